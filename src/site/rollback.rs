//! `airlock rollback`: make the retained `previous` bundle current again, verified.
//!
//! The retained bundle file is verified again from its first byte (signatures under the policy
//! it was installed with, or the one given; every digest), and its tree is restaged from it:
//! the tree on disk is never trusted as it is, so a tampered file or tree cannot come back.
//! Then its views are rewritten, its images republished to the registry the site remembers
//! (tags back to its digests), `current` and `previous` swapped, and the rollback recorded
//! with its duration. A retained bundle that fails verification is refused (exit 3) and the
//! site is left as it was.
//!
//! `airlock promote` on a mirror is the same switch to a retained release named by version or
//! id (a candidate, `install --candidate`): verified again the same way, refused below the
//! mirror's high-water mark without `--allow-downgrade`, recorded as `promote`; its `public/`
//! tree follows.

use std::fs::File;
use std::path::Path;

use super::activate::activate;
use super::apply::{Undo, failed_change, judge, retained_views};
use super::install::Attempt;
use super::packages::{self, Change, Changes, Node, Wanted};
use super::promotion::{Decided, PromotedBundle, Promotion, PromotionError};
use super::records::{self, Action, Phase};
use super::registry::{self, publish_images};
use super::retain::retain;
pub use super::retained::Trust;
use super::root::{BundleId, Link, SiteRoot};
use super::stage::{Staged, Verified, stage, write_views};
use super::state::State;
use super::transaction::{Step, Transaction};
use super::{Amber, CrashPoint, SiteError, crash_point, retained, views};
use crate::bundle::parts::Opened;
use crate::fetch::Net;
use crate::progress::Reporter;
use crate::sign::KeyId;

/// What a rollback did.
#[derive(Debug, serde::Serialize)]
pub struct RolledBack {
    /// The bundle that is current now (the old previous).
    pub id: BundleId,
    pub name: String,
    pub version: String,
    pub signers: Vec<KeyId>,
    /// The bundle that was current (now previous).
    #[serde(with = "super::root::as_link")]
    pub from: Option<BundleId>,
    pub images: Vec<registry::Pushed>,
    /// On a node: the packages put back to the bundle's set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packages: Option<Changes>,
    /// Seconds per phase (verify, packages, validate, switch, …): the rehearsal's figures.
    pub phases: records::PhaseTimes,
    pub record: std::path::PathBuf,
    pub seconds: f64,
}

/// Which retained bundle becomes current.
#[derive(Debug)]
pub enum Switch {
    /// `previous` (`airlock rollback`).
    Rollback,
    /// A mirror's retained release by version or id (`airlock promote`), on the decision it
    /// rests on, signed as the site's `promotion` role when `signing` is given.
    Promote {
        release: String,
        downgrade: super::Downgrade,
        decided: Box<Decided>,
        signing: Option<super::promotion::Signing>,
    },
}

impl Switch {
    fn action(&self) -> Action {
        match self {
            Switch::Rollback => Action::Rollback,
            Switch::Promote { .. } => Action::Promote,
        }
    }
}

pub fn rollback(
    root: &Path,
    trust: Trust,
    expiry: &super::trust::ExpiryRule,
    apt_key: Option<&views::AptSigningKey>,
    writer: &super::Writer,
    net: &Net,
    reporter: &dyn Reporter,
) -> Result<RolledBack, SiteError> {
    switch(root, &Switch::Rollback, trust, expiry, apt_key, writer, net, reporter)
}

/// Make a retained bundle current: `previous`, or a mirror's release (`promote`).
#[allow(clippy::too_many_arguments, reason = "the switch's inputs, with how it writes the root")]
pub fn switch(
    root: &Path,
    to: &Switch,
    trust: Trust,
    expiry: &super::trust::ExpiryRule,
    apt_key: Option<&views::AptSigningKey>,
    writer: &super::Writer,
    net: &Net,
    reporter: &dyn Reporter,
) -> Result<RolledBack, SiteError> {
    let root = &SiteRoot::new(root);
    // Nothing to roll back where nothing was installed: no root is made for it.
    if !root.is_site() {
        return Err(SiteError::NotASite { root: root.path().to_owned() });
    }
    let action = to.action();
    let lock = root.open_for_writing(action.as_str(), writer.wait)?;
    let what = match to {
        Switch::Rollback => root.link_path(Link::Previous).display().to_string(),
        Switch::Promote { release, .. } => format!("{} {release}", root.path().display()),
    };
    let mut attempt = Attempt::new(action, Phase::Verify, what, None);
    attempt.record.run_id.clone_from(&writer.run);
    let rolled = Transaction::writing(root, &lock)
        .and_then(|mut tx| rollback_locked(&mut tx, to, trust, expiry, apt_key, net, reporter, &mut attempt));
    // A refused or failed rollback is on record too.
    rolled.inspect_err(|e| attempt.record_failure(root, e))
}

#[allow(clippy::too_many_arguments, reason = "rollback's inputs, with the attempt it reports to")]
fn rollback_locked(
    tx: &mut Transaction<'_>,
    to: &Switch,
    trust: Trust,
    expiry: &super::trust::ExpiryRule,
    apt_key: Option<&views::AptSigningKey>,
    net: &Net,
    reporter: &dyn Reporter,
    attempt: &mut Attempt,
) -> Result<RolledBack, SiteError> {
    let root = tx.root();
    let state = &mut tx.state;
    let id = target(root, state, to)?;
    let policy = retained::policy(root, state, &id, trust)?;
    attempt.trusted(&policy);
    let (verified, tree, retained) = verify_again(root, state, &id, &policy, apt_key, reporter)?;
    attempt.verified(&verified, expiry)?;
    let mut downgrade = None;
    if let Switch::Promote { downgrade: policy, decided, .. } = to {
        let checked =
            super::install::check_downgrade(root, state, &verified.manifest, *policy).map_err(|e| match e {
                SiteError::Downgrade { name, version, high_water } => {
                    SiteError::PromoteDowngrade { name, version, high_water }
                }
                e => e,
            })?;
        downgrade = Some(checked);
        attempt.record.decision = Some(keep_decision(root, decided, &verified, &id)?);
    }
    attempt.phases.mark(Phase::Stage);
    crash_point(CrashPoint::Verified);
    crash_point(CrashPoint::Retained);
    let packages = match to {
        Switch::Rollback => node_packages(root, state, &tree, &verified.manifest, attempt)?,
        Switch::Promote { .. } => None,
    };
    attempt.phases.mark(Phase::Publish);
    let site = state.registry.as_ref().map(registry::SiteRegistry::from);
    let images = match &retained {
        Some(r) => publish_images(&r.id, &r.path, site.as_ref(), net)?.0,
        None => Vec::new(),
    };
    attempt.phases.mark(Phase::Switch);
    crash_point(CrashPoint::Published);
    // The policy it verified under now is the one its `trust/` holds (`retain` wrote it):
    // recorded before `current` moves, so that the next rollback uses the same.
    if let Some(entry) = state.bundles.get_mut(&id) {
        entry.trust = policy.key_ids();
        entry.threshold = policy.least_signers();
    }
    tx.save(Step::Remembered)?;
    let from = activate(root, &id)?;
    crash_point(CrashPoint::Activated);
    if super::public::served(root) {
        super::public::refresh(root, &tx.state)?;
    }
    if let Switch::Promote { signing: Some(signing), .. } = to {
        let number = publish_promotion(root, &tx.state, &verified, &id, attempt.record.decision.as_ref(), signing)?;
        tx.state.promotion = number;
        if let Some(d) = attempt.record.decision.as_mut() {
            d.promotion = Some(number);
        }
    }
    attempt.phases.mark(Phase::Record);

    let m = &verified.manifest;
    let event = verified.event(attempt.record.action.as_str(), &id, attempt.phases.total());
    tx.state.history.push(event.clone());
    match to {
        Switch::Rollback => tx.state.last_rollback = Some(event.clone()),
        Switch::Promote { .. } => super::install::raise_mark(&mut tx.state, m),
    }
    tx.save(Step::Saved)?;
    let r = attempt.activated(&event, from.as_ref(), &images);
    if let Some(v) = r.verdict.as_mut() {
        v.downgrade = downgrade;
    }
    if let Some(changes) = &packages {
        r.packages = Some(Changes::of(changes));
    }
    let record = records::write(root, r)?;
    Ok(RolledBack {
        id,
        name: m.name.to_string(),
        version: m.version.to_string(),
        signers: verified.signers,
        from,
        images,
        packages: packages.as_deref().map(Changes::of),
        phases: attempt.phases.times(),
        record,
        seconds: event.seconds,
    })
}

/// What a promotion rests on, checked against the release verified now and kept: an approval
/// for exactly this bundle, retained as `ROOT/approvals/ID.dsse.json` before `current` moves.
fn keep_decision(
    root: &SiteRoot,
    decided: &Decided,
    verified: &Verified,
    id: &BundleId,
) -> Result<crate::site::records::DecisionUsed, SiteError> {
    use crate::site::records::DecisionUsed;
    Ok(match decided {
        Decided::Approved { by, manifest_sha256, label, path, bytes } => {
            if *manifest_sha256 != verified.manifest_sha256 {
                let m = &verified.manifest;
                return Err(PromotionError::NotApproved {
                    path: path.clone(),
                    approved: label.clone(),
                    expected: format!("{} {} ({id})", m.name, m.version),
                }
                .into());
            }
            let dir = root.path().join(APPROVALS);
            std::fs::create_dir_all(&dir).map_err(super::io_err(&dir))?;
            let kept = dir.join(format!("{id}.dsse.json"));
            crate::atomic::write_durable(&kept, bytes).map_err(super::io_err(&kept))?;
            root.commit_dir(&dir)?;
            DecisionUsed {
                approval: Some(by.sha256),
                run: Some(by.run.clone()),
                approvers: by.approvers.clone(),
                ..DecisionUsed::default()
            }
        }
        Decided::Without { reason } => {
            DecisionUsed { without_approval: Some(reason.clone()), ..DecisionUsed::default() }
        }
        Decided::NoRole => DecisionUsed {
            unsigned: Some("the site's trust root has no approvers role".to_owned()),
            ..DecisionUsed::default()
        },
    })
}

/// Where a mirror keeps the approvals its promotions rest on.
pub const APPROVALS: &str = "approvals";

/// `public/promotion.json`, signed, for the release made current: the next number, the
/// approval it rests on. Written durably beside `current` (a node refuses a `current` its
/// promotion does not name, so a crash between the two fails closed).
fn publish_promotion(
    root: &SiteRoot,
    state: &State,
    verified: &Verified,
    id: &BundleId,
    decision: Option<&crate::site::records::DecisionUsed>,
    signing: &super::promotion::Signing,
) -> Result<u64, SiteError> {
    let public = root.public();
    let last = super::promotion::current(&public).map_or(0, |p| p.version);
    let number = state.promotion.max(last) + 1;
    let m = &verified.manifest;
    let bundle = PromotedBundle {
        name: m.name.to_string(),
        version: m.version.to_string(),
        id: id.clone(),
        manifest_sha256: verified.manifest_sha256,
    };
    let now = crate::clock::Timestamp::now();
    let mut promotion = Promotion::new(number, bundle, now, signing.expires);
    if let Some(d) = decision {
        promotion.without_approval.clone_from(&d.without_approval);
        if let (Some(sha256), Some(run)) = (d.approval, d.run.clone()) {
            promotion.approval = Some(super::promotion::ApprovedBy { sha256, run, approvers: d.approvers.clone() });
        }
    }
    let doc = super::promotion::sign(promotion, &signing.role, &signing.keys)?;
    std::fs::create_dir_all(&public).map_err(super::io_err(&public))?;
    let path = public.join(super::promotion::FILE);
    crate::atomic::write_durable(&path, &doc.to_bytes()).map_err(super::io_err(&path))?;
    root.commit_dir(&public)?;
    Ok(number)
}

/// On a node (the current bundle was applied, its packages changed): the retained bundle's
/// package set put back (downgrades, removals of what only the current one brought) and the
/// stack then installed validated; red puts the current set back and refuses (exit 4).
/// `None` where the current bundle changed no packages (a mirror, or a host judged as it is).
fn node_packages(
    root: &SiteRoot,
    state: &State,
    tree: &Path,
    manifest: &crate::bundle::manifest::VerifiedManifest,
    attempt: &mut Attempt,
) -> Result<Option<Vec<Change>>, SiteError> {
    let current = root.link(Link::Current);
    let Some(applied) =
        current.as_ref().and_then(|c| state.bundles.get(c)).map(|b| &b.applied).filter(|a| !a.is_empty())
    else {
        return Ok(None);
    };
    attempt.phases.mark(Phase::Packages);
    attempt.record.role = Some("node".to_owned());
    let node = Node::for_host(root.path(), packages::DEFAULT_LOCK_TIMEOUT, manifest)?;
    let mut wanted = packages::carried(manifest, &node.arch);
    for c in applied {
        if !wanted.iter().any(|w| w.name == c.name) {
            wanted.push(Wanted::put_back(&c.name, c.before.as_ref()));
        }
    }
    let views = retained_views(root, state, None, node.area());
    let mut sources = vec![tree.join(node.area())];
    sources.extend(views.iter().cloned());
    let changes = node.apply(&sources, &wanted, &views).map_err(|failed| failed_change(failed, attempt))?;
    attempt.record.packages = Some(Changes::of(&changes));
    attempt.phases.mark(Phase::Validate);
    // The bundle ran here before: amber does not stop the way back; red does.
    let amber = Amber::because("rolling back to a bundle this node ran before");
    judge(root, state, &Undo { node: &node, changes: &changes, views: &views }, manifest, &amber, attempt)?;
    Ok(Some(changes))
}

/// The retained bundle verified again from its first byte and restaged (or, for a node's part
/// of a mirror's bundle, verified in place): what it is, its tree, and the retained copy.
fn verify_again(
    root: &SiteRoot,
    state: &State,
    id: &BundleId,
    policy: &crate::sign::Policy,
    apt_key: Option<&views::AptSigningKey>,
    reporter: &dyn Reporter,
) -> Result<(Verified, std::path::PathBuf, Option<super::retain::Retained>), SiteError> {
    Ok(if state.bundles.get(id).is_some_and(|b| b.partial) {
        // A node's part of a bundle it applied from a mirror: verified again in place (there
        // is no file to restage from); damage refuses (exit 3).
        tracing::info!("verify: the part of bundles/{id} this node keeps");
        let (manifest, manifest_sha256, signers) = super::check::verify_kept(root, id, policy)?;
        let verified = Verified { manifest, manifest_sha256, signers, signatures: Vec::new(), base: None };
        (verified, root.bundle_dir(id), None)
    } else {
        let bundle = root.retained_file(id);
        tracing::info!("verify: the retained bundle `{}`", bundle.display());
        let open_err = |source| SiteError::Open { path: bundle.clone(), source };
        let file = File::open(&bundle).map_err(open_err)?;
        let opened = Opened::File { len: file.metadata().map_err(open_err)?.len(), file };
        let Staged { dir: staged, verified } = stage(&bundle, opened, policy, root, state, reporter)?;
        retained::check_id(id, &verified.manifest_sha256, || {
            format!("{} {}", verified.manifest.name, verified.manifest.version)
        })?;
        write_views(staged.path(), &verified.manifest, apt_key)?;
        let retained = retain(staged, &verified, policy, root)?;
        (verified, retained.path.clone(), Some(retained))
    })
}

/// The retained bundle a switch makes current.
fn target(root: &SiteRoot, state: &State, to: &Switch) -> Result<BundleId, SiteError> {
    match to {
        Switch::Rollback => {
            let id = root.link(Link::Previous).ok_or_else(|| SiteError::NoPrevious {
                root: root.path().to_owned(),
                // A node applies releases (it may keep no bundle file to install from).
                node: state.history.last().is_some_and(|e| e.action == "apply"),
            })?;
            refuse_forward(root, state, &id)?;
            Ok(id)
        }
        Switch::Promote { release, .. } => find_release(root, state, release),
    }
}

/// The release `release` names when it is the mirror's current already, with its name and
/// version; `None` otherwise (or when it names nothing: `promote` says so itself).
pub fn already_current(root: &Path, release: &str) -> Option<(BundleId, String, String)> {
    let root = SiteRoot::new(root);
    let state = State::load(&root).ok()?;
    let id = find_release(&root, &state, release).ok()?;
    let entry = state.bundles.get(&id)?;
    (root.link(Link::Current).as_ref() == Some(&id))
        .then(|| (id.clone(), entry.name.clone(), entry.version.to_string()))
}

/// The retained release a promotion names: its id, or its version (one bundle name only);
/// promotion is a mirror's (a node applies releases, and rolls back).
fn find_release(root: &SiteRoot, state: &State, release: &str) -> Result<BundleId, SiteError> {
    if let Some(current) = root.link(Link::Current).and_then(|c| state.bundles.get(&c)) {
        if current.partial && !current.kept.is_packages() {
            return Err(SiteError::Relay { root: root.path().to_owned() });
        }
        if current.partial || !current.applied.is_empty() {
            return Err(SiteError::NotAMirror { root: root.path().to_owned() });
        }
    }
    let retained = root.retained();
    let found: Vec<&BundleId> = state
        .bundles
        .iter()
        .filter(|(id, b)| retained.contains(id) && (id.as_str() == release || b.version.to_string() == release))
        .map(|(id, _)| id)
        .collect();
    match found.as_slice() {
        [id] => Ok((*id).clone()),
        [] => Err(SiteError::NoRelease {
            root: root.path().to_owned(),
            release: release.to_owned(),
            retained: state
                .bundles
                .iter()
                .filter(|(id, _)| retained.contains(id))
                .map(|(id, b)| format!("{} {} ({id})", b.name, b.version))
                .collect::<Vec<_>>()
                .join(", "),
        }),
        many => Err(SiteError::NoRelease {
            root: root.path().to_owned(),
            release: format!("{release} (ambiguous: name it by id)"),
            retained: many.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
        }),
    }
}

/// A rollback goes back: to an older release of the same bundle (or another bundle). A newer
/// `previous` (after a rollback, `previous` is the release rolled back from) is moving forward,
/// which is `install`'s, with its validation gate.
fn refuse_forward(root: &SiteRoot, state: &State, previous: &BundleId) -> Result<(), SiteError> {
    let Some(current) = root.link(Link::Current) else { return Ok(()) };
    let (Some(p), Some(c)) = (state.bundles.get(previous), state.bundles.get(&current)) else { return Ok(()) };
    if p.name == c.name && p.version > c.version {
        return Err(SiteError::NoOlder {
            name: p.name.clone(),
            previous: p.version.clone(),
            current: c.version.clone(),
            file: root.retained_file(previous),
            root: root.path().to_owned(),
            site_trust: crate::trust::SiteTrust::exists(root.path()),
        });
    }
    Ok(())
}
