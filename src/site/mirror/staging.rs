//! What a node (or relay) takes of a mirror's release: its part verified into `staging/`,
//! each member fetched (resumed, bounded, checked) or taken from what the root already holds.

use std::path::{Path, PathBuf};

use super::{MirrorHead, Place, Release, SignedPromotion, other_bundle, promotion, verified_manifest};
use crate::bundle::Manifest;
use crate::bundle::manifest::{Entry, MANIFEST, MAX_MANIFEST_BYTES, SIGNATURE, VerifiedManifest};
use crate::digest::Sha256;
use crate::fetch::Net;
use crate::progress::Reporter;
use crate::sign::Policy;
use crate::site::root::SiteRoot;
use crate::site::stage::{Staged, Verified};
use crate::site::state::Kept;
use crate::site::{SiteError, io_err};

/// Members a node (or relay) already holds, by sha256: those of the releases it retains
/// (`bundles/ID/`) and of those it fetched ahead (`downloads/ID/`), as their manifests list
/// them. Only a hint of where to look: what is taken from here is verified again.
#[derive(Debug, Default)]
pub(in crate::site) struct Held(std::collections::HashMap<Sha256, PathBuf>);

impl Held {
    /// What `root` holds of the members a `kept` part takes (a node indexes its packages only,
    /// not the thousands of files its manifests list and it never keeps).
    pub(in crate::site) fn of(root: &SiteRoot, kept: Kept) -> Self {
        let mut held = std::collections::HashMap::new();
        for parent in [root.bundles(), root.downloads()] {
            let Ok(dirs) = std::fs::read_dir(&parent) else { continue };
            for dir in dirs.filter_map(Result::ok).map(|e| e.path()) {
                let manifest = dir.join(MANIFEST);
                let Ok(Some(bytes)) = crate::site::root::read_bounded(&manifest, MAX_MANIFEST_BYTES) else { continue };
                let Ok(m) = serde_json::from_slice::<Manifest>(&bytes) else { continue };
                // A relay that keeps every member reuses a model a release left unchanged.
                for e in m.entries.iter().filter(|e| kept.holds(e.path.as_str())) {
                    held.entry(e.sha256).or_insert_with(|| e.path.under(&dir));
                }
            }
        }
        Self(held)
    }

    /// `entry` put at `dest` from what is held, linked (else copied) and verified: `false`
    /// (and nothing at `dest`) when it is not held or what is held does not verify.
    fn take(&self, entry: &Entry, dest: &Path) -> bool {
        let Some(from) = self.0.get(&entry.sha256) else { return false };
        if !std::fs::symlink_metadata(from).is_ok_and(|m| m.is_file()) {
            return false;
        }
        if let Some(parent) = dest.parent()
            && std::fs::create_dir_all(parent).is_err()
        {
            return false;
        }
        if std::fs::hard_link(from, dest).is_err() && std::fs::copy(from, dest).is_err() {
            let _ = std::fs::remove_file(dest);
            return false;
        }
        let verified = crate::sign::policy::open_regular(dest)
            .ok()
            .flatten()
            .and_then(|f| crate::digest::hash_reader(f).ok())
            .is_some_and(|(sha, size)| sha == entry.sha256 && size == entry.size);
        if !verified {
            tracing::warn!("`{}` held here does not verify; fetching it", from.display());
            let _ = std::fs::remove_file(dest);
        }
        verified
    }
}

/// What of a mirror a node fetches: which release, and whether its package files too (a dry
/// run takes only the indexes the package manager's simulation reads).
pub(in crate::site) struct Fetching<'a> {
    pub source: &'a str,
    pub release: &'a Release,
    pub net: &'a Net,
    pub packages: bool,
    /// The members taken: a node's part, or a relay's.
    pub kept: Kept,
    /// The node's `promotion` role (following `current` needs a signed promotion) and the
    /// highest promotion number it accepted.
    pub promotion: Option<(&'a crate::trust::DecisionRole, u64)>,
}

/// What a node staged from a mirror: the tree, the policy that verified it (the mirror's
/// co-signatures), what was fetched and reused, and the signed promotion it followed.
pub(in crate::site) struct FromMirror {
    pub staged: Staged,
    pub policy: Policy,
    pub transfer: crate::site::records::Transfer,
    pub promotion: Option<SignedPromotion>,
}

/// A package file (what a dry run leaves on the mirror).
fn is_package(path: &str) -> bool {
    Path::new(path).extension().is_some_and(|x| x.eq_ignore_ascii_case("deb") || x.eq_ignore_ascii_case("rpm"))
}

/// The part of a mirror's release a node installs from, verified into a directory under
/// `staging/`: the signed manifest, its signature, and every member under `debs/` and
/// `rpms/` (fetched, or taken from what the node `held`); the policy that verified it (the
/// co-signatures the mirror holds for the node's keys); and what was fetched and reused.
/// `before_fetch` runs on the verified manifest before any member is fetched (apply's
/// pre-flight): its error stops the staging with nothing downloaded.
pub(in crate::site) fn stage_packages(
    from: &Fetching<'_>,
    trust: &Policy,
    root: &SiteRoot,
    held: &Held,
    reporter: &dyn Reporter,
    before_fetch: &mut dyn FnMut(&VerifiedManifest, &Sha256) -> Result<(), SiteError>,
) -> Result<FromMirror, SiteError> {
    let (place, net) = (Place::parse(from.source, from.release)?, from.net);
    // A node that follows `current` reads the signed promotion first.
    let promotion = match (from.release, from.promotion) {
        (Release::Current, Some((role, seen))) => Some(promotion(from.source, role, seen, net)?),
        _ => None,
    };
    let MirrorHead { bytes, signature, policy, manifest, manifest_sha256, checked, members } =
        net.block_on(verified_manifest(from.source, &place, from.release, trust, net))?;
    let place = members.unwrap_or(place);
    if let Some(p) = promotion.as_ref().map(|p| &p.promotion).filter(|p| p.bundle.manifest_sha256 != manifest_sha256) {
        return Err(other_bundle(p, &manifest, &manifest_sha256).into());
    }
    before_fetch(&manifest, &manifest_sha256)?;
    let staging = root.staging();
    let dir = tempfile::Builder::new().prefix("stage-").tempdir_in(&staging).map_err(io_err(&staging))?;
    crate::interrupt::remove_tree_on_interrupt(dir.path());
    for (rel, content) in [(MANIFEST, &bytes), (SIGNATURE, &signature)] {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap_or(dir.path())).map_err(io_err(&path))?;
        std::fs::write(&path, content).map_err(io_err(&path))?;
    }
    let wanted: Vec<&Entry> = manifest
        .entries
        .iter()
        .filter(|e| from.kept.holds(e.path.as_str()) && (from.packages || !is_package(e.path.as_str())))
        .collect();
    let mut transfer = crate::site::records::Transfer::default();
    let mut fetch = Vec::new();
    for e in wanted {
        if held.take(e, &e.path.under(dir.path())) {
            transfer.reused.add(e.size);
        } else {
            fetch.push(e);
        }
    }
    reporter.start("fetching", fetch.iter().map(|e| e.size).sum());
    net.block_on(async {
        for e in &fetch {
            place.member(net, e, &e.path.under(dir.path()), reporter).await?;
            transfer.fetched.add(e.size);
        }
        Ok::<_, SiteError>(())
    })?;
    reporter.finish();
    tracing::info!(
        "fetched {} file(s), {} bytes; reused {} file(s), {} bytes held here",
        transfer.fetched.files,
        transfer.fetched.bytes,
        transfer.reused.files,
        transfer.reused.bytes
    );
    let verified =
        Verified { manifest, manifest_sha256, signers: checked.signers, signatures: checked.signatures, base: None };
    Ok(FromMirror { staged: Staged { dir, verified }, policy, transfer, promotion })
}
