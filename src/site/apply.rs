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

use super::activate::{activate, prune};
use super::install::{Attempt, check_downgrade, gate, name_damaged_part, preflight, raise_mark, remember_retained};
use super::packages::{self, Change, Changes, Node, Plan};
use super::records;
use super::retain::retain;
use super::root::{BundleId, SiteRoot};
use super::stage::{Staged, stage, write_views};
use super::state::{Pending, State};
use super::transaction::{Step, Transaction};
use super::{Amber, Options, SiteError, crash_point, io_err};
use crate::bundle::manifest::VerifiedManifest;
use crate::bundle::parts::{Input, Opened};
use crate::clock::Timestamp;
use crate::progress::Reporter;
use crate::sign::{KeyId, Policy};

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
    #[serde(with = "super::root::as_link")]
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
        release: &'a super::mirror::Release,
        net: &'a crate::fetch::Net,
        /// The node's `promotion` role: following `current` takes only a signed promotion.
        promotion: Option<&'a crate::trust::DecisionRole>,
    },
}

impl Arrival<'_> {
    fn describe(&self) -> String {
        match self {
            Arrival::Bundle(input) => input.display().to_string(),
            Arrival::Mirror { source, release: super::mirror::Release::Current, .. } => (*source).to_owned(),
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
    let mut attempt = Attempt::new(action, "verify", arrival.describe(), Some(trust));
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
        return apply_locked(arrival, opened, trust, &mut tx, opts, node, reporter, &mut attempt);
    }
    let root = &SiteRoot::new(root);
    let lock = root.open_for_writing("apply", opts.wait)?;
    let applied = Transaction::writing(root, &lock)
        .and_then(|mut tx| apply_locked(arrival, opened, trust, &mut tx, opts, node, reporter, &mut attempt));
    applied.inspect_err(|e| attempt.record_failure(root, e))
}

/// What arrived: the bundle verified into `staging/`, with (from a mirror) the policy that
/// verified it and what was fetched.
struct Arrived {
    staged: Staged,
    fetched: Option<(Policy, records::Transfer)>,
    promotion: Option<super::promotion::Promotion>,
}

/// The bundle verified into `staging/`; `verified` runs on its verified manifest before any
/// package is fetched from a mirror or changed (the pre-flight). `packages`: false for a dry
/// run, which takes only a mirror's indexes.
#[allow(clippy::too_many_arguments, reason = "where the bundle comes from and what runs as it arrives")]
fn arrive(
    arrival: &Arrival<'_>,
    opened: Option<Opened>,
    trust: &Policy,
    root: &SiteRoot,
    state: &State,
    packages: bool,
    reporter: &dyn Reporter,
    verified: &mut dyn FnMut(&VerifiedManifest, &crate::digest::Sha256) -> Result<(), SiteError>,
) -> Result<Arrived, SiteError> {
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
            let kept = super::mirror::Kept::Packages;
            let from = super::mirror::Fetching { source, release, net, packages, kept, promotion };
            let held = super::mirror::Held::of(root, kept);
            let got = super::mirror::stage_packages(&from, trust, root, &held, reporter, verified)?;
            let promotion = got.promotion.map(|p| p.promotion);
            Ok(Arrived { staged: got.staged, fetched: Some((got.policy, got.transfer)), promotion })
        }
        (Arrival::Bundle(input), None) => {
            Err(SiteError::Open { path: input.bundle().to_owned(), source: std::io::Error::other("not opened") })
        }
    }
}

#[allow(clippy::too_many_arguments, reason = "apply's phases, with the attempt they report to")]
fn apply_locked(
    arrival: &Arrival<'_>,
    opened: Option<Opened>,
    trust: &Policy,
    tx: &mut Transaction<'_>,
    opts: &Options,
    node_opts: &NodeOptions,
    reporter: &dyn Reporter,
    attempt: &mut Attempt,
) -> Result<Applied, SiteError> {
    let root = tx.root();
    let state = &mut tx.state;
    // Fetching ahead changes nothing a pending reboot waits on.
    if let Some(p) = state.pending.as_ref().filter(|_| node_opts.mode != Mode::DownloadOnly) {
        return Err(SiteError::PendingReboot { id: p.id.clone(), name: p.name.clone(), version: p.version.clone() });
    }
    let mut preflight_evidence = None;
    // Adopting records what runs: a baseline's matrix (often the release's, carried over by
    // `freeze`) does not decide whether the node's own stack is recorded.
    let adopting = node_opts.mode == Mode::Adopt;
    let mut before_packages = |m: &VerifiedManifest, sha256: &crate::digest::Sha256| {
        if !adopting {
            preflight_evidence = judge_before(m, sha256, attempt)?;
        }
        Ok(())
    };
    let dry_run = node_opts.mode == Mode::DryRun;
    // A dry run takes only a mirror's indexes, no package.
    let arrived = arrive(arrival, opened, trust, root, state, !dry_run, reporter, &mut before_packages)?;
    let Arrived { staged: Staged { dir, verified }, fetched, promotion } = arrived;
    follow(tx, arrival, promotion.as_ref(), dry_run, attempt)?;
    let state = &mut tx.state;
    let (partial, transfer) = (fetched.is_some(), fetched.as_ref().map(|(_, t)| *t));
    attempt.record.transfer = transfer;
    let trust = fetched.as_ref().map_or(trust, |(policy, _)| policy);
    opts.tag_version.as_ref().map(|tag| verified.manifest.check_tag(tag)).transpose()?;
    attempt.verified(&verified, &opts.expiry)?;
    attempt.phases.mark("preflight", "plan");
    let id = BundleId::of(&verified.manifest_sha256);
    let downgrade = check_downgrade(root, state, &verified.manifest, opts.downgrade)?;
    crash_point("verified");
    if node_opts.mode == Mode::DownloadOnly {
        let (staged, record) = keep_downloaded(root, dir, &id, attempt)?;
        let mut applied = outcome(&verified.manifest, id, verified.signers, Changes::default(), attempt.phases.total());
        (applied.staged, applied.transfer, applied.preflight) = (Some(staged), transfer, preflight_evidence);
        applied.record = Some(record);
        return Ok(applied);
    }
    write_node_views(dir.path(), &verified.manifest, partial, opts)?;
    let node = Node::for_manifest(root.packages_home(), node_opts.lock_timeout, &verified.manifest)?;
    let wanted = packages::carried(&verified.manifest, &node.arch);
    if adopting {
        return adopt(tx, &node, &wanted, dir, &verified, trust, partial, downgrade, opts, attempt);
    }
    let views = retained_views(root, state, None, node.area());
    let plan = node.plan(&dir.path().join(node.area()), &wanted, &views)?;
    tracing::info!("plan: {}", plan.changes.summary());
    let unchanged = node_opts.unless_current
        && plan.changes.is_empty()
        && root.link(super::root::Link::Current).is_some_and(|current| current == id);
    if dry_run || unchanged {
        let mut applied = dry_run_of(&verified.manifest, id, verified.signers, plan, attempt.phases.total());
        (applied.preflight, applied.transfer, applied.unchanged) = (preflight_evidence, transfer, unchanged);
        (applied.dry_run, applied.simulation) = (dry_run, applied.simulation.filter(|_| dry_run));
        return Ok(applied);
    }
    if let Err(changes) = accepts_unrestorable(node_opts, plan) {
        return Err(refused(root, dir, &id, partial, SiteError::Unrestorable { changes }));
    }
    attempt.phases.mark("plan", "stage");
    remember_retained(state, &verified, &id, trust, opts);
    if let Some(entry) = state.bundles.get_mut(&id) {
        entry.partial = partial;
    }
    tx.save(Step::Remembered)?;
    let retained = retain(dir, &verified, trust, root)?;
    attempt.phases.mark("stage", "baseline");
    crash_point("retained");
    drop_downloaded(root, &retained.id);
    if let Err(e) = measure_baseline(root, &tx.state, &verified.manifest) {
        if !retained.already_present {
            forget(tx, &retained.id, partial);
        }
        return Err(e);
    }
    attempt.phases.mark("baseline", "packages");

    // From here on the host changes. A bundle retained only for this apply does not stay when
    // the apply does not commit: it would raise the anti-downgrade mark (retained manifests
    // count) for a release this node never ran.
    let fresh = !retained.already_present;
    let outcome = change(tx, &node, &verified, &retained, &wanted, downgrade, fresh, opts, attempt);
    if outcome.is_err() && fresh {
        forget(tx, &retained.id, partial);
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
    promotion: Option<&super::promotion::Promotion>,
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
    promotion: Option<&super::promotion::Promotion>,
    release: &super::mirror::Release,
) -> records::DecisionUsed {
    let Some(p) = promotion else {
        let unsigned = match release {
            super::mirror::Release::Named(name) => format!("release {name} taken by name (--release), not a promotion"),
            super::mirror::Release::Current => {
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

/// `--adopt`: every package the baseline pins is installed at exactly its version (else exit 3
/// naming each difference, nothing written but the refusal's record), then the baseline is
/// retained and made current as an apply would, with no package changed and no gate: the node's
/// stack is what it is; from now on a release's changes to those packages can be put back from
/// the baseline's view.
#[allow(clippy::too_many_arguments, reason = "apply's state, handed over at the point adopt diverges")]
fn adopt(
    tx: &mut Transaction<'_>,
    node: &Node,
    wanted: &[packages::Wanted],
    dir: tempfile::TempDir,
    verified: &super::stage::Verified,
    trust: &Policy,
    partial: bool,
    downgrade: bool,
    opts: &Options,
    attempt: &mut Attempt,
) -> Result<Applied, SiteError> {
    let installed = node.installed()?;
    let differences: Vec<Change> = wanted
        .iter()
        .filter(|w| installed.get(&w.name) != w.version.as_ref())
        .map(|w| Change { name: w.name.clone(), before: installed.get(&w.name).cloned(), after: w.version.clone() })
        .collect();
    let (newer, differences) =
        patched_dependencies(node, &dir.path().join(node.area()), &verified.manifest, differences)?;
    if !differences.is_empty() {
        return Err(SiteError::NotAdoptable { differences });
    }
    for c in &newer {
        let (pinned, running) = (c.after.as_deref().unwrap_or("?"), c.before.as_deref().unwrap_or("?"));
        tracing::info!(
            "adopt: {} {running} is newer than the baseline's {pinned}; the stack's dependencies on it are met",
            c.name
        );
    }
    attempt.record.newer_than_baseline =
        newer.into_iter().map(|c| Change { name: c.name, before: c.after, after: c.before }).collect();
    // Installed at the version is not enough: a package dpkg left half-configured is not a
    // stack to record as this node's own.
    let unsettled: Vec<(String, String)> =
        node.unsettled()?.into_iter().filter(|(name, _)| wanted.iter().any(|w| &w.name == name)).collect();
    if !unsettled.is_empty() {
        return Err(SiteError::Unsettled { packages: unsettled });
    }
    tracing::info!("adopt: the {} package(s) the baseline pins are installed at its versions", wanted.len());
    attempt.phases.mark("plan", "stage");
    let id = BundleId::of(&verified.manifest_sha256);
    remember_retained(&mut tx.state, verified, &id, trust, opts);
    if let Some(entry) = tx.state.bundles.get_mut(&id) {
        entry.partial = partial;
    }
    tx.save(Step::Remembered)?;
    let root = tx.root();
    let retained = retain(dir, verified, trust, root)?;
    drop_downloaded(root, &retained.id);
    attempt.phases.mark("stage", "validate");
    let m = &verified.manifest;
    let commit = Commit { id: &retained.id, manifest: m, changes: &[], downgrade, keep: opts.keep };
    let (previous, pruned, record) = commit.run(tx, None, &opts.amber, attempt)?;
    Ok(Applied {
        previous,
        pruned,
        record: Some(record),
        phases: attempt.phases.times(),
        ..outcome(m, retained.id.clone(), verified.signers.clone(), Changes::default(), attempt.phases.total())
    })
}

/// Of the differences between a baseline and the node (`before`: the node's, `after`: the
/// baseline's), those a distribution's update explains: a pinned dependency of the stack
/// (`[[deb]] dependencies`, carried with what requires it) that the node runs newer, where
/// every carried package's dependency on it is still met. Returns them, and the rest.
fn patched_dependencies(
    node: &Node,
    view: &Path,
    manifest: &VerifiedManifest,
    differences: Vec<Change>,
) -> Result<(Vec<Change>, Vec<Change>), SiteError> {
    let mut newer = Vec::new();
    let mut rest = Vec::new();
    // The carried packages each pinned dependency serves, looked up once for every difference.
    let dependents: std::collections::HashMap<&str, &Vec<String>> = manifest
        .artifacts
        .iter()
        .filter_map(|a| match a {
            crate::bundle::manifest::Artifact::Deb(d) if !d.required_by.is_empty() => {
                Some((d.name.as_str(), &d.required_by))
            }
            _ => None,
        })
        .collect();
    for c in differences {
        let parents = dependents.get(c.name.as_str()).map(|p| (*p).clone());
        let ahead = match (&c.before, &c.after, &parents) {
            (Some(running), Some(pinned), Some(_)) => packages::newer(running, pinned),
            _ => false,
        };
        match (ahead, parents) {
            (true, Some(parents)) => {
                let running = c.before.as_deref().unwrap_or_default();
                let unmet = node.unmet(view, &parents, &c.name, running)?;
                if unmet.is_empty() {
                    newer.push(c);
                } else {
                    tracing::warn!("adopt: {} {running} does not meet {}", c.name, unmet.join("; "));
                    rest.push(c);
                }
            }
            _ => rest.push(c),
        }
    }
    Ok((newer, rest))
}

/// The pre-flight (the guide's "intersect"): the verified manifest's matrix judged on what the
/// probe already knows, before any package is fetched or changed. Red refuses (exit 4) with
/// nothing downloaded and nothing changed, on record; amber goes on (the gate after the change
/// decides, where `--accept-amber` counts).
fn judge_before(
    manifest: &VerifiedManifest,
    sha256: &crate::digest::Sha256,
    attempt: &mut Attempt,
) -> Result<Option<crate::validate::Evidence>, SiteError> {
    use crate::validate::matrix::Verdict;
    attempt.phases.mark("verify", "preflight");
    // What a refusal here is about: the verified manifest names it.
    let file = attempt.record.bundle.take().and_then(|b| b.file);
    attempt.record.bundle = Some(records::RecordBundle {
        id: Some(BundleId::of(sha256)),
        name: Some(manifest.name.to_string()),
        version: Some(manifest.version.to_string()),
        manifest_sha256: Some(*sha256),
        file,
        ..records::RecordBundle::default()
    });
    let host = crate::validate::probe::HostRoot::from_env();
    let Some(evidence) = crate::validate::preflight(manifest, &host) else { return Ok(None) };
    tracing::info!("{}", crate::escape::value(&evidence.summary));
    attempt.record.preflight = Some(records::Validation::Evidence(Box::new(evidence.clone())));
    if evidence.verdict == Verdict::Red {
        let word = "pre-flight red: ";
        let summary =
            crate::escape::value(evidence.summary.strip_prefix(word).unwrap_or(&evidence.summary)).into_owned();
        return Err(SiteError::Validation {
            verdict: Verdict::Red,
            summary,
            hint: "; found before anything was fetched or changed (pre-flight): this host can never meet the bundle's \
                   matrix, so no package was touched",
        });
    }
    Ok(Some(evidence))
}

/// The packages, the gate, and the commit or the wait for a reboot.
#[allow(clippy::too_many_arguments, reason = "the phases after the bundle is retained, with what they share")]
fn change(
    tx: &mut Transaction<'_>,
    node: &Node,
    verified: &super::stage::Verified,
    retained: &super::retain::Retained,
    wanted: &[packages::Wanted],
    downgrade: bool,
    fresh: bool,
    opts: &Options,
    attempt: &mut Attempt,
) -> Result<Applied, SiteError> {
    let reboot_before = reboot_needed();
    let root = tx.root();
    let views = retained_views(root, &tx.state, Some(&retained.id), node.area());
    let changes = match node.apply(&[retained.path.join(node.area())], wanted, &views) {
        Ok(changes) => changes,
        Err(failed) => return Err(failed_change(failed, attempt)),
    };
    attempt.record.packages = Some(Changes::of(&changes));
    if let Some(entry) = tx.state.bundles.get_mut(&retained.id) {
        entry.applied.clone_from(&changes);
    }
    attempt.phases.mark("packages", "validate");
    let m = &verified.manifest;
    if let Some(reason) = reboot_needed().filter(|_| reboot_before.is_none()) {
        let pending = Pending {
            id: retained.id.clone(),
            name: m.name.to_string(),
            version: m.version.clone(),
            since: Timestamp::now(),
            reason: reason.clone(),
            changes: changes.clone(),
            retained_here: fresh,
            keep: opts.keep,
            downgrade,
            accept_amber: match &opts.amber {
                Amber::Accept(a) => Some(a.clone()),
                Amber::Refuse => None,
            },
        };
        let record = wait_for_reboot(tx, pending, attempt)?;
        return Ok(Applied {
            pending_reboot: Some(reason),
            record: Some(record),
            phases: attempt.phases.times(),
            ..outcome(m, retained.id.clone(), verified.signers.clone(), Changes::of(&changes), attempt.phases.total())
        });
    }
    let validation = judge(root, &tx.state, node, &changes, &views, m, &opts.amber, attempt)?;
    let commit = Commit { id: &retained.id, manifest: m, changes: &changes, downgrade, keep: opts.keep };
    let (previous, pruned, record) = commit.run(tx, validation.as_ref(), &opts.amber, attempt)?;
    Ok(Applied {
        previous,
        validation,
        pruned,
        record: Some(record),
        phases: attempt.phases.times(),
        ..outcome(m, retained.id.clone(), verified.signers.clone(), Changes::of(&changes), attempt.phases.total())
    })
}

/// The current stack's metrics, measured before the packages change, the same checks the
/// candidate will run: kept as `ROOT/baseline.json` (a `validate --commit` after a reboot reads
/// it too). Nothing when no check declares a metric.
fn measure_baseline(root: &SiteRoot, state: &State, manifest: &VerifiedManifest) -> Result<(), SiteError> {
    let checks = &manifest.validation.check;
    if checks.iter().all(|c| c.metric.is_empty()) {
        return Ok(());
    }
    let under = root
        .link(super::root::Link::Current)
        .and_then(|c| state.bundles.get(&c))
        .map(|b| format!("{} {}", b.name, b.version));
    tracing::info!("baseline: the checks' metrics on the current stack, before the change");
    super::save_baseline(root.path(), &crate::validate::checks::baseline(checks, under))
}

/// `--download-only`: the verified part moved to `downloads/ID` (replacing an older copy; other
/// releases fetched ahead are dropped: a node waits for one), synced, and on record as staged.
fn keep_downloaded(
    root: &SiteRoot,
    dir: tempfile::TempDir,
    id: &BundleId,
    attempt: &mut Attempt,
) -> Result<(PathBuf, PathBuf), SiteError> {
    super::stage::sync_tree(dir.path()).map_err(io_err(dir.path()))?;
    let kept = dir.keep();
    let target = into_downloads(root, &kept, id, Replacing::Every).inspect_err(|_| {
        let _ = std::fs::remove_dir_all(&kept);
    })?;
    let r = &mut attempt.record;
    r.outcome = Some(records::Outcome::Staged);
    r.phases = attempt.phases.times();
    r.seconds = Some(attempt.phases.total());
    r.at = Timestamp::now();
    let record = records::write(root, r)?;
    tracing::info!("staged: {} waits for the apply of its release", target.display());
    Ok((target, record))
}

/// What a tree moved into `downloads/` replaces: every release fetched ahead (one fetched
/// ahead now takes their place), or only an older copy of the same release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Replacing {
    Every,
    Same,
}

/// `from`, a synced tree, renamed to `downloads/ID`; what it replaces goes aside into `staging/`
/// first (the next writer cleans what is left there) and is removed after. Returns `downloads/ID`.
fn into_downloads(root: &SiteRoot, from: &Path, id: &BundleId, replacing: Replacing) -> Result<PathBuf, SiteError> {
    let downloads = root.downloads();
    std::fs::create_dir_all(&downloads).map_err(io_err(&downloads))?;
    let target = downloads.join(id.as_str());
    let mut aside = Vec::new();
    for old in std::fs::read_dir(&downloads).map_err(io_err(&downloads))? {
        let old = old.map_err(io_err(&downloads))?.path();
        if replacing == Replacing::Every || old == target {
            let name = old.file_name().unwrap_or_default().to_string_lossy().into_owned();
            let to = root.staging().join(format!("dropped-{name}"));
            let _ = std::fs::remove_dir_all(&to);
            std::fs::rename(&old, &to).map_err(io_err(&old))?;
            aside.push(to);
        }
    }
    std::fs::rename(from, &target).map_err(io_err(&target))?;
    if let Some(parent) = from.parent() {
        root.commit_dir(parent)?;
    }
    root.commit_dir(&downloads)?;
    for dir in aside {
        let _ = std::fs::remove_dir_all(dir);
    }
    Ok(target)
}

/// Once a release is retained, its copy fetched ahead is not needed any more.
fn drop_downloaded(root: &SiteRoot, id: &BundleId) {
    let dir = root.downloads().join(id.as_str());
    if dir.exists()
        && let Err(e) = std::fs::remove_dir_all(&dir)
    {
        tracing::warn!("`{}` could not be removed: {e}", dir.display());
    }
}

/// A bundle retained for an apply that did not commit leaves `bundles/` (with its policy in
/// `state.json`; a failure here is warned about, the apply's own error is the one reported); what a node fetched
/// from a mirror (`fetched`) stays under `downloads/ID` as a release fetched ahead would, so
/// the next apply of it fetches nothing again (it verifies what it takes from there).
fn forget(tx: &mut Transaction<'_>, id: &BundleId, fetched: bool) {
    let root = tx.root();
    let held = fetched && hold_fetched(root, id).inspect_err(|e| tracing::warn!("{e}")).is_ok();
    let removed = if held {
        tx.state.bundles.remove(id);
        Ok(())
    } else {
        super::activate::discard(root, &mut tx.state, id)
    };
    match removed.and_then(|()| tx.save(Step::Forgotten)) {
        Ok(()) if held => tracing::info!("bundles/{id} was retained for this apply only: kept as downloads/{id}"),
        Ok(()) => tracing::info!("bundles/{id} was retained for this apply only: removed"),
        Err(e) => tracing::warn!("bundles/{id} was retained for this apply only and could not be removed: {e}"),
    }
}

/// A refusal before anything changed: what was fetched from a mirror waits for the next try.
fn refused(root: &SiteRoot, dir: tempfile::TempDir, id: &BundleId, fetched: bool, e: SiteError) -> SiteError {
    if fetched {
        hold_staged(root, dir, id);
    }
    e
}

/// A staged tree fetched from a mirror kept as `downloads/ID` for the next apply of it (warned
/// about when it cannot be: the refusal is what the apply reports).
fn hold_staged(root: &SiteRoot, dir: tempfile::TempDir, id: &BundleId) {
    let held = super::stage::sync_tree(dir.path()).map_err(io_err(dir.path())).and_then(|()| {
        let kept = dir.keep();
        into_downloads(root, &kept, id, Replacing::Same).inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&kept);
        })
    });
    match held {
        Ok(_) => tracing::info!("what was fetched is kept as downloads/{id} for the next apply of it"),
        Err(e) => tracing::warn!("what was fetched could not be kept for the next apply: {e}"),
    }
}

/// `bundles/ID` moved to `downloads/ID` (replacing an older copy of the same release).
fn hold_fetched(root: &SiteRoot, id: &BundleId) -> Result<(), SiteError> {
    into_downloads(root, &root.bundle_dir(id), id, Replacing::Same).map(drop)
}

/// The views of a staged tree; a node that fetched from a mirror keeps the packages only, so
/// their view only.
fn write_node_views(dir: &Path, manifest: &VerifiedManifest, partial: bool, opts: &Options) -> Result<(), SiteError> {
    if partial {
        write_views(dir, &super::mirror::kept(manifest, super::mirror::Kept::Packages), opts.apt_key.as_ref())
    } else {
        write_views(dir, manifest, opts.apt_key.as_ref())
    }
}

/// The node waits for a reboot: the pending apply saved (nothing is committed; another apply
/// is refused until `validate --commit`), and on record.
fn wait_for_reboot(tx: &mut Transaction<'_>, pending: Pending, attempt: &mut Attempt) -> Result<PathBuf, SiteError> {
    let reason = pending.reason.clone();
    tx.state.pending = Some(pending);
    tx.save(Step::Pending)?;
    let root = tx.root();
    let r = &mut attempt.record;
    r.outcome = Some(records::Outcome::PendingReboot);
    r.reason = Some(reason);
    r.phases = attempt.phases.times();
    r.seconds = Some(attempt.phases.total());
    records::write(root, r)
}

/// The gate on the stack now installed. Anything but green (or accepted amber) puts the
/// packages back (its own timed phase, `restore`), validates the restored host against the
/// bundle it went back to, and puts both on the record before the verdict's error is
/// returned; `failed_in` names the step that failed (`validate`, or `metrics` when only the
/// checks' metrics missed).
#[allow(clippy::too_many_arguments, reason = "the gate, what it restores, and where the record goes")]
pub(super) fn judge(
    root: &SiteRoot,
    state: &State,
    node: &Node,
    changes: &[Change],
    views: &[PathBuf],
    manifest: &VerifiedManifest,
    amber: &Amber,
    attempt: &mut Attempt,
) -> Result<Option<crate::validate::Evidence>, SiteError> {
    // The current side: what `apply` measured before it changed packages, or what `airlock
    // validate --baseline` kept.
    let baseline = super::load_baseline(node.root());
    match gate(manifest, amber, &mut attempt.record, baseline.as_ref()) {
        Ok(v) => Ok(v),
        Err(verdict @ SiteError::Validation { .. }) => {
            attempt.failed_in = Some(failed_step(attempt.record.validation.as_ref()));
            attempt.phases.mark("validate", "restore");
            tracing::warn!("{verdict}; putting the host's packages back");
            let restored = node.restore(changes, views);
            attempt.phases.mark("restore", "record");
            let restored = match restored {
                Ok(restored) => restored,
                Err(source) => return Err(restore_failed(node, changes, source, attempt)),
            };
            attempt.record.restored = Some(Changes::of(&restored));
            attempt.record.restored_validation = Some(validate_restored(root, state, baseline.as_ref()));
            Err(verdict)
        }
        Err(e) => Err(e),
    }
}

/// `metrics` when the matrix held and only a check's metric missed its threshold, else
/// `validate`.
fn failed_step(validation: Option<&records::Validation>) -> &'static str {
    use crate::validate::matrix::Verdict;
    let Some(e) = validation.and_then(records::Validation::evidence) else { return "validate" };
    let matrix_held = e.rows.iter().all(|r| r.verdict != Verdict::Red);
    let red_checks: Vec<_> = e.checks.iter().filter(|c| c.verdict == Verdict::Red).collect();
    let only_metrics = !red_checks.is_empty()
        && red_checks.iter().all(|c| c.exit_code == Some(0) && c.metrics.iter().any(|m| m.decision != "pass"));
    if matrix_held && only_metrics { "metrics" } else { "validate" }
}

/// The restored host judged against the bundle it went back to (the one still current: its
/// matrix and its checks), verified again first; skipped when nothing was current.
fn validate_restored(
    root: &SiteRoot,
    state: &State,
    baseline: Option<&crate::validate::metrics::Baseline>,
) -> records::Validation {
    let skipped =
        |reason: String| records::Validation::Skipped { verdict: records::ValidationVerdict::Skipped, reason };
    let Some(current) = root.link(super::root::Link::Current) else {
        return skipped("nothing was current before: the host went back to packages no bundle describes".into());
    };
    let back_to = match super::check::verified(root, state, &current, &crate::progress::Silent) {
        Ok((m, _)) => m,
        Err(e) => return skipped(format!("bundles/{current}, the bundle the host went back to, does not verify: {e}")),
    };
    let host = crate::validate::probe::HostRoot::from_env();
    match crate::validate::validate(&back_to.validation, &host, baseline, &crate::validate::scope_of(&back_to)) {
        Some(e) => records::Validation::Evidence(Box::new(e)),
        None => records::Validation::skipped(),
    }
}

/// A restore that failed: red on the record, with what is left installed of the change.
fn restore_failed(node: &Node, changes: &[Change], source: packages::PackageError, attempt: &mut Attempt) -> SiteError {
    let left: Vec<String> = match node.installed() {
        Ok(now) => changes
            .iter()
            .filter(|c| c.after.as_ref().is_some_and(|after| now.get(&c.name) == Some(after)))
            .map(ToString::to_string)
            .collect(),
        Err(e) => vec![format!("(what is installed cannot be read: {e})")],
    };
    let left =
        if left.is_empty() { "none of the change, as far as the package manager says".into() } else { left.join(", ") };
    attempt.record.restored_validation = Some(records::Validation::Skipped {
        verdict: records::ValidationVerdict::Red,
        reason: format!("the restore failed ({source}); still installed from the change: {left}"),
    });
    SiteError::Packages { source, restore: None }
}

/// A green (or accepted) apply made final: the mark raised, `current` switched, older bundles
/// pruned, history and the record written.
pub(super) struct Commit<'a> {
    pub id: &'a BundleId,
    pub manifest: &'a VerifiedManifest,
    pub changes: &'a [Change],
    pub downgrade: bool,
    pub keep: usize,
}

impl Commit<'_> {
    pub(super) fn run(
        &self,
        tx: &mut Transaction<'_>,
        validation: Option<&crate::validate::Evidence>,
        amber: &Amber,
        attempt: &mut Attempt,
    ) -> Result<(Option<BundleId>, Vec<BundleId>, PathBuf), SiteError> {
        attempt.phases.mark("validate", "switch");
        let root = tx.root();
        raise_mark(&mut tx.state, self.manifest);
        if let Some(entry) = tx.state.bundles.get_mut(self.id) {
            entry.applied = self.changes.to_vec();
        }
        tx.state.pending = None;
        tx.save(Step::Committing)?;
        let previous = activate(root, self.id)?;
        crash_point("activated");
        let pruned = prune(root, &mut tx.state, self.keep.max(2))?;
        attempt.phases.mark("switch", "record");
        let event = super::state::Event {
            action: attempt.record.action.as_str().to_owned(),
            id: self.id.clone(),
            name: self.manifest.name.to_string(),
            version: self.manifest.version.clone(),
            at: Timestamp::now(),
            seconds: attempt.phases.total(),
        };
        tx.state.history.push(event.clone());
        tx.save(Step::Saved)?;
        let verdict = validation.map(|e| e.verdict);
        let r = attempt.activated(&event, previous.as_ref(), &[]);
        r.verdict = Some(records::Verdicts {
            verified: true,
            downgrade: Some(self.downgrade),
            validation: Some(verdict.into()),
        });
        r.accept(amber, verdict);
        r.packages = Some(Changes::of(self.changes));
        r.pruned.clone_from(&pruned);
        let record = records::write(root, r)?;
        Ok((previous, pruned, record))
    }
}

/// The views a restore can install from: `area` (`debs/`, `rpms/`) of every bundle this root
/// retains (and of `also`, just retained), the ones `state.json` has a policy for.
pub(super) fn retained_views(root: &SiteRoot, state: &State, also: Option<&BundleId>, area: &str) -> Vec<PathBuf> {
    let index = if area == "rpms" { "repodata/repomd.xml" } else { "Packages" };
    root.retained()
        .into_iter()
        .filter(|id| state.bundles.contains_key(id) || Some(id) == also)
        .map(|id| root.bundle_dir(&id).join(area))
        .filter(|d| d.join(index).is_file())
        .collect()
}

/// Why the change just made needs a reboot, if it does: `/var/run/reboot-required` (what
/// Debian's and Ubuntu's packages write), or an amdgpu module installed for the running kernel
/// that is not the one loaded.
pub(super) fn reboot_needed() -> Option<String> {
    if Path::new("/var/run/reboot-required").exists() {
        let pkgs = std::fs::read_to_string("/var/run/reboot-required.pkgs").unwrap_or_default();
        let pkgs: Vec<&str> = pkgs.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        let by = if pkgs.is_empty() { String::new() } else { format!(" (by {})", pkgs.join(", ")) };
        return Some(format!("/var/run/reboot-required is present{by}"));
    }
    let loaded = std::fs::read_to_string("/sys/module/amdgpu/version").ok()?;
    let loaded = loaded.trim();
    let modinfo = std::process::Command::new("modinfo").args(["-F", "version", "amdgpu"]).output().ok()?;
    let installed = String::from_utf8_lossy(&modinfo.stdout).trim().to_owned();
    if installed.is_empty() || installed == loaded {
        return None;
    }
    Some(format!("the amdgpu module installed is {installed}, the loaded one is {loaded}"))
}

/// A change that failed, on the record with what putting the host back did.
pub(super) fn failed_change(failed: packages::Failed, attempt: &mut Attempt) -> SiteError {
    let restore = match failed.restored {
        Ok(restored) => {
            attempt.record.restored = Some(Changes::of(&restored));
            None
        }
        Err(e) => Some(Box::new(e)),
    };
    SiteError::Packages { source: failed.error, restore }
}

fn list(changes: &[Change]) -> String {
    changes.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
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

/// What `validate --commit` did with a pending apply.
#[derive(Debug, serde::Serialize)]
pub struct Committed {
    pub id: BundleId,
    pub name: String,
    pub version: String,
    pub verdict: records::ValidationVerdict,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation: Option<crate::validate::Evidence>,
    pub packages: Changes,
    #[serde(with = "super::root::as_link")]
    pub previous: Option<BundleId>,
    pub record: PathBuf,
    pub seconds: f64,
}

/// After the reboot a pending apply waited for: its bundle verified again, the stack now
/// running judged; green (or amber accepted at apply) commits, anything else restores the
/// host's packages (exit 4), as an apply without a reboot would have.
pub fn commit_pending(root: &Path, writer: &super::Writer, reporter: &dyn Reporter) -> Result<Committed, SiteError> {
    let root = &SiteRoot::new(root);
    if !root.is_site() {
        return Err(SiteError::NotASite { root: root.path().to_owned() });
    }
    let lock = root.open_for_writing("validate --commit", writer.wait)?;
    let mut tx = Transaction::writing(root, &lock)?;
    let pending = tx.state.pending.clone().ok_or_else(|| SiteError::NotPending { root: root.path().to_owned() })?;
    let file = root.retained_file(&pending.id).display().to_string();
    let mut attempt = Attempt::new(records::Action::Apply, "verify", file, None);
    attempt.record.role = Some("node".to_owned());
    attempt.record.run_id.clone_from(&writer.run);
    attempt.record.packages = Some(Changes::of(&pending.changes));
    let committed = commit_locked(&mut tx, &pending, reporter, &mut attempt);
    committed.inspect_err(|e| attempt.record_failure(root, e))
}

fn commit_locked(
    tx: &mut Transaction<'_>,
    pending: &Pending,
    reporter: &dyn Reporter,
    attempt: &mut Attempt,
) -> Result<Committed, SiteError> {
    let root = tx.root();
    if let Some(reason) = reboot_needed() {
        return Err(SiteError::StillPending { reason });
    }
    let (manifest, checked) = super::check::verified(root, &tx.state, &pending.id, reporter)?;
    attempt.record.bundle = Some(records::RecordBundle {
        id: Some(pending.id.clone()),
        name: Some(manifest.name.to_string()),
        version: Some(manifest.version.to_string()),
        ..records::RecordBundle::default()
    });
    attempt.record.signers.clone_from(&checked.signers);
    attempt.phases.mark("verify", "validate");
    let node = Node::for_manifest(root.path(), packages::DEFAULT_LOCK_TIMEOUT, &manifest)?;
    let views = retained_views(root, &tx.state, None, node.area());
    let amber = pending.accept_amber.clone().map_or(Amber::Refuse, Amber::Accept);
    let validation = match judge(root, &tx.state, &node, &pending.changes, &views, &manifest, &amber, attempt) {
        Ok(v) => v,
        Err(e) => {
            // Restored: nothing waits any more, and a bundle retained for that apply goes.
            tx.state.pending = None;
            tx.save(Step::Restored)?;
            if pending.retained_here {
                let fetched = tx.state.bundles.get(&pending.id).is_some_and(|b| b.partial);
                forget(tx, &pending.id, fetched);
            }
            return Err(e);
        }
    };
    let commit = Commit {
        id: &pending.id,
        manifest: &manifest,
        changes: &pending.changes,
        downgrade: pending.downgrade,
        keep: pending.keep,
    };
    let (previous, _, record) = commit.run(tx, validation.as_ref(), &amber, attempt)?;
    Ok(Committed {
        id: pending.id.clone(),
        name: manifest.name.to_string(),
        version: manifest.version.to_string(),
        verdict: validation.as_ref().map(|e| e.verdict).into(),
        validation,
        packages: Changes::of(&pending.changes),
        previous,
        record,
        seconds: attempt.phases.total(),
    })
}
