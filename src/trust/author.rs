//! A site's trust root written: `trust init`, `rotate`, the targets' changes (roles, renewals,
//! a Sigstore root), each signed by the keys its threshold needs and checked before it is kept.

use std::collections::BTreeMap;
use std::path::Path;

use super::load::{parse_root, parse_targets, require};
use super::metadata::{self, DelegatedRole, Delegations, Key, RoleKeys, Root, SPEC_VERSION, Signed, Targets};
use super::{
    DECISION_ROLES, InitSpec, RoleSpec, RootChange, SIGSTORE_TARGET, SiteTrust, TARGETS_FILE, TRUST_DIR, TargetsChange,
    TrustError, Update, root_file,
};
use crate::sign::{KeyId, SigningKey, TrustedKey};

/// Writing a site's trust root: its first metadata, a rotation, a change of its targets.
impl SiteTrust {
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
