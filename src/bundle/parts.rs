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

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use super::rejection::{Problem, Rejection};
use crate::digest::Sha256;
use crate::failure::{Class, Classify};
use crate::sign::{KeyId, SigningKey, TrustedKey};
use crate::spec::BundleName;

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

// ---------------------------------------------------------------------------------------------
// Writing

/// One part being written: a temporary file beside its final name.
struct Open {
    tmp: tempfile::NamedTempFile,
    written: u64,
    hash: sha2::Sha256,
    head: sha2::Sha256,
}

/// A writer that cuts the bundle's byte stream into parts of `part_size` bytes, each written
/// to a temporary file and hashed as it goes; nothing appears under the parts' names until
/// [`SplitWriter::commit`].
pub struct SplitWriter {
    bundle: PathBuf,
    part_size: u64,
    open: Option<Open>,
    done: Vec<(tempfile::NamedTempFile, Part)>,
    total: sha2::Sha256,
    bytes: u64,
}

impl SplitWriter {
    pub fn new(bundle: &Path, part_size: u64) -> Self {
        Self {
            bundle: bundle.to_owned(),
            part_size: part_size.max(1),
            open: None,
            done: Vec::new(),
            total: sha2::Sha256::new(),
            bytes: 0,
        }
    }

    fn close(&mut self) {
        let Some(open) = self.open.take() else { return };
        let index = self.done.len() + 1;
        let file = file_name(&part_path(&self.bundle, index));
        let part = Part {
            file,
            size: open.written,
            sha256: Sha256::from_raw(open.hash.finalize().into()),
            head_sha256: Sha256::from_raw(open.head.finalize().into()),
        };
        self.done.push((open.tmp, part));
    }

    /// Rename every part into place, write and sign the parts file, and remove parts of an
    /// earlier split of the same bundle that this one does not have.
    pub fn commit(
        mut self,
        name: &BundleName,
        version: &semver::Version,
        manifest_sha256: Sha256,
        key: &SigningKey,
    ) -> io::Result<(PathBuf, PartsFile)> {
        self.close();
        let count = self.done.len();
        let mut parts = Vec::with_capacity(count);
        for (index, (tmp, part)) in self.done.into_iter().enumerate() {
            crate::atomic::replace(tmp, &part_path(&self.bundle, index + 1))?;
            parts.push(part);
        }
        let doc = PartsFile {
            schema: SCHEMA.to_owned(),
            bundle: file_name(&self.bundle),
            name: name.clone(),
            version: version.clone(),
            manifest_sha256,
            key_id: key.key_id().clone(),
            bytes: self.bytes,
            sha256: Sha256::from_raw(self.total.finalize().into()),
            part_size: self.part_size,
            parts,
        };
        let mut bytes = serde_json::to_vec_pretty(&doc).expect("a parts file serialises");
        bytes.push(b'\n');
        let path = parts_path(&self.bundle);
        crate::atomic::write(&path, &bytes)?;
        crate::atomic::write(&signature_path(&path), key.sign_blob(&bytes).as_bytes())?;
        // Stale parts of an earlier, longer split to the same path.
        let mut stale = count + 1;
        loop {
            match std::fs::remove_file(part_path(&self.bundle, stale)) {
                Ok(()) => tracing::info!("removed stale part `{}`", part_path(&self.bundle, stale).display()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                Err(e) => return Err(e),
            }
            stale += 1;
        }
        Ok((path, doc))
    }
}

impl SplitWriter {
    /// Bytes the open part has room for, the next part opened if none is.
    fn room(&mut self) -> io::Result<usize> {
        if self.open.is_none() {
            if self.done.len() >= MAX_PARTS {
                return Err(io::Error::other(format!(
                    "the bundle needs more than {MAX_PARTS} parts of {} bytes; choose a larger --split-size",
                    self.part_size
                )));
            }
            let tmp = crate::atomic::temp_beside(&part_path(&self.bundle, self.done.len() + 1))?;
            self.open = Some(Open { tmp, written: 0, hash: sha2::Sha256::new(), head: sha2::Sha256::new() });
        }
        let open = self.open.as_ref().expect("opened above");
        Ok(usize::try_from(self.part_size - open.written).unwrap_or(usize::MAX))
    }

    /// Hash and count bytes just written to the open part; a full part is closed.
    fn record(&mut self, written: &[u8]) {
        let Some(open) = self.open.as_mut() else { return };
        open.hash.update(written);
        let head_left = usize::try_from(HEAD_BYTES.saturating_sub(open.written)).unwrap_or(usize::MAX);
        open.head.update(&written[..written.len().min(head_left)]);
        open.written += written.len() as u64;
        self.total.update(written);
        self.bytes += written.len() as u64;
        if open.written == self.part_size {
            self.close();
        }
    }
}

impl Write for SplitWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let room = self.room()?;
        let open = self.open.as_mut().expect("opened by room");
        let n = open.tmp.as_file_mut().write(&buf[..buf.len().min(room)])?;
        self.record(&buf[..n]);
        Ok(n)
    }

    /// One call for as many of `bufs` as the open part has room for: a raw frame's blocks
    /// arrive as one vectored write of up to 32 MiB (`frames::RawFrame`).
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        if bufs.iter().all(|b| b.is_empty()) {
            return Ok(0);
        }
        let mut room = self.room()?;
        let mut fit = Vec::with_capacity(bufs.len());
        for buf in bufs {
            if room == 0 {
                break;
            }
            let take = buf.len().min(room);
            fit.push(io::IoSlice::new(&buf[..take]));
            room -= take;
        }
        let open = self.open.as_mut().expect("opened by room");
        let written = open.tmp.as_file_mut().write_vectored(&fit)?;
        let mut left = written;
        for buf in &fit {
            if left == 0 {
                break;
            }
            let take = buf.len().min(left);
            self.record(&buf[..take]);
            left -= take;
        }
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

// ---------------------------------------------------------------------------------------------
// Reading

/// What a user named as a bundle: one file, or a split bundle (by its parts file or first part).
pub enum Input {
    Whole(PathBuf),
    Parts(Box<Split>),
    /// Bytes from elsewhere (a registry: `artifact`), opened afresh for each read.
    Remote(Box<Remote>),
}

/// A bundle read from somewhere other than files here.
pub struct Remote {
    /// What to call it (`oci://HOST/REPO@sha256:…`).
    pub name: PathBuf,
    pub bytes: u64,
    pub open: Box<dyn Fn() -> io::Result<Box<dyn Read + Send>> + Send + Sync>,
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Whole(p) => f.debug_tuple("Whole").field(p).finish(),
            Self::Parts(s) => f.debug_tuple("Parts").field(s).finish(),
            Self::Remote(r) => f.debug_tuple("Remote").field(&r.name).finish(),
        }
    }
}

/// A split bundle, its parts file read (not yet trusted).
#[derive(Debug)]
pub struct Split {
    /// Where the joined bundle would be: co-signatures (`airlock sign`) sit beside it.
    pub bundle: PathBuf,
    pub parts_file: PathBuf,
    pub doc: PartsFile,
    raw: Vec<u8>,
}

impl Input {
    /// `NAME.airlock.parts.json`, `NAME.airlock.001` with its parts file beside it, or
    /// `NAME.airlock` when only its parts exist, name a split bundle; anything else is one file.
    pub fn resolve(path: &Path) -> Result<Self, PartsError> {
        let name = file_name(path);
        if let Some(bundle) = name.strip_suffix(PARTS_SUFFIX) {
            return Split::load(&path.with_file_name(bundle), path);
        }
        if let Some((stem, number)) = name.rsplit_once('.')
            && number.len() >= 3
            && number.bytes().all(|b| b.is_ascii_digit())
        {
            let bundle = path.with_file_name(stem);
            let parts = parts_path(&bundle);
            if parts.exists() {
                let index: usize = number.parse().unwrap_or(usize::MAX);
                if index != 1 {
                    return Err(PartsError::NotFirst { path: path.to_owned(), index, parts });
                }
                return Split::load(&bundle, &parts);
            }
        }
        let parts = parts_path(path);
        if !path.exists() && parts.exists() {
            return Split::load(path, &parts);
        }
        Ok(Self::Whole(path.to_owned()))
    }

    /// The bundle's path as one file: co-signatures are looked for beside it.
    pub fn bundle(&self) -> &Path {
        match self {
            Self::Whole(p) => p,
            Self::Parts(s) => &s.bundle,
            Self::Remote(r) => &r.name,
        }
    }

    /// What to call it in messages: the file, or the parts file.
    pub fn display(&self) -> std::path::Display<'_> {
        match self {
            Self::Whole(p) => p.display(),
            Self::Parts(s) => s.parts_file.display(),
            Self::Remote(r) => r.name.display(),
        }
    }

    pub fn split(&self) -> Option<&Split> {
        match self {
            Self::Whole(_) | Self::Remote(_) => None,
            Self::Parts(s) => Some(s),
        }
    }

    /// The bundle's size in bytes: the file's, or the parts' together.
    pub fn bytes(&self) -> Result<u64, PartsError> {
        match self {
            Self::Whole(p) => {
                std::fs::metadata(p).map(|m| m.len()).map_err(|source| PartsError::Read { path: p.clone(), source })
            }
            Self::Parts(s) => Ok(s.doc.bytes),
            Self::Remote(r) => Ok(r.bytes),
        }
    }

    /// The byte stream, unverified: the file, or the parts checked (presence, sizes, heads)
    /// and then read one after the other, each checked whole at its end.
    pub fn open(&self) -> Result<Box<dyn Read + Send>, PartsError> {
        match self {
            Self::Whole(p) => {
                let file = File::open(p).map_err(|source| PartsError::Read { path: p.clone(), source })?;
                Ok(Box::new(io::BufReader::with_capacity(1 << 20, file)))
            }
            Self::Parts(s) => {
                s.check_parts()?;
                Ok(Box::new(io::BufReader::with_capacity(1 << 20, PartsReader::new(s))))
            }
            Self::Remote(r) => (r.open)().map_err(|source| PartsError::Read { path: r.name.clone(), source }),
        }
    }

    /// The bundle opened for one read: as a regular file where it is one (what can be read by
    /// position, `reader::verify_file`, or shared block for block, `site::stage`), else as a
    /// stream ([`Input::open_trusted`]: a split bundle's parts file checked against `keys`
    /// first; a pipe, not opened twice, is read once as it comes).
    pub fn open_for_reading(&self, keys: &[TrustedKey]) -> Result<Opened, PartsError> {
        if let Self::Whole(p) = self {
            let read_err = |source| PartsError::Read { path: p.clone(), source };
            if std::fs::metadata(p).map_err(read_err)?.is_file() {
                let file = File::open(p).map_err(read_err)?;
                let len = file.metadata().map_err(read_err)?.len();
                return Ok(Opened::File { file, len });
            }
        }
        let (stream, signer) = self.open_trusted(keys)?;
        Ok(Opened::Stream { stream, signer })
    }

    /// Like [`Input::open`], after checking that a trusted key signed the parts file (that
    /// key is returned; none for one file).
    pub fn open_trusted(&self, keys: &[TrustedKey]) -> Result<(Box<dyn Read + Send>, Option<KeyId>), PartsError> {
        let signer = match self {
            Self::Whole(_) | Self::Remote(_) => None,
            Self::Parts(s) => Some(s.check_signature(keys)?),
        };
        Ok((self.open()?, signer))
    }
}

/// A bundle opened for one read ([`Input::open_for_reading`]).
pub enum Opened {
    /// A regular file, with its size.
    File { file: File, len: u64 },
    /// Parts, a pipe, a registry; the key that signed a split bundle's parts file, if any.
    Stream { stream: Box<dyn Read + Send>, signer: Option<KeyId> },
}

impl Split {
    fn load(bundle: &Path, parts_file: &Path) -> Result<Input, PartsError> {
        let read_err = |source| PartsError::Read { path: parts_file.to_owned(), source };
        let invalid = |detail: String| PartsError::Invalid { path: parts_file.to_owned(), detail };
        let mut raw = Vec::new();
        File::open(parts_file)
            .map_err(read_err)?
            .take(MAX_PARTS_FILE_BYTES + 1)
            .read_to_end(&mut raw)
            .map_err(read_err)?;
        if raw.len() as u64 > MAX_PARTS_FILE_BYTES {
            return Err(invalid(format!("larger than {MAX_PARTS_FILE_BYTES} bytes: not a parts file")));
        }
        let doc: PartsFile = serde_json::from_slice(&raw).map_err(|e| invalid(e.to_string()))?;
        if doc.schema != SCHEMA {
            return Err(invalid(format!("schema is `{}`, expected `{SCHEMA}`", doc.schema)));
        }
        // The names become paths: only the names this format writes, beside the parts file.
        let bundle_name = file_name(bundle);
        if doc.bundle != bundle_name {
            return Err(invalid(format!("it is for bundle `{}`, expected `{bundle_name}`", doc.bundle)));
        }
        if doc.parts.is_empty() || doc.parts.len() > MAX_PARTS {
            return Err(invalid(format!("{} parts (1 to {MAX_PARTS} expected)", doc.parts.len())));
        }
        let mut total: u64 = 0;
        for (i, part) in doc.parts.iter().enumerate() {
            let expected = file_name(&part_path(bundle, i + 1));
            if part.file != expected {
                return Err(invalid(format!("part {} is named `{}`, expected `{expected}`", i + 1, part.file)));
            }
            total = total.checked_add(part.size).ok_or_else(|| invalid("the parts' sizes overflow".into()))?;
        }
        if total != doc.bytes {
            return Err(invalid(format!("the parts add up to {total} bytes, it says the bundle has {}", doc.bytes)));
        }
        Ok(Input::Parts(Box::new(Split { bundle: bundle.to_owned(), parts_file: parts_file.to_owned(), doc, raw })))
    }

    /// The parts file must be signed by one of `keys`; returns the key that signed it.
    pub fn check_signature(&self, keys: &[TrustedKey]) -> Result<KeyId, PartsError> {
        let signature = signature_path(&self.parts_file);
        let mut sig = Vec::new();
        File::open(&signature)
            .and_then(|f| f.take(crate::sign::MAX_SIGNATURE_BYTES).read_to_end(&mut sig))
            .map_err(|source| PartsError::Read { path: signature.clone(), source })?;
        if let Some(key) = keys.iter().find(|k| k.verify_blob(&self.raw, &sig).is_ok()) {
            return Ok(key.key_id().clone());
        }
        let tried = keys.iter().map(|k| format!("`{}`", k.key_id().short())).collect::<Vec<_>>().join(", ");
        Err(PartsError::Untrusted { path: self.parts_file.clone(), signature, tried, claimed: self.doc.key_id.clone() })
    }

    /// The manifest the parts held must be the one the parts file names.
    pub fn check_manifest(&self, actual: &Sha256) -> Result<(), PartsError> {
        if *actual == self.doc.manifest_sha256 {
            return Ok(());
        }
        Err(PartsError::Manifest { path: self.parts_file.clone(), expected: self.doc.manifest_sha256, actual: *actual })
    }

    fn part_file(&self, index: usize) -> PathBuf {
        self.parts_file.with_file_name(&self.doc.parts[index].file)
    }

    /// After a read of the parts failed: when the problems look like damaged bytes (the
    /// bundle's own checks may fail before a part's sha256 is), find the first part whose bytes
    /// differ from its listed sha256, reading each whole, and put it first.
    pub fn name_damage(&self, problems: &mut Vec<Problem>) {
        if !problems.iter().any(|p| p.reason.is_damage()) {
            return;
        }
        let count = self.doc.parts.len();
        for (i, part) in self.doc.parts.iter().enumerate() {
            let path = self.part_file(i);
            let damage = match File::open(&path).and_then(crate::digest::hash_reader) {
                Ok((actual, size)) if actual == part.sha256 && size == part.size => continue,
                Ok((actual, _)) => damaged(i + 1, count, &path, part, actual),
                Err(e) => format!("part {} of {count} `{}`: {e}", i + 1, path.display()),
            };
            let reason = Rejection::Parts(damage);
            if !problems.iter().any(|p| p.reason == reason) {
                problems.insert(0, Problem { member: None, reason });
            }
            return;
        }
    }

    /// Every part present, of its listed size, and with its listed first bytes.
    pub fn check_parts(&self) -> Result<(), PartsError> {
        let count = self.doc.parts.len();
        for (i, part) in self.doc.parts.iter().enumerate() {
            let (path, index) = (self.part_file(i), i + 1);
            let file = match File::open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    let hint = format!(
                        "; the bundle has {count} parts of up to {} bytes: copy every `{}.NNN` and the parts file",
                        self.doc.part_size, self.doc.bundle
                    );
                    return Err(PartsError::Missing { path, index, count, hint });
                }
                Err(source) => return Err(PartsError::Read { path, source }),
            };
            let actual = file.metadata().map_err(|source| PartsError::Read { path: path.clone(), source })?.len();
            if actual != part.size {
                let hint = if actual < part.size { " (truncated: copied incompletely?)" } else { "" };
                return Err(PartsError::Size { path, index, count, expected: part.size, actual, hint });
            }
            let head = part.size.min(HEAD_BYTES);
            let (actual, _) = crate::digest::hash_reader(file.take(head))
                .map_err(|source| PartsError::Read { path: path.clone(), source })?;
            if actual != part.head_sha256 {
                let hint = match self.doc.parts.iter().position(|p| p.head_sha256 == actual && p.size == part.size) {
                    Some(j) => format!("; it begins like part {} of {count}: parts swapped or renamed?", j + 1),
                    None => "; it is from another bundle or damaged".to_owned(),
                };
                return Err(PartsError::Foreign { path, index, count, head, expected: part.head_sha256, actual, hint });
            }
        }
        Ok(())
    }
}

/// The parts as one stream; each part's size and sha256 are checked when it ends, and a part
/// that differs ends the stream with an error that names it.
struct PartsReader {
    files: Vec<(PathBuf, Part)>,
    next: usize,
    open: Option<crate::digest::HashingReader<File>>,
}

impl PartsReader {
    fn new(split: &Split) -> Self {
        let files = split.doc.parts.iter().enumerate().map(|(i, p)| (split.part_file(i), p.clone())).collect();
        Self { files, next: 0, open: None }
    }
}

impl PartsReader {
    /// The part being read has ended (or reached its size): it must be whole and unchanged.
    fn end_part(&mut self) -> io::Result<()> {
        let (path, part) = &self.files[self.next];
        let (index, total) = (self.next + 1, self.files.len());
        let (actual, count) = self.open.take().expect("a part is open").finish();
        if count != part.size {
            return Err(io::Error::other(format!(
                "part {index} of {total} `{}` ended after {count} of {} bytes",
                path.display(),
                part.size
            )));
        }
        if actual != part.sha256 {
            return Err(io::Error::other(damaged(index, total, path, part, actual)));
        }
        self.next += 1;
        Ok(())
    }
}

fn damaged(index: usize, total: usize, path: &Path, part: &Part, actual: Sha256) -> String {
    format!("part {index} of {total} `{}` is damaged: sha256 expected {}, actual {actual}", path.display(), part.sha256)
}

impl Read for PartsReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some((path, part)) = self.files.get(self.next) else { return Ok(0) };
            if self.open.is_none() {
                let file =
                    File::open(path).map_err(|e| io::Error::new(e.kind(), format!("`{}`: {e}", path.display())))?;
                self.open = Some(crate::digest::HashingReader::new(file));
            }
            let reading = self.open.as_mut().expect("opened above");
            // Never past the listed size: the check below then runs before the last bytes of
            // a part are handed on.
            let left = usize::try_from(part.size - reading.count().min(part.size)).unwrap_or(usize::MAX);
            let want = buf.len().min(left);
            let n = if want == 0 { 0 } else { reading.read(&mut buf[..want])? };
            if n == 0 {
                // The part ended (or reached its size): check it, then go on with the next.
                if want == 0 && reading.read(&mut [0u8; 1])? > 0 {
                    return Err(io::Error::other(format!(
                        "part {} of {} `{}` is longer than the {} bytes listed",
                        self.next + 1,
                        self.files.len(),
                        path.display(),
                        part.size
                    )));
                }
                self.end_part()?;
                continue;
            }
            if reading.count() == part.size {
                self.end_part()?;
            }
            return Ok(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{IoSlice, Write as _};

    use sha2::Digest as _;

    /// What a split records and writes: each part with its bytes, the whole stream's digest and
    /// length.
    type Split = (Vec<(super::Part, Vec<u8>)>, Vec<u8>, u64);

    /// The split into parts of `part_size` of what `write` writes.
    fn split(part_size: u64, write: impl FnOnce(&mut super::SplitWriter)) -> Split {
        let dir = tempfile::tempdir().unwrap();
        let mut out = super::SplitWriter::new(&dir.path().join("b.airlock"), part_size);
        write(&mut out);
        out.close();
        let parts = out.done.iter().map(|(tmp, part)| (part.clone(), std::fs::read(tmp.path()).unwrap())).collect();
        (parts, out.total.clone().finalize().to_vec(), out.bytes)
    }

    #[test]
    fn a_vectored_write_cuts_and_hashes_parts_as_plain_writes_do() {
        let bytes: Vec<u8> = (0..300_000u32).map(|i| i.wrapping_mul(2_654_435_761).to_le_bytes()[1]).collect();
        // Parts smaller and larger than the head (64 KiB) and than one write, and an odd cut.
        for part_size in [1_000usize, 65_536, 70_001, 1 << 20] {
            let plain = split(part_size as u64, |out| out.write_all(&bytes).unwrap());
            // Slices of every size across the part boundaries, empty ones among them, written
            // as the raw frames' writer does.
            let vectored = split(part_size as u64, |out| {
                let mut slices = Vec::new();
                let mut at = 0;
                for len in [0usize, 7, 131_072, 0, 3, 65_536, 1].iter().cycle() {
                    let end = (at + len).min(bytes.len());
                    slices.push(IoSlice::new(&bytes[at..end]));
                    at = end;
                    if at == bytes.len() {
                        break;
                    }
                }
                crate::overlap::write_all_vectored(out, &mut slices).unwrap();
            });
            assert_eq!(plain.0.len(), bytes.len().div_ceil(part_size), "parts of {part_size}");
            assert_eq!(plain, vectored, "parts of {part_size}");
            let joined: Vec<u8> = vectored.0.iter().flat_map(|(_, b)| b.iter().copied()).collect();
            assert_eq!(joined, bytes);
            assert_eq!(vectored.1, sha2::Sha256::digest(&bytes).to_vec());
        }
    }
}
