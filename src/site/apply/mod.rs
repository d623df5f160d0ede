//! `airlock apply` on a node: the bundle verified and staged as `install` does, then its
//! packages applied with the host's package manager, and the stack that is then installed
//! judged against the bundle's matrix. Green commits (current, previous, record); amber only
//! when accepted; red puts the host's packages back as they were, validates again, and records
//! both. A change that needs a reboot leaves the node pending until `validate --commit`.
//!
//! Phases: verify → plan (the package manager's simulation; every change must be undoable) → stage (retained
//! under `bundles/ID`, whose `debs/` or `rpms/` is the view apt, dnf or zypper installs from) → packages → validate →
//! switch → record.

use std::path::{Path, PathBuf};

use crate::bundle::manifest::VerifiedManifest;
use crate::bundle::parts::{Input, Opened};
use crate::progress::Reporter;
use crate::sign::{KeyId, Policy};
use crate::site::install::{Attempt, Trip, check_downgrade, name_damaged_part, preflight, remember_retained};
use crate::site::packages::{self, Change, Changes, Node, Plan};
use crate::site::records;
use crate::site::records::Phase;
use crate::site::retain::retain;
use crate::site::root::{BundleId, SiteRoot};
use crate::site::stage::{Staged, stage, write_views};
use crate::site::state::State;
use crate::site::transaction::{Step, Transaction};
use crate::site::{CrashPoint, Options, SiteError, crash_point, io_err};

mod adopt;
mod commit;
mod downloads;
mod gate;

use adopt::adopt;
use commit::list;
use downloads::{drop_downloaded, forget, keep_downloaded, refused};
pub use gate::{Committed, commit_pending};
pub(in crate::site) use gate::{Undo, failed_change, judge};
use gate::{change, judge_before, measure_baseline};

/// What only a node's apply is told.
#[derive(Debug, Clone, Default)]
pub struct NodeOptions {
    /// `--accept-unrestorable --reason TEXT`.
    pub accept_unrestorable: Option<String>,
    pub mode: Mode,
    /// `--unless-current`: a node that already runs this bundle, with none of its packages to
    /// change, is left as it is (`unchanged`, no record, nothing validated).
    pub unless_current: bool,
    /// Seconds to wait for the dpkg lock.
    pub lock_timeout: u64,
}

/// What an apply does with the bundle once it is verified (the CLI's flags exclude each other).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Install its packages, judge the new stack, commit or restore.
    #[default]
    Change,
    /// `--dry-run`: say what would change; nothing under the root is written.
    DryRun,
    /// `--download-only`: fetch and verify the release's packages into `downloads/ID`, for
    /// the later apply of that release; no package manager, no activation.
    DownloadOnly,
    /// `--adopt`: the bundle pins what the node already runs (a baseline from `freeze`):
    /// checked package by package, then retained and made current with nothing changed.
    Adopt,
}

/// What an apply did (or, with `--dry-run`, would do).
#[derive(Debug, serde::Serialize)]
pub struct Applied {
    pub id: BundleId,
    pub name: String,
    pub version: String,
    pub signers: Vec<KeyId>,
    pub dry_run: bool,
    /// `--unless-current`: the node already runs this bundle and none of its packages would
    /// change, so nothing was done (no record, no validation).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unchanged: bool,
    /// `--download-only`: where the release's packages wait for its apply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub staged: Option<PathBuf>,
    /// What was fetched from a mirror, and what was taken from what this node held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transfer: Option<records::Transfer>,
    /// What changed (or would change).
    pub packages: Changes,
    /// Changes whose before-version no retained view holds.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unrestorable: Vec<Change>,
    /// The package manager's own simulation, for `--dry-run`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulation: Option<String>,
    /// The pre-flight verdict: the matrix on what the probe knew before anything changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preflight: Option<crate::validate::Evidence>,
    /// Why the change waits for a reboot (`validate --commit` after it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_reboot: Option<String>,
    #[serde(with = "crate::site::root::as_link")]
    pub previous: Option<BundleId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation: Option<crate::validate::Evidence>,
    pub pruned: Vec<BundleId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<PathBuf>,
    /// Seconds per phase that ended, as the record has them.
    #[serde(skip_serializing_if = "records::PhaseTimes::is_empty")]
    pub phases: records::PhaseTimes,
    pub seconds: f64,
}

/// Where an apply's bundle comes from.
pub enum Arrival<'a> {
    /// A bundle file, its parts, or a stream (`oci://…`): verified whole while it is staged,
    /// and retained whole.
    Bundle(&'a Input),
    /// A mirror's site root (`http(s)://…/`, `file:///…/`): its signed manifest checked
    /// under the node's policy, then only the members under `debs/` and `rpms/`, each checked against it
    /// (`mirror`); the node retains that part.
    Mirror {
        source: &'a str,
        release: &'a crate::site::mirror::Release,
        net: &'a crate::fetch::Net,
        /// The node's `promotion` role: following `current` takes only a signed promotion.
        promotion: Option<&'a crate::trust::DecisionRole>,
    },
}

impl Arrival<'_> {
    fn describe(&self) -> String {
        match self {
            Arrival::Bundle(input) => input.display().to_string(),
            Arrival::Mirror { source, release: crate::site::mirror::Release::Current, .. } => (*source).to_owned(),
            Arrival::Mirror { source, release, .. } => format!("{source} --release {release}"),
        }
    }
}

/// Apply what `arrival` brings on this node, verified under `trust`.
pub fn apply(
    arrival: &Arrival<'_>,
    trust: &Policy,
    root: &Path,
    opts: &Options,
    node: &NodeOptions,
    reporter: &dyn Reporter,
) -> Result<Applied, SiteError> {
    let opened = match arrival {
        Arrival::Bundle(input) => Some(input.open_for_reading(&trust.keys)?),
        Arrival::Mirror { .. } => None,
    };
    let action = if node.mode == Mode::Adopt { records::Action::Adopt } else { records::Action::Apply };
    let mut attempt = Attempt::new(action, Phase::Verify, arrival.describe(), Some(trust));
    attempt.record.role = Some("node".to_owned());
    attempt.record.run_id.clone_from(&opts.run);
    if node.mode == Mode::DryRun {
        // A dry run writes nothing under the root (no skeleton, no record, no state): the root
        // is read under its lock where it exists; the bundle is staged and apt's private
        // configuration made in a directory of its own outside it, removed after.
        let work = tempfile::Builder::new()
            .prefix("airlock-dry-run-")
            .tempdir()
            .map_err(|source| SiteError::Scratch { path: std::env::temp_dir(), source })?;
        std::fs::create_dir(work.path().join("staging")).map_err(io_err(work.path()))?;
        let root = &SiteRoot::read_only(root, work.path());
        let _lock = if root.is_site() { Some(root.lock_for_reading("apply --dry-run", opts.wait)?) } else { None };
        let mut tx = Transaction::reading(root)?;
        return apply_locked(
            arrival,
            opened,
            trust,
            node,
            &mut Trip { tx: &mut tx, opts, reporter, attempt: &mut attempt },
        );
    }
    let root = &SiteRoot::new(root);
    let lock = root.open_for_writing("apply", opts.wait)?;
    let applied = Transaction::writing(root, &lock).and_then(|mut tx| {
        apply_locked(arrival, opened, trust, node, &mut Trip { tx: &mut tx, opts, reporter, attempt: &mut attempt })
    });
    applied.inspect_err(|e| attempt.record_failure(root, e))
}

/// The verified bundle an apply goes on with, and how it arrived.
struct Candidate<'a> {
    verified: &'a crate::site::stage::Verified,
    /// The policy that verified it (a mirror's policy, where it came from one).
    trust: &'a Policy,
    /// Only its packages were fetched (from a mirror), not the whole bundle.
    partial: bool,
    /// It is older than what the node ran, and the site allows the step back.
    downgrade: bool,
}

/// What arrived: the bundle verified into `staging/`, with (from a mirror) the policy that
/// verified it and what was fetched.
struct Arrived {
    staged: Staged,
    fetched: Option<(Policy, records::Transfer)>,
    promotion: Option<crate::site::promotion::Promotion>,
}

/// The bundle verified into `staging/`; `verified` runs on its verified manifest before any
/// package is fetched from a mirror or changed (the pre-flight). `packages`: false for a dry
/// run, which takes only a mirror's indexes.
fn arrive(
    arrival: &Arrival<'_>,
    opened: Option<Opened>,
    trust: &Policy,
    tx: &Transaction<'_>,
    packages: bool,
    reporter: &dyn Reporter,
    verified: &mut dyn FnMut(&VerifiedManifest, &crate::digest::Sha256) -> Result<(), SiteError>,
) -> Result<Arrived, SiteError> {
    let (root, state) = (tx.root(), &tx.state);
    match (arrival, opened) {
        (Arrival::Bundle(input), Some(opened)) => {
            preflight(input, &opened, root, state)?;
            let staged = stage(input.bundle(), opened, trust, root, state, reporter);
            let staged = staged.map_err(|e| name_damaged_part(e, input))?;
            if let Some(split) = input.split() {
                split.check_manifest(&staged.verified.manifest_sha256)?;
            }
            verified(&staged.verified.manifest, &staged.verified.manifest_sha256)?;
            Ok(Arrived { staged, fetched: None, promotion: None })
        }
        (Arrival::Mirror { source, release, net, promotion }, _) => {
            let promotion = promotion.map(|role| (role, state.promotion));
            let kept = crate::site::state::Kept::Packages;
            let from = crate::site::mirror::Fetching { source, release, net, packages, kept, promotion };
            let held = crate::site::mirror::Held::of(root, kept);
            let got = crate::site::mirror::stage_packages(&from, trust, root, &held, reporter, verified)?;
            let promotion = got.promotion.map(|p| p.promotion);
            Ok(Arrived { staged: got.staged, fetched: Some((got.policy, got.transfer)), promotion })
        }
        (Arrival::Bundle(input), None) => {
            Err(SiteError::Open { path: input.bundle().to_owned(), source: std::io::Error::other("not opened") })
        }
    }
}

fn apply_locked(
    arrival: &Arrival<'_>,
    opened: Option<Opened>,
    trust: &Policy,
    node_opts: &NodeOptions,
    trip: &mut Trip<'_, '_>,
) -> Result<Applied, SiteError> {
    let root = trip.tx.root();
    // Fetching ahead changes nothing a pending reboot waits on.
    if let Some(p) = trip.tx.state.pending.as_ref().filter(|_| node_opts.mode != Mode::DownloadOnly) {
        return Err(SiteError::PendingReboot { id: p.id.clone(), name: p.name.clone(), version: p.version.clone() });
    }
    let mut preflight_evidence = None;
    // Adopting records what runs: a baseline's matrix (often the release's, carried over by
    // `freeze`) does not decide whether the node's own stack is recorded.
    let adopting = node_opts.mode == Mode::Adopt;
    let mut before_packages = |m: &VerifiedManifest, sha256: &crate::digest::Sha256| {
        if !adopting {
            preflight_evidence = judge_before(m, sha256, trip.attempt)?;
        }
        Ok(())
    };
    let dry_run = node_opts.mode == Mode::DryRun;
    // A dry run takes only a mirror's indexes, no package.
    let arrived = arrive(arrival, opened, trust, trip.tx, !dry_run, trip.reporter, &mut before_packages)?;
    let Arrived { staged: Staged { dir, verified }, fetched, promotion } = arrived;
    follow(trip.tx, arrival, promotion.as_ref(), dry_run, trip.attempt)?;
    let (partial, transfer) = (fetched.is_some(), fetched.as_ref().map(|(_, t)| *t));
    trip.attempt.record.transfer = transfer;
    let trust = fetched.as_ref().map_or(trust, |(policy, _)| policy);
    trip.opts.tag_version.as_ref().map(|tag| verified.manifest.check_tag(tag)).transpose()?;
    trip.attempt.verified(&verified, &trip.opts.expiry)?;
    trip.attempt.phases.mark(Phase::Plan);
    let id = BundleId::of(&verified.manifest_sha256);
    let downgrade = check_downgrade(root, &trip.tx.state, &verified.manifest, trip.opts.downgrade)?;
    crash_point(CrashPoint::Verified);
    if node_opts.mode == Mode::DownloadOnly {
        let (staged, record) = keep_downloaded(root, dir, &id, trip.attempt)?;
        let mut applied =
            outcome(&verified.manifest, id, verified.signers, Changes::default(), trip.attempt.phases.total());
        (applied.staged, applied.transfer, applied.preflight) = (Some(staged), transfer, preflight_evidence);
        applied.record = Some(record);
        return Ok(applied);
    }
    write_node_views(dir.path(), &verified.manifest, partial, trip.opts)?;
    let node = Node::for_manifest(root.packages_home(), node_opts.lock_timeout, &verified.manifest)?;
    let wanted = packages::carried(&verified.manifest, &node.arch);
    if adopting {
        return adopt(trip, &node, &wanted, dir, &Candidate { verified: &verified, trust, partial, downgrade });
    }
    let views = retained_views(root, &trip.tx.state, None, node.area());
    let plan = node.plan(&dir.path().join(node.area()), &wanted, &views)?;
    tracing::info!("plan: {}", plan.changes.summary());
    let unchanged = node_opts.unless_current
        && plan.changes.is_empty()
        && root.link(crate::site::root::Link::Current).is_some_and(|current| current == id);
    if dry_run || unchanged {
        let mut applied = dry_run_of(&verified.manifest, id, verified.signers, plan, trip.attempt.phases.total());
        (applied.preflight, applied.transfer, applied.unchanged) = (preflight_evidence, transfer, unchanged);
        (applied.dry_run, applied.simulation) = (dry_run, applied.simulation.filter(|_| dry_run));
        return Ok(applied);
    }
    if let Err(changes) = accepts_unrestorable(node_opts, plan) {
        return Err(refused(root, dir, &id, partial, SiteError::Unrestorable { changes }));
    }
    trip.attempt.phases.mark(Phase::Stage);
    remember_retained(&mut trip.tx.state, &verified, &id, trust, trip.opts);
    if let Some(entry) = trip.tx.state.bundles.get_mut(&id) {
        entry.partial = partial;
    }
    trip.tx.save(Step::Remembered)?;
    let retained = retain(dir, &verified, trust, root)?;
    trip.attempt.phases.mark(Phase::Baseline);
    crash_point(CrashPoint::Retained);
    drop_downloaded(root, &retained.id);
    if let Err(e) = measure_baseline(root, &trip.tx.state, &verified.manifest) {
        if !retained.already_present {
            forget(trip.tx, &retained.id, partial);
        }
        return Err(e);
    }
    trip.attempt.phases.mark(Phase::Packages);

    // From here on the host changes. A bundle retained only for this apply does not stay when
    // the apply does not commit: it would raise the anti-downgrade mark (retained manifests
    // count) for a release this node never ran.
    let fresh = !retained.already_present;
    let candidate = Candidate { verified: &verified, trust, partial, downgrade };
    let outcome = change(trip, &node, &candidate, &retained, &wanted, fresh);
    if outcome.is_err() && fresh {
        forget(trip.tx, &retained.id, partial);
    }
    outcome
}

/// Changes whose before-version no retained view holds: refused (returned) unless the node
/// accepts them (`--accept-unrestorable --reason`), then warned about.
fn accepts_unrestorable(node_opts: &NodeOptions, plan: Plan) -> Result<(), Vec<Change>> {
    match (&node_opts.accept_unrestorable, plan.unrestorable.is_empty()) {
        (_, true) => Ok(()),
        (None, false) => Err(plan.unrestorable),
        (Some(reason), false) => {
            tracing::warn!("--accept-unrestorable ({reason}): {}", list(&plan.unrestorable));
            Ok(())
        }
    }
}

/// A node's apply from a mirror on record with what it rested on, and the signed promotion it
/// followed remembered as the highest it accepted (saved at once, a dry run aside).
fn follow(
    tx: &mut Transaction<'_>,
    arrival: &Arrival<'_>,
    promotion: Option<&crate::site::promotion::Promotion>,
    dry_run: bool,
    attempt: &mut Attempt,
) -> Result<(), SiteError> {
    let Arrival::Mirror { release, .. } = arrival else { return Ok(()) };
    attempt.record.decision = Some(followed(promotion, release));
    if let Some(p) = promotion.filter(|p| p.version > tx.state.promotion && !dry_run) {
        tx.state.promotion = p.version;
        tx.save(Step::Promoted)?;
    }
    Ok(())
}

/// What a node's apply from a mirror rested on: the signed promotion it followed, or why none.
fn followed(
    promotion: Option<&crate::site::promotion::Promotion>,
    release: &crate::site::mirror::Release,
) -> records::DecisionUsed {
    let Some(p) = promotion else {
        let unsigned = match release {
            crate::site::mirror::Release::Named(name) => {
                format!("release {name} taken by name (--release), not a promotion")
            }
            crate::site::mirror::Release::Current => {
                "the node's trust root has no promotion role: `current` followed unsigned".to_owned()
            }
        };
        return records::DecisionUsed { unsigned: Some(unsigned), ..records::DecisionUsed::default() };
    };
    records::DecisionUsed {
        promotion: Some(p.version),
        approval: p.approval.as_ref().map(|a| a.sha256),
        run: p.approval.as_ref().map(|a| a.run.clone()),
        approvers: p.approval.as_ref().map(|a| a.approvers.clone()).unwrap_or_default(),
        without_approval: p.without_approval.clone(),
        unsigned: None,
    }
}

/// The views of a staged tree; a node that fetched from a mirror keeps the packages only, so
/// their view only.
fn write_node_views(dir: &Path, manifest: &VerifiedManifest, partial: bool, opts: &Options) -> Result<(), SiteError> {
    if partial {
        write_views(
            dir,
            &crate::site::mirror::kept(manifest, crate::site::state::Kept::Packages),
            opts.apt_key.as_ref(),
        )
    } else {
        write_views(dir, manifest, opts.apt_key.as_ref())
    }
}

/// The views a restore can install from: `area` (`debs/`, `rpms/`) of every bundle this root
/// retains (and of `also`, just retained), the ones `state.json` has a policy for.
pub(in crate::site) fn retained_views(
    root: &SiteRoot,
    state: &State,
    also: Option<&BundleId>,
    area: &str,
) -> Vec<PathBuf> {
    let index = if area == "rpms" { "repodata/repomd.xml" } else { "Packages" };
    root.retained()
        .into_iter()
        .filter(|id| state.bundles.contains_key(id) || Some(id) == also)
        .map(|id| root.bundle_dir(&id).join(area))
        .filter(|d| d.join(index).is_file())
        .collect()
}

fn outcome(m: &VerifiedManifest, id: BundleId, signers: Vec<KeyId>, packages: Changes, seconds: f64) -> Applied {
    Applied {
        id,
        name: m.name.to_string(),
        version: m.version.to_string(),
        signers,
        dry_run: false,
        unchanged: false,
        staged: None,
        transfer: None,
        packages,
        unrestorable: Vec::new(),
        simulation: None,
        preflight: None,
        pending_reboot: None,
        previous: None,
        validation: None,
        pruned: Vec::new(),
        record: None,
        phases: records::PhaseTimes::default(),
        seconds,
    }
}

fn dry_run_of(m: &VerifiedManifest, id: BundleId, signers: Vec<KeyId>, plan: Plan, seconds: f64) -> Applied {
    Applied {
        dry_run: true,
        unrestorable: plan.unrestorable,
        simulation: Some(plan.simulation),
        ..outcome(m, id, signers, plan.changes, seconds)
    }
}
