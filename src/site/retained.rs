//! What may verify a bundle retained under `bundles/ID/`, and whether it is that bundle.
//!
//! `bundles/` is the part of the root that is served and copied around (views, mirrors), so a
//! file there is input like any other: a public key planted in `bundles/ID/trust/`, or another
//! validly signed bundle copied over `bundles/ID/bundle.airlock`, must change nothing. The
//! keys and threshold come from what the site recorded in `state.json` when it installed the
//! bundle (or from `--trust`): a key file in `trust/` is used only when its id is one the
//! state lists, and the state lacking an entry fails closed. A bundle that verifies must also
//! be the one its directory is named for: its manifest's digest gives its id.

use std::path::Path;

use super::root::{BundleId, SiteRoot, TRUST_DIR};
use super::state::State;
use super::{SiteError, io_err};
use crate::digest::Sha256;
use crate::sign::{KeyId, Policy, TrustedKey};

/// Who must have signed a retained bundle: the given keys and threshold, else the site's: its
/// trust root's signing roles as they stand now (a key revoked since the bundle was installed
/// no longer counts), or, on a site without one, the keys it was installed with.
pub enum Trust {
    Given { keys: Vec<TrustedKey>, threshold: usize },
    Site(super::trust::ExpiryRule),
}

/// The policy to verify retained bundle `id` under, with the co-signatures retained beside it
/// (each still has to verify with a key of the policy to count).
pub fn policy(root: &SiteRoot, state: &State, id: &BundleId, trust: Trust) -> Result<Policy, SiteError> {
    let dir = root.bundle_dir(id);
    let cosignatures = crate::sign::policy::cosignatures_beside(&root.retained_file(id)).map_err(io_err(&dir))?;
    match trust {
        Trust::Given { keys, threshold } => {
            if super::trust::load(root, state)?.is_some() {
                return Err(SiteError::TrustGiven { dir: root.path().join(crate::trust::TRUST_DIR) });
            }
            Ok(Policy::new(keys, threshold, cosignatures)?)
        }
        Trust::Site(rule) => {
            if let Some(policy) = super::trust::policy(root, state, cosignatures.clone(), &rule)? {
                return Ok(policy);
            }
            let recorded = state.bundles.get(id).ok_or_else(|| SiteError::NotRecorded { id: id.clone() })?;
            Policy::new(recorded_keys(&dir, &recorded.trust), recorded.threshold, cosignatures).map_err(|e| match e {
                // Recorded keys gone or altered: the recorded threshold cannot be met.
                crate::sign::policy::PolicyError::Unreachable { threshold, keys } => {
                    SiteError::RecordedKeysMissing { id: id.clone(), threshold, keys }
                }
                e => SiteError::Policy(e),
            })
        }
    }
}

/// The keys the state lists for a bundle, each from `trust/KEYID.pub` and only if the file
/// holds that very key (its id is the digest of the key, so no other key can pass for it).
/// Any other file in `trust/` is ignored.
fn recorded_keys(dir: &Path, ids: &[KeyId]) -> Vec<TrustedKey> {
    let trust_dir = dir.join(TRUST_DIR);
    let mut keys = Vec::new();
    for id in ids {
        let path = trust_dir.join(format!("{id}.pub"));
        match TrustedKey::load(&path) {
            Ok(key) if key.key_id() == id => keys.push(key),
            Ok(key) => {
                tracing::warn!("`{}` holds key {}, not the recorded {id}: ignored", path.display(), key.key_id());
            }
            Err(e) => tracing::warn!("recorded trust key {id} is unusable: {e}"),
        }
    }
    keys
}

/// A bundle that verified under a retained directory's policy is the one the site retained
/// there only if its manifest digest gives that directory's id.
pub fn check_id(id: &BundleId, manifest_sha256: &Sha256, what: impl FnOnce() -> String) -> Result<(), SiteError> {
    let actual = BundleId::of(manifest_sha256);
    if actual == *id {
        return Ok(());
    }
    Err(SiteError::NotRetained { id: id.clone(), actual: format!("{} (id {actual})", what()) })
}
