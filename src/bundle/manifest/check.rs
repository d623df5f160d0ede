//! The rules a signed manifest must still satisfy before its entries are trusted as a plan for
//! reading (`Manifest::check`), a version tag's, and the entries looked up by path.

use std::collections::BTreeMap;

use super::artifacts::{Artifact, FileArtifact, ModelArtifact, TreeSum};
use super::{AREAS, Entry, MAX_ENTRY_BYTES, MAX_TOTAL_BYTES, Manifest, SBOM, SCHEMA_V1, is_carried_trust};
use crate::digest::Sha256;

/// A version tag (`oci://…:2.0.0`, `v2.0.0`) that names another version than the bundle it
/// points at.
#[derive(Debug, thiserror::Error)]
#[error(
    "the tag `{tag}` names version {tag_version} but the bundle it points at is {name} {version}; \
     the tag was moved or mislabelled; nothing was written or changed",
    tag_version = tag.strip_prefix('v').unwrap_or(tag)
)]
pub struct TagMismatch {
    pub tag: String,
    pub name: String,
    pub version: semver::Version,
}

impl crate::failure::Classify for TagMismatch {
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Verification
    }
}

impl Manifest {
    /// A tag that is a version (`2.0.0`, `v2.0.0`) must name this manifest's version; a tag
    /// that is not one (`latest`, `canary`) names none.
    pub fn check_tag(&self, tag: &str) -> Result<(), TagMismatch> {
        let Ok(tagged) = semver::Version::parse(tag.strip_prefix('v').unwrap_or(tag)) else { return Ok(()) };
        if tagged == self.version {
            return Ok(());
        }
        Err(TagMismatch { tag: tag.to_owned(), name: self.name.to_string(), version: self.version.clone() })
    }

    /// The entry an artifact of one file points at: its name, path, sha256 and size (a model
    /// and a directory are checked file by file, before this).
    /// An artifact's upstream signature names members that are entries, with their digests.
    fn check_signature(a: &Artifact, by_path: &ByPath<'_>) -> Result<(), ArtifactRule> {
        let (name, signature) = match a {
            Artifact::Image(i) => (i.reference.as_str(), &i.signature),
            Artifact::File(f) => (f.name.as_str(), &f.signature),
            Artifact::Wheel(w) => (w.filename.as_str(), &w.signature),
            _ => return Ok(()),
        };
        for (path, sha256) in signature.iter().flat_map(crate::spec::UpstreamSignature::members) {
            if by_path.get(path.as_str()).is_none_or(|e| e.sha256 != sha256) {
                return Err(ArtifactRule::SignatureNotEntry { name: name.to_owned(), path: path.to_string(), sha256 });
            }
        }
        if let Artifact::Image(i) = a {
            for (path, sha256) in i.filtered_indexes() {
                if by_path.get(path.as_str()).is_none_or(|e| e.sha256 != sha256) {
                    return Err(ArtifactRule::FilteredIndexNotEntry { name: name.to_owned(), sha256 });
                }
            }
        }
        Ok(())
    }

    fn artifact_entry(a: &Artifact) -> Result<(&str, String, Sha256, u64), ArtifactRule> {
        Ok(match a {
            Artifact::File(f) => (f.name.as_str(), f.path.as_str().to_owned(), f.sha256, f.size),
            Artifact::Wheel(w) => {
                if w.path.as_str() != format!("wheels/{}", w.filename) {
                    return Err(ArtifactRule::WheelPath { filename: w.filename.clone() });
                }
                (w.filename.as_str(), w.path.as_str().to_owned(), w.sha256, w.size)
            }
            Artifact::Deb(d) => {
                if d.path.area() != "debs" {
                    return Err(ArtifactRule::DebArea { name: d.name.clone() });
                }
                (d.name.as_str(), d.path.as_str().to_owned(), d.sha256, d.size)
            }
            Artifact::Rpm(r) => {
                if r.path.area() != "rpms" || r.path.as_str().starts_with("rpms/repodata/") {
                    return Err(ArtifactRule::RpmArea { name: r.name.clone() });
                }
                (r.name.as_str(), r.path.as_str().to_owned(), r.sha256, r.size)
            }
            Artifact::Model(m) => {
                return Err(ArtifactRule::ModelNoEntry { repo: m.repo.to_string() });
            }
            Artifact::Image(i) => (i.reference.as_str(), format!("images/blobs/sha256/{}", i.digest), i.digest, i.size),
        })
    }

    /// A `[[file]]` directory: each file an entry at `path/PATH`, the digest the tree's.
    fn check_tree(f: &FileArtifact, by_path: &ByPath<'_>) -> Result<(), ArtifactRule> {
        if let Some(listed) = &f.tree {
            // Held as entries: those under `path/`, in path order, must be the listing (its
            // digest, count and total), and the listing the tree the artifact claims.
            let dir = format!("{}/", f.path);
            let mut sum = TreeSum::default();
            for e in by_path.under(&dir) {
                sum.add(&e.path.as_str()[dir.len()..], e.sha256, e.size);
            }
            let entries = sum.finish();
            if entries != *listed {
                return Err(ArtifactRule::TreeCount {
                    name: f.name.to_string(),
                    files: listed.count,
                    entries: entries.count,
                    dir,
                });
            }
            if listed.digest != f.sha256 || listed.total != f.size {
                return Err(ArtifactRule::TreeDigest { name: f.name.to_string() });
            }
            return Ok(());
        }
        // Each file's member is `path/PATH` by construction (`FilesRead`).
        for file in &f.files {
            let member = format!("{}/{}", f.path, file.path);
            let listed = by_path.get(&member);
            if !listed.is_some_and(|e| e.sha256 == file.sha256 && e.size == file.size) {
                return Err(ArtifactRule::TreeFile { name: f.name.to_string(), file: file.path.to_string(), member });
            }
        }
        let digest = crate::spec::lock::tree_digest(f.files.iter().map(|t| (t.path.as_str(), t.sha256, t.size)));
        let total: u64 = f.files.iter().map(|t| t.size).sum();
        if digest != f.sha256 || total != f.size {
            return Err(ArtifactRule::TreeDigest { name: f.name.to_string() });
        }
        Ok(())
    }

    /// A model artifact's names, which become cache-view paths, and its files' entries.
    fn check_model(m: &ModelArtifact, by_path: &ByPath<'_>) -> Result<(), ArtifactRule> {
        Self::check_model_names(m)?;
        // Each file's member is `models/ORG/NAME/COMMIT/PATH` by construction (`FilesRead`):
        // the cache view's file path is exactly its tail.
        let dir = m.dir();
        for f in &m.files {
            let member = format!("{dir}/{}", f.path);
            let listed = by_path.get(&member);
            if !listed.is_some_and(|e| e.sha256 == f.sha256 && e.size == f.size) {
                return Err(ArtifactRule::ModelFile { repo: m.repo.to_string(), file: f.path.to_string(), member });
            }
        }
        Ok(())
    }

    /// A model's repository is `ORG/NAME` and its commit a hex sha.
    pub(super) fn check_model_names(m: &ModelArtifact) -> Result<(), ArtifactRule> {
        if m.repo.as_str().split('/').count() != 2 {
            return Err(ArtifactRule::ModelRepo { repo: m.repo.to_string() });
        }
        let commit = m.commit.as_str();
        if !(commit.len() == 40 || commit.len() == 64) || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ArtifactRule::ModelCommit { repo: m.repo.to_string(), commit: commit.to_owned() });
        }
        Ok(())
    }

    /// Rules a signed manifest must still satisfy before its entries are trusted as a plan for
    /// reading: known schema, unique entries in known areas, no reserved names, no entry that
    /// is also another entry's directory, and artifacts that point at entries.
    pub fn check(&self) -> Result<(), ManifestError> {
        if self.schema != SCHEMA_V1 {
            return Err(ManifestError::Schema { actual: self.schema.clone() });
        }
        let mut total: u64 = 0;
        for e in &self.entries {
            let p = e.path.as_str();
            let path = || p.to_owned();
            // Sizes become tar padding, byte budgets and disk-space checks: an absurd one is
            // refused here, so that no arithmetic on it can overflow later.
            if e.size > MAX_ENTRY_BYTES {
                return Err(ManifestError::EntryTooLarge { path: path(), size: e.size });
            }
            total = total.checked_add(e.size).filter(|t| *t <= MAX_TOTAL_BYTES).ok_or(ManifestError::TooLarge)?;
            if !AREAS.contains(&e.path.area()) {
                return Err(ManifestError::OutsideAreas { path: path() });
            }
            if e.path.area() == "airlock" && p != SBOM && !is_carried_trust(p) {
                return Err(ManifestError::Reserved { path: path() });
            }
            if e.from_base && (self.base.is_none() || e.path.area() == "airlock") {
                let why = match self.base {
                    None => "the manifest names no base",
                    Some(_) => "`airlock/` members are always carried",
                };
                return Err(ManifestError::FromBase { path: path(), why });
            }
        }
        // By path: a lookup per artifact, not a scan (450 000 entries made that quadratic).
        let by_path = ByPath::new(&self.entries).map_err(|p| ManifestError::ListedTwice { path: p.to_owned() })?;
        if by_path.get(SBOM).is_none() {
            return Err(ManifestError::NoSbom);
        }
        for e in &self.entries {
            if let Some(dir) = e.path.ancestors().find(|a| by_path.get(a).is_some()) {
                return Err(ManifestError::DirectoryOfEntry { dir: dir.to_string(), entry: e.path.to_string() });
            }
        }
        for a in &self.artifacts {
            Self::check_signature(a, &by_path)?;
            if let Artifact::Model(m) = a {
                Self::check_model(m, &by_path)?;
                continue;
            }
            if let Artifact::File(f) = a
                && f.is_tree()
            {
                Self::check_tree(f, &by_path)?;
                continue;
            }
            let (name, path, sha256, size) = Self::artifact_entry(a)?;
            let listed = by_path.get(path.as_str());
            if !listed.is_some_and(|e| e.sha256 == sha256 && e.size == size) {
                return Err(ManifestError::ArtifactEntry { name: name.to_owned(), path });
            }
        }
        Ok(())
    }
}

/// Why a signed manifest cannot be trusted as a plan for reading (`Manifest::check`): a
/// verification failure, whoever signed it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    #[error("signed by {have} of the {need} key(s) of `{role}` its policy needs")]
    Unsigned { role: String, need: usize, have: usize },
    #[error("schema is `{actual}`, expected `{v1}`", v1 = SCHEMA_V1)]
    Schema { actual: String },
    #[error("entry `{path}` claims {size} bytes (at most {max})", max = MAX_ENTRY_BYTES)]
    EntryTooLarge { path: String, size: u64 },
    #[error("the entries' sizes add up to more than {max} bytes", max = MAX_TOTAL_BYTES)]
    TooLarge,
    #[error("entry `{path}` is outside the areas {areas:?}", areas = AREAS)]
    OutsideAreas { path: String },
    #[error("entry `{path}` uses a reserved `airlock/` name")]
    Reserved { path: String },
    #[error("entry `{path}` is marked `from_base`, but {why}")]
    FromBase { path: String, why: &'static str },
    #[error("entry `{path}` is listed twice")]
    ListedTwice { path: String },
    #[error("no entry for `{sbom}`: every v1 bundle lists its SBOM", sbom = SBOM)]
    NoSbom,
    #[error("entry `{dir}` is also the directory of entry `{entry}`")]
    DirectoryOfEntry { dir: String, entry: String },
    #[error("artifact `{name}` does not match an entry at `{path}`")]
    ArtifactEntry { name: String, path: String },
    /// An artifact's own rules (a deb outside `debs/`, a tree whose files do not give its
    /// digest, a model's names).
    #[error(transparent)]
    Artifact(#[from] ArtifactRule),
}

/// An artifact that breaks its kind's rules in a manifest (`Manifest::check`), in its kind's
/// words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArtifactRule {
    #[error("`{name}`'s upstream signature is at `{path}` (sha256 {sha256}), not an entry")]
    SignatureNotEntry { name: String, path: String, sha256: Sha256 },
    #[error(
        "`{name}` is carried filtered to some platforms, but the upstream index its signature is over \
         (sha256 {sha256}) is not an entry: its platforms cannot be checked against it"
    )]
    FilteredIndexNotEntry { name: String, sha256: Sha256 },
    #[error("wheel `{filename}` is not at `wheels/{filename}`")]
    WheelPath { filename: String },
    #[error("deb `{name}` is not under `debs/`")]
    DebArea { name: String },
    #[error("rpm `{name}` is not under `rpms/` (outside `rpms/repodata/`)")]
    RpmArea { name: String },
    #[error("model `{repo}` has no one entry: its files are checked one by one")]
    ModelNoEntry { repo: String },
    #[error("file `{name}`: its {files} files do not match the {entries} entries under `{dir}`")]
    TreeCount { name: String, files: usize, entries: usize, dir: String },
    #[error("file `{name}`: its files do not give the tree digest and size it claims")]
    TreeDigest { name: String },
    #[error("file `{name}` tree file `{file}` does not match an entry at `{member}`")]
    TreeFile { name: String, file: String, member: String },
    #[error("model `{repo}` file `{file}` does not match an entry at `{member}`")]
    ModelFile { repo: String, file: String, member: String },
    #[error("model repository `{repo}` is not `ORG/NAME`")]
    ModelRepo { repo: String },
    #[error("model `{repo}` commit `{commit}` is not a hex commit sha")]
    ModelCommit { repo: String, commit: String },
}

impl crate::failure::Classify for ArtifactRule {
    /// A signed manifest that breaks a rule: a verification failure, whoever signed it.
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Verification
    }
}

impl crate::failure::Classify for ManifestError {
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Verification
    }
}

/// A manifest's entries by path. Every bundle airlock writes lists them sorted by path (they
/// are its members, which are sorted), and then a lookup is a binary search over the entries
/// themselves: nothing more is held, however many there are (an index of 200,000 paths took
/// 5 to 7 MB, and `check` built two). Entries in another order, which a manifest may have,
/// get an index built once.
pub struct ByPath<'a> {
    entries: &'a [Entry],
    /// Only when the entries are not sorted.
    pub(super) index: Option<BTreeMap<&'a str, usize>>,
}

impl<'a> ByPath<'a> {
    /// The lookup over `entries`; `Err` with a path that is listed twice.
    pub fn new(entries: &'a [Entry]) -> Result<Self, &'a str> {
        if entries.windows(2).all(|w| w[0].path.as_str() < w[1].path.as_str()) {
            return Ok(Self { entries, index: None });
        }
        let mut index = BTreeMap::new();
        for (i, e) in entries.iter().enumerate() {
            if index.insert(e.path.as_str(), i).is_some() {
                return Err(e.path.as_str());
            }
        }
        Ok(Self { entries, index: Some(index) })
    }

    /// Where the entry at `path` is in the list.
    pub fn position(&self, path: &str) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(path).copied(),
            None => self.entries.binary_search_by(|e| e.path.as_str().cmp(path)).ok(),
        }
    }

    pub fn get(&self, path: &str) -> Option<&'a Entry> {
        self.position(path).map(|i| &self.entries[i])
    }

    /// The entries whose path starts with `prefix`, in path order.
    pub fn under(&self, prefix: &'a str) -> Box<dyn Iterator<Item = &'a Entry> + '_> {
        let within = move |p: &str| p.starts_with(prefix);
        if let Some(index) = &self.index {
            Box::new(index.range(prefix..).take_while(move |(p, _)| within(p)).map(|(_, i)| &self.entries[*i]))
        } else {
            let start = self.entries.partition_point(|e| e.path.as_str() < prefix);
            Box::new(self.entries[start..].iter().take_while(move |e| within(e.path.as_str())))
        }
    }
}
