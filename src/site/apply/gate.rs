//! Around the change: the stack judged before anything changes (pre-flight) and after (the
//! gate), the packages changed, a reboot waited for (and `validate --commit` after it), and a
//! red change put back and judged again.

use std::path::{Path, PathBuf};

use super::commit::Commit;
use super::downloads::forget;
use super::{Applied, Candidate, outcome, retained_views};
use crate::bundle::manifest::VerifiedManifest;
use crate::clock::Timestamp;
use crate::progress::Reporter;
use crate::site::install::{Attempt, Trip, gate};
use crate::site::packages::{Change, Changes, Node};
use crate::site::records::Phase;
use crate::site::root::{BundleId, SiteRoot};
use crate::site::state::{Pending, State};
use crate::site::transaction::{Step, Transaction};
use crate::site::{Amber, SiteError, packages, records};

/// The pre-flight (the guide's "intersect"): the verified manifest's matrix judged on what the
/// probe already knows, before any package is fetched or changed. Red refuses (exit 4) with
/// nothing downloaded and nothing changed, on record; amber goes on (the gate after the change
/// decides, where `--accept-amber` counts).
pub(super) fn judge_before(
    manifest: &VerifiedManifest,
    sha256: &crate::digest::Sha256,
    attempt: &mut Attempt,
) -> Result<Option<crate::validate::Evidence>, SiteError> {
    use crate::validate::matrix::Verdict;
    attempt.phases.mark(Phase::Preflight);
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
pub(super) fn change(
    trip: &mut Trip<'_, '_>,
    node: &Node,
    candidate: &Candidate<'_>,
    retained: &crate::site::retain::Retained,
    wanted: &[packages::Wanted],
    fresh: bool,
) -> Result<Applied, SiteError> {
    let (verified, downgrade) = (candidate.verified, candidate.downgrade);
    let reboot_before = reboot_needed();
    let root = trip.tx.root();
    let views = retained_views(root, &trip.tx.state, Some(&retained.id), node.area());
    let changes = match node.apply(&[retained.path.join(node.area())], wanted, &views) {
        Ok(changes) => changes,
        Err(failed) => return Err(failed_change(failed, trip.attempt)),
    };
    trip.attempt.record.packages = Some(Changes::of(&changes));
    if let Some(entry) = trip.tx.state.bundles.get_mut(&retained.id) {
        entry.applied.clone_from(&changes);
    }
    trip.attempt.phases.mark(Phase::Validate);
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
            keep: trip.opts.keep,
            downgrade,
            accept_amber: match &trip.opts.amber {
                Amber::Accept(a) => Some(a.clone()),
                Amber::Refuse => None,
            },
        };
        let record = wait_for_reboot(trip.tx, pending, trip.attempt)?;
        return Ok(Applied {
            pending_reboot: Some(reason),
            record: Some(record),
            phases: trip.attempt.phases.times(),
            ..outcome(
                m,
                retained.id.clone(),
                verified.signers.clone(),
                Changes::of(&changes),
                trip.attempt.phases.total(),
            )
        });
    }
    let validation = judge(
        root,
        &trip.tx.state,
        &Undo { node, changes: &changes, views: &views },
        m,
        &trip.opts.amber,
        trip.attempt,
    )?;
    let commit = Commit { id: &retained.id, manifest: m, changes: &changes, downgrade, keep: trip.opts.keep };
    let (previous, pruned, record) = commit.run(trip.tx, validation.as_ref(), &trip.opts.amber, trip.attempt)?;
    Ok(Applied {
        previous,
        validation,
        pruned,
        record: Some(record),
        phases: trip.attempt.phases.times(),
        ..outcome(m, retained.id.clone(), verified.signers.clone(), Changes::of(&changes), trip.attempt.phases.total())
    })
}

/// The current stack's metrics, measured before the packages change, the same checks the
/// candidate will run: kept as `ROOT/baseline.json` (a `validate --commit` after a reboot reads
/// it too). Nothing when no check declares a metric.
pub(super) fn measure_baseline(root: &SiteRoot, state: &State, manifest: &VerifiedManifest) -> Result<(), SiteError> {
    let checks = &manifest.validation.check;
    if checks.iter().all(|c| c.metric.is_empty()) {
        return Ok(());
    }
    let under = root
        .link(crate::site::root::Link::Current)
        .and_then(|c| state.bundles.get(&c))
        .map(|b| format!("{} {}", b.name, b.version));
    tracing::info!("baseline: the checks' metrics on the current stack, before the change");
    crate::site::save_baseline(root.path(), &crate::validate::checks::baseline(checks, under))
}

/// The node waits for a reboot: the pending apply saved (nothing is committed; another apply
/// is refused until `validate --commit`), and on record.
pub(super) fn wait_for_reboot(
    tx: &mut Transaction<'_>,
    pending: Pending,
    attempt: &mut Attempt,
) -> Result<PathBuf, SiteError> {
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

/// What a gate that is not passed puts back: the packages `changes` changed on `node`, from
/// the retained `views`.
#[derive(Clone, Copy)]
pub(in crate::site) struct Undo<'a> {
    pub node: &'a Node,
    pub changes: &'a [Change],
    pub views: &'a [PathBuf],
}

/// The gate on the stack now installed. Anything but green (or accepted amber) puts the
/// packages back (its own timed phase, `restore`), validates the restored host against the
/// bundle it went back to, and puts both on the record before the verdict's error is
/// returned; `failed_in` names the step that failed (`validate`, or `metrics` when only the
/// checks' metrics missed).
pub(in crate::site) fn judge(
    root: &SiteRoot,
    state: &State,
    undo: &Undo<'_>,
    manifest: &VerifiedManifest,
    amber: &Amber,
    attempt: &mut Attempt,
) -> Result<Option<crate::validate::Evidence>, SiteError> {
    let Undo { node, changes, views } = *undo;
    // The current side: what `apply` measured before it changed packages, or what `airlock
    // validate --baseline` kept.
    let baseline = crate::site::load_baseline(node.root());
    match gate(manifest, amber, &mut attempt.record, baseline.as_ref()) {
        Ok(v) => Ok(v),
        Err(verdict @ SiteError::Validation { .. }) => {
            attempt.failed_in = Some(failed_step(attempt.record.validation.as_ref()));
            attempt.phases.mark(Phase::Restore);
            tracing::warn!("{verdict}; putting the host's packages back");
            let restored = node.restore(changes, views);
            attempt.phases.mark(Phase::Record);
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
pub(super) fn failed_step(validation: Option<&records::Validation>) -> Phase {
    use crate::validate::matrix::Verdict;
    let Some(e) = validation.and_then(records::Validation::evidence) else { return Phase::Validate };
    let matrix_held = e.rows.iter().all(|r| r.verdict != Verdict::Red);
    let red_checks: Vec<_> = e.checks.iter().filter(|c| c.verdict == Verdict::Red).collect();
    let only_metrics = !red_checks.is_empty()
        && red_checks.iter().all(|c| c.exit_code == Some(0) && c.metrics.iter().any(|m| m.decision != "pass"));
    if matrix_held && only_metrics { Phase::Metrics } else { Phase::Validate }
}

/// The restored host judged against the bundle it went back to (the one still current: its
/// matrix and its checks), verified again first; skipped when nothing was current.
pub(super) fn validate_restored(
    root: &SiteRoot,
    state: &State,
    baseline: Option<&crate::validate::metrics::Baseline>,
) -> records::Validation {
    let skipped =
        |reason: String| records::Validation::Skipped { verdict: records::ValidationVerdict::Skipped, reason };
    let Some(current) = root.link(crate::site::root::Link::Current) else {
        return skipped("nothing was current before: the host went back to packages no bundle describes".into());
    };
    let back_to = match crate::site::check::verified(root, state, &current, &crate::progress::Silent) {
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
pub(super) fn restore_failed(
    node: &Node,
    changes: &[Change],
    source: packages::PackageError,
    attempt: &mut Attempt,
) -> SiteError {
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

/// Why the change just made needs a reboot, if it does: `/var/run/reboot-required` (what
/// Debian's and Ubuntu's packages write), or an amdgpu module installed for the running kernel
/// that is not the one loaded.
pub(in crate::site) fn reboot_needed() -> Option<String> {
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
pub(in crate::site) fn failed_change(failed: packages::Failed, attempt: &mut Attempt) -> SiteError {
    let restore = match failed.restored {
        Ok(restored) => {
            attempt.record.restored = Some(Changes::of(&restored));
            None
        }
        Err(e) => Some(Box::new(e)),
    };
    SiteError::Packages { source: failed.error, restore }
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
    #[serde(with = "crate::site::root::as_link")]
    pub previous: Option<BundleId>,
    pub record: PathBuf,
    pub seconds: f64,
}

/// After the reboot a pending apply waited for: its bundle verified again, the stack now
/// running judged; green (or amber accepted at apply) commits, anything else restores the
/// host's packages (exit 4), as an apply without a reboot would have.
pub fn commit_pending(
    root: &Path,
    writer: &crate::site::Writer,
    reporter: &dyn Reporter,
) -> Result<Committed, SiteError> {
    let root = &SiteRoot::new(root);
    if !root.is_site() {
        return Err(SiteError::NotASite { root: root.path().to_owned() });
    }
    let lock = root.open_for_writing("validate --commit", writer.wait)?;
    let mut tx = Transaction::writing(root, &lock)?;
    let pending = tx.state.pending.clone().ok_or_else(|| SiteError::NotPending { root: root.path().to_owned() })?;
    let file = root.retained_file(&pending.id).display().to_string();
    let mut attempt = Attempt::new(records::Action::Apply, Phase::Verify, file, None);
    attempt.record.role = Some("node".to_owned());
    attempt.record.run_id.clone_from(&writer.run);
    attempt.record.packages = Some(Changes::of(&pending.changes));
    let committed = commit_locked(&mut tx, &pending, reporter, &mut attempt);
    committed.inspect_err(|e| attempt.record_failure(root, e))
}

pub(super) fn commit_locked(
    tx: &mut Transaction<'_>,
    pending: &Pending,
    reporter: &dyn Reporter,
    attempt: &mut Attempt,
) -> Result<Committed, SiteError> {
    let root = tx.root();
    if let Some(reason) = reboot_needed() {
        return Err(SiteError::StillPending { reason });
    }
    let (manifest, checked) = crate::site::check::verified(root, &tx.state, &pending.id, reporter)?;
    attempt.record.bundle = Some(records::RecordBundle {
        id: Some(pending.id.clone()),
        name: Some(manifest.name.to_string()),
        version: Some(manifest.version.to_string()),
        ..records::RecordBundle::default()
    });
    attempt.record.signers.clone_from(&checked.signers);
    attempt.phases.mark(Phase::Validate);
    let node = Node::for_manifest(root.path(), packages::DEFAULT_LOCK_TIMEOUT, &manifest)?;
    let views = retained_views(root, &tx.state, None, node.area());
    let amber = pending.accept_amber.clone().map_or(Amber::Refuse, Amber::Accept);
    let validation = match judge(
        root,
        &tx.state,
        &Undo { node: &node, changes: &pending.changes, views: &views },
        &manifest,
        &amber,
        attempt,
    ) {
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
