//! `airlock rollback`: make the retained `previous` bundle current again, verified.
//!
//! The retained bundle file is verified again from its first byte (signatures under the policy
//! it was installed with, or the one given; every digest), and its tree is restaged from it:
//! the tree on disk is never trusted as it is, so a tampered file or tree cannot come back.
//! Then its views are rewritten, its images republished to the registry the site remembers
//! (tags back to its digests), `current` and `previous` swapped, and the rollback recorded
//! with its duration. A retained bundle that fails verification is refused (exit 3) and the
//! site is left as it was.

use std::fs::File;
use std::path::Path;
use std::time::Duration;

use super::records::{self, Phases};
use super::state::State;
use super::{
    RETAINED_BUNDLE, SiteError, Staged, TRUST_DIR, activate, io_err, open_root, publish_images, registry, retain,
    views, write_views,
};
use crate::fetch::Net;
use crate::progress::Reporter;
use crate::sign::{KeyId, Policy, TrustedKey};

/// What a rollback did.
#[derive(Debug, serde::Serialize)]
pub struct RolledBack {
    /// The bundle that is current now (the old previous).
    pub id: String,
    pub name: String,
    pub version: String,
    pub signers: Vec<KeyId>,
    /// The bundle that was current (now previous).
    pub from: Option<String>,
    pub images: Vec<registry::Pushed>,
    pub record: std::path::PathBuf,
    pub seconds: f64,
}

/// Who must have signed the retained bundle: the given keys and threshold, else those it was
/// installed with.
pub enum Trust {
    Given { keys: Vec<TrustedKey>, threshold: usize },
    AsInstalled,
}

pub fn rollback(
    root: &Path,
    trust: Trust,
    apt_key: Option<&views::AptSigningKey>,
    wait: Duration,
    net: &Net,
    reporter: &dyn Reporter,
) -> Result<RolledBack, SiteError> {
    let _lock = open_root(root, "rollback", wait)?;
    let mut state = State::load(root)?;
    let target =
        std::fs::read_link(root.join("previous")).map_err(|_| SiteError::NoPrevious { root: root.to_owned() })?;
    let id = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let dir = root.join("bundles").join(&id);
    let bundle = dir.join(RETAINED_BUNDLE);
    let policy = policy(&dir, &bundle, trust, &state, &id)?;
    let mut phases = Phases::start();
    tracing::info!("verify: the retained bundle `{}`", bundle.display());
    let input = File::open(&bundle).map_err(|source| SiteError::Open { path: bundle.clone(), source })?;
    let input = Box::new(std::io::BufReader::with_capacity(1 << 20, input));
    let Staged { dir: staged, verified } = super::stage(&bundle, input, &policy, root, &state, reporter)?;
    phases.mark("verify");
    write_views(staged.path(), &verified.manifest, apt_key)?;
    let retained = retain(staged, &verified, &policy, root)?;
    phases.mark("stage");
    let site = state.registry.as_ref().map(registry::SiteRegistry::from);
    let (images, _) = publish_images(&retained, site.as_ref(), net)?;
    phases.mark("publish");
    let from = activate(root, &retained.id)?;
    phases.mark("switch");

    let m = &verified.manifest;
    let event = verified.event("rollback", &retained.id, phases.total());
    state.history.push(event.clone());
    state.last_rollback = Some(event.clone());
    state.save(root)?;
    let record = records::write(
        root,
        "rollback",
        &serde_json::json!({
            "action": "rollback",
            "at": event.at,
            "bundle": verified.record(&retained.id),
            "from": from,
            "signers": verified.signers,
            "trust": { "keys": policy.key_ids(), "threshold": policy.threshold },
            "verdict": { "verified": true },
            "published": images,
            "phases": phases.to_json(),
            "seconds": event.seconds,
        }),
    )?;
    Ok(RolledBack {
        id: retained.id,
        name: m.name.to_string(),
        version: m.version.to_string(),
        signers: verified.signers,
        from,
        images,
        record,
        seconds: event.seconds,
    })
}

/// The policy to verify the retained bundle under, with the co-signatures retained beside it.
pub(super) fn policy(dir: &Path, bundle: &Path, trust: Trust, state: &State, id: &str) -> Result<Policy, SiteError> {
    let cosignatures = crate::sign::policy::cosignatures_beside(bundle).map_err(io_err(dir))?;
    let (keys, threshold) = match trust {
        Trust::Given { keys, threshold } => (keys, threshold),
        Trust::AsInstalled => {
            let trust_dir = dir.join(TRUST_DIR);
            let mut keys = Vec::new();
            for entry in std::fs::read_dir(&trust_dir).map_err(io_err(&trust_dir))? {
                let path = entry.map_err(io_err(&trust_dir))?.path();
                keys.push(TrustedKey::load(&path).map_err(|e| SiteError::State { path, detail: e.to_string() })?);
            }
            let threshold = state.bundles.get(id).map_or(1, |b| b.threshold);
            (keys, threshold)
        }
    };
    Policy::new(keys, threshold, cosignatures).map_err(SiteError::Policy)
}
