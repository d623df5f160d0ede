//! The lock (`airlock.lock` for `airlock.toml`, `NAME.lock` for `NAME.toml`): every input of
//! the spec pinned to a sha256 and size, plus the time it was resolved (the bundle's timestamp
//! when `SOURCE_DATE_EPOCH` is not set). Like `Cargo.lock`, it is TOML, meant to be committed
//! and reviewed.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{DebPin, FileName, RpmPin, Spec, SpecError, parse_error};
use crate::clock::Timestamp;
use crate::digest::Sha256;

pub const LOCK_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    pub version: u32,
    pub resolved_at: Timestamp,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image: Vec<LockedImage>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wheel: Vec<LockedWheel>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deb: Vec<LockedDeb>,
    /// The dpkg status files closures were resolved over (`base_status`), by digest: a
    /// changed base makes the lock stale.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deb_base: Vec<LockedBase>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rpm: Vec<LockedRpm>,
    /// The rpm databases closures were resolved over (`base_rpmdb`), by digest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rpm_base: Vec<LockedBase>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model: Vec<LockedModel>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub file: Vec<LockedFile>,
}

/// A target's dpkg status file, as the spec names it, and its digest when the lock was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedBase {
    pub path: String,
    pub sha256: Sha256,
}

/// A Debian package pinned to the file its signed repository index names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedDeb {
    pub repo: String,
    pub suite: String,
    pub arch: String,
    /// The package as the spec asks for it (`name=version` or a bare `name`), or for a
    /// dependency of a closure its exact `name=version`.
    pub package: DebPin,
    /// The package's own `Architecture` (the spec's arch, or `all`).
    pub architecture: String,
    /// The upstream `Filename` (`pool/…`).
    pub filename: String,
    pub sha256: Sha256,
    pub size: u64,
    /// The upstream `Packages` stanza.
    pub stanza: String,
    /// For a package of a dependency closure (`resolve = true`): the packages of the closure
    /// whose dependencies it satisfies. Empty for a package only the spec asks for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_by: Vec<String>,
    /// The repository's `Release` `Origin` and `Codename` (`Debian`, `bookworm`): the purl's
    /// namespace and `distro`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codename: Option<String>,
}

/// A model repository pinned to a commit, with every chosen file's digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedModel {
    pub hub: String,
    pub repo: String,
    /// The revision as written in the spec (a branch, tag or commit).
    pub revision: String,
    pub commit: String,
    pub files: Vec<LockedModelFile>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedModelFile {
    pub path: String,
    pub sha256: Sha256,
    pub size: u64,
    /// Stored with Git LFS upstream (its sha256 came from the hub).
    #[serde(default)]
    pub lfs: bool,
}

/// One wheel file a pinned requirement resolved to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedWheel {
    pub index: String,
    /// The requirement as written in the spec.
    pub requirement: String,
    /// PEP 503-normalised project name.
    pub name: String,
    pub version: String,
    pub filename: String,
    pub url: String,
    pub sha256: Sha256,
    pub size: u64,
    /// The spec's `lockfile` this wheel's package came from, as the spec writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lockfile: Option<String>,
    /// The digest of that lock file when this lock was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lockfile_sha256: Option<Sha256>,
    /// What that lock file says the package depends on (normalised names), for the SBOM's
    /// dependency graph.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<String>,
    /// Its PEP 740 attestation that verified under the spec's `verify`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<crate::spec::UpstreamSignature>,
}

/// An image pinned to the digest its source served for the tag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedImage {
    /// The spec's `ref`, or its `oci_layout` path.
    pub source: String,
    /// The spec's `tag` for a layout source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// The name the image has in the bundle and on the site (`org.opencontainers.image.ref.name`).
    pub reference: String,
    #[serde(with = "crate::digest::prefixed")]
    pub digest: Sha256,
    pub media_type: String,
    pub size: u64,
    /// For an index: the platforms carried, each with its manifest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub platforms: Vec<LockedPlatform>,
    /// Upstream signatures and attestations of this image (cosign tags, OCI referrers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attached: Vec<LockedAttachment>,
    /// The upstream Sigstore signature that verified under the spec's `verify`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<crate::spec::UpstreamSignature>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedPlatform {
    pub platform: String,
    #[serde(with = "crate::digest::prefixed")]
    pub digest: Sha256,
    pub media_type: String,
    pub size: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedAttachment {
    /// The cosign tag (`sha256-HEX.sig`, `.att`, `.sbom`), or none for an OCI referrer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    #[serde(with = "crate::digest::prefixed")]
    pub digest: Sha256,
    pub media_type: String,
    pub size: u64,
}

/// An rpm pinned to the file its signed repository metadata names: by NEVRA, sha256 and size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedRpm {
    /// The spec's `baseurl`, as written (the key the spec and the lock are compared by).
    pub baseurl: String,
    /// `baseurl` expanded: where `location` is relative to.
    pub url: String,
    /// The entry's architecture.
    pub arch: String,
    /// The package as the spec asks for it, or for a dependency its exact `name=EVR`.
    pub package: RpmPin,
    pub name: String,
    pub epoch: u32,
    pub version: String,
    pub release: String,
    /// The package's own architecture (the entry's, or `noarch`).
    pub architecture: String,
    /// `location href` in the repository (`Packages/r/rocm-core-….rpm`).
    pub location: String,
    pub sha256: Sha256,
    pub size: u64,
    /// The module stream it belongs to (`name:stream`), for a modular package.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_by: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distro: Option<String>,
}

impl LockedRpm {
    /// `[EPOCH:]VERSION-RELEASE`, the epoch shown only when it is not 0 (as rpm prints it).
    pub fn evr(&self) -> String {
        if self.epoch == 0 {
            format!("{}-{}", self.version, self.release)
        } else {
            format!("{}:{}-{}", self.epoch, self.version, self.release)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedFile {
    pub name: FileName,
    pub source: String,
    /// A file's sha256; for a directory, the tree's (`tree_digest` of `files`).
    pub sha256: Sha256,
    /// A file's size; for a directory, its files' total.
    pub size: u64,
    /// A directory's regular files, by path relative to it, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<TreeFile>,
    /// The upstream Sigstore signature (`sigstore_bundle`) that verified under the spec's `verify`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<crate::spec::UpstreamSignature>,
}

/// One regular file of a `[[file]]` directory. In the lock it is one string, its line of the
/// tree digest's listing (`SHA256 SIZE PATH`): a table per file made the TOML parser hold
/// 2.6 KB per file (260 MB for a 100,000-file tree), a string about a tenth of that. The
/// table form (`{ path, sha256, size }`) earlier locks hold is read too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeFile {
    pub path: String,
    pub sha256: Sha256,
    pub size: u64,
}

impl Serialize for TreeFile {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{} {} {}", self.sha256, self.size, self.path))
    }
}

impl<'de> Deserialize<'de> for TreeFile {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TreeFileForm)
    }
}

/// Either form, each with its own error (an untagged enum would say only that neither fits).
struct TreeFileForm;

impl<'de> serde::de::Visitor<'de> for TreeFileForm {
    type Value = TreeFile;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a tree file line `SHA256 SIZE PATH` (or a `{ path, sha256, size }` table)")
    }

    fn visit_str<E: serde::de::Error>(self, line: &str) -> Result<TreeFile, E> {
        let parsed = line.split_once(' ').and_then(|(sha256, rest)| {
            let (size, path) = rest.split_once(' ')?;
            Some((sha256.parse::<Sha256>().ok()?, size.parse::<u64>().ok()?, path))
        });
        match parsed {
            Some((sha256, size, path)) if !path.is_empty() => Ok(TreeFile { path: path.to_owned(), sha256, size }),
            _ => Err(E::custom(format!("`{line}` is not a tree file line `SHA256 SIZE PATH`"))),
        }
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<TreeFile, A::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Table {
            path: String,
            sha256: Sha256,
            size: u64,
        }
        let Table { path, sha256, size } = Table::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
        Ok(TreeFile { path, sha256, size })
    }
}

/// A tree's digest: the sha256 of its listing, one `SHA256 SIZE PATH` line per file in path
/// order (what `sha256sum`-style tools can recompute).
pub fn tree_digest<'a>(files: impl IntoIterator<Item = (&'a str, Sha256, u64)>) -> Sha256 {
    let mut digest = TreeDigest::default();
    for (path, sha256, size) in files {
        digest.add(path, sha256, size);
    }
    digest.finish()
}

/// [`tree_digest`] a file at a time, hashed line by line: the listing of a 100,000-file tree
/// is 10 MB.
#[derive(Default)]
pub struct TreeDigest {
    hasher: sha2::Sha256,
    line: String,
}

impl TreeDigest {
    pub fn add(&mut self, path: &str, sha256: Sha256, size: u64) {
        self.line.clear();
        let _ = writeln!(self.line, "{sha256} {size} {path}");
        sha2::Digest::update(&mut self.hasher, self.line.as_bytes());
    }

    pub fn finish(self) -> Sha256 {
        Sha256::from_raw(sha2::Digest::finalize(self.hasher).into())
    }
}

impl LockedFile {
    /// Why a locked directory no longer holds the files the lock lists (by path and size; the
    /// digests are checked as they are packed), if it does not.
    fn stale_tree(&self, base_dir: &Path) -> Option<String> {
        let dir = base_dir.join(&self.source);
        let mut now = BTreeMap::new();
        for entry in walkdir::WalkDir::new(&dir).follow_links(false) {
            let Ok(entry) = entry else {
                return Some(format!("`[[file]]` `{}`: `{}` cannot be read", self.name, dir.display()));
            };
            if entry.file_type().is_file() {
                let rel = entry.path().strip_prefix(&dir).unwrap_or(entry.path()).to_string_lossy().into_owned();
                now.insert(rel, entry.metadata().map_or(u64::MAX, |m| m.len()));
            }
        }
        let locked: BTreeMap<String, u64> = self.files.iter().map(|f| (f.path.clone(), f.size)).collect();
        (now != locked).then(|| {
            let added = now.keys().filter(|k| !locked.contains_key(*k)).count();
            let gone = locked.keys().filter(|k| !now.contains_key(*k)).count();
            format!(
                "`[[file]]` `{}` directory changed since it was locked ({added} added, {gone} gone, or sizes changed)",
                self.name
            )
        })
    }
}

impl LockedDeb {
    /// The version locked: the pin's, or for a bare name the one its stanza names.
    pub fn version(&self) -> &str {
        self.package
            .version
            .as_deref()
            .unwrap_or_else(|| self.stanza.lines().find_map(|l| l.strip_prefix("Version:")).map_or("", str::trim))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error("lock file `{}` does not exist; run `airlock lock` (or build without `--locked`)", path.display())]
    Missing { path: PathBuf },
    #[error("lock file `{}` is out of date with the spec: {reason}; run `airlock lock`", path.display())]
    Stale { path: PathBuf, reason: String },
    #[error("lock file `{}` has version {found}; this airlock reads version {LOCK_VERSION}", path.display())]
    Version { path: PathBuf, found: u32 },
    #[error("cannot write lock file `{}`", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl crate::failure::Classify for LockError {
    fn class(&self) -> crate::failure::Class {
        use crate::failure::Class;
        match self {
            LockError::Spec(e) => e.class(),
            LockError::Missing { .. }
            | LockError::Stale { .. }
            | LockError::Version { .. }
            | LockError::Write { .. } => Class::Runtime,
        }
    }
}

/// A lock as read from disk, with the digest of its exact bytes (recorded in the manifest).
#[derive(Debug)]
pub struct LockFile {
    pub path: PathBuf,
    pub sha256: Sha256,
    pub lock: Lock,
}

impl Lock {
    pub fn new(resolved_at: Timestamp) -> Self {
        Self {
            version: LOCK_VERSION,
            resolved_at,
            image: Vec::new(),
            wheel: Vec::new(),
            deb: Vec::new(),
            deb_base: Vec::new(),
            rpm: Vec::new(),
            rpm_base: Vec::new(),
            model: Vec::new(),
            file: Vec::new(),
        }
    }

    /// Why this lock does not cover `spec` exactly, if it does not: an entry missing from
    /// either side, or a source or pinned digest that changed.
    pub fn stale_reason(&self, spec: &Spec) -> Option<String> {
        let kinds = [Self::stale_images, Self::stale_wheels, Self::stale_debs, Self::stale_rpms, Self::stale_models];
        if let Some(reason) = kinds.iter().find_map(|check| check(self, spec)) {
            return Some(reason);
        }
        let mut locked: BTreeMap<&str, &LockedFile> = self.file.iter().map(|f| (f.name.as_str(), f)).collect();
        for entry in &spec.file {
            let want = entry.get_ref();
            let Some(have) = locked.remove(want.name.as_str()) else {
                return Some(format!("`[[file]]` `{}` is not locked", want.name));
            };
            if have.source != want.source {
                return Some(format!(
                    "`[[file]]` `{}` source changed from `{}` to `{}`",
                    want.name, have.source, want.source
                ));
            }
            if want.sha256.is_some_and(|pinned| pinned != have.sha256) {
                return Some(format!("`[[file]]` `{}` has a different pinned sha256 than the lock", want.name));
            }
            let signed = have.signature.as_ref().map(|s| (&s.verify, s.url.as_deref()));
            if signed != want.verify.as_ref().map(|v| (v, want.sigstore_bundle.as_deref())) {
                return Some(format!("`[[file]]` `{}`: its `verify` or `sigstore_bundle` changed", want.name));
            }
        }
        locked.into_keys().next().map(|name| format!("locked file `{name}` is no longer in the spec"))
    }

    fn stale_images(&self, spec: &Spec) -> Option<String> {
        let mut locked: Vec<&LockedImage> = self.image.iter().collect();
        for entry in &spec.image {
            let want = entry.get_ref();
            let key = want.source_key();
            let Some(i) = locked.iter().position(|l| (l.source.as_str(), l.tag.as_deref()) == (key.0, key.1)) else {
                return Some(format!("`[[image]]` `{}` is not locked", key.0));
            };
            let have = locked.swap_remove(i);
            let wanted: Vec<&str> = want.platforms.iter().map(String::as_str).collect();
            if !wanted.is_empty() && have.platforms.iter().any(|p| !wanted.contains(&p.platform.as_str())) {
                return Some(format!("`[[image]]` `{}` platforms changed", key.0));
            }
            if have.signature.as_ref().map(|s| &s.verify) != want.verify.as_ref() {
                return Some(format!("`[[image]]` `{}`: its `verify` changed", key.0));
            }
        }
        locked.first().map(|l| format!("locked image `{}` is no longer in the spec", l.source))
    }

    fn stale_wheels(&self, spec: &Spec) -> Option<String> {
        let wanted: std::collections::BTreeSet<(&str, &str)> = spec
            .wheel
            .iter()
            .flat_map(|w| w.get_ref().requirements.iter().map(move |r| (w.get_ref().index.as_str(), r.as_str())))
            .collect();
        // A lock file's packages are what the file says; the file itself is compared by
        // `stale_lockfiles`.
        let locked: std::collections::BTreeSet<(&str, &str)> = self
            .wheel
            .iter()
            .filter(|w| w.lockfile.is_none())
            .map(|w| (w.index.as_str(), w.requirement.as_str()))
            .collect();
        let files: std::collections::BTreeSet<(&str, String)> = spec
            .wheel
            .iter()
            .filter_map(|w| Some((w.get_ref().index.as_str(), w.get_ref().lockfile.as_ref()?.display().to_string())))
            .collect();
        let locked_files: std::collections::BTreeSet<(&str, String)> =
            self.wheel.iter().filter_map(|w| Some((w.index.as_str(), w.lockfile.clone()?))).collect();
        if let Some((_, f)) = files.difference(&locked_files).next() {
            return Some(format!("`[[wheel]]` lock file `{f}` is not locked"));
        }
        if let Some((_, f)) = locked_files.difference(&files).next() {
            return Some(format!("locked wheels of lock file `{f}` are no longer in the spec"));
        }
        if let Some((_, r)) = wanted.difference(&locked).next() {
            return Some(format!("`[[wheel]]` requirement `{r}` is not locked"));
        }
        // Every wheel an entry locked carries that entry's `verify` (none, or the same policy).
        for entry in &spec.wheel {
            let e = entry.get_ref();
            let from_entry = |w: &&LockedWheel| {
                w.index == e.index
                    && match (&e.lockfile, &w.lockfile) {
                        (Some(f), Some(l)) => f.display().to_string() == *l,
                        (None, None) => e.requirements.contains(&w.requirement),
                        _ => false,
                    }
            };
            if let Some(w) = self
                .wheel
                .iter()
                .filter(from_entry)
                .find(|w| w.signature.as_ref().map(|s| &s.verify) != e.verify.as_ref())
            {
                return Some(format!("`[[wheel]]` `{}`: its `verify` changed", w.filename));
            }
        }
        locked
            .difference(&wanted)
            .next()
            .map(|(_, r)| format!("locked wheel requirement `{r}` is no longer in the spec"))
    }

    /// An input file read at lock time — a `[[wheel]]` lock file, a `[[deb]]` base status —
    /// whose bytes changed since (paths relative to `base_dir`, the spec's directory).
    pub fn stale_inputs(&self, base_dir: &Path) -> Option<String> {
        if let Some(reason) = self.file.iter().filter(|f| !f.files.is_empty()).find_map(|f| f.stale_tree(base_dir)) {
            return Some(reason);
        }
        let lockfiles: BTreeMap<&str, Sha256> =
            self.wheel.iter().filter_map(|w| Some((w.lockfile.as_deref()?, w.lockfile_sha256?))).collect();
        let bases = self
            .deb_base
            .iter()
            .map(|b| (b.path.as_str(), b.sha256, "`[[deb]]` base status"))
            .chain(self.rpm_base.iter().map(|b| (b.path.as_str(), b.sha256, "`[[rpm]]` base rpmdb")));
        lockfiles.into_iter().map(|(p, d)| (p, d, "`[[wheel]]` lock file")).chain(bases).find_map(
            |(file, digest, what)| {
                let now = std::fs::read(base_dir.join(file)).ok().map(|b| Sha256::of_bytes(&b));
                (now != Some(digest)).then(|| format!("{what} `{file}` changed since it was locked"))
            },
        )
    }

    fn stale_debs(&self, spec: &Spec) -> Option<String> {
        let wanted: std::collections::BTreeSet<(String, String, String, DebPin)> = spec
            .deb
            .iter()
            .map(toml::Spanned::get_ref)
            .flat_map(|d| {
                d.packages
                    .iter()
                    .chain(&d.dependencies)
                    .map(move |p| (d.repo.clone(), d.suite.clone(), d.arch.clone(), p.clone()))
            })
            .collect();
        // A closure's dependencies follow from the requested packages; they are not compared.
        // A requested package that another requested package also depends on is both: it
        // keeps the spec's words and lists what requires it (the SBOM's dependency graph).
        let locked: std::collections::BTreeSet<(String, String, String, DebPin)> = self
            .deb
            .iter()
            .map(|d| ((d.repo.clone(), d.suite.clone(), d.arch.clone(), d.package.clone()), d.required_by.is_empty()))
            .filter(|(key, requested_only)| *requested_only || wanted.contains(key))
            .map(|(key, _)| key)
            .collect();
        if let Some((_, _, _, p)) = wanted.difference(&locked).next() {
            return Some(format!("`[[deb]]` package `{p}` is not locked"));
        }
        let bases: std::collections::BTreeSet<String> = spec
            .deb
            .iter()
            .filter(|d| d.get_ref().resolve)
            .filter_map(|d| Some(d.get_ref().base_status.as_ref()?.display().to_string()))
            .collect();
        let locked_bases: std::collections::BTreeSet<String> = self.deb_base.iter().map(|b| b.path.clone()).collect();
        if bases != locked_bases {
            return Some("the `[[deb]]` base status files changed".to_owned());
        }
        let resolving = spec.deb.iter().any(|d| d.get_ref().resolve);
        let pinned_dependency = |d: &LockedDeb| {
            spec.deb
                .iter()
                .map(toml::Spanned::get_ref)
                .any(|e| e.repo == d.repo && e.suite == d.suite && e.dependencies.contains(&d.package))
        };
        if let Some(d) = self.deb.iter().find(|d| !resolving && !d.required_by.is_empty() && !pinned_dependency(d)) {
            return Some(format!("dependency `{}` is locked but no `[[deb]]` entry has `resolve = true`", d.package));
        }
        locked.difference(&wanted).next().map(|(_, _, _, p)| format!("locked package `{p}` is no longer in the spec"))
    }

    fn stale_rpms(&self, spec: &Spec) -> Option<String> {
        use std::collections::BTreeSet;
        let wanted: BTreeSet<(String, String, RpmPin)> = spec
            .rpm
            .iter()
            .map(toml::Spanned::get_ref)
            .flat_map(|r| r.packages.iter().map(move |p| (r.baseurl.clone(), r.arch.clone(), p.clone())))
            .collect();
        let locked: BTreeSet<(String, String, RpmPin)> = self
            .rpm
            .iter()
            .map(|r| ((r.baseurl.clone(), r.arch.clone(), r.package.clone()), r.required_by.is_empty()))
            .filter(|(key, requested_only)| *requested_only || wanted.contains(key))
            .map(|(key, _)| key)
            .collect();
        if let Some((_, _, p)) = wanted.difference(&locked).next() {
            return Some(format!("`[[rpm]]` package `{p}` is not locked"));
        }
        let bases: BTreeSet<String> =
            spec.rpm.iter().filter_map(|r| Some(r.get_ref().base_rpmdb.as_ref()?.display().to_string())).collect();
        if bases != self.rpm_base.iter().map(|b| b.path.clone()).collect() {
            return Some("the `[[rpm]]` base rpm databases changed".to_owned());
        }
        let resolving = spec.rpm.iter().any(|r| r.get_ref().resolve);
        if let Some(r) = self.rpm.iter().find(|r| !resolving && !r.required_by.is_empty()) {
            return Some(format!("dependency `{}` is locked but no `[[rpm]]` entry has `resolve = true`", r.package));
        }
        locked.difference(&wanted).next().map(|(_, _, p)| format!("locked package `{p}` is no longer in the spec"))
    }

    fn stale_models(&self, spec: &Spec) -> Option<String> {
        let key =
            |hub: &str, repo: &str, rev: &str| (hub.trim_end_matches('/').to_owned(), repo.to_owned(), rev.to_owned());
        let wanted: std::collections::BTreeSet<_> =
            spec.model.iter().map(toml::Spanned::get_ref).map(|m| key(&m.hub, &m.repo, &m.revision)).collect();
        let locked: std::collections::BTreeSet<_> =
            self.model.iter().map(|m| key(&m.hub, &m.repo, &m.revision)).collect();
        if let Some((_, repo, rev)) = wanted.difference(&locked).next() {
            return Some(format!("`[[model]]` `{repo}` at `{rev}` is not locked"));
        }
        locked.difference(&wanted).next().map(|(_, repo, _)| format!("locked model `{repo}` is no longer in the spec"))
    }

    pub fn locked_image(&self, source: &str, tag: Option<&str>) -> Option<&LockedImage> {
        self.image.iter().find(|l| l.source == source && l.tag.as_deref() == tag)
    }

    pub fn locked_file(&self, name: &FileName) -> Option<&LockedFile> {
        self.file.iter().find(|f| &f.name == name)
    }

    /// The `[[file]]` pin named `name`, taken out of the lock (a build's plan moves a
    /// directory's listing into its artifact rather than copying it).
    pub fn take_file(&mut self, name: &FileName) -> Option<LockedFile> {
        let at = self.file.iter().position(|f| &f.name == name)?;
        Some(self.file.swap_remove(at))
    }
}

impl LockFile {
    /// The lock at `path`, or `None` when there is no file there.
    pub fn load(path: &Path) -> Result<Option<Self>, LockError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(SpecError::Read { path: path.to_owned(), source }.into());
            }
        };
        let lock: Lock = toml::from_str(&text).map_err(|e| parse_error(path, &text, &e))?;
        if lock.version != LOCK_VERSION {
            return Err(LockError::Version { path: path.to_owned(), found: lock.version });
        }
        Ok(Some(Self { path: path.to_owned(), sha256: Sha256::of_bytes(text.as_bytes()), lock }))
    }

    /// Write `lock` to `path` atomically (temp file beside it, then rename) and return it as loaded.
    pub fn write(path: &Path, lock: Lock) -> Result<Self, LockError> {
        let wrap = |source| LockError::Write { path: path.to_owned(), source };
        let body = toml::to_string_pretty(&lock).map_err(|e| wrap(std::io::Error::other(e)))?;
        let text = format!("# airlock.lock: generated by `airlock lock`; commit it, do not edit it.\n\n{body}");
        crate::atomic::write(path, text.as_bytes()).map_err(wrap)?;
        Ok(Self { path: path.to_owned(), sha256: Sha256::of_bytes(text.as_bytes()), lock })
    }
}

/// The spec's path with `.lock` in place of `.toml` (`airlock.toml` → `airlock.lock`,
/// `canary.toml` → `canary.lock`), so that two specs in one directory never share a lock.
pub fn default_lock_path(spec: &Path) -> PathBuf {
    spec.with_extension("lock")
}
