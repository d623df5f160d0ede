//! `airlock rollout resolve|plan|next|judge|note|evidence|end`: the rollout's decisions for the
//! Ansible collection's playbook, which calls them on its controller and passes the nodes'
//! facts and results as one JSON document on stdin. Each prints one JSON document; the logic
//! is `fleet`'s, the journal lines it writes are synced before the document is printed.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::UsageError;
use crate::cli::{RolloutArgs, RolloutCommand, RolloutNoteArgs, RolloutResolveArgs, RolloutStep, RolloutWaveArgs};
use crate::clock::Timestamp;
use crate::failure::{Context as _, Exit, Result};
use crate::fleet::journal::Event;
use crate::fleet::judge::{self, Progress, Step};
use crate::fleet::plan::{MAX_PLAN_BYTES, PlanInput};
use crate::fleet::results::NodeResults;
use crate::fleet::scheduler::SchedulerNode;
use crate::fleet::{FleetError, NodeName, RunDir, evidence, plan, read_input};
use crate::site::BundleId;

pub fn run(cmd: &RolloutCommand) -> Result<Exit> {
    match cmd {
        RolloutCommand::Resolve(a) => resolve(a),
        RolloutCommand::Plan(a) => plan(a),
        RolloutCommand::Next(a) => next(a),
        RolloutCommand::Judge(a) => judge(a),
        RolloutCommand::Note(a) => note(a),
        RolloutCommand::Evidence(a) => evidence(a),
        RolloutCommand::End(a) => end(a),
    }
}

fn print(doc: &impl Serialize) -> Result<Exit> {
    let text = serde_json::to_string_pretty(doc).context("the document")?;
    println!("{text}");
    Ok(Exit::Ok)
}

fn stdin<T: serde::de::DeserializeOwned>(what: &str) -> Result<T, FleetError> {
    read_input(std::io::stdin().lock(), what, MAX_PLAN_BYTES)
}

fn dir(a: &RolloutArgs) -> RunDir {
    RunDir::new(&a.evidence, a.run.clone())
}

/// Journal `events` unless this is a dry run.
fn journal(a: &RolloutArgs, run: &RunDir, events: Vec<Event>) -> Result<(), FleetError> {
    if a.dry_run { Ok(()) } else { run.note(events) }
}

#[derive(Serialize)]
struct ResolvedDoc {
    id: BundleId,
    name: String,
    version: String,
    sha256: String,
}

fn resolve(a: &RolloutResolveArgs) -> Result<Exit> {
    let (sha256, name, version) = if crate::site::mirror::is_mirror(&a.source) {
        let redirects = crate::fetch::Redirects::SameOrigin { also: Vec::new() };
        let net = crate::fetch::Net::for_mirror(a.net.options(), redirects)?;
        let release = a.release.clone().unwrap_or_default();
        let (sha256, m) = crate::site::mirror::served_manifest(&a.source, &release, &net)?;
        // Where the node follows only a signed promotion, so does the run it pins.
        let role = a.root.as_deref().and_then(|r| crate::trust::SiteTrust::load(r).ok());
        let role = role.and_then(|t| t.decision_role(crate::trust::PROMOTION_ROLE));
        if let (Some(role), crate::site::mirror::Release::Current) = (role, &release) {
            let root = crate::site::SiteRoot::new(a.root.as_deref().unwrap_or(Path::new(".")));
            let seen = crate::site::state::State::load(&root).map_or(0, |s| s.promotion);
            crate::site::mirror::check_promoted(&a.source, &role, seen, &sha256, &m, &net)?;
        }
        (sha256, m.name.to_string(), m.version.to_string())
    } else if a.source.starts_with("oci://") {
        return Err(UsageError(format!(
            "a rollout pins a mirror's release or a bundle file, not `{}`: install it on a mirror \
             (`airlock install … --role mirror`) and roll out from the mirror",
            a.source
        ))
        .into());
    } else {
        if a.release.is_some() {
            return Err(UsageError("--release names a mirror's release; the source is a bundle file".into()).into());
        }
        let input = crate::bundle::parts::Input::resolve(Path::new(&a.source))?;
        let head = crate::bundle::reader::read_head(input.open()?)
            .map_err(|p| super::VerificationFailed(format!("cannot read `{}`: {p}", input.display())))?;
        (head.manifest_sha256, head.manifest.name.to_string(), head.manifest.version.to_string())
    };
    print(&ResolvedDoc { id: BundleId::of(&sha256), name, version, sha256: sha256.to_string() })
}

fn plan(a: &RolloutArgs) -> Result<Exit> {
    let run = dir(a);
    let mut input: PlanInput = stdin("the run's facts (stdin)")?;
    input.approved = approved(&input)?;
    let plan = plan::plan(a.run.clone(), Timestamp::now(), input)?;
    if a.dry_run {
        return print(&plan);
    }
    if run.plan_file().exists() {
        return Err(FleetError::Run {
            run: a.run.to_string(),
            detail: format!("`{}` is planned already: give the new run another id", run.plan_file().display()),
        }
        .into());
    }
    std::fs::create_dir_all(&run.path).map_err(crate::fleet::io_err(&run.path))?;
    let mut text = serde_json::to_vec_pretty(&plan).context("the plan")?;
    text.push(b'\n');
    write_durable(&run.plan_file(), &text)?;
    write_run_file(&run, &RunFile::started(&plan))?;
    run.note(vec![Event::Planned {
        bundle: plan.bundle.id.to_string(),
        nodes: plan.nodes.len(),
        waves: plan.waves.len(),
    }])?;
    print(&plan)
}

/// The approval a run expands on, verified against the `approvers` role of the site root
/// `approval_root` names, for the run's bundle; none when the run names none.
fn approved(input: &PlanInput) -> Result<Option<plan::Approved>> {
    let Some(file) = &input.approval else { return Ok(None) };
    let Some(root) = &input.approval_root else {
        return Err(UsageError(
            "airlock_approval needs airlock_approval_root: a site root (the mirror's, or a copy of its trust/) \
             whose trust root holds the approvers role"
                .into(),
        )
        .into());
    };
    let trust = crate::trust::SiteTrust::load(Path::new(root))?;
    let role = trust.decision_role(crate::trust::APPROVERS_ROLE).ok_or_else(|| {
        crate::approval::ApprovalError::NoApprovers {
            dir: trust.dir.clone(),
            what: "airlock_approval cannot be checked".into(),
        }
    })?;
    let path = Path::new(file);
    let bytes = crate::approval::read(path, crate::approval::MAX_APPROVAL_BYTES)?.ok_or_else(|| {
        crate::approval::ApprovalError::Format { path: path.to_owned(), detail: "no such file".into() }
    })?;
    let approval = crate::approval::verify(path, &bytes, &role)?;
    let d = &approval.statement.predicate.decision;
    if d.bundle.id != input.bundle.id.as_str() {
        return Err(crate::approval::ApprovalError::OtherBundle {
            path: path.to_owned(),
            approved: format!("{} {} ({})", d.bundle.name, d.bundle.version, d.bundle.id),
            expected: format!("the run's bundle {}", input.bundle.id),
        }
        .into());
    }
    Ok(Some(plan::Approved {
        file: file.clone(),
        sha256: approval.sha256,
        run: d.run.clone(),
        approvers: approval.signers,
    }))
}

fn write_durable(path: &Path, bytes: &[u8]) -> Result<(), FleetError> {
    crate::atomic::write(path, bytes).map_err(crate::fleet::io_err(path))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    crate::atomic::sync_dir(dir).map_err(crate::fleet::io_err(dir))
}

/// `run.json`: the run's start, and its end once it ended.
#[derive(Serialize)]
struct RunFile {
    id: String,
    started: Timestamp,
    ended: Option<Timestamp>,
    aborted: bool,
    reason: Option<String>,
    source: String,
    bundle: String,
}

impl RunFile {
    fn started(plan: &crate::fleet::plan::Plan) -> Self {
        Self {
            id: plan.run.to_string(),
            started: plan.started,
            ended: None,
            aborted: false,
            reason: None,
            source: plan.source.clone(),
            bundle: plan.bundle.id.to_string(),
        }
    }
}

fn write_run_file(run: &RunDir, file: &RunFile) -> Result<()> {
    let mut text = serde_json::to_vec_pretty(file).context("run.json")?;
    text.push(b'\n');
    Ok(write_durable(&run.run_file(), &text)?)
}

#[derive(Deserialize)]
struct NextInput {
    batch: Vec<NodeName>,
    #[serde(default)]
    rows: Option<Vec<SchedulerNode>>,
}

fn next(a: &RolloutWaveArgs) -> Result<Exit> {
    let run = dir(&a.run);
    let input: NextInput = stdin("the wave's batch (stdin)")?;
    let plan = run.plan()?;
    let progress = Progress::of(&run.journal()?);
    let decided = judge::next(&plan, &progress, &a.wave, &input.batch, input.rows.as_deref())?;
    journal(&a.run, &run, judge::next_events(&decided, &input.batch))?;
    print(&decided)
}

#[derive(Deserialize)]
struct ResultsInput {
    nodes: Vec<NodeResults>,
}

fn judge(a: &RolloutWaveArgs) -> Result<Exit> {
    let run = dir(&a.run);
    let input: ResultsInput = stdin("the wave's results (stdin)")?;
    let plan = run.plan()?;
    let progress = Progress::of(&run.journal()?);
    let judged = judge::judge(&plan, &progress, &a.wave, &input.nodes);
    journal(&a.run, &run, judged.events.clone())?;
    print(&judged)
}

#[derive(Serialize)]
struct Noted {
    events: usize,
    stopped: Option<String>,
}

fn note(a: &RolloutNoteArgs) -> Result<Exit> {
    let run = dir(&a.run);
    let input: ResultsInput = stdin("the step's results (stdin)")?;
    run.plan()?;
    let step = match a.step {
        RolloutStep::Adopt => Step::Adopt,
        RolloutStep::Stage => Step::Stage,
        RolloutStep::After => Step::After,
        RolloutStep::Rollback => Step::Rollback,
    };
    let events = judge::note(step, &input.nodes, a.max_seconds);
    let stopped = events.iter().find_map(|e| match e {
        Event::Stopped { reason } => Some(reason.clone()),
        _ => None,
    });
    let count = events.len();
    journal(&a.run, &run, events)?;
    print(&Noted { events: count, stopped })
}

#[derive(Deserialize)]
struct EvidenceInput {
    nodes: Vec<evidence::NodeAnswer>,
}

#[derive(Serialize)]
struct Written {
    written: Vec<String>,
    refused: Vec<(String, String)>,
}

fn evidence(a: &RolloutArgs) -> Result<Exit> {
    let run = dir(a);
    let input: EvidenceInput = stdin("the nodes' evidence (stdin)")?;
    let plan = run.plan()?;
    if a.dry_run {
        return print(&Written { written: Vec::new(), refused: Vec::new() });
    }
    let touched: std::collections::BTreeSet<NodeName> =
        run.journal()?.into_iter().filter_map(|l| l.event.node().cloned()).collect();
    let (written, events) =
        evidence::write_all(&run, &plan, &input.nodes, &|n| touched.contains(n), &crate::report::fleet::node_page)?;
    let refused = events
        .iter()
        .filter_map(|e| match e {
            Event::EvidenceRefused { node, reason } => Some((node.to_string(), reason.clone())),
            _ => None,
        })
        .collect();
    run.note(events)?;
    print(&Written { written: written.iter().map(|p| p.display().to_string()).collect(), refused })
}

#[derive(Serialize)]
struct Ended {
    run: String,
    aborted: bool,
    /// Every reason the run is not green: why it stopped, nodes that failed a step.
    problems: Vec<String>,
    message: String,
}

fn end(a: &RolloutArgs) -> Result<Exit> {
    let run = dir(a);
    let plan = run.plan()?;
    let lines = run.journal()?;
    let progress = Progress::of(&lines);
    let mut problems: Vec<String> = progress.stopped.iter().cloned().collect();
    for line in &lines {
        match &line.event {
            Event::Failed { node, wave, reason } if matches!(wave.as_str(), "adopt" | "stage") => {
                problems.push(format!("{node}: {reason}"));
            }
            Event::EvidenceRefused { node, reason } => problems.push(format!("{node}: evidence refused: {reason}")),
            _ => {}
        }
    }
    let aborted = progress.stopped.is_some();
    let reason = progress.stopped.clone().or_else(|| progress.awaiting.clone());
    let message = if let (true, Some(awaiting)) = (problems.is_empty(), &progress.awaiting) {
        format!("the rollout {} of {} ended after its canaries, {awaiting}", plan.run, plan.label)
    } else if problems.is_empty() {
        format!("the rollout {} of {} ended", plan.run, plan.label)
    } else {
        format!("the rollout {} {}: {}", plan.run, if aborted { "stopped" } else { "ended red" }, problems.join("; "))
    };
    if !a.dry_run {
        let file =
            RunFile { ended: Some(Timestamp::now()), aborted, reason: reason.clone(), ..RunFile::started(&plan) };
        write_run_file(&run, &file)?;
        run.note(vec![Event::Ended { aborted, reason }])?;
    }
    print(&Ended { run: plan.run.to_string(), aborted, problems, message })
}
