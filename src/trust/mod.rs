//! A site's trust root: who may sign the bundles a site activates, in TUF metadata
//! (`ROOT/trust/N.root.json`, `ROOT/trust/targets.json`) that an independent TUF client checks.
//!
//! - **root** (`N.root.json`, one file per version): the root keys and threshold, and the
//!   targets role's keys. Version 1 is the anchor the operator provisions; version N+1 counts
//!   only when a threshold of version N's root keys and a threshold of its own signed it
//!   (§5.3.4), so a chain is read from 1 upwards, one version at a time, never skipping.
//! - **targets** (`targets.json`): signed by the newest root's targets role; its
//!   `delegations` are airlock's signing roles (`build` 1 of 1, `security` 1 of 2). A bundle is
//!   accepted when every role's threshold is met by distinct keys. Revoking a key is a new
//!   targets version without it.
//! - **expiry**: the newest root and the targets metadata expire; checked against the time the
//!   command started (`Timestamp::started`), by the caller, who may accept it on record.
//!
//! Nothing here knows the site root's layout beyond its `trust/` directory: the site records
//! which versions it has used (its pin) and refuses metadata older than that (`site::trust`).

mod author;
mod load;
pub mod metadata;

pub use load::{next_root, parse_root, parse_targets, read_metadata};

use std::collections::BTreeMap;
use std::path::PathBuf;

use metadata::{Key, RoleKeys, Root, Signed, Targets};

use crate::clock::Timestamp;
use crate::digest::Sha256;
use crate::sign::policy::PolicyError;
use crate::sign::{KeyError, SigningKey, TrustedKey};

/// The directory under a site root.
pub const TRUST_DIR: &str = "trust";
pub const TARGETS_FILE: &str = "targets.json";
/// The target a site's Sigstore trusted root is (`targets.targets`), its file under
/// `trust/targets/`: a private Sigstore instance's root, updated as the rest of the site's trust.
pub const SIGSTORE_TARGET: &str = "sigstore/trusted_root.json";
/// The role whose keys approve a release for promotion (`airlock approve`), and the role whose
/// keys sign a mirror's promotion (`ROOT/public/promotion.json`): the site's decisions, never
/// counted toward a bundle's signatures. A site without them promotes and follows `current`
/// as before (and says so).
pub const APPROVERS_ROLE: &str = "approvers";
pub const PROMOTION_ROLE: &str = "promotion";
/// The delegated roles that are not signing roles.
pub const DECISION_ROLES: [&str; 2] = [APPROVERS_ROLE, PROMOTION_ROLE];
/// The largest target file read.
pub const MAX_TARGET_BYTES: u64 = 4 << 20;
/// The largest metadata file read: a root with a few dozen keys is a few tens of KiB.
pub const MAX_METADATA_BYTES: u64 = 1 << 20;
/// The most root versions a chain is read through.
const MAX_ROOT_VERSIONS: u64 = 10_000;

/// The file name of root version `n`.
pub fn root_file(n: u64) -> String {
    format!("{n}.root.json")
}

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("cannot read or write `{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{}` has no site trust root (no {}): create one with `airlock trust init`", dir.display(), root_file(1))]
    Missing { dir: PathBuf },
    #[error("`{}` is larger than {limit} bytes: not trust metadata", path.display())]
    TooLarge { path: PathBuf, limit: u64 },
    #[error("`{}` is not TUF {role} metadata: {detail}", path.display())]
    Format { path: PathBuf, role: &'static str, detail: String },
    #[error("`{}` is signed by {got} of the {need} {role} key(s) of root version {version} it needs", path.display())]
    Threshold { path: PathBuf, role: String, version: u64, need: u64, got: usize },
    #[error(
        "{} expired at {expires} (this command started at {now}); renew it with `airlock trust renew --root DIR \
         --expires 1y --sign KEY…`, or pass --allow-expired --reason TEXT to use it anyway (recorded)",
        path.display()
    )]
    Expired { path: PathBuf, expires: Timestamp, now: Timestamp },
    #[error(
        "`{}` is root version {found}: the site is at root version {current} and accepts exactly version {} next \
         (never a skipped or a lower version)",
        path.display(), current + 1
    )]
    Sequence { path: PathBuf, current: u64, found: u64 },
    #[error("`{}` is targets version {found}, not above the site's version {current}: a lower or replayed version is refused", path.display())]
    TargetsNotNewer { path: PathBuf, current: u64, found: u64 },
    #[error("`{}` is root version {version} but differs from the site's own version {version}: refused", path.display())]
    Fork { path: PathBuf, version: u64 },
    #[error("{0}")]
    Usage(String),
    /// A target file that is not what the verified targets metadata says.
    #[error("`{}` is not the target `{name}` targets version {version} lists: {detail}", path.display())]
    Target { path: PathBuf, name: String, version: u64, detail: String },
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error(transparent)]
    Policy(#[from] PolicyError),
}

impl crate::failure::Classify for TrustError {
    fn class(&self) -> crate::failure::Class {
        use crate::failure::Class;
        match self {
            TrustError::Io { .. } | TrustError::TooLarge { .. } => Class::Runtime,
            TrustError::Usage(_) => Class::Usage,
            TrustError::Key(e) => e.class(),
            TrustError::Policy(e) => e.class(),
            TrustError::Missing { .. }
            | TrustError::Format { .. }
            | TrustError::Threshold { .. }
            | TrustError::Expired { .. }
            | TrustError::Sequence { .. }
            | TrustError::TargetsNotNewer { .. }
            | TrustError::Target { .. }
            | TrustError::Fork { .. } => Class::Verification,
        }
    }
}

/// A site's verified trust root: the newest root reached through the chain, and the targets
/// metadata that root's targets role signed.
#[derive(Debug, Clone)]
pub struct SiteTrust {
    pub dir: PathBuf,
    /// The sha256 of `1.root.json`: the anchor the site pins.
    pub anchor: Sha256,
    pub root: Signed<Root>,
    pub targets: Signed<Targets>,
}

/// A root chain as read: the directory, the anchor's digest, the newest root, and the targets
/// file's path and bytes (not yet checked against that root).
struct Chain {
    dir: PathBuf,
    anchor: Sha256,
    root: Signed<Root>,
    targets: Option<(PathBuf, Vec<u8>)>,
}

/// A metadata file that has expired.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Expiry {
    pub path: PathBuf,
    pub expires: Timestamp,
}

/// Whether a file was named by the operator (`trust update`: an older version is an error) or
/// carried by a bundle (an older version is simply not news).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presented {
    Explicit,
    Carried,
}

/// New metadata that verified against a site's trust root, not yet written.
#[derive(Debug, Default)]
pub struct Update {
    pub roots: Vec<Signed<Root>>,
    pub targets: Option<Signed<Targets>>,
    /// Target files the new targets metadata lists (name under `trust/targets/`, bytes).
    pub target_files: Vec<(String, Vec<u8>)>,
}

impl Update {
    pub fn is_empty(&self) -> bool {
        self.roots.is_empty() && self.targets.is_none()
    }
}

/// A decision role of a site: the keys the targets metadata delegates it, by TUF id, and how
/// many of them must sign.
#[derive(Debug, Clone)]
pub struct DecisionRole {
    pub name: String,
    pub keys: BTreeMap<String, Key>,
    pub role: RoleKeys,
    /// Where it comes from, for messages.
    pub origin: String,
}

impl DecisionRole {
    /// The role's distinct keys (by airlock key id), each once.
    pub fn trusted(&self) -> Result<Vec<TrustedKey>, TrustError> {
        Ok(metadata::distinct_keys(&self.keys, &self.role.keyids, &self.origin)?)
    }

    pub fn threshold(&self) -> usize {
        usize::try_from(self.role.threshold).unwrap_or(usize::MAX)
    }
}

/// A signing role as `trust init` and `trust role` take it: `NAME=PUB[,PUB…]:THRESHOLD`.
#[derive(Debug, Clone)]
pub struct RoleSpec {
    pub name: String,
    pub keys: Vec<TrustedKey>,
    pub threshold: u64,
}

/// Everything `trust init` writes.
pub struct InitSpec {
    pub root_keys: Vec<TrustedKey>,
    pub root_threshold: u64,
    pub targets_keys: Vec<TrustedKey>,
    pub targets_threshold: u64,
    pub roles: Vec<RoleSpec>,
    pub expires: Timestamp,
    pub signers: Vec<SigningKey>,
}

/// What `trust rotate` changes in the root.
#[derive(Default)]
pub struct RootChange {
    pub add_root: Vec<TrustedKey>,
    pub remove_root: Vec<TrustedKey>,
    pub root_threshold: Option<u64>,
    pub add_targets: Vec<TrustedKey>,
    pub remove_targets: Vec<TrustedKey>,
    pub targets_threshold: Option<u64>,
    pub expires: Option<Timestamp>,
}

/// What `trust role`, `trust revoke` and `trust renew` change in the targets metadata.
#[derive(Default)]
pub struct TargetsChange {
    pub set_roles: Vec<RoleSpec>,
    pub remove_roles: Vec<String>,
    pub revoke: Vec<TrustedKey>,
    pub expires: Option<Timestamp>,
    /// The site's Sigstore trusted root (`SIGSTORE_TARGET`): set to these bytes.
    pub sigstore_root: Option<Vec<u8>>,
}
