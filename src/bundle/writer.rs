//! The deterministic, streaming bundle writer.
//!
//! Content streams from its origin through a hasher into the tar and zstd streams: it is never
//! whole in memory, and its digest and size are checked against the signed manifest as it
//! passes. The output goes to a temporary file beside the destination and is renamed into
//! place only when complete; on any failure nothing is left at the destination.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use super::header;
use super::manifest::{MANIFEST, Manifest, PROVENANCE, SIGNATURE};
use crate::digest::{HashingReader, Sha256};
use crate::failure::{Class, Classify};
use crate::member_path::MemberPath;
use crate::progress::{Reporter, Tracked};
use crate::sign::SigningKey;

/// zstd level: the large payloads (image layers, wheels, weights) are mostly incompressible,
/// so zstd's default level with long-distance matching is the right trade: on 2 cores level 3
/// compresses random data at ~215 MiB/s against ~110 MiB/s for level 6, same memory.
const ZSTD_LEVEL: i32 = 3;
/// 128 MiB window: the default most decoders accept without extra flags (`zstd -d` included).
pub const ZSTD_WINDOW_LOG: u32 = 27;
/// Multithreaded zstd's output does not depend on the number of workers (checked with libzstd
/// 1.5: 1, 2, 4 and 8 workers give identical frames), only on multithreading being on, so every
/// host uses all its cores and still writes the same bytes. Never 0: that is single-thread
/// mode, whose frames differ.
fn zstd_workers() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(1)).clamp(1, 16)
}

/// One content member of the bundle to be, and where its bytes come from.
#[derive(Debug, Clone)]
pub struct Member {
    pub path: MemberPath,
    pub size: u64,
    pub sha256: Sha256,
    /// The file holding its bytes (a cache blob, or a local file named by the spec).
    pub origin: PathBuf,
    /// Human name for messages, e.g. "[[file]] `fw.bin`".
    pub what: String,
}

/// The hint on a member whose bytes are not the ones that were locked.
const CHANGED: &str = " (changed since `airlock lock`?)";

#[derive(Debug, thiserror::Error)]
pub enum PackError {
    #[error("cannot read `{}` (source of `{what}`)", origin.display())]
    Read {
        what: String,
        origin: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("`{what}` from `{}`: expected {expected} bytes, got {actual}{CHANGED}", origin.display())]
    SizeMismatch { what: String, origin: PathBuf, expected: u64, actual: u64 },
    #[error("`{what}` from `{}`: expected sha256 {expected}, got {actual}{CHANGED}", origin.display())]
    DigestMismatch { what: String, origin: PathBuf, expected: Sha256, actual: Sha256 },
    #[error("cannot write bundle `{}`", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl Classify for PackError {
    fn class(&self) -> Class {
        match self {
            PackError::Read { .. } | PackError::Write { .. } => Class::Runtime,
            PackError::SizeMismatch { .. } | PackError::DigestMismatch { .. } => Class::Verification,
        }
    }
}

/// What was written.
#[derive(Debug)]
pub struct Packed {
    pub path: PathBuf,
    pub manifest_sha256: Sha256,
    pub bytes: u64,
    pub members: usize,
}

/// A tar over zstd that only takes deterministic regular-file members.
pub struct BundleWriter<W: Write> {
    tar: tar::Builder<zstd::stream::write::Encoder<'static, W>>,
    mtime: u64,
}

impl<W: Write> BundleWriter<W> {
    pub fn new(out: W, mtime: u64) -> io::Result<Self> {
        let mut zstd = zstd::stream::write::Encoder::new(out, ZSTD_LEVEL)?;
        zstd.include_checksum(true)?;
        zstd.long_distance_matching(true)?;
        zstd.window_log(ZSTD_WINDOW_LOG)?;
        zstd.multithread(zstd_workers())?;
        let mut tar = tar::Builder::new(zstd);
        tar.follow_symlinks(false);
        tar.sparse(false);
        tar.mode(tar::HeaderMode::Deterministic);
        Ok(Self { tar, mtime })
    }

    /// Append `size` bytes from `data` as `path`. The caller guarantees `data` yields exactly
    /// `size` bytes (see `append_checked`); a short reader would corrupt the archive.
    pub fn append(&mut self, path: &MemberPath, size: u64, data: impl Read) -> io::Result<()> {
        let h = header::regular_file(path, size, self.mtime);
        if !h.pax.is_empty() {
            self.tar.append_pax_extensions(h.pax.iter().map(|(k, v)| (*k, v.as_slice())))?;
        }
        self.tar.append(&h.header, data)
    }

    /// Finish the tar and the zstd frame (without `finish` the frame is truncated).
    pub fn finish(self) -> io::Result<W> {
        self.tar.into_inner()?.finish()
    }
}

/// Write a whole bundle: manifest, signature, then every content member in manifest order.
pub fn pack(
    out: &Path,
    manifest: &Manifest,
    key: &SigningKey,
    members: &[Member],
    provenance: Option<&[u8]>,
    reporter: &dyn Reporter,
) -> Result<Packed, PackError> {
    let write_err = |source| PackError::Write { path: out.to_owned(), source };
    let manifest_bytes = manifest.canonical_bytes();
    let signature = key.sign_blob(&manifest_bytes);
    // Dropped (and deleted) on every early return: nothing half-written is left behind.
    let tmp = crate::atomic::temp_beside(out).map_err(write_err)?;

    let mut writer = BundleWriter::new(BufWriter::with_capacity(1 << 20, tmp.as_file()), manifest.created.unix())
        .map_err(write_err)?;
    let fixed = |p: &str| MemberPath::new(p).expect("reserved member names are valid paths");
    writer.append(&fixed(MANIFEST), manifest_bytes.len() as u64, manifest_bytes.as_slice()).map_err(write_err)?;
    writer.append(&fixed(SIGNATURE), signature.len() as u64, signature.as_bytes()).map_err(write_err)?;

    reporter.start("packing", manifest.content_bytes());
    // Order: the listed `airlock/` members (the SBOM), the provenance, then the content.
    let split = members.iter().position(|m| m.path.area() != "airlock").unwrap_or(members.len());
    let (head, rest) = members.split_at(split);
    let append = |writer: &mut BundleWriter<_>, member: &Member| {
        append_checked(writer, member, reporter).map_err(|e| match e {
            AppendError::Member(e) => e,
            AppendError::Write(source) => write_err(source),
        })
    };
    for member in head {
        append(&mut writer, member)?;
    }
    if let Some(bytes) = provenance {
        writer.append(&fixed(PROVENANCE), bytes.len() as u64, bytes).map_err(write_err)?;
    }
    for member in rest {
        append(&mut writer, member)?;
    }
    reporter.finish();

    let buffered = writer.finish().map_err(write_err)?;
    buffered.into_inner().map_err(|e| write_err(e.into_error()))?.sync_all().map_err(write_err)?;
    let bytes = tmp.as_file().metadata().map_err(write_err)?.len();
    tmp.persist(out).map_err(|e| write_err(e.error))?;
    Ok(Packed {
        path: out.to_owned(),
        manifest_sha256: Sha256::of_bytes(&manifest_bytes),
        bytes,
        members: members.len() + 2 + usize::from(provenance.is_some()),
    })
}

enum AppendError {
    /// The member's origin could not be read, or is not what the manifest promises.
    Member(PackError),
    Write(io::Error),
}

/// Stream one content member from its origin, checking size and digest against what the
/// manifest promises. A mismatch aborts the bundle (the temporary output is discarded).
fn append_checked<W: Write>(
    writer: &mut BundleWriter<W>,
    member: &Member,
    reporter: &dyn Reporter,
) -> Result<(), AppendError> {
    let read_err = |source| {
        AppendError::Member(PackError::Read { what: member.what.clone(), origin: member.origin.clone(), source })
    };
    let file = File::open(&member.origin).map_err(read_err)?;
    let actual_size = file.metadata().map_err(read_err)?.len();
    let mut hashing = HashingReader::new(BufReader::with_capacity(1 << 20, file));
    let mut limited = Tracked::new((&mut hashing).take(member.size), reporter);
    writer.append(&member.path, member.size, &mut limited).map_err(|e| match limited.take_read_error() {
        Some(read) => read_err(read),
        None => AppendError::Write(e),
    })?;
    let short = hashing.count();
    // One byte more than promised means the origin changed since it was locked.
    let extra = hashing.read(&mut [0u8; 1]).map_err(read_err)?;
    let (actual, count) = hashing.finish();
    if short != member.size || extra != 0 {
        // The file's real size: what was read if it ended early, else what the file holds now.
        let actual = if extra == 0 { count } else { actual_size.max(member.size.saturating_add(1)) };
        return Err(AppendError::Member(PackError::SizeMismatch {
            what: member.what.clone(),
            origin: member.origin.clone(),
            expected: member.size,
            actual,
        }));
    }
    if actual != member.sha256 {
        return Err(AppendError::Member(PackError::DigestMismatch {
            what: member.what.clone(),
            origin: member.origin.clone(),
            expected: member.sha256,
            actual,
        }));
    }
    Ok(())
}
