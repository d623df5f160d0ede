//! What a bundle is packed from: its members and where their bytes are (`Member`, `Origin`,
//! `Origins`, `Packing`), the buffers a member's bytes arrive in (`Buffers`), and what can go
//! wrong reading them (`PackError`). The writer (`writer`) and the thread that reads members
//! for it (`feed`) share these; neither imports the other for them.

use std::borrow::Cow;
use std::io::{self, BufRead};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::manifest::Entry;
use crate::digest::Sha256;
use crate::failure::{Class, Classify};
use crate::member_path::MemberPath;

/// One content member of the bundle to be, and where its bytes come from.
#[derive(Debug, Clone)]
pub struct Member {
    pub path: MemberPath,
    pub size: u64,
    pub sha256: Sha256,
    /// Where its bytes are read from (`Member::origin`).
    pub origin: Origin,
    /// Human name for messages, e.g. "[[file]] `fw.bin`": one, shared, for all the files of a
    /// directory (the messages name each file's path).
    pub what: Arc<str>,
}

/// Where a member's bytes are read from.
#[derive(Debug, Clone)]
pub enum Origin {
    /// A file: a cache blob or a local file the spec names (or, for an image blob that
    /// streams in, what it streams from, for messages).
    File(PathBuf),
    /// A file of a local directory: `dir` joined with the member's path after its first `skip`
    /// bytes (`files/NAME/`). One `dir` for all its files rather than a path each, which was
    /// about 100 bytes a file of `build`'s memory.
    InDir { dir: Arc<Path>, skip: usize },
}

impl From<PathBuf> for Origin {
    fn from(path: PathBuf) -> Self {
        Origin::File(path)
    }
}

impl Origin {
    /// The file holding the bytes of the member at `path`.
    fn locate(&self, path: &MemberPath) -> Cow<'_, Path> {
        match self {
            Origin::File(file) => Cow::Borrowed(file),
            Origin::InDir { dir, skip } => Cow::Owned(dir.join(path.as_str().get(*skip..).unwrap_or_default())),
        }
    }
}

impl Member {
    /// The file holding its bytes.
    pub fn origin(&self) -> Cow<'_, Path> {
        self.origin.locate(&self.path)
    }

    /// Bundle order: by path, then by digest, so that no sort, stable or not, can order the
    /// bytes of a bundle two ways. Sorted in place (`sort_unstable_by`): a stable sort of
    /// 200,000 members took a buffer of 10 MB.
    pub fn order(a: &Member, b: &Member) -> std::cmp::Ordering {
        a.path.cmp(&b.path).then_with(|| a.sha256.cmp(&b.sha256))
    }
}

/// Where the bytes of a manifest's entries come from, in the manifest's order: what a build
/// keeps of its members once the manifest's entries hold their paths, sizes and digests. A
/// directory's files are one run (each file's origin follows from its path), so a tree of
/// 50,000 files is one run here rather than 50,000 members beside the entries (13 MiB).
#[derive(Debug, Default)]
pub struct Origins {
    /// How many consecutive entries each run covers, where their bytes are, and their name.
    runs: Vec<(usize, Origin, Arc<str>)>,
}

impl Origins {
    /// Split `members`, in manifest order, into the manifest's entries (each path moved, not
    /// copied) and where their bytes are.
    pub fn split(members: Vec<Member>) -> (Vec<Entry>, Origins) {
        let mut entries = Vec::with_capacity(members.len());
        let mut runs: Vec<(usize, Origin, Arc<str>)> = Vec::new();
        for Member { path, size, sha256, origin, what } in members {
            match (runs.last_mut(), &origin) {
                (Some((count, Origin::InDir { dir, skip }, name)), Origin::InDir { dir: d, skip: s })
                    if Arc::ptr_eq(dir, d) && skip == s && Arc::ptr_eq(name, &what) =>
                {
                    *count += 1;
                }
                _ => runs.push((1, origin, what)),
            }
            entries.push(Entry { path, size, sha256, from_base: false });
        }
        (entries, Origins { runs })
    }

    /// The members to pack, in order: the `entries` this split made that the bundle carries
    /// (not `from_base`), each with where its bytes are.
    pub fn members<'a>(&'a self, entries: &'a [Entry]) -> impl Iterator<Item = Packing<'a>> + Send + 'a {
        self.runs
            .iter()
            .scan(0usize, move |start, (count, origin, what)| {
                let run = entries.get(*start..*start + count).unwrap_or_default();
                *start += count;
                Some(run.iter().map(move |entry| Packing { entry, origin, what }))
            })
            .flatten()
            .filter(|p| !p.entry.from_base)
    }
}

/// One member being packed: the manifest's entry for it, and where its bytes are.
#[derive(Debug, Clone, Copy)]
pub struct Packing<'a> {
    pub entry: &'a Entry,
    origin: &'a Origin,
    /// Human name for messages (`Member::what`).
    pub what: &'a str,
}

impl Packing<'_> {
    /// The file holding its bytes.
    pub fn origin(&self) -> Cow<'_, Path> {
        self.origin.locate(&self.entry.path)
    }
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
    #[error("`{what}` was not fetched: its download failed or was stopped")]
    NotFetched { what: String },
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
            PackError::Read { .. } | PackError::Write { .. } | PackError::NotFetched { .. } => Class::Runtime,
            PackError::SizeMismatch { .. } | PackError::DigestMismatch { .. } => Class::Verification,
        }
    }
}

/// A member's bytes as `writer::BundleWriter::append` reads them: a `BufRead` that may hold more
/// than one buffer at once, so that bytes stored as they are go out in one vectored write
/// however they arrived (the feed's batches of a layer streamed from its registry).
pub trait Buffers: BufRead {
    /// The bytes at hand, in order, `fill_buf`'s first; none at the end.
    fn fill_bufs(&mut self) -> io::Result<Vec<&[u8]>> {
        let buf = self.fill_buf()?;
        Ok(if buf.is_empty() { Vec::new() } else { vec![buf] })
    }

    /// Mark `n` bytes of [`Buffers::fill_bufs`]'s read, across its buffers.
    fn consume_bufs(&mut self, n: usize) {
        self.consume(n);
    }
}

impl Buffers for &[u8] {}

impl<R: io::Read> Buffers for io::BufReader<R> {}

impl<B: Buffers + ?Sized> Buffers for &mut B {
    fn fill_bufs(&mut self) -> io::Result<Vec<&[u8]>> {
        (**self).fill_bufs()
    }

    fn consume_bufs(&mut self, n: usize) {
        (**self).consume_bufs(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_s_files_are_one_origin_and_each_member_keeps_its_own() {
        let member = |path: &str, origin: Origin, what: &Arc<str>| Member {
            path: MemberPath::new(path).unwrap(),
            size: path.len() as u64,
            sha256: Sha256::of_bytes(path.as_bytes()),
            origin,
            what: what.clone(),
        };
        let (sbom, tree, other, blob): (Arc<str>, Arc<str>, Arc<str>, Arc<str>) =
            ("sbom".into(), "tree".into(), "other tree".into(), "blob".into());
        let (t, u): (Arc<Path>, Arc<Path>) = (Path::new("/src/t").into(), Path::new("/src/u").into());
        let in_dir = |dir: &Arc<Path>| Origin::InDir { dir: dir.clone(), skip: "files/t/".len() };
        let members = vec![
            member("airlock/sbom.cdx.json", Origin::File("/cache/s".into()), &sbom),
            member("files/t/a", in_dir(&t), &tree),
            member("files/t/b/c", in_dir(&t), &tree),
            member("files/t/d", in_dir(&t), &tree),
            // The same directory under another name, then a file between two runs of one tree.
            member("files/u/e", in_dir(&u), &other),
            member("files/v", Origin::File("/cache/v".into()), &blob),
            member("files/w/f", in_dir(&t), &tree),
        ];
        let (mut entries, origins) = Origins::split(members.clone());
        assert_eq!(origins.runs.len(), 5, "{:?}", origins.runs);
        assert_eq!(origins.runs[1].0, 3);
        let expect: Vec<(MemberPath, u64, Sha256)> =
            members.iter().map(|m| (m.path.clone(), m.size, m.sha256)).collect();
        let got: Vec<(MemberPath, u64, Sha256)> = entries.iter().map(|e| (e.path.clone(), e.size, e.sha256)).collect();
        assert_eq!(got, expect);
        entries[2].from_base = true;
        let packing: Vec<(String, PathBuf, String)> = origins
            .members(&entries)
            .map(|p| (p.entry.path.to_string(), p.origin().into_owned(), p.what.to_owned()))
            .collect();
        let want = [
            ("airlock/sbom.cdx.json", "/cache/s", "sbom"),
            ("files/t/a", "/src/t/a", "tree"),
            ("files/t/d", "/src/t/d", "tree"),
            ("files/u/e", "/src/u/e", "other tree"),
            ("files/v", "/cache/v", "blob"),
            ("files/w/f", "/src/t/f", "tree"),
        ];
        let want: Vec<(String, PathBuf, String)> =
            want.iter().map(|(p, o, w)| ((*p).to_owned(), PathBuf::from(o), (*w).to_owned())).collect();
        assert_eq!(packing, want);
    }
}
