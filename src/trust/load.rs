//! A site's trust root read and verified: the root chain from the anchor (each version signed
//! by its predecessor's threshold), the targets, bounded reads of every file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::metadata::{self, Key, RoleKeys, Root, Signed, TOP_LEVEL_ROLES, Targets};
use super::{
    Chain, DECISION_ROLES, DecisionRole, Expiry, MAX_METADATA_BYTES, MAX_ROOT_VERSIONS, MAX_TARGET_BYTES, Presented,
    SIGSTORE_TARGET, SiteTrust, TARGETS_FILE, TRUST_DIR, TrustError, Update, root_file,
};
use crate::clock::Timestamp;
use crate::digest::Sha256;
use crate::sign::policy::{Origin, Rule};
use crate::sign::{CoSignature, Policy};

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
    let doc: Signed<Root> = Signed::parse(bytes).map_err(|e| err(e.to_string()))?;
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
    let doc: Signed<Targets> = Signed::parse(bytes).map_err(|e| err(e.to_string()))?;
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
pub(super) fn require<T: serde::Serialize + serde::de::DeserializeOwned>(
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

/// Reading a site's trust root: its chain verified from the anchor, its targets, its roles.
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
}
