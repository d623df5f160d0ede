//! The site's trust root as the site uses it (`ROOT/trust/`, read and written by `crate::trust`):
//! pinned by `state.json` and the records, so that metadata older than what the site has used,
//! or another trust root planted in its place, is refused; expiry enforced for what activates a
//! bundle; changes (`airlock trust …`, and the metadata a bundle carries) written under the
//! root's lock, the pin raised after.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::root::SiteRoot;
use super::state::{State, TrustPin};
use super::transaction::{Step, Transaction};
use super::{SiteError, records};
use crate::bundle::manifest::VerifiedManifest;
use crate::clock::Timestamp;
use crate::digest::Sha256;
use crate::sign::policy::{Origin, Waiver};
use crate::sign::{CoSignature, Policy};
use crate::trust::{Presented, SiteTrust, TrustError, Update};

/// What expired metadata or an expired bundle does.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ExpiryRule {
    /// Refused (exit 3) with the date and the command that renews it.
    #[default]
    Enforce,
    /// `--allow-expired --reason TEXT`: used, and the record says so.
    Accept(String),
    /// Reading, not activating (`check`, `report`, `status`): the caller shows the dates.
    Ignore,
}

impl ExpiryRule {
    pub fn from_flags(allow: bool, reason: Option<&str>) -> Self {
        match (allow, reason) {
            (true, Some(r)) => Self::Accept(r.to_owned()),
            _ => Self::Enforce,
        }
    }
}

/// The site's trust root, verified and checked against the pin (`state.json`'s, raised by every
/// record); `None` when the site has none and never had one.
pub fn load(root: &SiteRoot, state: &State) -> Result<Option<SiteTrust>, SiteError> {
    // The site's trust root is its own directory: a link to one elsewhere is refused.
    let dir = root.path().join(crate::trust::TRUST_DIR);
    if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(SiteError::Symlink { path: dir });
    }
    let pin = pin_of(root, state)?;
    if !SiteTrust::exists(root.path()) {
        return match pin {
            None => Ok(None),
            Some(p) => Err(SiteError::TrustRootGone {
                dir: root.path().join(crate::trust::TRUST_DIR),
                root_version: p.versions.root_version,
                targets_version: p.versions.targets_version,
            }),
        };
    }
    let trust = SiteTrust::load(root.path())?;
    if let Some(pin) = pin {
        check_pin(&trust, &pin)?;
    }
    Ok(Some(trust))
}

/// What the site has used: `state.json`'s anchor, and the highest versions it and the records name.
struct Pin {
    anchor: Option<Sha256>,
    versions: Origin,
}

fn pin_of(root: &SiteRoot, state: &State) -> Result<Option<Pin>, SiteError> {
    let recorded = records::trust_versions(root)?;
    let saved =
        state.trust.as_ref().map(|p| Origin { root_version: p.root_version, targets_version: p.targets_version });
    let versions = [saved, recorded].into_iter().flatten().reduce(|a, b| Origin {
        root_version: a.root_version.max(b.root_version),
        targets_version: a.targets_version.max(b.targets_version),
    });
    Ok(versions.map(|versions| Pin { anchor: state.trust.as_ref().map(|p| p.anchor), versions }))
}

fn check_pin(trust: &SiteTrust, pin: &Pin) -> Result<(), SiteError> {
    let found = trust.origin();
    if let Some(pinned) = pin.anchor
        && pinned != trust.anchor
    {
        return Err(SiteError::TrustAnchor { dir: trust.dir.clone(), pinned, found: trust.anchor });
    }
    if found.root_version < pin.versions.root_version || found.targets_version < pin.versions.targets_version {
        return Err(SiteError::TrustRolledBack { dir: trust.dir.clone(), pinned: pin.versions, found });
    }
    Ok(())
}

/// The policy of the site's signing roles for a bundle with `cosignatures`, when the site has a
/// trust root; expired metadata refused, or accepted on record, or ignored, by `rule`.
pub fn policy(
    root: &SiteRoot,
    state: &State,
    cosignatures: Vec<CoSignature>,
    rule: &ExpiryRule,
) -> Result<Option<Policy>, SiteError> {
    let Some(trust) = load(root, state)? else { return Ok(None) };
    let expired = trust.expired(Timestamp::started());
    let mut policy = trust.policy(cosignatures)?;
    if let Some(first) = expired.first() {
        match rule {
            ExpiryRule::Enforce => {
                return Err(TrustError::Expired {
                    path: first.path.clone(),
                    expires: first.expires,
                    now: Timestamp::started(),
                }
                .into());
            }
            ExpiryRule::Accept(reason) => {
                let expired =
                    expired.iter().map(|e| format!("{} expired at {}", e.path.display(), e.expires)).collect();
                policy.waiver = Some(Waiver { reason: reason.clone(), expired });
            }
            ExpiryRule::Ignore => {}
        }
    }
    Ok(Some(policy))
}

/// A verified bundle past its `expires`: refused, or accepted (the waiver to record), or
/// ignored, by `rule`.
pub fn check_bundle_expiry(manifest: &VerifiedManifest, rule: &ExpiryRule) -> Result<Option<Waiver>, SiteError> {
    let Some(expires) = manifest.expires else { return Ok(None) };
    let now = Timestamp::started();
    if expires > now {
        return Ok(None);
    }
    let what = format!("{} {}", manifest.name, manifest.version);
    match rule {
        ExpiryRule::Enforce => Err(SiteError::BundleExpired { what, expires, now }),
        ExpiryRule::Accept(reason) => {
            Ok(Some(Waiver { reason: reason.clone(), expired: vec![format!("bundle {what} expired at {expires}")] }))
        }
        ExpiryRule::Ignore => Ok(None),
    }
}

/// Make `make`'s metadata the site's, under the root's lock: verified against the site's
/// trust root (or, for `trust init`, none), written, loaded back, and the pin raised.
pub fn change(
    root_dir: &Path,
    wait: Duration,
    make: impl FnOnce(Option<&SiteTrust>) -> Result<Update, TrustError>,
) -> Result<SiteTrust, SiteError> {
    let root = SiteRoot::new(root_dir);
    let lock = root.open_for_writing("trust", wait)?;
    let mut tx = Transaction::writing(&root, &lock)?;
    let current = load(&root, &tx.state)?;
    let update = make(current.as_ref())?;
    if !update.is_empty() {
        SiteTrust::write(root.path(), &update)?;
    }
    let after = SiteTrust::load(root.path())?;
    tx.state.trust = Some(TrustPin::of(&after));
    tx.save(Step::Trust)?;
    Ok(after)
}

/// Pin the site's trust root at its first use: `1.root.json`'s sha256 and the versions in
/// `state.json`, under the root's lock, when nothing pinned it yet (a site provisioned by copying
/// the metadata into `ROOT/trust/`, then used). From then on another trust root planted in its
/// place is refused (`TrustAnchor`), and a deleted one cannot let `--trust` back in. Nothing to
/// do on a site without a trust root, or one already pinned.
pub fn pin_first_use(root_dir: &Path, wait: Duration) -> Result<(), SiteError> {
    let root = SiteRoot::new(root_dir);
    if !SiteTrust::exists(root_dir) || State::load(&root)?.trust.is_some() {
        return Ok(());
    }
    let lock = root.open_for_writing("trust", wait)?;
    let mut tx = Transaction::writing(&root, &lock)?;
    if tx.state.trust.is_some() {
        return Ok(());
    }
    // Verified from `1.root.json` up, and not below the versions the records name.
    let Some(trust) = load(&root, &tx.state)? else { return Ok(()) };
    tx.state.trust = Some(TrustPin::of(&trust));
    tx.save(Step::Trust)?;
    tracing::info!("trust: pinned this site's trust root (1.root.json sha256 {})", trust.anchor);
    Ok(())
}

/// Adopt the trust metadata a bundle carries (`airlock/trust/…`) or an operator names
/// (`trust update`): newer root versions one at a time, a newer targets version. A site without
/// a trust root ignores carried metadata (it trusts what `--trust` says).
pub fn adopt(
    root_dir: &Path,
    wait: Duration,
    files: &[(PathBuf, Vec<u8>)],
    presented: Presented,
) -> Result<Option<SiteTrust>, SiteError> {
    if files.is_empty() || (presented == Presented::Carried && !SiteTrust::exists(root_dir)) {
        return Ok(None);
    }
    let after = change(root_dir, wait, |current| {
        if current.is_none() {
            return Err(TrustError::Missing { dir: root_dir.join(crate::trust::TRUST_DIR) });
        }
        SiteTrust::update(root_dir, files, presented)
    })?;
    let o = after.origin();
    tracing::info!("trust: the site is at root version {} and targets version {}", o.root_version, o.targets_version);
    Ok(Some(after))
}
