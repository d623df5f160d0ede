//! The site root's layout as one typed value: where everything lives, what `current` and
//! `previous` name, the ids of retained bundles, and the writer's way in (the lock, planted
//! links refused, what a killed writer left behind put back or cleaned).
//!
//! ```text
//! ROOT/bundles/ID/              the retained bundle file (bundle.airlock), the co-signatures
//!                               that counted (bundle.airlock.KEYID.sig), the trust keys it was
//!                               installed with (trust/KEYID.pub) + its staged tree and views
//! ROOT/current -> bundles/ID    swapped atomically (rename of a symlink)
//! ROOT/previous -> bundles/ID
//! ROOT/state.json               policies, high-water versions, history (written atomically)
//! ROOT/records/TIME-ACTION.json as-built evidence of every install, rollback and validate
//! ROOT/staging/                 private (0700) work space; whatever is left there is cleaned
//! ROOT/downloads/ID/            a node's packages of a release fetched ahead (`apply
//!                               --download-only`), taken by the apply of that release
//! ROOT/public/                  a mirror's served tree: `current`, `releases/VERSION` and
//!                               `releases/ID` (links into `bundles/`); nothing else
//! ROOT/.lock                    one writer at a time (flock; never unlinked)
//! ```

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::lock::RootLock;
use super::{SiteError, io_err};
use crate::digest::Sha256;

/// The retained copy of the bundle file inside `bundles/ID/`.
pub const RETAINED_BUNDLE: &str = "bundle.airlock";
/// The trust keys a bundle was installed with, inside `bundles/ID/`.
pub const TRUST_DIR: &str = "trust";
/// Where `retain`'s fallback exchange keeps the old tree of `bundles/ID` for a moment.
pub(super) const ASIDE_PREFIX: &str = "aside-";

/// A bundle's id at a site: the first 16 hex digits of its manifest's sha256, the name of its
/// directory under `bundles/`. Checked when built, so it is always a plain directory name.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct BundleId(String);

impl BundleId {
    pub fn of(manifest_sha256: &Sha256) -> Self {
        Self(manifest_sha256.short(16))
    }

    /// An id as a directory or link names it: 16 lower-case hex digits.
    pub fn parse(s: &str) -> Option<Self> {
        (s.len() == 16 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))).then(|| Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for BundleId {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Self::parse(&s).ok_or_else(|| format!("`{s}` is not a bundle id (16 lower-case hex digits)"))
    }
}

impl From<BundleId> for String {
    fn from(id: BundleId) -> Self {
        id.0
    }
}

impl fmt::Display for BundleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for BundleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BundleId({})", self.0)
    }
}

/// Serde for an optional bundle named as a link names it, `bundles/ID` (what `--json` and the
/// records have always said); an id alone is read too:
/// `#[serde(with = "crate::site::root::as_link")]`.
pub mod as_link {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::BundleId;

    #[allow(clippy::ref_option, reason = "serde's `with` hands the field by reference")]
    pub fn serialize<S: Serializer>(id: &Option<BundleId>, s: S) -> Result<S::Ok, S::Error> {
        match id {
            Some(id) => s.serialize_str(&format!("bundles/{id}")),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<BundleId>, D::Error> {
        let Some(text) = Option::<String>::deserialize(d)? else { return Ok(None) };
        let id = text.strip_prefix("bundles/").unwrap_or(&text);
        BundleId::parse(id).map(Some).ok_or_else(|| serde::de::Error::custom(format!("`{text}` names no bundle")))
    }
}

/// The two links a site keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    Current,
    Previous,
}

impl Link {
    pub fn name(self) -> &'static str {
        match self {
            Link::Current => "current",
            Link::Previous => "previous",
        }
    }
}

/// A site root (`--root`).
#[derive(Debug, Clone)]
pub struct SiteRoot {
    path: PathBuf,
    /// Where a reader that must write nothing under the root (`apply --dry-run`) stages and
    /// keeps its package manager's private configuration instead of `staging/` and `apt/`.
    work: Option<PathBuf>,
}

impl SiteRoot {
    pub fn new(path: &Path) -> Self {
        Self { path: path.to_owned(), work: None }
    }

    /// The root at `path`, read only: staging and the package manager's private configuration
    /// go under `work`, a directory outside it.
    pub fn read_only(path: &Path, work: &Path) -> Self {
        Self { path: path.to_owned(), work: Some(work.to_owned()) }
    }

    /// Where the package manager's private configuration lives (`ROOT/apt/`, `ROOT/dnf/`…):
    /// the root, or the work directory of a read-only root.
    pub fn packages_home(&self) -> &Path {
        self.work.as_deref().unwrap_or(&self.path)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn bundles(&self) -> PathBuf {
        self.path.join("bundles")
    }

    pub fn bundle_dir(&self, id: &BundleId) -> PathBuf {
        self.bundles().join(id.as_str())
    }

    /// `bundles/ID/bundle.airlock`.
    pub fn retained_file(&self, id: &BundleId) -> PathBuf {
        self.bundle_dir(id).join(RETAINED_BUNDLE)
    }

    pub fn staging(&self) -> PathBuf {
        self.work.as_deref().unwrap_or(&self.path).join("staging")
    }

    pub fn records(&self) -> PathBuf {
        self.path.join("records")
    }

    /// `downloads/`: releases a node fetched ahead of its window, one directory each.
    pub fn downloads(&self) -> PathBuf {
        self.path.join("downloads")
    }

    /// `public/`: what a mirror serves to its nodes.
    pub fn public(&self) -> PathBuf {
        self.path.join("public")
    }

    pub fn link_path(&self, link: Link) -> PathBuf {
        self.path.join(link.name())
    }

    /// The bundle a link names, if it exists and names `bundles/ID`.
    pub fn link(&self, link: Link) -> Option<BundleId> {
        let target = std::fs::read_link(self.link_path(link)).ok()?;
        let mut parts = target.iter();
        match (parts.next(), parts.next(), parts.next()) {
            (Some(b), Some(id), None) if b == "bundles" => BundleId::parse(id.to_str()?),
            _ => None,
        }
    }

    /// Every directory under `bundles/` named like an id, sorted.
    pub fn retained(&self) -> Vec<BundleId> {
        let Ok(dir) = std::fs::read_dir(self.bundles()) else { return Vec::new() };
        let mut ids: Vec<BundleId> =
            dir.filter_map(Result::ok).filter_map(|e| BundleId::parse(e.file_name().to_str()?)).collect();
        ids.sort();
        ids
    }

    /// Make the renames and creations inside `dir` durable (`dir` is one of this root's).
    pub fn commit_dir(&self, dir: &Path) -> Result<(), SiteError> {
        crate::atomic::sync_dir(dir).map_err(io_err(dir))
    }

    /// Whether something was ever installed here (`.lock` is created by the first writer).
    pub fn is_site(&self) -> bool {
        self.path.join(".lock").is_file()
    }

    /// The lock for a reader that must see no writer at work (check, validate).
    pub fn lock_for_reading(&self, action: &str, wait: Duration) -> Result<RootLock, SiteError> {
        if !self.is_site() {
            return Err(SiteError::NotASite { root: self.path.clone() });
        }
        RootLock::acquire_shared(&self.path, action, wait)
    }

    /// The root made ready for a writer: its directories real (never symbolic links planted to
    /// lead writes elsewhere), the lock held, a tree a crashed exchange moved aside put back,
    /// and whatever else a killed writer left in `staging/` removed.
    pub fn open_for_writing(&self, action: &str, wait: Duration) -> Result<RootLock, SiteError> {
        let root = &self.path;
        std::fs::create_dir_all(root).map_err(io_err(root))?;
        for name in [".lock", "staging", "bundles", "records", "state.json", "downloads", "public"] {
            let path = root.join(name);
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(SiteError::Symlink { path });
            }
        }
        let lock = RootLock::acquire(root, action, wait)?;
        let staging = self.staging();
        match std::fs::create_dir(&staging) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_err(&staging)(e)),
        }
        std::fs::set_permissions(&staging, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .map_err(io_err(&staging))?;
        self.recover_aside()?;
        for leftover in std::fs::read_dir(&staging).map_err(io_err(&staging))? {
            let path = leftover.map_err(io_err(&staging))?.path();
            tracing::info!("cleaning `{}`, left by an interrupted writer", path.display());
            let removed = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
            removed.map_err(io_err(&path))?;
        }
        Ok(lock)
    }

    /// A tree moved aside by `retain`'s fallback exchange (`staging/aside-ID`) whose
    /// replacement never arrived (a crash between the two renames) is moved back to
    /// `bundles/ID`, so `current` and `previous` never stay dangling; one whose replacement
    /// did arrive is left for the cleanup.
    fn recover_aside(&self) -> Result<(), SiteError> {
        let staging = self.staging();
        for entry in std::fs::read_dir(&staging).map_err(io_err(&staging))? {
            let name = entry.map_err(io_err(&staging))?.file_name().to_string_lossy().into_owned();
            let Some(id) = name.strip_prefix(ASIDE_PREFIX).and_then(BundleId::parse) else { continue };
            let target = self.bundle_dir(&id);
            if std::fs::symlink_metadata(&target).is_err() {
                tracing::warn!("restoring bundles/{id}, moved aside by an interrupted writer");
                std::fs::rename(staging.join(&name), &target).map_err(io_err(&target))?;
                self.commit_dir(&self.bundles())?;
                self.commit_dir(&staging)?;
            }
        }
        Ok(())
    }
}

/// A file's bytes, refused when larger than `limit` (checked on what was opened, and read no
/// further than the limit) or when it is no regular file (opened without waiting: a FIFO or a
/// device planted where a file was expected is refused, not read); `None` when it does not exist.
pub fn read_bounded(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, SiteError> {
    use crate::sign::policy::{Refused, read_regular};
    read_regular(path, limit).map_err(|e| match e {
        Refused::NotRegular => SiteError::NotRegular { path: path.to_owned() },
        Refused::TooLarge => SiteError::TooLarge { path: path.to_owned(), limit },
        Refused::Io(source) => SiteError::Io { path: path.to_owned(), source },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_sixteen_lower_case_hex_digits_and_links_name_only_bundle_dirs() {
        assert!(BundleId::parse("0123456789abcdef").is_some());
        for bad in ["0123456789ABCDEF", "0123456789abcde", "../../etc/passwd", "0123456789abcdef0", ""] {
            assert!(BundleId::parse(bad).is_none(), "{bad}");
        }
        assert!(serde_json::from_str::<BundleId>("\"..\"").is_err());
        let dir = tempfile::tempdir().unwrap();
        let root = SiteRoot::new(dir.path());
        std::os::unix::fs::symlink("bundles/0123456789abcdef", dir.path().join("current")).unwrap();
        std::os::unix::fs::symlink("/etc", dir.path().join("previous")).unwrap();
        assert_eq!(root.link(Link::Current).map(|i| i.to_string()).as_deref(), Some("0123456789abcdef"));
        assert_eq!(root.link(Link::Previous), None, "a link elsewhere names no bundle");
    }
}
