//! Who must have signed a bundle: the trusted keys, how many of them (`--threshold`), and the
//! detached co-signatures found beside the bundle file.
//!
//! A co-signature is written by `airlock sign` as `BUNDLE.KEYID.sig` in the bundle's directory:
//! the cosign `sign-blob` format over the same manifest bytes as the embedded signature, so
//! `openssl dgst -sha256 -verify KEY.pub -signature <(base64 -d BUNDLE.KEYID.sig) manifest.json`
//! checks it too. The key id in the name says which trusted key to check it with; a file named
//! for a key that is not trusted, or one that does not verify (stale after a rebuild, or
//! tampered with), does not count, and is reported.

use std::collections::BTreeSet;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{KeyId, MAX_SIGNATURE_BYTES, TrustedKey};
use crate::digest::Sha256;

/// A detached co-signature file.
#[derive(Debug, Clone)]
pub struct CoSignature {
    pub path: PathBuf,
    pub key_id: KeyId,
    pub signature: Vec<u8>,
}

/// The co-signature file for `bundle` by the key `key_id`: `BUNDLE.KEYID.sig` beside it.
pub fn cosignature_path(bundle: &Path, key_id: &KeyId) -> PathBuf {
    let mut name = bundle.file_name().unwrap_or_default().to_owned();
    name.push(format!(".{key_id}.sig"));
    bundle.with_file_name(name)
}

/// Every `BUNDLE.KEYID.sig` beside `bundle` (links followed), sorted by key id. Files of that
/// shape larger than a signature can be are read only up to the limit (and then fail to verify).
pub fn cosignatures_beside(bundle: &Path) -> io::Result<Vec<CoSignature>> {
    let Some(name) = bundle.file_name().and_then(|n| n.to_str()) else {
        return Ok(Vec::new());
    };
    let dir = match bundle.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut found = Vec::new();
    for item in std::fs::read_dir(dir)? {
        let item = item?;
        let file_name = item.file_name();
        let Some(key_id) = file_name
            .to_str()
            .and_then(|f| f.strip_prefix(name))
            .and_then(|rest| rest.strip_prefix('.'))
            .and_then(|rest| rest.strip_suffix(".sig"))
            .and_then(KeyId::parse)
        else {
            continue;
        };
        let path = cosignature_path(bundle, &key_id);
        // One unreadable file (a dangling link, no permission) is skipped, not fatal: a
        // co-signature can only help meet a threshold.
        let read = || -> io::Result<Option<Vec<u8>>> {
            let Some(file) = open_regular(&path)? else { return Ok(None) };
            let mut signature = Vec::new();
            file.take(MAX_SIGNATURE_BYTES).read_to_end(&mut signature)?;
            Ok(Some(signature))
        };
        match read() {
            Ok(Some(signature)) => found.push(CoSignature { path, key_id, signature }),
            Ok(None) => {}
            Err(e) => tracing::warn!("skipping co-signature `{}`: {e}", path.display()),
        }
    }
    found.sort_by(|a, b| a.key_id.cmp(&b.key_id));
    Ok(found)
}

pub use crate::regular::{Refused, open as open_regular, read as read_regular};

/// The signature policy a bundle is verified under: every rule must be met.
#[derive(Debug)]
pub struct Policy {
    /// Every key any rule names (one entry per distinct key).
    pub keys: Vec<TrustedKey>,
    /// `--trust` and `--threshold` make one rule over all the keys; a site trust root makes
    /// one per signing role (`build` 1 of 1, `security` 1 of 2).
    pub rules: Vec<Rule>,
    pub cosignatures: Vec<CoSignature>,
    /// The site trust root's metadata versions the rules came from, if they did.
    pub origin: Option<Origin>,
    /// Expired metadata (or an expired bundle) used anyway, on record.
    pub waiver: Option<Waiver>,
    /// The Sigstore trusted root upstream signatures the manifest records are checked again
    /// against: the site's (its trust root's target), `--trusted-root`, else the public-good one.
    pub sigstore_root: crate::sign::sigstore::Root,
}

/// What `--allow-expired --reason` let through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Waiver {
    pub reason: String,
    /// `PATH expired at TIME`, one per expired file or bundle.
    pub expired: Vec<String>,
}

/// `threshold` distinct keys among `keys` must have signed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Rule {
    /// The signing role (`trusted` for the keys given with `--trust`).
    pub role: String,
    pub keys: Vec<KeyId>,
    pub threshold: usize,
}

/// The role name of the one rule `--trust` and `--threshold` make.
pub const GIVEN_ROLE: &str = "trusted";

/// Which site trust root metadata a policy came from: what records name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Origin {
    pub root_version: u64,
    pub targets_version: u64,
}

/// A rule the signers do not meet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shortfall {
    pub role: String,
    pub need: usize,
    /// The rule's keys that did sign.
    pub have: Vec<KeyId>,
}

/// Why a policy cannot be used at all.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("--threshold must be at least 1")]
    ZeroThreshold,
    #[error("--threshold {threshold} can never be met: only {keys} distinct trusted key(s) were given with --trust")]
    Unreachable { threshold: usize, keys: usize },
    #[error("signing role `{role}` needs {threshold} of its keys and can never be met: it has {keys} distinct key(s)")]
    RoleUnreachable { role: String, threshold: usize, keys: usize },
}

impl crate::failure::Classify for PolicyError {
    fn class(&self) -> crate::failure::Class {
        match self {
            PolicyError::ZeroThreshold | PolicyError::Unreachable { .. } => crate::failure::Class::Usage,
            // A site's own metadata that names a role nobody can meet: nothing verifies under it.
            PolicyError::RoleUnreachable { .. } => crate::failure::Class::Verification,
        }
    }
}

/// How one signature fared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum Outcome {
    /// Verified with a trusted key: it counts.
    Valid,
    /// Named for, or verifiable only by, a key that is not trusted: it does not count.
    Untrusted,
    /// The named key is trusted but the signature does not verify over this manifest.
    Invalid { detail: String },
}

/// Where a signature over the manifest came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The signature member inside the bundle.
    Embedded,
    /// A co-signature file beside the bundle.
    CoSignature(PathBuf),
}

/// One signature considered, with where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureCheck {
    pub source: Source,
    /// The key that verified it; for a co-signature, the key its file name names.
    pub key_id: Option<KeyId>,
    pub outcome: Outcome,
}

/// The signatures over one manifest, checked.
#[derive(Debug, Default)]
pub struct Checked {
    /// Distinct trusted keys with a valid signature, in the order found.
    pub signers: Vec<KeyId>,
    /// Every signature considered, each with its source.
    pub signatures: Vec<SignatureCheck>,
    /// Why the embedded signature could not even be decoded, if it could not.
    pub embedded_error: Option<String>,
}

/// The co-signatures of `policy` whose check in `checks` is valid: those that counted.
pub fn counted<'p>(policy: &'p Policy, checks: &[SignatureCheck]) -> Vec<&'p CoSignature> {
    policy
        .cosignatures
        .iter()
        .filter(|co| {
            checks.iter().any(|c| c.outcome == Outcome::Valid && c.source == Source::CoSignature(co.path.clone()))
        })
        .collect()
}

/// `keys` with duplicates (by key id) dropped, in the order given.
fn distinct(keys: Vec<TrustedKey>) -> Vec<TrustedKey> {
    let mut seen = BTreeSet::new();
    keys.into_iter().filter(|k| seen.insert(k.key_id().clone())).collect()
}

impl Policy {
    /// A policy over `keys` (duplicates by key id dropped) requiring `threshold` of them.
    pub fn new(keys: Vec<TrustedKey>, threshold: usize, cosignatures: Vec<CoSignature>) -> Result<Self, PolicyError> {
        Self::reachable(&keys, threshold)?;
        let keys = distinct(keys);
        let rule =
            Rule { role: GIVEN_ROLE.to_owned(), keys: keys.iter().map(|k| k.key_id().clone()).collect(), threshold };
        let sigstore_root = crate::sign::sigstore::Root::PublicGood;
        Ok(Self { keys, rules: vec![rule], cosignatures, origin: None, waiver: None, sigstore_root })
    }

    /// A policy of several rules (a site trust root's signing roles); `keys` must hold every
    /// key a rule names.
    pub fn of_roles(
        keys: Vec<TrustedKey>,
        rules: Vec<Rule>,
        cosignatures: Vec<CoSignature>,
        origin: Origin,
    ) -> Result<Self, PolicyError> {
        let keys = distinct(keys);
        for rule in &rules {
            let known = rule.keys.iter().filter(|id| keys.iter().any(|k| k.key_id() == *id)).count();
            if rule.threshold == 0 || rule.threshold > known {
                return Err(PolicyError::RoleUnreachable {
                    role: rule.role.clone(),
                    threshold: rule.threshold,
                    keys: known,
                });
            }
        }
        let sigstore_root = crate::sign::sigstore::Root::PublicGood;
        Ok(Self { keys, rules, cosignatures, origin: Some(origin), waiver: None, sigstore_root })
    }

    /// The same rules and keys over other co-signatures (those kept beside a retained bundle).
    #[must_use]
    pub fn with_cosignatures(&self, cosignatures: Vec<CoSignature>) -> Self {
        Self {
            keys: self.keys.clone(),
            rules: self.rules.clone(),
            cosignatures,
            origin: self.origin,
            waiver: self.waiver.clone(),
            sigstore_root: self.sigstore_root.clone(),
        }
    }

    /// The same policy, re-checking upstream signatures against `root`.
    #[must_use]
    pub fn with_sigstore_root(mut self, root: crate::sign::sigstore::Root) -> Self {
        self.sigstore_root = root;
        self
    }

    /// The first rule `signers` do not meet, if any.
    pub fn shortfall(&self, signers: &[KeyId]) -> Option<Shortfall> {
        self.rules.iter().find_map(|rule| {
            let have: Vec<KeyId> = rule.keys.iter().filter(|k| signers.contains(k)).cloned().collect();
            (have.len() < rule.threshold).then(|| Shortfall { role: rule.role.clone(), need: rule.threshold, have })
        })
    }

    /// The rules in words: `2 of 3 trusted keys`, or `build 1 of 1, security 1 of 2`.
    pub fn describe(&self) -> String {
        match self.rules.as_slice() {
            [rule] if rule.role == GIVEN_ROLE => format!("{} of {} trusted key(s)", rule.threshold, rule.keys.len()),
            rules => rules
                .iter()
                .map(|r| format!("{} {} of {}", r.role, r.threshold, r.keys.len()))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// Distinct signatures the policy needs at the least (the largest rule's threshold).
    pub fn least_signers(&self) -> usize {
        self.rules.iter().map(|r| r.threshold).max().unwrap_or(0)
    }

    /// Whether `threshold` distinct keys can ever sign among `keys`: asked before anything is
    /// downloaded or read, so an impossible policy is a usage error at once.
    pub fn reachable(keys: &[TrustedKey], threshold: usize) -> Result<(), PolicyError> {
        let distinct = keys.iter().map(TrustedKey::key_id).collect::<BTreeSet<_>>().len();
        if threshold == 0 {
            return Err(PolicyError::ZeroThreshold);
        }
        if threshold > distinct {
            return Err(PolicyError::Unreachable { threshold, keys: distinct });
        }
        Ok(())
    }

    pub fn key_ids(&self) -> Vec<KeyId> {
        self.keys.iter().map(|k| k.key_id().clone()).collect()
    }

    /// Check the embedded signature and every co-signature over the manifest whose SHA-256
    /// is `manifest` (hashed once, as it was read, for every key).
    pub fn check(&self, manifest: &Sha256, embedded: &[u8]) -> Checked {
        let mut checked = Checked::default();
        let mut embedded_check = SignatureCheck { source: Source::Embedded, key_id: None, outcome: Outcome::Untrusted };
        for key in &self.keys {
            match key.verify_blob_digest(manifest, embedded) {
                Ok(()) => {
                    embedded_check = SignatureCheck {
                        source: Source::Embedded,
                        key_id: Some(key.key_id().clone()),
                        outcome: Outcome::Valid,
                    };
                    break;
                }
                Err(e @ super::SignatureError::Encoding(_)) => checked.embedded_error = Some(e.to_string()),
                Err(super::SignatureError::Mismatch(_)) => {}
            }
        }
        checked.signatures.push(embedded_check);
        for co in &self.cosignatures {
            let source = Source::CoSignature(co.path.clone());
            let outcome = match self.keys.iter().find(|k| k.key_id() == &co.key_id) {
                None => Outcome::Untrusted,
                Some(key) => match key.verify_blob_digest(manifest, &co.signature) {
                    Ok(()) => Outcome::Valid,
                    Err(e) => Outcome::Invalid { detail: e.to_string() },
                },
            };
            checked.signatures.push(SignatureCheck { source, key_id: Some(co.key_id.clone()), outcome });
        }
        for s in &checked.signatures {
            if let (Outcome::Valid, Some(id)) = (&s.outcome, &s.key_id)
                && !checked.signers.contains(id)
            {
                checked.signers.push(id.clone());
            }
        }
        checked
    }
}

#[cfg(test)]
mod tests {
    use super::super::{SigningKey, generate};
    use super::*;

    #[test]
    fn distinct_trusted_keys_count_once_and_untrusted_or_stale_cosignatures_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let [a, b, c] = ["a", "b", "c"].map(|n| generate(dir.path(), n, None).unwrap());
        let sign = |k: &super::super::GeneratedKey, msg: &[u8]| {
            SigningKey::load(&k.private_path, None).unwrap().sign_blob(msg).into_bytes()
        };
        let trusted = || vec![TrustedKey::load(&a.public_path).unwrap(), TrustedKey::load(&b.public_path).unwrap()];
        let bundle = dir.path().join("x.airlock");
        let co = |k: &super::super::GeneratedKey, msg: &[u8]| CoSignature {
            path: cosignature_path(&bundle, &k.key_id),
            key_id: k.key_id.clone(),
            signature: sign(k, msg),
        };
        let manifest = b"manifest bytes";
        let embedded = sign(&a, manifest);

        let policy =
            Policy::new(trusted(), 2, vec![co(&a, manifest), co(&b, b"an older manifest"), co(&c, manifest)]).unwrap();
        let checked = policy.check(&Sha256::of_bytes(manifest), &embedded);
        assert_eq!(checked.signers, vec![a.key_id.clone()], "a twice is one key; b stale; c untrusted");
        let outcome = |source: Source| checked.signatures.iter().find(|s| s.source == source).unwrap().outcome.clone();
        let co_path = |k: &super::super::GeneratedKey| Source::CoSignature(cosignature_path(&bundle, &k.key_id));
        assert_eq!(outcome(Source::Embedded), Outcome::Valid);
        assert_eq!(outcome(co_path(&a)), Outcome::Valid);
        assert!(matches!(outcome(co_path(&b)), Outcome::Invalid { .. }));
        assert_eq!(outcome(co_path(&c)), Outcome::Untrusted);
        let counted: Vec<_> = counted(&policy, &checked.signatures).into_iter().map(|co| &co.key_id).collect();
        assert_eq!(counted, vec![&a.key_id]);

        let policy = Policy::new(trusted(), 2, vec![co(&b, manifest)]).unwrap();
        assert_eq!(
            policy.check(&Sha256::of_bytes(manifest), &embedded).signers,
            vec![a.key_id.clone(), b.key_id.clone()]
        );

        assert!(matches!(Policy::new(trusted(), 3, vec![]), Err(PolicyError::Unreachable { threshold: 3, keys: 2 })));
        let twice = vec![TrustedKey::load(&a.public_path).unwrap(), TrustedKey::load(&a.public_path).unwrap()];
        assert!(matches!(Policy::new(twice, 2, vec![]), Err(PolicyError::Unreachable { keys: 1, .. })));
        assert!(matches!(Policy::new(trusted(), 0, vec![]), Err(PolicyError::ZeroThreshold)));
    }

    #[test]
    fn a_fifo_named_like_a_cosignature_is_skipped_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("b.airlock.fifo.sig");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from_raw_mode(0o644)).unwrap();
        // Opening a FIFO for reading blocks until a writer comes, unless it is non-blocking.
        let (done, wait) = std::sync::mpsc::channel();
        std::thread::spawn(move || done.send(open_regular(&fifo).map(|f| f.is_none())).unwrap());
        let opened = wait.recv_timeout(std::time::Duration::from_secs(10)).expect("open_regular did not block");
        assert!(opened.unwrap(), "a FIFO is not a regular file");
        let file = dir.path().join("b.airlock.x.sig");
        std::fs::write(&file, b"sig").unwrap();
        assert!(open_regular(&file).unwrap().is_some());
    }

    #[test]
    fn cosignatures_are_found_by_bundle_name_and_key_id() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = dir.path().join("stack.airlock");
        let id = KeyId::of_spki_der(b"k");
        assert_eq!(cosignature_path(&bundle, &id), dir.path().join(format!("stack.airlock.{id}.sig")));
        std::fs::write(cosignature_path(&bundle, &id), "sig").unwrap();
        for other in ["stack.airlock.nothex.sig", "other.airlock.0.sig", "stack.airlock.sig"] {
            std::fs::write(dir.path().join(other), "x").unwrap();
        }
        std::fs::write(dir.path().join(format!("stack.airlock2.{id}.sig")), "x").unwrap();
        // A link is followed; a dangling link and a directory of that shape are skipped.
        let (linked, dangling, directory) =
            (KeyId::of_spki_der(b"l"), KeyId::of_spki_der(b"d"), KeyId::of_spki_der(b"x"));
        std::fs::write(dir.path().join("real.sig"), "linked sig").unwrap();
        std::os::unix::fs::symlink("real.sig", cosignature_path(&bundle, &linked)).unwrap();
        std::os::unix::fs::symlink("missing.sig", cosignature_path(&bundle, &dangling)).unwrap();
        std::fs::create_dir(cosignature_path(&bundle, &directory)).unwrap();
        let found = cosignatures_beside(&bundle).unwrap();
        let mut want = vec![(id, b"sig".to_vec()), (linked, b"linked sig".to_vec())];
        want.sort();
        assert_eq!(found.into_iter().map(|c| (c.key_id, c.signature)).collect::<Vec<_>>(), want);
    }
}
