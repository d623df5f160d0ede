//! `rollout next` and `rollout judge`: before a wave, whether it starts (the run still going,
//! Ansible's batch exactly the plan's wave, the capacity rule met); after it, what each node's
//! results mean (journaled as events), whether the run goes on, and what it rolls back — each
//! node to roll back drained first when it is back in service, and resumed after a green
//! restore.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::capacity::{self, Counts, Figures};
use super::journal::{Event, Line};
use super::plan::{Plan, Scheduler, Scope};
use super::results::{NodeResults, read};
use super::scheduler::SchedulerNode;
use super::{FleetError, NodeName};

/// Whether a wave starts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Next {
    pub wave: String,
    pub go: bool,
    /// Why not.
    pub reason: Option<String>,
    /// Nodes of the wave that failed an earlier step (adopt, stage): left out of the change.
    pub left_out: Vec<NodeName>,
    pub capacity: Option<Figures>,
}

/// What the run has done so far, from its journal.
#[derive(Debug, Default)]
pub struct Progress {
    pub stopped: Option<String>,
    /// The run paused after its canaries for an approval (not a stop: nothing failed).
    pub awaiting: Option<String>,
    pub started_waves: BTreeSet<String>,
    pub started_canaries: BTreeSet<NodeName>,
    pub failed: BTreeSet<NodeName>,
    /// Nodes whose change the run kept so far (applied and changed, not failed, not rolled
    /// back), with their wave.
    pub changed: BTreeMap<NodeName, String>,
    pub resumed: BTreeSet<NodeName>,
    /// The bundle a node adopted in this run.
    pub adopted: BTreeMap<NodeName, Option<String>>,
}

impl Progress {
    pub fn of(lines: &[Line]) -> Self {
        let mut p = Progress::default();
        for line in lines {
            match &line.event {
                Event::Stopped { reason } => {
                    p.stopped.get_or_insert_with(|| reason.clone());
                }
                Event::AwaitingApproval { reason } => {
                    p.awaiting.get_or_insert_with(|| reason.clone());
                }
                Event::Wave { wave, nodes, .. } => {
                    p.started_waves.insert(wave.clone());
                    if wave == "canary" {
                        p.started_canaries.extend(nodes.iter().cloned());
                    }
                }
                Event::Failed { node, .. } => {
                    p.failed.insert(node.clone());
                    p.changed.remove(node);
                }
                Event::Applied { node, wave, changed: true, .. } => {
                    p.changed.insert(node.clone(), wave.clone());
                }
                Event::RolledBack { node, .. } => {
                    p.changed.remove(node);
                }
                Event::Resumed { node } => {
                    p.resumed.insert(node.clone());
                }
                Event::Adopted { node, bundle, .. } => {
                    p.adopted.insert(node.clone(), bundle.clone());
                }
                _ => {}
            }
        }
        p
    }
}

/// Before wave `wave`, whose nodes Ansible put in this batch (`batch`): `rows` are the
/// scheduler's, for the run's partitions (Slurm), when it has a capacity rule.
pub fn next(
    plan: &Plan,
    progress: &Progress,
    wave: &str,
    batch: &[NodeName],
    rows: Option<&[SchedulerNode]>,
) -> Result<Next, FleetError> {
    // Unnamed, the wave is the one the batch's first node is in.
    let named = batch.first().and_then(|n| plan.node(n)).and_then(|p| p.wave.clone());
    let wave = if wave.is_empty() { named.as_deref().unwrap_or("") } else { wave };
    let mut out = Next { wave: wave.to_owned(), go: false, reason: None, left_out: Vec::new(), capacity: None };
    if let Some(stopped) = &progress.stopped {
        out.reason = Some(format!("the run stopped: {stopped}"));
        return Ok(out);
    }
    let Some(planned) = plan.wave(wave) else {
        out.reason = Some(format!("the plan has no wave `{wave}`"));
        return Ok(out);
    };
    if wave != "canary" && plan.approval.required && plan.approval.approved.is_none() {
        out.reason = Some(format!(
            "{}: the canaries are done; approve their evidence (`airlock approve --fleet DIR --run {}`, co-signed \
             to the approvers' threshold), then run again with airlock_approval=FILE",
            super::plan::AWAITING_APPROVAL,
            plan.run
        ));
        return Ok(out);
    }
    let asked: BTreeSet<&NodeName> = batch.iter().collect();
    // The canaries go one at a time: each batch is one canary not started yet.
    let want: BTreeSet<&NodeName> = if wave == "canary" {
        planned.nodes.iter().filter(|n| asked.contains(n) && !progress.started_canaries.contains(*n)).take(1).collect()
    } else {
        planned.nodes.iter().collect()
    };
    let started = wave != "canary" && progress.started_waves.contains(wave);
    if asked != want || want.is_empty() || started {
        let list = |s: &BTreeSet<&NodeName>| s.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(", ");
        out.reason = Some(if started {
            format!("{wave} started already in this run")
        } else {
            format!(
                "Ansible's batch ({}) is not the plan's {wave} ({}): a node was unreachable or left the play",
                list(&asked),
                planned.nodes.iter().map(NodeName::as_str).collect::<Vec<_>>().join(", ")
            )
        });
        return Ok(out);
    }
    out.left_out = batch.iter().filter(|n| progress.failed.contains(*n)).cloned().collect();
    // Canaries go one at a time; the rule is checked before each expansion batch.
    if let (Some(rule), true) = (&plan.capacity, wave != "canary") {
        let changing: Vec<String> = batch
            .iter()
            .filter(|n| !out.left_out.contains(n))
            .filter_map(|n| plan.node(n).map(|p| p.scheduler_name.clone()))
            .collect();
        let counts = match (plan.scheduler, rows) {
            (Scheduler::Slurm, Some(rows)) => {
                let ours = |reason: &str| {
                    super::scheduler::is_this_runs(reason, &plan.label, &plan.run)
                        || super::scheduler::is_airlock_hold(reason)
                };
                Counts::of_scheduler(rows, &changing, &ours)?
            }
            _ => Counts::of_variables(rule, changing.len())?,
        };
        let figures = capacity::judge(rule, counts)?;
        if !figures.ok {
            out.reason = Some(capacity::broken(&changing, &figures));
        }
        out.capacity = Some(figures);
    }
    out.go = out.reason.is_none();
    Ok(out)
}

/// The journal lines of `next`: the wave's start, or the run's stop.
pub fn next_events(n: &Next, batch: &[NodeName]) -> Vec<Event> {
    let nodes = batch.to_vec();
    if n.go {
        vec![Event::Wave { wave: n.wave.clone(), nodes, capacity: n.capacity.clone() }]
    } else {
        let reason = n.reason.clone().unwrap_or_default();
        // A capacity stop keeps its figures for the page; a run stopped before stays stopped.
        let mut events = Vec::new();
        if n.capacity.is_some() {
            events.push(Event::Wave { wave: n.wave.clone(), nodes: Vec::new(), capacity: n.capacity.clone() });
        }
        if reason.starts_with(super::plan::AWAITING_APPROVAL) {
            events.push(Event::AwaitingApproval { reason });
        } else if !reason.starts_with("the run stopped: ") {
            events.push(Event::Stopped { reason });
        }
        events
    }
}

/// A node to roll back, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rollback {
    pub node: NodeName,
    pub scheduler_name: String,
    /// The bundle it ran before the run (adopted in it, else current when planned).
    pub to: Option<String>,
    /// It is back in service: drain it (its jobs end) before its packages change.
    pub drain: bool,
    /// Resume it after a green restore (the scheduler holds it for the rollout).
    pub resume: bool,
}

/// After a wave: the run's decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judged {
    pub wave: String,
    pub go_on: bool,
    pub reason: Option<String>,
    pub failed: Vec<NodeName>,
    /// Green (or amber accepted) and not rolled back: back into service (under Slurm, those
    /// it drained; on any other scheduler, the site's resume tasks run for them).
    pub resume: Vec<NodeName>,
    /// Drained for this wave and not good: kept out, the scheduler's reason by node.
    pub hold: BTreeMap<NodeName, String>,
    pub rollback: Vec<Rollback>,
    /// The journal lines this judgement wrote (or, in a dry run, would write).
    #[serde(skip)]
    pub events: Vec<Event>,
}

/// What one node's results say.
struct Outcome {
    drained: bool,
    changed: bool,
    /// The scheduler found it someone else's: not changed, not ours to resume.
    left_alone: bool,
    failure: Option<(String, String)>,
}

fn outcome(plan: &Plan, wave: &str, results: &NodeResults, events: &mut Vec<Event>) -> Outcome {
    let node = results.node.clone();
    let mut out = Outcome { drained: false, changed: false, left_alone: false, failure: None };
    let parts = (
        read(results.drain.as_ref(), "drain"),
        read(results.apply.as_ref(), "apply"),
        read(results.commit.as_ref(), "commit"),
    );
    let (drain, apply, commit) = match parts {
        (Ok(drain), Ok(apply), Ok(commit)) => (drain, apply, commit),
        (Err(e), ..) | (_, Err(e), _) | (.., Err(e)) => {
            out.failure = Some(("red".into(), e.to_string()));
            return out;
        }
    };
    if let Some(drained) = drain.as_ref().filter(|d| d.ran_ok()) {
        if drained.held {
            let reason = drained.reason.clone().unwrap_or_default();
            events.push(Event::LeftAlone { node, reason: format!("out of service for someone else: {reason}") });
            out.left_alone = true;
            return out;
        }
        if drained.drained {
            out.drained = true;
            events.push(Event::Drained { node: node.clone(), waited_s: drained.waited });
        }
    }
    if let Some(failed) = drain.as_ref().filter(|d| d.went_wrong()) {
        out.failure = Some(("red".into(), failed.why("drain")));
        return out;
    }
    match apply.as_ref() {
        Some(applied) if applied.ran_ok() => {
            let bundle = applied.id.clone();
            events.push(Event::Applied {
                node: node.clone(),
                wave: wave.to_owned(),
                changed: applied.changed,
                bundle: bundle.clone(),
                verdict: applied.verdict.clone(),
                pending_reboot: applied.pending_reboot.clone(),
                record: applied.record.clone(),
            });
            out.changed = applied.changed;
            let pinned = plan.bundle.id.as_str();
            if bundle.as_deref() != Some(pinned) {
                let got = bundle.unwrap_or_else(|| "no bundle id".into());
                out.failure =
                    Some(("red".into(), format!("ended on {got}, not the run's bundle {pinned} ({})", plan.label)));
            }
        }
        Some(failed) if failed.went_wrong() => {
            out.failure = Some((failed.failed_verdict().unwrap_or_else(|| "red".into()), failed.why("apply")));
        }
        _ => {}
    }
    if let Some(committed) = commit.as_ref().filter(|c| !c.skipped) {
        if committed.ran_ok() {
            events.push(Event::Committed { node: node.clone(), verdict: committed.verdict.clone() });
        } else if out.failure.is_none() {
            out.failure = Some(("red".into(), committed.why("commit after the reboot")));
        }
    }
    if let (Some(f), None) = (&results.failure, &out.failure) {
        out.failure = Some(("red".into(), f.clone()));
    }
    out
}

/// After wave `wave`: each node's `results`, judged against the plan and the run so far.
pub fn judge(plan: &Plan, progress: &Progress, wave: &str, results: &[NodeResults]) -> Judged {
    let mut events = Vec::new();
    let mut failed = Vec::new();
    let mut reasons = Vec::new();
    let mut resume = Vec::new();
    let mut hold = BTreeMap::new();
    let mut changed_here = Vec::new();
    for r in results {
        let o = outcome(plan, wave, r, &mut events);
        if let Some((verdict, reason)) = o.failure {
            events.push(Event::Failed { node: r.node.clone(), wave: wave.to_owned(), reason: reason.clone() });
            reasons.push(format!("{}: {reason}", r.node));
            failed.push(r.node.clone());
            if o.drained {
                hold.insert(r.node.clone(), plan.hold_reason(&verdict));
            }
        } else {
            if o.changed {
                changed_here.push(r.node.clone());
            }
            // Back into service: what Slurm drained, and on any other scheduler (its own task
            // files drain) every node whose change was good.
            if o.drained || (plan.scheduler != Scheduler::Slurm && !o.left_alone) {
                resume.push(r.node.clone());
            }
        }
    }
    let go_on = failed.is_empty() && progress.stopped.is_none();
    let mut rollback = Vec::new();
    if !failed.is_empty() {
        let mut set: Vec<NodeName> = changed_here.clone();
        if plan.rollback_scope == Scope::All {
            for node in progress.changed.keys() {
                if !set.contains(node) && !failed.contains(node) {
                    set.push(node.clone());
                }
            }
        }
        let scheduled = plan.scheduler != Scheduler::None;
        for node in set {
            let Some(planned) = plan.node(&node) else { continue };
            let before = progress.adopted.get(&node).cloned().flatten().or_else(|| planned.current.clone());
            let here = changed_here.contains(&node);
            rollback.push(Rollback {
                scheduler_name: planned.scheduler_name.clone(),
                to: before,
                drain: scheduled && !here && progress.resumed.contains(&node),
                resume: scheduled,
                node,
            });
        }
        resume.retain(|n| !rollback.iter().any(|r| &r.node == n));
    }
    let reason = (!reasons.is_empty()).then(|| reasons.join("; "));
    if let Some(r) = &reason {
        events.push(Event::Stopped { reason: r.clone() });
    }
    Judged { wave: wave.to_owned(), go_on, reason, failed, resume, hold, rollback, events }
}

/// What a step's results are of (`rollout note --step`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `apply --adopt` before the waves.
    Adopt,
    /// `apply --download-only` before the waves.
    Stage,
    /// After a wave: back into service, or held.
    After,
    /// The rollback of the nodes `judge` named.
    Rollback,
}

/// The journal lines of a step's results. A node whose adopt or stage failed is left out of
/// its wave (and the run ends red); a rollback that failed, or took longer than
/// `max_seconds`, stops the run.
pub fn note(step: Step, results: &[NodeResults], max_seconds: Option<f64>) -> Vec<Event> {
    let mut events = Vec::new();
    let mut stops = Vec::new();
    for r in results {
        let node = r.node.clone();
        let part = |v: Option<&serde_json::Value>, what: &'static str| read(v, what);
        match step {
            Step::Adopt | Step::Stage => {
                let wave = if step == Step::Adopt { "adopt" } else { "stage" };
                match part(r.step.as_ref(), wave) {
                    Ok(Some(t)) if t.ran_ok() => events.push(if step == Step::Adopt {
                        Event::Adopted { node, bundle: t.id, record: t.record }
                    } else {
                        Event::Staged { node, record: t.record }
                    }),
                    Ok(Some(t)) if t.went_wrong() => {
                        events.push(Event::Failed { node, wave: wave.into(), reason: t.why(wave) });
                    }
                    Ok(_) => {}
                    Err(e) => events.push(Event::Failed { node, wave: wave.into(), reason: e.to_string() }),
                }
            }
            Step::After => {
                if let Ok(Some(t)) = part(r.resume.as_ref(), "resume")
                    && t.ran_ok()
                    && t.changed
                {
                    events.push(Event::Resumed { node: node.clone() });
                }
                if let Ok(Some(t)) = part(r.hold.as_ref(), "hold")
                    && t.ran_ok()
                    && t.changed
                {
                    events.push(Event::Held { node, reason: t.reason.unwrap_or_default() });
                }
            }
            Step::Rollback => {
                if let Ok(Some(t)) = part(r.drain.as_ref(), "drain")
                    && t.ran_ok()
                    && t.drained
                {
                    events.push(Event::Drained { node: node.clone(), waited_s: t.waited });
                }
                let failed = match part(r.rollback.as_ref(), "rollback") {
                    Ok(Some(t)) if t.ran_ok() => {
                        events.push(Event::RolledBack { node: node.clone(), to: t.id.clone(), seconds: t.seconds });
                        match (t.seconds, max_seconds) {
                            (Some(s), Some(max)) if max > 0.0 && s > max => {
                                Some(format!("rollback took {s:.1} s, more than airlock_rollback_max_seconds {max}"))
                            }
                            _ => None,
                        }
                    }
                    Ok(Some(t)) if t.went_wrong() => Some(t.why("rollback")),
                    Ok(_) => r.failure.clone().map(|f| format!("rollback: {f}")),
                    Err(e) => Some(e.to_string()),
                };
                if let Some(reason) = failed {
                    stops.push(format!("{node}: {reason}"));
                    events.push(Event::RollbackFailed { node: node.clone(), reason });
                }
                if let Ok(Some(t)) = part(r.resume.as_ref(), "resume")
                    && t.ran_ok()
                    && t.changed
                {
                    events.push(Event::Resumed { node });
                }
            }
        }
    }
    if !stops.is_empty() {
        events.push(Event::Stopped { reason: stops.join("; ") });
    }
    events
}

#[cfg(test)]
mod tests {
    use super::super::capacity::Rule;
    use super::super::plan::{CurrentBundle, NodeFacts, PlanInput, ProbeFacts, Resolved, plan};
    use super::*;
    use crate::clock::Timestamp;
    use crate::site::BundleId;

    const ID: &str = "0123456789abcdef";
    const OLD: &str = "fedcba9876543210";

    fn name(n: &str) -> NodeName {
        NodeName::try_from(n.to_owned()).unwrap()
    }

    fn the_plan(scheduler: Scheduler, scope: Scope, capacity: Option<Rule>) -> Plan {
        let nodes = ["a1", "a2", "a3", "b1", "b2"]
            .iter()
            .map(|n| NodeFacts {
                node: name(n),
                scheduler_name: None,
                probe: Some(ProbeFacts {
                    tuple: Some(n[..1].to_owned()),
                    current: Some(CurrentBundle { id: Some(OLD.into()), version: None }),
                    failed: false,
                    msg: None,
                }),
                scheduler: Some(super::super::plan::SchedulerFacts {
                    state: Some("idle".into()),
                    reason: None,
                    failed: false,
                    msg: None,
                }),
            })
            .collect();
        let input = PlanInput {
            source: "http://m/".into(),
            release: None,
            bundle: Resolved { id: BundleId::parse(ID).unwrap(), name: Some("r".into()), version: Some("2".into()) },
            batches: vec![super::super::plan::BatchSize::Count(2)],
            capacity,
            scheduler,
            rollback_scope: scope,
            adopt: None,
            adopt_release: None,
            stage: false,
            nodes,
            scheduler_states: None,
            approval_required: false,
            approval: None,
            approval_root: None,
            approved: None,
        };
        plan("run-1".parse().unwrap(), Timestamp::from_unix(0), input).unwrap()
    }

    fn applied(node: &str, id: &str) -> NodeResults {
        NodeResults {
            node: name(node),
            drain: Some(serde_json::json!({"changed": true, "drained": true, "waited": 1.5})),
            apply: Some(serde_json::json!({"changed": true, "id": id, "verdict": "green"})),
            commit: Some(serde_json::json!({"skipped": true})),
            rollback: None,
            resume: None,
            hold: None,
            step: None,
            failure: None,
        }
    }

    fn red(node: &str) -> NodeResults {
        let mut r = applied(node, ID);
        r.apply = Some(
            serde_json::json!({"failed": true, "msg": "red: firmware", "result": {"validation": {"verdict": "red"}}}),
        );
        r
    }

    fn journal(events: Vec<Event>) -> Vec<Line> {
        events.into_iter().map(|event| Line { at: Timestamp::from_unix(0), event }).collect()
    }

    #[test]
    fn a_green_wave_goes_on_and_resumes_its_nodes() {
        let p = the_plan(Scheduler::Slurm, Scope::Batch, None);
        assert_eq!(p.waves.iter().map(|w| w.name.as_str()).collect::<Vec<_>>(), ["canary", "batch 1", "batch 2"]);
        let j = judge(&p, &Progress::default(), "canary", &[applied("a1", ID), applied("b1", ID)]);
        assert!(j.go_on && j.rollback.is_empty() && j.hold.is_empty(), "{j:?}");
        assert_eq!(j.resume, [name("a1"), name("b1")]);
        assert!(
            j.events.iter().any(|e| matches!(e, Event::Drained { waited_s: Some(w), .. } if (*w - 1.5).abs() < 1e-9))
        );
    }

    #[test]
    fn a_node_on_another_bundle_stops_the_run() {
        let p = the_plan(Scheduler::None, Scope::Batch, None);
        let j = judge(&p, &Progress::default(), "canary", &[applied("a1", ID), applied("b1", OLD)]);
        assert!(!j.go_on, "{j:?}");
        assert_eq!(j.failed, [name("b1")]);
        assert!(j.reason.as_deref().is_some_and(|r| r.contains("ended on fedcba9876543210, not the run's bundle")));
        assert_eq!(j.rollback.len(), 1, "a1 changed in the failed wave is rolled back");
    }

    #[test]
    fn scope_batch_rolls_back_the_batch_scope_all_every_change_draining_those_in_service() {
        let canaries = journal(vec![
            Event::Wave { wave: "canary".into(), nodes: vec![name("a1"), name("b1")], capacity: None },
            Event::Applied {
                node: name("a1"),
                wave: "canary".into(),
                changed: true,
                bundle: Some(ID.into()),
                verdict: None,
                pending_reboot: None,
                record: None,
            },
            Event::Resumed { node: name("a1") },
            Event::Applied {
                node: name("b1"),
                wave: "canary".into(),
                changed: true,
                bundle: Some(ID.into()),
                verdict: None,
                pending_reboot: None,
                record: None,
            },
            Event::Resumed { node: name("b1") },
            Event::Adopted { node: name("b1"), bundle: Some("1111111111111111".into()), record: None },
        ]);
        let progress = Progress::of(&canaries);
        let results = [applied("a2", ID), red("a3")];
        let batch = judge(&the_plan(Scheduler::Slurm, Scope::Batch, None), &progress, "batch 1", &results);
        assert!(!batch.go_on);
        assert_eq!(batch.failed, [name("a3")]);
        assert_eq!(batch.hold, BTreeMap::from([(name("a3"), "airlock red r-2 run run-1".to_owned())]));
        let nodes: Vec<(&str, bool, bool)> =
            batch.rollback.iter().map(|r| (r.node.as_str(), r.drain, r.resume)).collect();
        assert_eq!(nodes, [("a2", false, true)], "still drained from its change: resumed after the restore");
        assert!(batch.resume.is_empty(), "a node to roll back is not resumed before");

        let all = judge(&the_plan(Scheduler::Slurm, Scope::All, None), &progress, "batch 1", &results);
        let nodes: Vec<(&str, bool, Option<&str>)> =
            all.rollback.iter().map(|r| (r.node.as_str(), r.drain, r.to.as_deref())).collect();
        assert_eq!(
            nodes,
            [("a2", false, Some(OLD)), ("a1", true, Some(OLD)), ("b1", true, Some("1111111111111111"))],
            "the canaries are back in service: drained first; b1 goes back to the baseline it adopted"
        );
        let none = judge(&the_plan(Scheduler::None, Scope::All, None), &progress, "batch 1", &results);
        assert!(none.rollback.iter().all(|r| !r.drain && !r.resume), "no scheduler: nothing to drain");
        let green = judge(&the_plan(Scheduler::None, Scope::Batch, None), &progress, "batch 1", &results[..1]);
        assert_eq!(green.resume, [name("a2")], "the site's resume tasks run for a good node without Slurm");
    }

    #[test]
    fn an_amber_stack_not_accepted_is_held_as_amber() {
        let p = the_plan(Scheduler::Slurm, Scope::Batch, None);
        let mut r = applied("a1", ID);
        r.apply = Some(
            serde_json::json!({"failed": true, "msg": "validation is amber", "result": {"error": {"verdict": "amber"}}}),
        );
        let j = judge(&p, &Progress::default(), "canary", &[r]);
        assert_eq!(j.hold.get(&name("a1")).map(String::as_str), Some("airlock amber r-2 run run-1"));
    }

    #[test]
    fn a_result_a_node_garbled_is_its_own_failure() {
        let p = the_plan(Scheduler::None, Scope::Batch, None);
        let mut bad = applied("a1", ID);
        bad.apply = Some(serde_json::json!(["not", "a", "result"]));
        let j = judge(&p, &Progress::default(), "canary", &[bad, applied("b1", ID)]);
        assert_eq!(j.failed, [name("a1")]);
        assert!(j.reason.unwrap().contains("not an object: a list"));
        let mut unreachable = applied("b1", ID);
        unreachable.apply = Some(serde_json::json!({"unreachable": true, "msg": "ssh: timed out"}));
        let j = judge(&p, &Progress::default(), "canary", &[unreachable]);
        assert!(j.reason.unwrap().contains("apply: unreachable: ssh: timed out"));
    }

    #[test]
    fn an_admins_node_found_at_drain_is_left_alone_not_failed() {
        let p = the_plan(Scheduler::Slurm, Scope::Batch, None);
        let mut r = applied("a1", ID);
        r.drain = Some(serde_json::json!({"changed": false, "held": true, "reason": "maint"}));
        r.apply = Some(serde_json::json!({"skipped": true}));
        let j = judge(&p, &Progress::default(), "canary", &[r]);
        assert!(j.go_on && j.resume.is_empty() && j.failed.is_empty(), "{j:?}");
        assert!(matches!(&j.events[0], Event::LeftAlone { .. }));
    }

    #[test]
    fn with_an_approval_required_the_canaries_go_and_the_batches_wait_for_it() {
        let mut p = the_plan(Scheduler::None, Scope::Batch, None);
        p.approval.required = true;
        assert!(next(&p, &Progress::default(), "canary", &[name("a1")], None).unwrap().go);
        let batch1 = p.wave("batch 1").unwrap().nodes.clone();
        let n = next(&p, &Progress::default(), "batch 1", &batch1, None).unwrap();
        assert!(!n.go && n.reason.as_deref().unwrap().starts_with(super::super::plan::AWAITING_APPROVAL), "{n:?}");
        let events = next_events(&n, &batch1);
        assert!(matches!(events.as_slice(), [Event::AwaitingApproval { .. }]), "a pause, not a stop: {events:?}");
        let progress = Progress::of(&journal(events));
        assert!(progress.stopped.is_none() && progress.awaiting.is_some());
        p.approval.approved = Some(super::super::plan::Approved {
            file: "approval.dsse.json".into(),
            sha256: crate::digest::Sha256::of_bytes(b"approval"),
            run: "run-0".into(),
            approvers: Vec::new(),
        });
        assert!(next(&p, &Progress::default(), "batch 1", &batch1, None).unwrap().go, "approved: the batches go");
    }

    #[test]
    fn next_checks_the_batch_the_stop_and_the_capacity() {
        let rule = Rule { total: Some(5), reserved: Some(1), demand: 2, headroom: 0, per_node: 1 };
        let p = the_plan(Scheduler::None, Scope::Batch, Some(rule));
        let batch1 = p.wave("batch 1").unwrap().nodes.clone();
        let n = next(&p, &Progress::default(), "batch 1", &batch1, None).unwrap();
        assert!(n.go && n.capacity.as_ref().is_some_and(|c| c.available == 2), "{n:?}");
        let canary = next(&p, &Progress::default(), "canary", &[name("a1")], None).unwrap();
        assert!(canary.go && canary.capacity.is_none(), "canaries go one at a time, no capacity check");
        let both = next(&p, &Progress::default(), "canary", &p.groups.canary, None).unwrap();
        assert!(!both.go, "two canaries at once: {both:?}");
        let after = Progress::of(&journal(next_events(&canary, &[name("a1")])));
        assert!(!next(&p, &after, "canary", &[name("a1")], None).unwrap().go, "a canary does not go twice");
        assert!(next(&p, &after, "canary", &[name("b1")], None).unwrap().go);
        let wrong = next(&p, &Progress::default(), "batch 1", &[name("a2")], None).unwrap();
        assert!(!wrong.go && wrong.reason.unwrap().contains("is not the plan's batch 1"));
        let stopped = Progress { stopped: Some("b1: red".into()), ..Progress::default() };
        let n = next(&p, &stopped, "batch 1", &batch1, None).unwrap();
        assert_eq!(n.reason.as_deref(), Some("the run stopped: b1: red"));
        assert!(next_events(&n, &batch1).is_empty(), "a stopped run is not stopped twice");
        let tight = Rule { total: Some(4), reserved: Some(1), demand: 2, headroom: 0, per_node: 1 };
        let p = the_plan(Scheduler::None, Scope::Batch, Some(tight));
        let n = next(&p, &Progress::default(), "batch 1", &batch1, None).unwrap();
        assert!(!n.go && n.reason.as_deref().unwrap().starts_with("capacity rule broken before the batch a2, a3"));
        let events = next_events(&n, &batch1);
        assert!(matches!(&events[0], Event::Wave { nodes, capacity: Some(_), .. } if nodes.is_empty()));
        assert!(matches!(&events[1], Event::Stopped { .. }));
    }

    #[test]
    fn notes_journal_each_steps_outcome_and_a_slow_rollback_stops_the_run() {
        let with = |f: &dyn Fn(&mut NodeResults)| {
            let mut r = applied("a1", ID);
            r.drain = None;
            r.apply = None;
            r.commit = None;
            f(&mut r);
            r
        };
        let adopt = [
            with(&|r| r.step = Some(serde_json::json!({"changed": true, "id": OLD, "record": "x"}))),
            with(&|r| r.step = Some(serde_json::json!({"failed": true, "msg": "not the baseline"}))),
        ];
        let events = note(Step::Adopt, &adopt, None);
        assert!(matches!(&events[0], Event::Adopted { bundle: Some(b), .. } if b == OLD));
        assert!(
            matches!(&events[1], Event::Failed { wave, reason, .. } if wave == "adopt" && reason == "adopt: not the baseline")
        );
        let progress = Progress::of(&journal(events));
        assert!(progress.stopped.is_none(), "a node that cannot adopt is left out; the run goes on");
        let p = the_plan(Scheduler::None, Scope::Batch, None);
        let n = next(&p, &progress, "canary", &[name("a1")], None).unwrap();
        assert!(n.go && n.left_out == [name("a1")], "{n:?}");

        let rolled = [with(&|r| {
            r.drain = Some(serde_json::json!({"changed": true, "drained": true}));
            r.rollback = Some(serde_json::json!({"changed": true, "seconds": 12.5}));
            r.resume = Some(serde_json::json!({"changed": true}));
        })];
        let events = note(Step::Rollback, &rolled, Some(10.0));
        let kinds: Vec<&str> = events
            .iter()
            .map(|e| match e {
                Event::Drained { .. } => "drained",
                Event::RolledBack { .. } => "rolled back",
                Event::RollbackFailed { .. } => "rollback failed",
                Event::Resumed { .. } => "resumed",
                Event::Stopped { .. } => "stopped",
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["drained", "rolled back", "rollback failed", "resumed", "stopped"]);
        assert!(note(Step::Rollback, &rolled, Some(20.0)).iter().all(|e| !matches!(e, Event::Stopped { .. })));
    }

    #[test]
    fn overflowing_capacity_figures_are_an_error() {
        let rule = Rule { total: Some(i64::MAX), reserved: Some(0), demand: 1, headroom: 0, per_node: i64::MAX };
        let p = the_plan(Scheduler::None, Scope::Batch, Some(rule));
        let batch1 = p.wave("batch 1").unwrap().nodes.clone();
        assert!(matches!(next(&p, &Progress::default(), "batch 1", &batch1, None), Err(FleetError::Overflow { .. })));
    }
}
