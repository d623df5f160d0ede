//! Writing a split bundle: parts of a chosen size, each a temporary file renamed when it is
//! complete, then the parts file that lists them.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use sha2::Digest as _;

use super::{HEAD_BYTES, MAX_PARTS, Part, PartsFile, SCHEMA, file_name, part_path, parts_path, signature_path};
use crate::digest::Sha256;
use crate::sign::SigningKey;
use crate::spec::BundleName;

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
