//! `airlock report --fleet DIR [--run ID]`: one rollout run judged from the evidence the Ansible
//! collection `airlock.site` collects on its controller, one directory per run:
//!
//! ```text
//! DIR/runs/RUN/run.json                 the run: id, started, ended, aborted and why
//! DIR/runs/RUN/plan.json                the rollout: source, batches, capacity rule, canaries
//! DIR/runs/RUN/batches/TIME.json        each expansion batch: its nodes, when, the capacity figures
//! DIR/runs/RUN/nodes/NODE/node.json     the node's hardware tuple and wave
//! DIR/runs/RUN/nodes/NODE/status.json   `airlock status --json` at the end of the run
//! DIR/runs/RUN/nodes/NODE/records/      the node's records of this run (`run_id`), nothing older
//! DIR/runs/RUN/nodes/NODE/report.html   the node's approval pack (`airlock report --root`)
//! ```
//!
//! The run's verdict is its outcome (red when it aborted or did not end), each node is shown in
//! the state the run left it in (its status, rolled back or not), and only this run's records
//! are judged: earlier runs in DIR are summarised apart. Everything is read back bounded; the
//! result depends only on the evidence, so the same evidence gives the same page and JSON (the
//! contract: `schemas/fleet-report.v1.json`).

mod files;
mod journaled;
mod node;
mod page;
mod tally;

use files::{BatchFile, NodeFile, RunFile, StatusFile, read_json, sorted_dirs};
use tally::{capacity, read_batches, tuples, waves};

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use node::node_page;
pub use page::render;

use super::ReportError;
use crate::clock::Timestamp;
use crate::site::SiteRoot;
use crate::site::records::{Action, Outcome, Record, RunId};
use crate::site::status::Rehearsals;
use journaled::{planned, waves_of_journal, with_plan};

pub const SCHEMA: &str = "airlock.fleet-report/v1";
/// The largest evidence document read (run, plan, batch, node, status): a few kilobytes each.
const MAX_EVIDENCE_BYTES: u64 = 1 << 20;
/// Earlier runs summarised beside the one judged (the newest of them).
const MAX_EARLIER_RUNS: usize = 20;

/// One run, judged.
#[derive(Debug, Serialize)]
pub struct Fleet {
    pub schema: &'static str,
    /// The run's directory.
    pub dir: PathBuf,
    /// green: every node ended green; amber: some ended on an accepted amber; red: the run
    /// aborted, did not end, or a node ended refused, restored or failed.
    pub verdict: &'static str,
    pub run: RunFacts,
    /// The bundle this run rolled out, as the nodes' records name it.
    pub bundle: Option<BundleFacts>,
    /// Where the nodes took it from (the playbook's `airlock_source`).
    pub source: String,
    pub nodes: Vec<NodeLine>,
    pub tuples: Vec<Tuple>,
    /// Canaries, then batches, in the order they ran.
    pub waves: Vec<Wave>,
    pub capacity: Vec<Capacity>,
    /// This run's refusals, restores, failures and accepted ambers, and why it stopped.
    pub problems: Vec<Problem>,
    /// The decision around this run: whether its batches waited for an approval, the approval
    /// it expanded on, one prepared from its canaries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalFacts>,
    /// Earlier runs in the same evidence directory: history, not judged here.
    pub earlier: Vec<EarlierRun>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunFacts {
    pub id: String,
    pub started: Option<Timestamp>,
    pub ended: Option<Timestamp>,
    pub aborted: bool,
    /// Why it stopped, as the playbook said it.
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BundleFacts {
    pub name: String,
    pub version: String,
    pub id: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct NodeLine {
    pub node: String,
    pub tuple: String,
    pub wave: String,
    /// The version it runs at the end of the run, as its `status` says (none: nothing current).
    pub version: Option<String>,
    /// Its own change in this run: green, amber, skipped (no matrix), pending (a reboot), red
    /// (refused, restored or failed), or untouched (no record of this run).
    pub verdict: String,
    /// How long its rollback in this run took; null when it was not rolled back.
    pub rolled_back_s: Option<f64>,
    /// How long airlock took to put its packages back after its change was red (its
    /// record's `restore` phase); null when it was not restored.
    pub restored_s: Option<f64>,
    /// The record that decided its verdict (its file name under `records/`).
    pub record: Option<String>,
    /// Its approval pack, relative to the run's directory, when the evidence holds one.
    pub pack: Option<String>,
    /// What the run did with it (from its plan and journal): `skipped`, `reserved`,
    /// `unavailable`, `not reached`, `canary`, `batch N`, `held`, `failed`, `restored`, `rolled
    /// back`, `left alone`; the wave for an older run's evidence.
    #[serde(default)]
    pub state: String,
    /// Why it is in that state (the scheduler's reason, the failure, the refusal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Tuple {
    pub tuple: String,
    pub nodes: Vec<String>,
    /// Rollback durations of this tuple's nodes in this run.
    pub rollbacks: Option<Rehearsals>,
    /// The results sheet of the tuple: each metric's median over its nodes' latest validation.
    pub results: Vec<MetricMedian>,
}

/// One metric over a tuple's nodes: the medians of the current and candidate values, and how
/// many nodes met the threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricMedian {
    pub check: String,
    pub metric: String,
    pub nodes: usize,
    pub current_median: Option<f64>,
    pub candidate_median: Option<f64>,
    pub change_percent: Option<f64>,
    pub threshold: String,
    pub passed: usize,
    pub failed: usize,
}

#[derive(Debug, Serialize)]
pub struct Wave {
    pub name: String,
    pub nodes: Vec<String>,
    /// The first and last time a change of this wave's nodes was recorded.
    pub from: Option<Timestamp>,
    pub to: Option<Timestamp>,
}

/// The capacity rule as it stood before a batch: its figures, each with its source
/// (`fleet::capacity`, checked arithmetic).
#[derive(Debug, Serialize)]
pub struct Capacity {
    pub before_wave: String,
    #[serde(flatten)]
    pub figures: crate::fleet::capacity::Figures,
}

#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    pub node: String,
    pub at: String,
    pub action: String,
    pub outcome: String,
    pub reason: String,
}

#[derive(Debug, Serialize)]
pub struct EarlierRun {
    pub id: String,
    pub started: Option<Timestamp>,
    pub verdict: &'static str,
    pub problems: Vec<Problem>,
}

/// What the evidence says of a run's approval.
#[derive(Debug, Serialize)]
pub struct ApprovalFacts {
    /// The batches waited for an approval of the canaries (`airlock_approval_required`).
    pub required: bool,
    /// The run ended after its canaries, awaiting it.
    pub awaiting: bool,
    /// The approval this run expanded on, as `rollout plan` verified it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expanded_on: Option<crate::fleet::plan::Approved>,
    /// An approval of this run's canaries in its directory (`approval.dsse.json`), not verified
    /// here: its sha256 and the key ids its signatures name (`airlock verify-approval` checks them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prepared: Option<PreparedApproval>,
}

#[derive(Debug, Serialize)]
pub struct PreparedApproval {
    pub file: String,
    pub sha256: crate::digest::Sha256,
    pub keyids: Vec<String>,
}

/// The approval facts of the run in `dir`, when it has any.
fn approval_facts(
    dir: &Path,
    planned: Option<&(crate::fleet::plan::Plan, Vec<crate::fleet::journal::Line>)>,
) -> Option<ApprovalFacts> {
    let file = dir.join("approval.dsse.json");
    let prepared = crate::site::root::read_bounded(&file, 16 << 20).ok().flatten().map(|bytes| PreparedApproval {
        file: "approval.dsse.json".to_owned(),
        sha256: crate::digest::Sha256::of_bytes(&bytes),
        keyids: crate::sign::dsse::named_keyids(&bytes).unwrap_or_default(),
    });
    let (gate, awaiting) = planned.map_or((None, false), |(plan, lines)| {
        let awaiting = lines.iter().any(|l| matches!(l.event, crate::fleet::journal::Event::AwaitingApproval { .. }));
        (Some(&plan.approval), awaiting)
    });
    if prepared.is_none() && !gate.is_some_and(|g| g.required) {
        return None;
    }
    Some(ApprovalFacts {
        required: gate.is_some_and(|g| g.required),
        awaiting,
        expanded_on: gate.and_then(|g| g.approved.clone()),
        prepared,
    })
}

/// The run `run` (the newest by its start when none is named) of the evidence under `dir`,
/// judged, with the earlier runs summarised.
pub fn fleet(dir: &Path, run: Option<&RunId>) -> Result<Fleet, ReportError> {
    let mut runs = Vec::new();
    for (name, path) in sorted_dirs(&dir.join("runs"))? {
        let Ok(id) = name.parse::<RunId>() else { continue };
        let file: RunFile = read_json(&path.join("run.json"))?.unwrap_or_default();
        runs.push((file.started, id, path));
    }
    if runs.is_empty() {
        return Err(ReportError::Records {
            path: dir.to_owned(),
            detail: "no rollout run here (runs/RUN/run.json): is it an airlock_evidence_dir?".into(),
        });
    }
    runs.sort();
    let chosen = match run {
        Some(id) => runs.iter().position(|(_, r, _)| r == id).ok_or_else(|| ReportError::Records {
            path: dir.join("runs"),
            detail: format!(
                "no run `{id}` here; the runs are: {}",
                runs.iter().map(|(_, r, _)| r.as_str()).collect::<Vec<_>>().join(", ")
            ),
        })?,
        None => runs.len() - 1,
    };
    let (_, id, path) = &runs[chosen];
    let mut fleet = judge(id, path)?;
    for (_, id, path) in runs[..chosen].iter().rev().take(MAX_EARLIER_RUNS) {
        let earlier = judge(id, path)?;
        fleet.earlier.push(EarlierRun {
            id: earlier.run.id,
            started: earlier.run.started,
            verdict: earlier.verdict,
            problems: earlier.problems,
        });
    }
    Ok(fleet)
}

/// Everything one node's evidence says about this run.
struct NodeEvidence {
    line: NodeLine,
    records: Vec<(PathBuf, Record)>,
    /// The bundle its status says is current at the run's end.
    current_id: Option<String>,
}

/// One run's directory, judged on its own.
fn judge(id: &RunId, dir: &Path) -> Result<Fleet, ReportError> {
    let file: RunFile = read_json(&dir.join("run.json"))?.unwrap_or_default();
    let plan: Option<serde_json::Value> = read_json(&dir.join("plan.json"))?;
    let batches = read_batches(dir)?;
    let mut nodes = Vec::new();
    for (name, path) in sorted_dirs(&dir.join("nodes"))? {
        nodes.push(node_evidence(id, &name, &path, &batches)?);
    }
    let planned = planned(id, dir)?;
    let (mut nodes, journal_problems, journal_waves, journal_capacity) = match &planned {
        Some((plan, lines)) => {
            let (nodes, problems) = with_plan(plan, lines, nodes);
            let (waves, capacity) = waves_of_journal(plan, lines);
            (nodes, problems, Some(waves), Some(capacity))
        }
        None => (nodes, Vec::new(), None, None),
    };
    for n in &mut nodes {
        if n.line.state.is_empty() {
            n.line.state.clone_from(&n.line.wave);
        }
    }
    let mut problems: Vec<Problem> = nodes.iter().flat_map(|n| problems_of(&n.line.node, &n.records)).collect();
    problems.extend(journal_problems);
    problems.sort_by(|a, b| (&a.at, &a.node).cmp(&(&b.at, &b.node)));
    if file.aborted || file.ended.is_none() {
        problems.push(Problem {
            node: String::new(),
            at: file.ended.map(|t| t.to_string()).unwrap_or_default(),
            action: "rollout".to_owned(),
            outcome: if file.aborted { "aborted" } else { "not ended" }.to_owned(),
            reason: file.reason.clone().unwrap_or_else(|| {
                "the evidence has no end of this run: it was interrupted, or is still running".to_owned()
            }),
        });
    }
    let verdict = if file.aborted || file.ended.is_none() || nodes.iter().any(|n| n.line.verdict == "red") {
        "red"
    } else if nodes.iter().any(|n| matches!(n.line.verdict.as_str(), "amber" | "pending")) {
        "amber"
    } else {
        "green"
    };
    let source =
        file.source.clone().or_else(|| plan.as_ref()?.get("source")?.as_str().map(str::to_owned)).unwrap_or_default();
    let bundle = bundle_of(&nodes).or_else(|| {
        let (plan, _) = planned.as_ref()?;
        Some(BundleFacts {
            name: plan.bundle.name.clone()?,
            version: plan.bundle.version.clone()?,
            id: Some(plan.bundle.id.to_string()),
        })
    });
    let approval = approval_facts(dir, planned.as_ref());
    Ok(Fleet {
        approval,
        schema: SCHEMA,
        dir: dir.to_owned(),
        verdict,
        run: RunFacts {
            id: id.to_string(),
            started: file.started,
            ended: file.ended,
            aborted: file.aborted,
            reason: file.reason,
        },
        bundle,
        source,
        tuples: tuples(&nodes),
        waves: journal_waves.unwrap_or_else(|| waves(&nodes, &batches)),
        capacity: match journal_capacity {
            Some(c) => c,
            None => capacity(dir, &batches)?,
        },
        nodes: nodes.into_iter().map(|n| n.line).collect(),
        problems,
        earlier: Vec::new(),
    })
}

fn node_evidence(
    run: &RunId,
    node: &str,
    dir: &Path,
    batches: &[(String, BatchFile)],
) -> Result<NodeEvidence, ReportError> {
    let file: NodeFile = read_json(&dir.join("node.json"))?.unwrap_or_default();
    let status: Option<StatusFile> = read_json(&dir.join("status.json"))?;
    // Only this run's records count, whatever else was collected beside them.
    let records: Vec<(PathBuf, Record)> = crate::site::records::read_all(&SiteRoot::new(dir))?
        .into_iter()
        .filter(|(_, r)| r.run_id.as_ref() == Some(run))
        .collect();
    // Packages fetched ahead (`--download-only`) changed nothing.
    let change = records
        .iter()
        .rev()
        .find(|(_, r)| matches!(r.action, Action::Apply | Action::Install) && r.outcome() != Outcome::Staged);
    let verdict = change.map_or_else(|| "untouched".to_owned(), |(_, r)| verdict_of(r));
    let rolled_back_s = records
        .iter()
        .rev()
        .find(|(_, r)| r.action == Action::Rollback && r.outcome() == Outcome::Activated)
        .map(|(_, r)| r.seconds.unwrap_or(0.0));
    let wave = batches.iter().find(|(_, b)| b.nodes.iter().any(|n| n == node)).map_or_else(
        || if file.wave.is_empty() { "untouched".to_owned() } else { file.wave.clone() },
        |(name, _)| name.clone(),
    );
    let pack = dir.join("report.html").is_file().then(|| format!("nodes/{node}/report.html"));
    let current = status.and_then(|s| s.current);
    let line = NodeLine {
        node: node.to_owned(),
        tuple: if file.tuple.is_empty() { "unknown".to_owned() } else { file.tuple },
        state: wave.clone(),
        wave,
        version: current.as_ref().and_then(|c| c.version.clone()),
        verdict,
        rolled_back_s,
        restored_s: change.filter(|(_, r)| r.outcome() == Outcome::Restored).and_then(|(_, r)| r.phases.get("restore")),
        record: change.and_then(|(p, _)| Some(p.file_name()?.to_string_lossy().into_owned())),
        pack,
        reason: file.refused,
    };
    Ok(NodeEvidence { line, records, current_id: current.and_then(|c| c.id) })
}

/// A change's verdict: its validation's when it activated, `pending` before a reboot, `red`
/// when it was refused, failed or restored.
pub(super) fn verdict_of(r: &Record) -> String {
    match r.outcome() {
        Outcome::Activated | Outcome::Validated => activated_verdict(r),
        Outcome::PendingReboot => "pending".to_owned(),
        Outcome::Refused | Outcome::Failed | Outcome::Restored => "red".to_owned(),
        Outcome::Staged => "untouched".to_owned(),
    }
}

/// An outcome's word, as records spell it.
pub(super) fn outcome_word(o: Outcome) -> &'static str {
    match o {
        Outcome::Activated => "activated",
        Outcome::Refused => "refused",
        Outcome::Failed => "failed",
        Outcome::Validated => "validated",
        Outcome::PendingReboot => "pending-reboot",
        Outcome::Restored => "restored",
        Outcome::Staged => "staged",
    }
}

/// The word for an activation: its validation verdict, `skipped` when the bundle names no
/// matrix.
fn activated_verdict(r: &Record) -> String {
    if let Some(e) = r.validation.as_ref().and_then(|v| v.evidence()) {
        return crate::validate::word(e.verdict).to_owned();
    }
    let recorded = r.verdict.as_ref().and_then(|v| v.validation);
    match recorded {
        Some(crate::site::records::ValidationVerdict::Green) => "green",
        Some(crate::site::records::ValidationVerdict::Amber) => "amber",
        Some(crate::site::records::ValidationVerdict::Red) => "red",
        Some(crate::site::records::ValidationVerdict::Skipped) | None => "skipped",
    }
    .to_owned()
}

/// The bundle the run rolled out: the first change of the run that names it whole.
fn bundle_of(nodes: &[NodeEvidence]) -> Option<BundleFacts> {
    let mut changes: Vec<&Record> = nodes
        .iter()
        .flat_map(|n| &n.records)
        .map(|(_, r)| r)
        .filter(|r| matches!(r.action, Action::Apply | Action::Install))
        .collect();
    changes.sort_by_key(|r| r.at);
    changes.iter().find_map(|r| {
        let b = r.bundle.as_ref()?;
        Some(BundleFacts {
            name: b.name.clone()?,
            version: b.version.clone()?,
            id: b.id.as_ref().map(ToString::to_string),
        })
    })
}

/// This node's refusals, restores, failures and accepted ambers in this run.
fn problems_of(node: &str, records: &[(PathBuf, Record)]) -> Vec<Problem> {
    let mut out = Vec::new();
    for (_, r) in records {
        let word = match r.outcome() {
            Outcome::Refused => "refused",
            Outcome::Failed => "failed",
            Outcome::Restored => "restored",
            Outcome::PendingReboot => "pending reboot",
            Outcome::Staged => continue,
            Outcome::Activated | Outcome::Validated => {
                if let Some(reason) = &r.accepted_amber {
                    let terms = r.amber.as_ref().map_or_else(String::new, |a| format!(" ({})", a.terms()));
                    out.push(Problem {
                        node: node.to_owned(),
                        at: r.at.to_string(),
                        action: r.action.as_str().to_owned(),
                        outcome: "activated".to_owned(),
                        reason: format!("amber accepted{terms}: {reason}"),
                    });
                }
                continue;
            }
        };
        out.push(Problem {
            node: node.to_owned(),
            at: r.at.to_string(),
            action: r.action.as_str().to_owned(),
            outcome: word.to_owned(),
            reason: r.reason.clone().unwrap_or_default(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::NodeName;
    use crate::fleet::journal::Event;
    use crate::fleet::plan::{CurrentBundle, NodeFacts, PlanInput, ProbeFacts, Resolved};

    const ID: &str = "0123456789abcdef";
    const OLD: &str = "fedcba9876543210";

    fn name(n: &str) -> NodeName {
        NodeName::try_from(n.to_owned()).unwrap()
    }

    /// A run of four nodes (a skipped one, a reserved one, a canary, a batch node) planned under
    /// `evidence`, with `events` journaled and each `(node, current id)` status written.
    fn run_of(evidence: &Path, events: Vec<Event>, statuses: &[(&str, &str)]) -> crate::fleet::RunDir {
        let facts = |n: &str, current: &str| NodeFacts {
            node: name(n),
            scheduler_name: None,
            probe: Some(ProbeFacts {
                tuple: Some("A".into()),
                current: Some(CurrentBundle { id: Some(current.into()), version: Some("v".into()) }),
                failed: false,
                msg: None,
            }),
            scheduler: None,
        };
        let mut reserved = facts("r1", OLD);
        reserved.probe = Some(ProbeFacts { failed: true, msg: Some("unreachable".into()), ..ProbeFacts::default() });
        let input = PlanInput {
            source: "/srv/b.airlock".into(),
            release: None,
            bundle: Resolved {
                id: crate::site::BundleId::parse(ID).unwrap(),
                name: Some("rocm".into()),
                version: Some("2".into()),
            },
            batches: vec![crate::fleet::plan::BatchSize::Count(1)],
            capacity: None,
            scheduler: crate::fleet::plan::Scheduler::None,
            rollback_scope: crate::fleet::plan::Scope::Batch,
            adopt: None,
            adopt_release: None,
            stage: false,
            nodes: vec![facts("s1", ID), reserved, facts("c1", OLD), facts("b1", OLD)],
            scheduler_states: None,
            approval_required: false,
            approval: None,
            approval_root: None,
            approved: None,
        };
        let run_id: RunId = "run-1".parse().unwrap();
        let plan = crate::fleet::plan::plan(run_id.clone(), Timestamp::from_unix(1_800_000_000), input).unwrap();
        let dir = crate::fleet::RunDir::new(evidence, run_id);
        std::fs::create_dir_all(&dir.path).unwrap();
        std::fs::write(dir.plan_file(), serde_json::to_vec(&plan).unwrap()).unwrap();
        let run = serde_json::json!({"started": "2027-01-15T08:00:00Z", "ended": "2027-01-15T09:00:00Z"});
        std::fs::write(dir.run_file(), run.to_string()).unwrap();
        dir.note(events).unwrap();
        for (node, current) in statuses {
            let top = dir.node_dir(&name(node));
            std::fs::create_dir_all(&top).unwrap();
            let status = serde_json::json!({"current": {"id": current, "version": "v"}});
            std::fs::write(top.join("status.json"), status.to_string()).unwrap();
        }
        dir
    }

    fn applied(node: &str) -> Event {
        Event::Applied {
            node: name(node),
            wave: "canary".into(),
            changed: true,
            bundle: Some(ID.into()),
            verdict: Some("green".into()),
            pending_reboot: None,
            record: None,
        }
    }

    #[test]
    fn every_planned_node_is_on_the_page_with_its_state() {
        let t = tempfile::tempdir().unwrap();
        let wave = Event::Wave { wave: "canary".into(), nodes: vec![name("c1")], capacity: None };
        let stop = Event::Stopped { reason: "c1: red".into() };
        run_of(t.path(), vec![wave, applied("c1"), stop], &[("c1", ID)]);
        let f = fleet(t.path(), None).unwrap();
        let states: Vec<(&str, &str)> = f.nodes.iter().map(|n| (n.node.as_str(), n.state.as_str())).collect();
        assert_eq!(states, [("s1", "skipped"), ("r1", "unavailable"), ("c1", "canary"), ("b1", "not reached")]);
        assert_eq!(f.nodes[1].reason.as_deref(), Some("probe failed: unreachable"));
        assert_eq!(f.waves.len(), 1, "a wave the run never started is not shown");
    }

    #[test]
    fn a_node_that_ends_on_another_bundle_is_red_and_named() {
        let t = tempfile::tempdir().unwrap();
        let wave = Event::Wave { wave: "canary".into(), nodes: vec![name("c1")], capacity: None };
        run_of(t.path(), vec![wave, applied("c1")], &[("c1", OLD)]);
        let f = fleet(t.path(), None).unwrap();
        assert_eq!(f.verdict, "red");
        let c1 = f.nodes.iter().find(|n| n.node == "c1").unwrap();
        assert_eq!(c1.verdict, "red");
        let p = f.problems.iter().find(|p| p.node == "c1").expect("named");
        assert!(p.outcome == "other bundle" && p.reason.starts_with("ends on fedcba9876543210"), "{p:?}");
    }

    #[test]
    fn capacity_figures_that_overflow_in_older_evidence_are_an_error_naming_them() {
        let t = tempfile::tempdir().unwrap();
        let run = t.path().join("runs/old-1");
        std::fs::create_dir_all(run.join("batches")).unwrap();
        std::fs::write(run.join("run.json"), r#"{"started": "2026-12-01T08:00:00Z"}"#).unwrap();
        let batch = serde_json::json!({"nodes": ["n1"], "capacity": {
            "total": i64::MAX, "in_change": 2, "per_node": i64::MAX, "demand": 1}});
        std::fs::write(run.join("batches/20261201T080000000000.json"), batch.to_string()).unwrap();
        let e = fleet(t.path(), None).unwrap_err().to_string();
        assert!(e.contains("batch 1: capacity rule: in change × per node overflows"), "{e}");
    }
}
