//! Reading `Packages` indexes and dpkg status files as streams: an index is decompressed on
//! one thread into a pipe while `deb822-fast` reads paragraphs from the other end, so a 60 MB
//! distribution index never sits in memory whole; each paragraph is cut down to the fields
//! airlock resolves with ([`Pkg`]) and dropped.

use std::io::{BufReader, Read, Write};

use deb822_fast::{Paragraph, ParagraphReader};
use debian_control::lossy::{Relation, Relations};
use debversion::Version;
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
/// (a verification failure), or it is not a readable index at all.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadError {
    Mismatch { expected: String, actual: String },
    Unreadable(String),
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

impl Index {
    /// Call `each` with every paragraph, in order. The decompressed bytes are hashed while
    /// they stream past and checked against `plain` at the end; a decompression error or a
    /// mismatch wins over whatever `each` said about a stream that was cut short.
    pub fn read(&self, mut each: impl FnMut(Paragraph) -> Result<(), String>) -> Result<(), ReadError> {
        let (reader, writer) = std::io::pipe().map_err(|e| ReadError::Unreadable(format!("pipe: {e}")))?;
        std::thread::scope(|scope| {
            let decompressor = scope.spawn(move || {
                let mut sink = Hashing { inner: writer, hasher: sha2::Sha256::new(), count: 0, limit: self.limit };
                decompress_into(&self.bytes, self.compression, &mut sink)?;
                Ok::<_, std::io::Error>((Sha256::from_raw(sink.hasher.finalize().into()), sink.count))
            });
            let mut consumed = Ok(());
            for paragraph in ParagraphReader::new(BufReader::new(reader)) {
                match paragraph.map_err(|e| format!("not a deb822 index: {e}")).and_then(&mut each) {
                    Ok(()) => {}
                    Err(e) => {
                        consumed = Err(e);
                        break;
                    }
                }
            }
            // The reader is dropped here: a producer still writing gets a broken pipe.
            let produced =
                decompressor.join().map_err(|_| ReadError::Unreadable("the decompressor panicked".into()))?;
            let (digest, size) = match (produced, consumed) {
                (Ok(sum), Ok(())) => sum,
                // The reader stopped first: the pipe broke because of what it said.
                (Err(e), Err(said)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                    return Err(ReadError::Unreadable(said));
                }
                (Err(e), _) => return Err(ReadError::Unreadable(e.to_string())),
                (Ok(_), Err(said)) => return Err(ReadError::Unreadable(said)),
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

/// `Multi-Arch`: how a package satisfies dependencies across architectures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MultiArch {
    No,
    Same,
    Foreign,
    Allowed,
}

/// A virtual package a package provides, versioned or not.
#[derive(Debug, Clone)]
pub struct Provided {
    pub name: String,
    pub version: Option<Version>,
}

/// One package of an index (or of the target's status file), cut down to what resolving
/// needs. Relation fields stay text until the resolver visits the package: a distribution
/// index has 60 000 packages and a closure touches a few hundred.
#[derive(Debug, Clone)]
pub struct Pkg {
    pub name: String,
    pub version: Version,
    pub architecture: String,
    pub multi_arch: MultiArch,
    pub required: bool,
    pub pre_depends: String,
    pub depends: String,
    pub conflicts: String,
    pub breaks: String,
    pub provides: Vec<Provided>,
    /// Which loaded index it came from (for the base: unused).
    pub source: usize,
}

impl Pkg {
    /// The fields of one paragraph; `None` for a paragraph that names no package or version.
    pub fn from_paragraph(p: &Paragraph, source: usize) -> Result<Option<Self>, String> {
        let (Some(name), Some(version)) = (p.get("Package"), p.get("Version")) else { return Ok(None) };
        let version: Version = version.parse().map_err(|e| format!("`{name}`: bad Version `{version}`: {e}"))?;
        let text = |k: &str| p.get(k).unwrap_or_default().to_owned();
        let multi_arch = match p.get("Multi-Arch").map(str::trim) {
            Some("same") => MultiArch::Same,
            Some("foreign") => MultiArch::Foreign,
            Some("allowed") => MultiArch::Allowed,
            _ => MultiArch::No,
        };
        let provides = relations(p.get("Provides").unwrap_or_default())
            .map_err(|e| format!("`{name}`: bad Provides: {e}"))?
            .0
            .into_iter()
            .flatten()
            .map(|r| Provided { name: r.name, version: r.version.map(|(_, v)| v) })
            .collect();
        Ok(Some(Self {
            name: name.to_owned(),
            version,
            architecture: text("Architecture"),
            multi_arch,
            required: p.get("Priority").is_some_and(|v| v.trim() == "required")
                || p.get("Essential").is_some_and(|v| v.trim() == "yes"),
            pre_depends: text("Pre-Depends"),
            depends: text("Depends"),
            conflicts: text("Conflicts"),
            breaks: text("Breaks"),
            provides,
            source,
        }))
    }

    /// `name version arch` for messages.
    pub fn label(&self) -> String {
        format!("{} {}", self.name, self.version)
    }
}

/// Parse a relation field (`a (>= 1) | b, c:any`).
pub fn relations(text: &str) -> Result<Relations, String> {
    // Continuation lines of a folded field.
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    flat.parse()
}

/// A relation as Debian writes it: `name[:qual] (op version)`.
pub fn show(r: &Relation) -> String {
    let qual = r.archqual.as_deref().map(|q| format!(":{q}")).unwrap_or_default();
    match &r.version {
        Some((op, v)) => format!("{}{qual} ({op} {v})", r.name),
        None => format!("{}{qual}", r.name),
    }
}

/// The packages a dpkg status file says are installed (`Status: install ok installed`),
/// read as a stream.
pub fn read_status(reader: impl Read) -> Result<Vec<Pkg>, String> {
    let mut out = Vec::new();
    for p in ParagraphReader::new(BufReader::new(reader)) {
        let p = p.map_err(|e| format!("not a dpkg status file: {e}"))?;
        let installed = p.get("Status").is_some_and(|s| s.split_whitespace().last() == Some("installed"));
        if installed && let Some(pkg) = Pkg::from_paragraph(&p, usize::MAX)? {
            out.push(pkg);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn compress(plain: &[u8], compression: Compression) -> Vec<u8> {
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

    fn names(index: &Index) -> Result<Vec<String>, ReadError> {
        let mut out = Vec::new();
        index.read(|p| {
            out.push(p.get("Package").unwrap_or_default().to_owned());
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
    fn a_consumer_error_stops_the_stream() {
        let plain = b"Package: a\nVersion: 1\n\n".repeat(100_000);
        let idx = index(&plain, Compression::Xz, plain.len() as u64);
        let err = idx.read(|_| Err("stop".into())).unwrap_err();
        assert_eq!(err, ReadError::Unreadable("stop".into()));
    }

    #[test]
    fn status_keeps_installed_packages_with_their_provides() {
        let status = "Package: libc6\nStatus: install ok installed\nVersion: 2.36-9\nArchitecture: amd64\nMulti-Arch: same\nProvides: libc6-x (= 2.36)\n\nPackage: gone\nStatus: deinstall ok config-files\nVersion: 1\nArchitecture: amd64\n";
        let pkgs = read_status(status.as_bytes()).unwrap();
        assert_eq!(pkgs.len(), 1);
        assert_eq!((pkgs[0].name.as_str(), pkgs[0].multi_arch), ("libc6", MultiArch::Same));
        assert_eq!(pkgs[0].provides[0].version.as_ref().map(ToString::to_string).as_deref(), Some("2.36"));
    }

    #[test]
    fn versions_order_as_debian_policy_says() {
        let v = |s: &str| s.parse::<Version>().unwrap();
        assert!(v("1.0~rc1") < v("1.0"));
        assert!(v("1:0.9") > v("2.0"));
        assert!(v("2.10-3") > v("2.9-9"));
        assert!(v("6.4.0-1") < v("6.4.0-1+b1"));
        let r = relations("a (>= 1.2) | b,\n c:any, d (<< 2~)").unwrap();
        let shown: Vec<Vec<String>> = r.0.iter().map(|g| g.iter().map(show).collect()).collect();
        assert_eq!(shown, vec![vec!["a (>= 1.2)", "b"], vec!["c:any"], vec!["d (<< 2~)"]]);
    }
}
