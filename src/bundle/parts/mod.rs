//! Split volumes: one bundle written as `NAME.airlock.001`, `.002`, … (byte ranges of the
//! ordinary bundle file: `cat` joins them into it) plus `NAME.airlock.parts.json`, which lists
//! every part's file, size and sha256 and the sha256 of its first 64 KiB, and is signed like
//! the manifest (`NAME.airlock.parts.json.sig`, cosign `sign-blob` format over its exact bytes).
//!
//! Before anything is read, a reader checks the parts file's signature and then every part's
//! presence, size and head digest: a missing, truncated, reordered, swapped or foreign part is
//! named then. While the parts stream as one, each part's whole sha256 is checked when its last
//! byte has been read. The bundle inside is verified as always; the parts file only makes sure
//! that what is read is the byte stream the builder wrote, and says where it went wrong.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::digest::Sha256;
use crate::failure::{Class, Classify};
use crate::sign::KeyId;
use crate::spec::BundleName;

mod read;
mod write;

pub use read::{Input, Opened, Remote, Split};
pub use write::SplitWriter;

pub const SCHEMA: &str = "airlock.parts/v1";
/// `NAME.airlock` → `NAME.airlock.parts.json`.
pub const PARTS_SUFFIX: &str = ".parts.json";
/// The smallest part accepted: below this a bundle would become thousands of files.
pub const MIN_PART_BYTES: u64 = 4 << 10;
/// The most parts one bundle may be split into.
pub const MAX_PARTS: usize = 9999;
/// The leading bytes of each part whose digest is checked before anything is read.
const HEAD_BYTES: u64 = 64 << 10;
/// The largest parts file a reader accepts (9999 parts take about 2.5 MiB).
const MAX_PARTS_FILE_BYTES: u64 = 4 << 20;
/// FAT32 holds files up to 4 GiB less one byte.
const FAT32_MAX_FILE: u64 = (4 << 30) - 1;

/// `NAME.airlock.parts.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartsFile {
    pub schema: String,
    /// The joined bundle's file name (`cat` the parts into it); parts sit beside this file.
    pub bundle: String,
    pub name: BundleName,
    pub version: semver::Version,
    /// The bundle's manifest (its site id is the first 16 hex digits).
    pub manifest_sha256: Sha256,
    /// The key that signed this file (a claim; the signature says which key did).
    pub key_id: KeyId,
    /// Size and sha256 of the joined bundle.
    pub bytes: u64,
    pub sha256: Sha256,
    /// Every part but the last has this size.
    pub part_size: u64,
    pub parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Part {
    /// `NAME.airlock.NNN`, beside the parts file.
    pub file: String,
    pub size: u64,
    pub sha256: Sha256,
    /// The sha256 of the part's first 64 KiB (all of it when smaller).
    pub head_sha256: Sha256,
}

#[derive(Debug, thiserror::Error)]
pub enum PartsError {
    #[error("`{}`: {detail}", path.display())]
    Invalid { path: PathBuf, detail: String },
    #[error("cannot read `{}`", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "`{}`: the parts file's signature `{}` does not verify with any trusted key ({tried}); it claims key `{}`",
        path.display(), signature.display(), claimed.short()
    )]
    Untrusted { path: PathBuf, signature: PathBuf, tried: String, claimed: KeyId },
    #[error("part {index} of {count} `{}` is missing{hint}", path.display())]
    Missing { path: PathBuf, index: usize, count: usize, hint: String },
    #[error("part {index} of {count} `{}` has {actual} bytes, the parts file lists {expected}{hint}", path.display())]
    Size { path: PathBuf, index: usize, count: usize, expected: u64, actual: u64, hint: &'static str },
    #[error(
        "part {index} of {count} `{}` is not the part the parts file lists (sha256 of its first {head} bytes: \
         expected {expected}, actual {actual}){hint}",
        path.display()
    )]
    Foreign { path: PathBuf, index: usize, count: usize, head: u64, expected: Sha256, actual: Sha256, hint: String },
    #[error("`{}` lists the bundle with manifest sha256 {expected}, but its parts hold manifest {actual}", path.display())]
    Manifest { path: PathBuf, expected: Sha256, actual: Sha256 },
    #[error("`{}` is part {index} of a split bundle: give its first part or `{}`", path.display(), parts.display())]
    NotFirst { path: PathBuf, index: usize, parts: PathBuf },
}

impl Classify for PartsError {
    fn class(&self) -> Class {
        match self {
            PartsError::Read { .. } | PartsError::NotFirst { .. } => Class::Runtime,
            PartsError::Invalid { .. }
            | PartsError::Untrusted { .. }
            | PartsError::Missing { .. }
            | PartsError::Size { .. }
            | PartsError::Foreign { .. }
            | PartsError::Manifest { .. } => Class::Verification,
        }
    }
}

/// A `--split-size` (or `--chunk-size`) that is not one: the text given and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}`{why}")]
pub struct SizeError {
    pub text: String,
    why: String,
}

impl crate::failure::Classify for SizeError {
    fn class(&self) -> Class {
        Class::Usage
    }
}

/// `--split-size`: a byte count with an optional unit, as `split -b` reads it: `K`, `M`, `G`,
/// `T` (also `KiB`…) are powers of 1024, `KB`, `MB`, `GB`, `TB` powers of 1000.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let bad = |why: String| SizeError { text: text.to_owned(), why };
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let n: u64 = number.parse().map_err(|_| bad(" is not a size such as 4G, 700M or 65536".into()))?;
    let scale: u64 = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KIB" => 1 << 10,
        "M" | "MIB" => 1 << 20,
        "G" | "GIB" => 1 << 30,
        "T" | "TIB" => 1 << 40,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => {
            return Err(bad(format!(
                ": unknown unit `{unit}` (K, M, G, T are powers of 1024; KB, MB, GB, TB of 1000)"
            )));
        }
    };
    let bytes = n.checked_mul(scale).ok_or_else(|| bad(" is too large".into()))?;
    if bytes < MIN_PART_BYTES {
        return Err(bad(format!(" is {bytes} bytes; it must be at least {MIN_PART_BYTES} bytes")));
    }
    Ok(bytes)
}

/// What to say about a part size that does not fit the medium it is usually meant for.
pub fn size_warning(bytes: u64) -> Option<String> {
    (bytes > FAT32_MAX_FILE && bytes <= 4 << 30).then(|| {
        format!(
            "parts of {bytes} bytes are one byte too large for FAT32, which holds files up to {FAT32_MAX_FILE} \
             bytes; use --split-size 4095M for FAT32 media"
        )
    })
}

/// `NAME.airlock` → `NAME.airlock.parts.json`.
pub fn parts_path(bundle: &Path) -> PathBuf {
    suffixed(bundle, PARTS_SUFFIX)
}

/// Part `index` (from 1) of `bundle`: `NAME.airlock.001`.
pub fn part_path(bundle: &Path, index: usize) -> PathBuf {
    suffixed(bundle, &format!(".{index:03}"))
}

/// The detached signature of a parts file.
pub fn signature_path(parts: &Path) -> PathBuf {
    suffixed(parts, ".sig")
}

fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(suffix);
    path.with_file_name(name)
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}
