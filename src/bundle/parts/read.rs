//! Reading what a user named as a bundle: one file, a split bundle (its parts file checked,
//! then every part's presence, size and head digest before a byte of it is read; the parts
//! streamed as one, each part's sha256 checked as it ends), or bytes from a registry.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::{
    HEAD_BYTES, MAX_PARTS, MAX_PARTS_FILE_BYTES, PARTS_SUFFIX, Part, PartsError, PartsFile, SCHEMA, file_name,
    part_path, parts_path, signature_path,
};
use crate::bundle::rejection::{Problem, Rejection};
use crate::digest::Sha256;
use crate::sign::{KeyId, TrustedKey};

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
