//! A repository index fetched whole (verified by the signed file that lists it) and read as a
//! stream: decompressed on one thread into a pipe while the caller parses the other end, so a
//! 60 MB index never sits in memory decompressed. apt's `Packages` (`apt::index`) and rpm's
//! `primary.xml` and `updateinfo.xml` (`sources::rpm`) are read this way.

use std::io::{BufRead, BufReader, Write};

use sha2::Digest as _;

use crate::digest::Sha256;

/// How an index is compressed, by its file name's suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    Xz,
    Gz,
    Zst,
    Bz2,
    Plain,
}

/// Why an index could not be read: its decompressed bytes are not what the `Release` says
/// (a verification failure), they do not decompress, or what read them refused them (`E`).
#[derive(Debug, PartialEq, Eq)]
pub enum ReadError<E> {
    Mismatch { expected: String, actual: String },
    Unreadable(String),
    Refused(E),
}

/// A fetched index, verified as fetched by the `Release`; decompressed only while read.
pub struct Index {
    pub url: String,
    pub bytes: Vec<u8>,
    pub compression: Compression,
    /// The `Release`'s SHA256 and size of the decompressed file, when it lists them.
    pub plain: Option<(String, u64)>,
    /// The most bytes it may decompress to.
    pub limit: u64,
}

/// An index its signed listing names by sha256 and size (a `Release`'s `SHA256`, a
/// `repomd.xml`'s sha256 checksum), as an earlier command kept it in the cache: `freeze` then
/// the lock of the baseline it wrote, or the next `lock` of an unchanged archive, fetch it once.
/// The bytes are hashed again as they are read; none where they are not there or not these.
pub fn cached(cache: &crate::cache::Cache, sha256: &str, size: u64, limit: u64) -> Option<Vec<u8>> {
    let digest: Sha256 = sha256.parse().ok()?;
    cache.get_small(&digest, limit).filter(|bytes| bytes.len() as u64 == size)
}

/// Keep an index its caller verified for the next command (`cached`). Not kept is only a
/// slower next command: said at debug level.
pub async fn keep(cache: &crate::cache::Cache, sha256: &str, bytes: &[u8], what: &str) {
    let Ok(digest) = sha256.parse::<Sha256>() else { return };
    if cache.contains(&digest, Some(bytes.len() as u64)) {
        return;
    }
    let (cache, bytes, what) = (cache.clone(), bytes.to_vec(), what.to_owned());
    let size = bytes.len() as u64;
    let kept = crate::fetch::blocking(move || cache.put(digest, Some(size), &what, bytes.as_slice())).await;
    if let Err(e) = kept {
        tracing::debug!("index {sha256} not kept in the cache: {e}");
    }
}

/// The most an index may decompress to: the size its signed listing declares (rpm's
/// `open-size`, a `Release`'s size of the uncompressed file), never more than `cap`. A small
/// file that expands past what was declared is refused as it streams, at the declared size,
/// not at the cap.
pub fn plain_limit(declared: Option<u64>, cap: u64) -> u64 {
    declared.map_or(cap, |d| d.min(cap))
}

impl Index {
    /// Hand the decompressed stream to `consume`. The decompressed bytes are hashed while
    /// they stream past and checked against `plain` at the end; a decompression error or a
    /// mismatch wins over whatever `consume` said about a stream that was cut short.
    pub fn stream<E>(&self, consume: impl FnOnce(&mut dyn BufRead) -> Result<(), E>) -> Result<(), ReadError<E>> {
        let (reader, writer) = std::io::pipe().map_err(|e| ReadError::Unreadable(format!("pipe: {e}")))?;
        std::thread::scope(|scope| {
            let decompressor = scope.spawn(move || {
                let mut sink = Hashing { inner: writer, hasher: sha2::Sha256::new(), count: 0, limit: self.limit };
                decompress_into(&self.bytes, self.compression, &mut sink)?;
                Ok::<_, std::io::Error>((Sha256::from_raw(sink.hasher.finalize().into()), sink.count))
            });
            let consumed = consume(&mut BufReader::new(reader));
            // The reader is dropped here: a producer still writing gets a broken pipe.
            let produced =
                decompressor.join().map_err(|_| ReadError::Unreadable("the decompressor panicked".into()))?;
            let (digest, size) = match (produced, consumed) {
                (Ok(sum), Ok(())) => sum,
                // The reader stopped first: the pipe broke because of what it said.
                (Err(e), Err(said)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                    return Err(ReadError::Refused(said));
                }
                (Err(e), _) => return Err(ReadError::Unreadable(e.to_string())),
                (Ok(_), Err(said)) => return Err(ReadError::Refused(said)),
            };
            if let Some((hash, expected)) = &self.plain
                && (digest.to_string() != *hash || size != *expected)
            {
                return Err(ReadError::Mismatch {
                    expected: format!("{hash}/{expected}"),
                    actual: format!("{digest}/{size}"),
                });
            }
            Ok(())
        })
    }
}

fn decompress_into(bytes: &[u8], compression: Compression, out: &mut impl Write) -> std::io::Result<()> {
    let mut input = bytes;
    match compression {
        Compression::Plain => out.write_all(bytes),
        Compression::Xz => lzma_rs::xz_decompress(&mut input, out).map_err(|e| match e {
            lzma_rs::error::Error::IoError(e) => e,
            other => std::io::Error::other(other.to_string()),
        }),
        Compression::Gz => std::io::copy(&mut flate2::read::GzDecoder::new(input), out).map(drop),
        Compression::Zst => std::io::copy(&mut zstd::stream::read::Decoder::new(input)?, out).map(drop),
        Compression::Bz2 => std::io::copy(&mut bzip2::read::BzDecoder::new(input), out).map(drop),
    }
}

/// Hashes and counts what passes to `inner`, refusing more than `limit` bytes (a small
/// compressed index can expand to anything).
struct Hashing<W> {
    inner: W,
    hasher: sha2::Sha256,
    count: u64,
    limit: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.count.saturating_add(buf.len() as u64) > self.limit {
            return Err(std::io::Error::other(format!("decompresses to more than {} bytes", self.limit)));
        }
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io::Write as _;

    use super::*;

    pub(crate) fn compress(plain: &[u8], compression: Compression) -> Vec<u8> {
        match compression {
            Compression::Plain => plain.to_vec(),
            Compression::Xz => {
                let mut out = Vec::new();
                lzma_rs::xz_compress(&mut &plain[..], &mut out).unwrap();
                out
            }
            Compression::Gz => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(plain).unwrap();
                e.finish().unwrap()
            }
            Compression::Zst => zstd::encode_all(plain, 3).unwrap(),
            Compression::Bz2 => {
                let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
                e.write_all(plain).unwrap();
                e.finish().unwrap()
            }
        }
    }

    fn index(plain: &[u8], compression: Compression, limit: u64) -> Index {
        let sum = (Sha256::of_bytes(plain).to_string(), plain.len() as u64);
        Index { url: "u".into(), bytes: compress(plain, compression), compression, plain: Some(sum), limit }
    }

    fn names(index: &Index) -> Result<Vec<String>, ReadError<std::io::ErrorKind>> {
        let mut out = Vec::new();
        index.stream(|r| {
            for line in r.lines() {
                let line = line.map_err(|e| e.kind())?;
                if let Some(name) = line.strip_prefix("Package: ") {
                    out.push(name.to_owned());
                }
            }
            Ok(())
        })?;
        Ok(out)
    }

    #[test]
    fn every_served_form_streams_and_none_past_the_limit() {
        let plain: Vec<u8> = (0..2000)
            .flat_map(|i| format!("Package: p{i}\nVersion: 1.{i}\nDescription: x\n long\n\n").into_bytes())
            .collect();
        let n = plain.len() as u64;
        for c in [Compression::Xz, Compression::Gz, Compression::Zst, Compression::Bz2, Compression::Plain] {
            let got = names(&index(&plain, c, n)).unwrap();
            assert_eq!((got.len(), got[1999].as_str()), (2000, "p1999"), "{c:?}");
            // One byte over is refused, never cut short and used.
            let err = names(&index(&plain, c, n - 1)).unwrap_err();
            assert!(
                matches!(&err, ReadError::Unreadable(e) if e.contains(&format!("more than {} bytes", n - 1))),
                "{c:?}: {err:?}"
            );
        }
        let mut bad = index(&plain, Compression::Gz, n);
        bad.plain = Some((Sha256::of_bytes(b"other").to_string(), n));
        assert!(matches!(names(&bad).unwrap_err(), ReadError::Mismatch { .. }));
        bad.bytes = b"not gzip".to_vec();
        assert!(names(&bad).is_err());
    }

    #[test]
    fn the_declared_size_bounds_the_stream_below_the_cap() {
        assert_eq!(plain_limit(Some(1000), 2 << 30), 1000);
        assert_eq!(plain_limit(Some(3 << 30), 2 << 30), 2 << 30);
        assert_eq!(plain_limit(None, 2 << 30), 2 << 30);
        // A zstd bomb: 64 MiB of zeros in a few KiB, declared as 1000 bytes. It is refused at
        // the declared size, its consumer having seen no more than that.
        let bomb = vec![0u8; 64 << 20];
        let mut index = index(&bomb, Compression::Zst, plain_limit(Some(1000), 2 << 30));
        index.plain = None;
        assert!(index.bytes.len() < 64 << 10, "a bomb: {} bytes", index.bytes.len());
        let mut seen = 0;
        let r = index.stream(|input| {
            let mut buf = [0u8; 4096];
            loop {
                match std::io::Read::read(input, &mut buf) {
                    Ok(0) => return Ok(()),
                    Ok(n) => seen += n,
                    Err(e) => return Err(e.to_string()),
                }
            }
        });
        assert!(matches!(r, Err(ReadError::Unreadable(ref why)) if why.contains("more than 1000 bytes")), "{r:?}");
        assert!(seen <= 1000, "{seen}");
    }

    #[test]
    fn a_consumer_error_stops_the_stream() {
        let plain = b"Package: a\nVersion: 1\n\n".repeat(100_000);
        let idx = index(&plain, Compression::Xz, plain.len() as u64);
        let err = idx.stream(|_| Err("stop")).unwrap_err();
        assert_eq!(err, ReadError::Refused("stop"));
    }
}
