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

pub mod metadata;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use metadata::{DelegatedRole, Delegations, Key, RoleKeys, Root, SPEC_VERSION, Signed, TOP_LEVEL_ROLES, Targets};

use crate::clock::Timestamp;
use crate::digest::Sha256;
use crate::sign::policy::{Origin, PolicyError, Rule};
use crate::sign::{CoSignature, KeyError, KeyId, Policy, SigningKey, TrustedKey};

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

/// A metadata file's bytes, at most `MAX_METADATA_BYTES`, from a regular file only (opened
/// without waiting: a FIFO, `/dev/zero` or another device is refused, not read); `None` when
/// it does not exist. Every metadata file airlock reads goes through it, the site's and those
/// a command is given (`trust update`, `build --trust-root`).
pub fn read_metadata(path: &Path) -> Result<Option<Vec<u8>>, TrustError> {
    read_bounded(path)
}

fn read_bounded(path: &Path) -> Result<Option<Vec<u8>>, TrustError> {
    read_up_to(path, MAX_METADATA_BYTES)
}

fn read_up_to(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, TrustError> {
    use crate::sign::policy::{Refused, read_regular};
    let io = |source| TrustError::Io { path: path.to_owned(), source };
    read_regular(path, limit).map_err(|e| match e {
        Refused::NotRegular => io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (a FIFO, a device or a directory): refused, not read",
        )),
        Refused::TooLarge => TrustError::TooLarge { path: path.to_owned(), limit },
        Refused::Io(e) => io(e),
    })
}

/// Whether `bytes` are the target `entry` lists (its `length` and `hashes.sha256`); the
/// difference in words when they are not.
fn listed_target(entry: &metadata::TargetFile, bytes: &[u8]) -> Result<(), String> {
    let sha256 = entry.hashes.get("sha256").map(String::as_str);
    let actual = Sha256::of_bytes(bytes);
    if entry.length == bytes.len() as u64 && sha256 == Some(actual.to_string().as_str()) {
        return Ok(());
    }
    Err(format!(
        "{} bytes with sha256 {actual}, expected {} bytes with sha256 {}",
        bytes.len(),
        entry.length,
        sha256.unwrap_or("(none listed)")
    ))
}

fn format_err<'a>(path: &'a Path, role: &'static str) -> impl Fn(String) -> TrustError + 'a {
    move |detail| TrustError::Format { path: path.to_owned(), role, detail }
}

/// Parse a root and check it is well formed: its type, spec version, the four top-level roles,
/// every key id present and every threshold reachable by distinct keys.
pub fn parse_root(path: &Path, bytes: &[u8]) -> Result<Signed<Root>, TrustError> {
    let err = format_err(path, "root");
    let doc: Signed<Root> = Signed::parse(bytes).map_err(&err)?;
    let root = &doc.signed;
    if root.kind != "root" {
        return Err(err(format!("_type is `{}`", root.kind)));
    }
    check_spec_version(&root.spec_version).map_err(&err)?;
    Timestamp::parse_rfc3339(&root.expires).map_err(|e| err(e.to_string()))?;
    for name in TOP_LEVEL_ROLES {
        let role = root.roles.get(name).ok_or_else(|| err(format!("no `{name}` role")))?;
        check_role(name, &root.keys, &role.keyids, role.threshold, path).map_err(&err)?;
    }
    if let Some(extra) = root.roles.keys().find(|r| !TOP_LEVEL_ROLES.contains(&r.as_str())) {
        return Err(err(format!("unknown role `{extra}`")));
    }
    Ok(doc)
}

/// Parse targets metadata and check its delegations the same way.
pub fn parse_targets(path: &Path, bytes: &[u8]) -> Result<Signed<Targets>, TrustError> {
    let err = format_err(path, "targets");
    let doc: Signed<Targets> = Signed::parse(bytes).map_err(&err)?;
    let t = &doc.signed;
    if t.kind != "targets" {
        return Err(err(format!("_type is `{}`", t.kind)));
    }
    check_spec_version(&t.spec_version).map_err(&err)?;
    Timestamp::parse_rfc3339(&t.expires).map_err(|e| err(e.to_string()))?;
    let Some(delegations) = &t.delegations else { return Err(err("no delegations: no signing roles".to_owned())) };
    if delegations.roles.iter().all(|r| DECISION_ROLES.contains(&r.name.as_str())) {
        return Err(err("no signing roles".to_owned()));
    }
    let mut names = std::collections::BTreeSet::new();
    for role in &delegations.roles {
        if !names.insert(role.name.as_str()) {
            return Err(err(format!("role `{}` twice", role.name)));
        }
        if role.threshold == 0 {
            return Err(err(format!("role `{}` has threshold 0", role.name)));
        }
        for id in &role.keyids {
            let key =
                delegations.keys.get(id).ok_or_else(|| err(format!("role `{}` names unknown key {id}", role.name)))?;
            key.trusted(&format!("{} key {id}", path.display()))?;
        }
    }
    Ok(doc)
}

fn check_spec_version(v: &str) -> Result<(), String> {
    if v.split('.').next() == Some("1") { Ok(()) } else { Err(format!("spec_version `{v}` (airlock reads TUF 1.x)")) }
}

fn check_role(
    name: &str,
    keys: &BTreeMap<String, Key>,
    keyids: &[String],
    threshold: u64,
    path: &Path,
) -> Result<(), String> {
    if let Some(missing) = keyids.iter().find(|id| !keys.contains_key(*id)) {
        return Err(format!("role `{name}` names unknown key {missing}"));
    }
    let distinct = metadata::distinct_keys(keys, keyids, &path.display().to_string()).map_err(|e| e.to_string())?.len();
    if threshold == 0 || threshold > distinct as u64 {
        return Err(format!("role `{name}` needs {threshold} of {distinct} distinct key(s): it can never be met"));
    }
    Ok(())
}

/// Check that `doc` carries a threshold of `role`'s signatures as `by` (root version `version`)
/// defines it.
fn require<T: serde::Serialize + serde::de::DeserializeOwned>(
    doc: &Signed<T>,
    by: &Root,
    role: &str,
    path: &Path,
) -> Result<(), TrustError> {
    let keys = by.roles.get(role).expect("parse_root checked the top-level roles");
    let got = doc.signers(&by.keys, keys, &path.display().to_string()).len();
    if (got as u64) < keys.threshold {
        return Err(TrustError::Threshold {
            path: path.to_owned(),
            role: role.to_owned(),
            version: by.version,
            need: keys.threshold,
            got,
        });
    }
    Ok(())
}

/// Verify `next` as the successor of `current` (§5.3.4): version exactly one more, a threshold
/// of the current root keys and a threshold of its own.
/// Root version `current.version + 1`, from untrusted bytes (a mirror's), parsed and verified
/// by `current` and by itself before anything else is read.
pub fn next_root(current: &Signed<Root>, bytes: &[u8], path: &Path) -> Result<Signed<Root>, TrustError> {
    let doc = parse_root(path, bytes)?;
    verify_successor(&current.signed, &doc, path)?;
    Ok(doc)
}

fn verify_successor(current: &Root, next: &Signed<Root>, path: &Path) -> Result<(), TrustError> {
    if next.signed.version != current.version + 1 {
        return Err(TrustError::Sequence {
            path: path.to_owned(),
            current: current.version,
            found: next.signed.version,
        });
    }
    require(next, current, "root", path)?;
    require(next, &next.signed, "root", path)
}

impl SiteTrust {
    /// Whether `root_dir` has a trust root at all (its anchor).
    pub fn exists(root_dir: &Path) -> bool {
        root_dir.join(TRUST_DIR).join(root_file(1)).exists()
    }

    /// The root chain from `1.root.json` up, each version verified by the one before, and the
    /// newest root; `targets.json` as it stands (it may fail under that root, after a crash
    /// between writing a new root and its targets: `load` says so, `update` can repair it).
    fn chain(root_dir: &Path) -> Result<Chain, TrustError> {
        let dir = root_dir.join(TRUST_DIR);
        let first_path = dir.join(root_file(1));
        let Some(first) = read_bounded(&first_path)? else { return Err(TrustError::Missing { dir }) };
        let anchor = Sha256::of_bytes(&first);
        let mut root = parse_root(&first_path, &first)?;
        if root.signed.version != 1 {
            return Err(TrustError::Sequence { path: first_path, current: 0, found: root.signed.version });
        }
        // The anchor is trusted because the operator provisioned it; it must still be whole.
        require(&root, &root.signed, "root", &first_path)?;
        for n in 2..=MAX_ROOT_VERSIONS {
            let path = dir.join(root_file(n));
            let Some(bytes) = read_bounded(&path)? else { break };
            let next = parse_root(&path, &bytes)?;
            verify_successor(&root.signed, &next, &path)?;
            root = next;
        }
        let targets_path = dir.join(TARGETS_FILE);
        let targets = read_bounded(&targets_path)?.map(|b| (targets_path, b));
        Ok(Chain { dir, anchor, root, targets })
    }

    /// Load and verify a site's trust root (expiry is the caller's to check: `expired`).
    pub fn load(root_dir: &Path) -> Result<Self, TrustError> {
        let Chain { dir, anchor, root, targets } = Self::chain(root_dir)?;
        let Some((path, bytes)) = targets else {
            return Err(TrustError::Format {
                path: dir.join(TARGETS_FILE),
                role: "targets",
                detail: "missing: the site has no signing roles".to_owned(),
            });
        };
        let targets = parse_targets(&path, &bytes)?;
        require(&targets, &root.signed, "targets", &path)?;
        Ok(Self { dir, anchor, root, targets })
    }

    /// The metadata versions in use.
    /// The site's Sigstore trusted root, when its targets metadata lists one: the file under
    /// `trust/targets/`, checked against the length and sha256 the verified targets give it.
    pub fn sigstore_root(&self) -> Result<Option<(Vec<u8>, u64)>, TrustError> {
        let targets = &self.targets.signed;
        let Some(entry) = targets.targets.get(SIGSTORE_TARGET) else { return Ok(None) };
        let path = self.dir.join("targets").join(SIGSTORE_TARGET);
        let bad = |detail: String| TrustError::Target {
            path: path.clone(),
            name: SIGSTORE_TARGET.to_owned(),
            version: targets.version,
            detail,
        };
        let bytes = read_up_to(&path, MAX_TARGET_BYTES)
            .map_err(|e| bad(e.to_string()))?
            .ok_or_else(|| bad("missing".into()))?;
        listed_target(entry, &bytes).map_err(bad)?;
        Ok(Some((bytes, targets.version)))
    }

    pub fn origin(&self) -> Origin {
        Origin { root_version: self.root.signed.version, targets_version: self.targets.signed.version }
    }

    /// The newest root and the targets metadata, each when it has expired at `now`.
    pub fn expired(&self, now: Timestamp) -> Vec<Expiry> {
        let root = (self.dir.join(root_file(self.root.signed.version)), &self.root.signed.expires);
        let targets = (self.dir.join(TARGETS_FILE), &self.targets.signed.expires);
        [root, targets]
            .into_iter()
            .filter_map(|(path, expires)| {
                let expires = Timestamp::parse_rfc3339(expires).ok()?;
                (expires <= now).then_some(Expiry { path, expires })
            })
            .collect()
    }

    /// A decision role (`approvers`, `promotion`) as the verified targets metadata delegates
    /// it: its keys by TUF id, its key ids and threshold; `None` when the site has none.
    pub fn decision_role(&self, name: &str) -> Option<DecisionRole> {
        let delegations = self.targets.signed.delegations.as_ref()?;
        let role = delegations.roles.iter().find(|r| r.name == name)?;
        Some(DecisionRole {
            name: role.name.clone(),
            keys: delegations.keys.clone(),
            role: RoleKeys { keyids: role.keyids.clone(), threshold: role.threshold },
            origin: format!(
                "{} role `{name}` (targets version {})",
                self.dir.join(TARGETS_FILE).display(),
                self.targets.signed.version
            ),
        })
    }

    /// The signing roles as a policy over `cosignatures`.
    pub fn policy(&self, cosignatures: Vec<CoSignature>) -> Result<Policy, TrustError> {
        let delegations = self.targets.signed.delegations.as_ref().expect("parse_targets checked the delegations");
        let origin = self.dir.join(TARGETS_FILE).display().to_string();
        let mut keys = Vec::new();
        let mut rules = Vec::new();
        for role in delegations.roles.iter().filter(|r| !DECISION_ROLES.contains(&r.name.as_str())) {
            let role_keys = metadata::distinct_keys(&delegations.keys, &role.keyids, &origin)?;
            rules.push(Rule {
                role: role.name.clone(),
                keys: role_keys.iter().map(|k| k.key_id().clone()).collect(),
                threshold: usize::try_from(role.threshold).unwrap_or(usize::MAX),
            });
            keys.extend(role_keys);
        }
        let policy = Policy::of_roles(keys, rules, cosignatures, self.origin())?;
        Ok(policy.with_sigstore_root(self.sigstore()?))
    }

    /// The site's Sigstore root: its trust root's `sigstore/trusted_root.json` target (checked
    /// against the verified targets metadata), else the shipped public-good one.
    pub fn sigstore(&self) -> Result<crate::sign::sigstore::Root, TrustError> {
        use crate::sign::sigstore::Root;
        Ok(match self.sigstore_root()? {
            Some((json, version)) => {
                Root::Given { from: format!("the site's `{SIGSTORE_TARGET}` (targets version {version})"), json }
            }
            None => Root::PublicGood,
        })
    }

    /// Check files presented to this site (`trust update`, or a bundle's `airlock/trust/`):
    /// root versions above the site's must follow it one at a time, each verified by the one
    /// before; a targets version above the site's must verify under the newest root. What is
    /// already the site's is not news; a root version the site has with other bytes is a fork.
    pub fn update(root_dir: &Path, files: &[(PathBuf, Vec<u8>)], presented: Presented) -> Result<Update, TrustError> {
        let Chain { dir, mut root, targets: on_disk_targets, .. } = Self::chain(root_dir)?;
        let mut roots = Vec::new();
        let mut targets_files = Vec::new();
        let mut candidates = Vec::new();
        let mut sigstore_root = None;
        for (path, bytes) in files {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if name.ends_with(".root.json") || name == "root.json" {
                candidates.push((path.clone(), bytes, parse_root(path, bytes)?));
            } else if name.ends_with("targets.json") {
                targets_files.push((path.clone(), parse_targets(path, bytes)?));
            } else if name == "trusted_root.json" {
                sigstore_root = Some((path.clone(), bytes.clone()));
            } else {
                return Err(TrustError::Usage(format!(
                    "`{}` is neither N.root.json, targets.json nor a Sigstore trusted_root.json",
                    path.display()
                )));
            }
        }
        candidates.sort_by_key(|(_, _, doc)| doc.signed.version);
        for (path, bytes, doc) in candidates {
            let version = doc.signed.version;
            if version <= root.signed.version {
                let ours = read_bounded(&dir.join(root_file(version)))?;
                if ours.as_deref() != Some(bytes.as_slice()) {
                    return Err(TrustError::Fork { path, version });
                }
                if presented == Presented::Explicit {
                    return Err(TrustError::Sequence { path, current: root.signed.version, found: version });
                }
                continue;
            }
            verify_successor(&root.signed, &doc, &path)?;
            roots.push(doc.clone());
            root = doc;
        }
        let current_targets =
            on_disk_targets.map(|(path, bytes)| parse_targets(&path, &bytes).map(|t| (path, t))).transpose()?;
        let current_version = current_targets.as_ref().map_or(0, |(_, t)| t.signed.version);
        let mut targets = None;
        for (path, doc) in targets_files {
            if doc.signed.version <= current_version {
                if presented == Presented::Explicit {
                    return Err(TrustError::TargetsNotNewer {
                        path,
                        current: current_version,
                        found: doc.signed.version,
                    });
                }
                continue;
            }
            require(&doc, &root.signed, "targets", &path)?;
            if targets.as_ref().is_none_or(|t: &Signed<Targets>| t.signed.version < doc.signed.version) {
                targets = Some(doc);
            }
        }
        // With a new root, the targets the site keeps must still verify under it.
        if targets.is_none()
            && !roots.is_empty()
            && let Some((path, doc)) = &current_targets
        {
            require(doc, &root.signed, "targets", path)?;
        }
        let files_listed = match &targets {
            Some(doc) => Self::sigstore_file(&dir, doc, sigstore_root)?,
            None => Vec::new(),
        };
        Ok(Update { roots, targets, target_files: files_listed })
    }

    /// The Sigstore trusted root new targets metadata lists: the file presented beside it,
    /// or the one the site has, each only when its length and sha256 are the ones listed.
    fn sigstore_file(
        dir: &Path,
        doc: &Signed<Targets>,
        presented: Option<(PathBuf, Vec<u8>)>,
    ) -> Result<Vec<(String, Vec<u8>)>, TrustError> {
        let Some(entry) = doc.signed.targets.get(SIGSTORE_TARGET) else { return Ok(Vec::new()) };
        let matches = |b: &[u8]| listed_target(entry, b).is_ok();
        let on_disk = dir.join("targets").join(SIGSTORE_TARGET);
        let bad = |path: PathBuf, detail: String| TrustError::Target {
            path,
            name: SIGSTORE_TARGET.to_owned(),
            version: doc.signed.version,
            detail,
        };
        match presented {
            Some((path, bytes)) => match listed_target(entry, &bytes) {
                Ok(()) => Ok(vec![(SIGSTORE_TARGET.to_owned(), bytes)]),
                Err(detail) => Err(bad(path, detail)),
            },
            None => match read_up_to(&on_disk, MAX_TARGET_BYTES)? {
                Some(bytes) if matches(&bytes) => Ok(Vec::new()),
                _ => Err(bad(
                    on_disk,
                    "the new targets list a Sigstore trusted root this site does not have: present its \
                     trusted_root.json with `airlock trust update`"
                        .to_owned(),
                )),
            },
        }
    }

    /// Write verified metadata into `root_dir/trust/`: roots in order, then targets, each
    /// synced and renamed, the directory synced after each.
    pub fn write(root_dir: &Path, update: &Update) -> Result<(), TrustError> {
        let dir = root_dir.join(TRUST_DIR);
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| TrustError::Io { path, source }
        };
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        // The files first: a targets version never names a file that is not there yet.
        for (name, bytes) in &update.target_files {
            let path = dir.join("targets").join(name);
            let parent = path.parent().unwrap_or(&dir).to_owned();
            std::fs::create_dir_all(&parent).map_err(io(&parent))?;
            crate::atomic::write_durable(&path, bytes).map_err(io(&path))?;
            crate::atomic::sync_dir(&parent).map_err(io(&parent))?;
        }
        for root in &update.roots {
            let path = dir.join(root_file(root.signed.version));
            crate::atomic::write_durable(&path, &root.to_bytes()).map_err(io(&path))?;
        }
        if let Some(targets) = &update.targets {
            let path = dir.join(TARGETS_FILE);
            crate::atomic::write_durable(&path, &targets.to_bytes()).map_err(io(&path))?;
        }
        crate::atomic::sync_dir(&dir).map_err(io(&dir))?;
        crate::atomic::sync_dir(root_dir).map_err(io(root_dir))
    }

    /// Root version 1 and targets version 1 for a new site.
    pub fn init(spec: &InitSpec) -> Result<Update, TrustError> {
        let expires = spec.expires.to_string();
        let mut keys = BTreeMap::new();
        let root_ids = tuf_ids(&spec.root_keys, &mut keys);
        let targets_ids = tuf_ids(&spec.targets_keys, &mut keys);
        let role = |keyids: &[String], threshold| RoleKeys { keyids: keyids.to_vec(), threshold };
        let roles = BTreeMap::from([
            ("root".to_owned(), role(&root_ids, spec.root_threshold)),
            ("targets".to_owned(), role(&targets_ids, spec.targets_threshold)),
            // TUF requires these two; a site has no snapshot or timestamp metadata (it is offline
            // and its metadata travels whole), so they name the targets keys.
            ("snapshot".to_owned(), role(&targets_ids, spec.targets_threshold)),
            ("timestamp".to_owned(), role(&targets_ids, spec.targets_threshold)),
        ]);
        let root = Root {
            kind: "root".to_owned(),
            spec_version: SPEC_VERSION.to_owned(),
            consistent_snapshot: false,
            version: 1,
            expires: expires.clone(),
            keys,
            roles,
        };
        let targets = targets_doc(1, expires, delegations(&spec.roles)?);
        let mut root = Signed::new(root);
        let mut targets = Signed::new(targets);
        let signed = root.signed.clone();
        let used_root = sign_as(&mut root, &[&signed], "root", &spec.signers);
        let used_targets = sign_as(&mut targets, &[&signed], "targets", &spec.signers);
        check_signed(&root, &[&signed], "root", Path::new(&root_file(1)))?;
        check_signed(&targets, &[&signed], "targets", Path::new(TARGETS_FILE))?;
        unused_signers(&spec.signers, &[used_root, used_targets])?;
        // What is written must read back as it will be read.
        parse_root(Path::new(&root_file(1)), &root.to_bytes())?;
        parse_targets(Path::new(TARGETS_FILE), &targets.to_bytes())?;
        Ok(Update { roots: vec![root], targets: Some(targets), target_files: Vec::new() })
    }

    /// Root version N+1 with `change`, signed by a threshold of version N's root keys and of
    /// its own; a new targets version too when the targets keys changed (signed by the new ones).
    pub fn rotate(&self, change: &RootChange, signers: &[SigningKey]) -> Result<Update, TrustError> {
        let old = &self.root.signed;
        let mut next = old.clone();
        next.version = old.version + 1;
        if let Some(expires) = change.expires {
            next.expires = expires.to_string();
        }
        edit_role(&mut next, "root", &change.add_root, &change.remove_root, change.root_threshold)?;
        let targets_changed =
            !change.add_targets.is_empty() || !change.remove_targets.is_empty() || change.targets_threshold.is_some();
        for role in ["targets", "snapshot", "timestamp"] {
            edit_role(&mut next, role, &change.add_targets, &change.remove_targets, change.targets_threshold)?;
        }
        // Keys no role names any more are dropped.
        let named: std::collections::BTreeSet<String> = next.roles.values().flat_map(|r| r.keyids.clone()).collect();
        next.keys.retain(|id, _| named.contains(id));
        let path = self.dir.join(root_file(next.version));
        let mut doc = Signed::new(next.clone());
        let used = sign_as(&mut doc, &[old, &next], "root", signers);
        check_signed(&doc, &[old, &next], "root", &path)?;
        parse_root(&path, &doc.to_bytes())?;
        let mut used_all = vec![used];
        let targets = if targets_changed {
            let mut t = self.targets.signed.clone();
            t.version += 1;
            let mut t = Signed::new(t);
            used_all.push(sign_as(&mut t, &[&next], "targets", signers));
            check_signed(&t, &[&next], "targets", &self.dir.join(TARGETS_FILE))?;
            Some(t)
        } else {
            None
        };
        unused_signers(signers, &used_all)?;
        Ok(Update { roots: vec![doc], targets, target_files: Vec::new() })
    }

    /// Targets version N+1 with `change`, signed by the root's targets role.
    pub fn change_targets(
        &self,
        change: &TargetsChange,
        signers: &[SigningKey],
    ) -> Result<(Update, Vec<String>), TrustError> {
        let mut t = self.targets.signed.clone();
        t.version += 1;
        if let Some(expires) = change.expires {
            t.expires = expires.to_string();
        }
        let delegations = t.delegations.get_or_insert_with(|| Delegations { keys: BTreeMap::new(), roles: Vec::new() });
        let mut warnings = Vec::new();
        for name in &change.remove_roles {
            let before = delegations.roles.len();
            delegations.roles.retain(|r| &r.name != name);
            if delegations.roles.len() == before {
                return Err(TrustError::Usage(format!("there is no role `{name}` to remove")));
            }
        }
        for spec in &change.set_roles {
            let new = delegations_of(spec, &mut delegations.keys);
            match delegations.roles.iter_mut().find(|r| r.name == spec.name) {
                Some(role) => *role = new,
                None => delegations.roles.push(new),
            }
        }
        for key in &change.revoke {
            let id = key.key_id();
            let tuf_ids: Vec<String> = delegations
                .keys
                .iter()
                .filter(|(_, k)| k.trusted("targets.json").is_ok_and(|t| t.key_id() == id))
                .map(|(tuf, _)| tuf.clone())
                .collect();
            let mut found = false;
            for role in &mut delegations.roles {
                let before = role.keyids.len();
                role.keyids.retain(|k| !tuf_ids.contains(k));
                if role.keyids.len() != before {
                    found = true;
                    let left = role.keyids.len() as u64;
                    if left < role.threshold {
                        warnings.push(format!(
                            "role `{}` now has {left} key(s) for a threshold of {}: no bundle verifies until a key \
                             is added (`airlock trust role --role {}=NEW.pub:{}`)",
                            role.name, role.threshold, role.name, role.threshold
                        ));
                    }
                }
            }
            if !found {
                let hint = if self.root.signed.keys.values().any(|k| k.trusted("root").is_ok_and(|t| t.key_id() == id))
                {
                    "; it is a root or targets key: remove it with `airlock trust rotate --remove-root-key` or `--remove-targets-key`"
                } else {
                    ""
                };
                return Err(TrustError::Usage(format!("key {id} is in no signing role{hint}")));
            }
            delegations.keys.retain(|k, _| !tuf_ids.contains(k));
        }
        if delegations.roles.iter().all(|r| DECISION_ROLES.contains(&r.name.as_str())) {
            return Err(TrustError::Usage("the change leaves no signing role".to_owned()));
        }
        let mut target_files = Vec::new();
        if let Some(bytes) = &change.sigstore_root {
            t.targets.insert(SIGSTORE_TARGET.to_owned(), metadata::TargetFile::of(bytes));
            target_files.push((SIGSTORE_TARGET.to_owned(), bytes.clone()));
        }
        let path = self.dir.join(TARGETS_FILE);
        let mut doc = Signed::new(t);
        let used = sign_as(&mut doc, &[&self.root.signed], "targets", signers);
        check_signed(&doc, &[&self.root.signed], "targets", &path)?;
        unused_signers(signers, &[used])?;
        Ok((Update { roots: Vec::new(), targets: Some(doc), target_files }, warnings))
    }
}

fn targets_doc(version: u64, expires: String, delegations: Delegations) -> Targets {
    Targets {
        kind: "targets".to_owned(),
        spec_version: SPEC_VERSION.to_owned(),
        version,
        expires,
        targets: BTreeMap::new(),
        delegations: Some(delegations),
    }
}

fn delegations(roles: &[RoleSpec]) -> Result<Delegations, TrustError> {
    if roles.iter().all(|r| DECISION_ROLES.contains(&r.name.as_str())) {
        return Err(TrustError::Usage("name at least one signing role: --role build=BUILD.pub:1".to_owned()));
    }
    let mut keys = BTreeMap::new();
    let roles = roles.iter().map(|spec| delegations_of(spec, &mut keys)).collect();
    Ok(Delegations { keys, roles })
}

fn delegations_of(spec: &RoleSpec, keys: &mut BTreeMap<String, Key>) -> DelegatedRole {
    DelegatedRole {
        name: spec.name.clone(),
        keyids: tuf_ids(&spec.keys, keys),
        threshold: spec.threshold,
        terminating: true,
        paths: vec!["*".to_owned()],
    }
}

/// The TUF ids of `trusted` (one per distinct key), adding each key to `keys`.
fn tuf_ids(trusted: &[TrustedKey], keys: &mut BTreeMap<String, Key>) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for key in trusted {
        let k = Key::of(key);
        let id = k.tuf_id();
        if !ids.contains(&id) {
            ids.push(id.clone());
        }
        keys.insert(id, k);
    }
    ids
}

/// Add and remove keys of `role` in a root, and set its threshold.
fn edit_role(
    root: &mut Root,
    role: &str,
    add: &[TrustedKey],
    remove: &[TrustedKey],
    threshold: Option<u64>,
) -> Result<(), TrustError> {
    let added = tuf_ids(add, &mut root.keys);
    let removed: Vec<KeyId> = remove.iter().map(|k| k.key_id().clone()).collect();
    let keys = root.keys.clone();
    let entry = root.roles.get_mut(role).expect("a verified root has every top-level role");
    for r in &removed {
        let before = entry.keyids.len();
        entry.keyids.retain(|id| keys.get(id).and_then(|k| k.trusted("root").ok()).is_none_or(|k| k.key_id() != r));
        if entry.keyids.len() == before && (role == "root" || role == "targets") {
            return Err(TrustError::Usage(format!("key {r} is not a {role} key of root version {}", root.version)));
        }
    }
    for id in added {
        if !entry.keyids.contains(&id) {
            entry.keyids.push(id);
        }
    }
    if let Some(t) = threshold {
        entry.threshold = t;
    }
    let distinct = metadata::distinct_keys(&root.keys, &entry.keyids, "root")?.len() as u64;
    if entry.threshold == 0 || entry.threshold > distinct {
        return Err(TrustError::Usage(format!(
            "the {role} role would need {} of {distinct} distinct key(s): it could never be met",
            entry.threshold
        )));
    }
    Ok(())
}

/// Sign `doc` with every signer that holds a key of `role` in any of `roots`; the key ids used.
fn sign_as<T: serde::Serialize + serde::de::DeserializeOwned>(
    doc: &mut Signed<T>,
    roots: &[&Root],
    role: &str,
    signers: &[SigningKey],
) -> Vec<KeyId> {
    let mut used = Vec::new();
    for signer in signers {
        for root in roots {
            let Some(keys) = root.roles.get(role) else { continue };
            let tuf = keys.keyids.iter().find(|id| {
                root.keys.get(*id).and_then(|k| k.trusted(role).ok()).is_some_and(|k| k.key_id() == signer.key_id())
            });
            if let Some(tuf) = tuf {
                doc.sign(signer, tuf.clone());
                used.push(signer.key_id().clone());
            }
        }
    }
    used
}

/// Every root in `roots` must find its threshold of `role` signatures on `doc`: said as a
/// usage error naming how many more `--sign` keys are needed.
fn check_signed<T: serde::Serialize + serde::de::DeserializeOwned>(
    doc: &Signed<T>,
    roots: &[&Root],
    role: &str,
    path: &Path,
) -> Result<(), TrustError> {
    for root in roots {
        if let Err(TrustError::Threshold { need, got, version, .. }) = require(doc, root, role, path) {
            return Err(TrustError::Usage(format!(
                "{} needs {need} signature(s) by {role} keys of root version {version}; the --sign keys gave {got}",
                path.display()
            )));
        }
    }
    Ok(())
}

fn unused_signers(signers: &[SigningKey], used: &[Vec<KeyId>]) -> Result<(), TrustError> {
    match signers.iter().find(|s| !used.iter().flatten().any(|u| u == s.key_id())) {
        Some(s) => Err(TrustError::Usage(format!(
            "--sign key {} holds no key of the roles this change must be signed by",
            s.key_id()
        ))),
        None => Ok(()),
    }
}
