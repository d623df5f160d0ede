//! A run that `airlock rollout` planned and journaled: every node of its plan with its state
//! in the run, the journal's own problems, and the waves and capacity as the journal saw them.

use std::collections::BTreeMap;
use std::path::Path;

use super::files::read_json;
use super::{Capacity, NodeEvidence, NodeLine, Problem, ReportError, Wave};
use crate::clock::Timestamp;
use crate::fleet::journal::{Event, Line};
use crate::fleet::plan::{Part, Plan};
use crate::site::records::{Outcome, RunId};

/// The run's plan and journal, when `rollout plan` made the run (older runs' evidence has
/// neither: the playbook wrote it).
pub(super) fn planned(id: &RunId, dir: &Path) -> Result<Option<(Plan, Vec<Line>)>, ReportError> {
    let path = dir.join(crate::fleet::plan::PLAN_FILE);
    let Some(value) = read_json::<serde_json::Value>(&path)? else { return Ok(None) };
    if value.get("schema").and_then(serde_json::Value::as_str) != Some(crate::fleet::plan::SCHEMA) {
        return Ok(None);
    }
    let plan: Plan = serde_json::from_value(value)
        .map_err(|e| ReportError::Records { path: path.clone(), detail: e.to_string() })?;
    let run = crate::fleet::RunDir { id: id.clone(), path: dir.to_owned() };
    let lines = run.journal().map_err(|e| ReportError::Records { path: run.journal_file(), detail: e.to_string() })?;
    Ok(Some((plan, lines)))
}

fn part_word(p: Part) -> &'static str {
    match p {
        Part::Skip => "skipped",
        Part::Reserved => "reserved",
        Part::Unavailable => "unavailable",
        Part::Canary => "canary",
        Part::Batch => "batch",
    }
}

/// Every node of the plan, in its order, each with its state in the run from the journal; a
/// node with no evidence is shown as the plan left it. The journal's own problems (failed
/// steps, refused evidence, a node on another bundle, the stop) come back too.
pub(super) fn with_plan(plan: &Plan, lines: &[Line], nodes: Vec<NodeEvidence>) -> (Vec<NodeEvidence>, Vec<Problem>) {
    let mut by_name: BTreeMap<String, NodeEvidence> = nodes.into_iter().map(|n| (n.line.node.clone(), n)).collect();
    let stopped = lines.iter().any(|l| matches!(l.event, Event::Stopped { .. }));
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for p in &plan.nodes {
        let mut n = by_name.remove(p.node.as_str()).unwrap_or_else(|| unseen(p));
        n.line.wave = p.wave.clone().unwrap_or_else(|| part_word(p.part).to_owned());
        let events: Vec<&Line> = lines.iter().filter(|l| l.event.node() == Some(&p.node)).collect();
        let reached = events
            .iter()
            .any(|l| matches!(l.event, Event::Applied { .. } | Event::Failed { .. } | Event::LeftAlone { .. }));
        let (state, reason) = match p.part {
            Part::Skip | Part::Reserved | Part::Unavailable => (part_word(p.part).to_owned(), p.reason.clone()),
            Part::Canary | Part::Batch if reached || !stopped => (n.line.wave.clone(), None),
            Part::Canary | Part::Batch => ("not reached".to_owned(), None),
        };
        n.line.state = state;
        n.line.reason = reason;
        let changed = journaled(&mut n, &events, &mut problems);
        // A change the run kept must have left the node on the run's bundle.
        let pinned = plan.bundle.id.as_str();
        if changed && n.current_id.as_deref() != Some(pinned) {
            let on = n.current_id.clone().unwrap_or_else(|| "no bundle".to_owned());
            let why = format!("ends on {on}, not the run's bundle {pinned} ({})", plan.label);
            "red".clone_into(&mut n.line.verdict);
            let at = events.last().map_or(plan.started, |l| l.at);
            problems.push(problem(p.node.as_str(), at, "apply", "other bundle", why.clone()));
            n.line.reason = Some(why);
        }
        out.push(n);
    }
    // Evidence of a node the plan does not name is shown after the plan's nodes.
    out.extend(by_name.into_values());
    (out, problems)
}

fn problem(node: &str, at: Timestamp, action: &str, outcome: &str, reason: String) -> Problem {
    Problem {
        node: node.to_owned(),
        at: at.to_string(),
        action: action.to_owned(),
        outcome: outcome.to_owned(),
        reason,
    }
}

/// A node of the plan with no evidence in the run's directory, as the plan saw it.
fn unseen(p: &crate::fleet::plan::PlannedNode) -> NodeEvidence {
    NodeEvidence {
        line: NodeLine {
            node: p.node.to_string(),
            tuple: p.tuple.clone().unwrap_or_else(|| "unknown".to_owned()),
            wave: String::new(),
            version: p.current_version.clone(),
            verdict: "untouched".to_owned(),
            rolled_back_s: None,
            restored_s: None,
            record: None,
            pack: None,
            state: String::new(),
            reason: None,
        },
        records: Vec::new(),
        current_id: p.current.clone(),
    }
}

/// What the journal says of node `n` (`events`, its lines): its state, reason and verdict set;
/// whether the run kept a change of it.
fn journaled(n: &mut NodeEvidence, events: &[&Line], problems: &mut Vec<Problem>) -> bool {
    let name = n.line.node.clone();
    let mut changed = false;
    let set = |n: &mut NodeEvidence, state: &str, reason: &str| {
        state.clone_into(&mut n.line.state);
        n.line.reason = Some(reason.to_owned());
    };
    for l in events {
        match &l.event {
            Event::Applied { changed: c, .. } => changed |= *c,
            Event::LeftAlone { reason, .. } => set(n, "left alone", reason),
            Event::Failed { reason, wave, .. } => {
                let restored = n.records.iter().any(|(_, r)| r.outcome() == Outcome::Restored);
                set(n, if restored { "restored" } else { "failed" }, reason);
                "red".clone_into(&mut n.line.verdict);
                let from_records = n
                    .records
                    .iter()
                    .any(|(_, r)| matches!(r.outcome(), Outcome::Refused | Outcome::Failed | Outcome::Restored));
                if !from_records {
                    let action = if matches!(wave.as_str(), "adopt" | "stage") { wave.as_str() } else { "apply" };
                    problems.push(problem(&name, l.at, action, "failed", reason.clone()));
                }
            }
            Event::Held { reason, .. } => set(n, "held", reason),
            Event::RolledBack { seconds, .. } => {
                "rolled back".clone_into(&mut n.line.state);
                changed = false;
                n.line.rolled_back_s = n.line.rolled_back_s.or(Some(seconds.unwrap_or(0.0)));
            }
            Event::RollbackFailed { reason, .. } => {
                set(n, "rollback failed", reason);
                "red".clone_into(&mut n.line.verdict);
                problems.push(problem(&name, l.at, "rollback", "failed", reason.clone()));
            }
            Event::EvidenceRefused { reason, .. } => {
                set(n, "evidence refused", reason);
                "red".clone_into(&mut n.line.verdict);
                problems.push(problem(&name, l.at, "evidence", "refused", reason.clone()));
            }
            _ => {}
        }
    }
    changed
}

/// The waves as the journal saw them start and end, and the capacity before each batch.
pub(super) fn waves_of_journal(plan: &Plan, lines: &[Line]) -> (Vec<Wave>, Vec<Capacity>) {
    let mut waves: Vec<Wave> = Vec::new();
    let mut capacity = Vec::new();
    for l in lines {
        match &l.event {
            Event::Wave { wave, nodes, capacity: figures } => {
                if let Some(f) = figures {
                    capacity.push(Capacity { before_wave: wave.clone(), figures: f.clone() });
                }
                if nodes.is_empty() {
                    continue;
                }
                let names = nodes.iter().map(ToString::to_string);
                match waves.iter_mut().find(|w| &w.name == wave) {
                    Some(w) => w.nodes.extend(names),
                    None => waves.push(Wave {
                        name: wave.clone(),
                        nodes: names.collect(),
                        from: Some(l.at),
                        to: Some(l.at),
                    }),
                }
            }
            event @ (Event::Drained { .. }
            | Event::LeftAlone { .. }
            | Event::Applied { .. }
            | Event::Committed { .. }
            | Event::Failed { .. }
            | Event::Resumed { .. }
            | Event::Held { .. }) => {
                let Some(node) = event.node() else { continue };
                let Some(wave) = plan.node(node).and_then(|p| p.wave.as_ref()) else { continue };
                if let Some(w) = waves.iter_mut().find(|w| &w.name == wave) {
                    w.to = w.to.max(Some(l.at));
                }
            }
            _ => {}
        }
    }
    for w in &mut waves {
        w.nodes.sort();
        w.nodes.dedup();
    }
    (waves, capacity)
}
