//! Property tests of the rollout's decisions over many generated inventories (tuples, current
//! bundles, scheduler states, batch sizes, scopes): the plan accounts for every node once,
//! its waves partition the eligible nodes in inventory order, and a run walked wave by wave
//! with `next` and `judge` goes on when all is green and rolls back exactly what it changed
//! when a node fails. A small xorshift generator keeps the cases reproducible (seeded, no
//! dependency).

use std::collections::BTreeSet;

use super::NodeName;
use super::journal::{Event, Line};
use super::judge::{Progress, judge, next, next_events};
use super::plan::{BatchSize, CurrentBundle, NodeFacts, Part, PlanInput, ProbeFacts, Resolved, SchedulerFacts};
use super::plan::{Scheduler, Scope, plan};
use super::results::NodeResults;
use crate::clock::Timestamp;
use crate::site::BundleId;

const ID: &str = "0123456789abcdef";
const OLD: &str = "fedcba9876543210";

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn inventory(rng: &mut Rng, scheduler: Scheduler) -> Vec<NodeFacts> {
    let count = 1 + rng.below(40);
    (0..count)
        .map(|i| {
            let tuple = ["A", "B", "C"][usize::try_from(rng.below(3)).unwrap()];
            let current = match rng.below(4) {
                0 => None,
                1 => Some(ID),
                _ => Some(OLD),
            };
            let (state, reason) = match rng.below(8) {
                0 => ("drained", "bad DIMM"),
                1 => ("down", ""),
                2 => ("drained", "airlock red rocm-1 run r0 record x.json"),
                _ => ("idle", ""),
            };
            NodeFacts {
                node: NodeName::try_from(format!("n{i}")).unwrap(),
                scheduler_name: None,
                probe: Some(ProbeFacts {
                    tuple: Some(tuple.into()),
                    current: current.map(|c| CurrentBundle { id: Some(c.into()), version: None }),
                    failed: rng.below(20) == 0,
                    msg: None,
                }),
                scheduler: (scheduler == Scheduler::Slurm).then(|| SchedulerFacts {
                    state: Some(state.into()),
                    reason: Some(reason.into()),
                    failed: false,
                    msg: None,
                }),
            }
        })
        .collect()
}

fn batches(rng: &mut Rng) -> Vec<BatchSize> {
    (0..=rng.below(3))
        .map(|_| match rng.below(3) {
            0 => BatchSize::Count(1 + rng.below(5)),
            1 => BatchSize::Text(format!("{}%", 1 + rng.below(100))),
            _ => BatchSize::Text((1 + rng.below(3)).to_string()),
        })
        .collect()
}

fn green(node: &NodeName, drained: bool) -> NodeResults {
    NodeResults {
        node: node.clone(),
        drain: drained.then(|| serde_json::json!({"changed": true, "drained": true})),
        apply: Some(serde_json::json!({"changed": true, "id": ID, "verdict": "green"})),
        commit: None,
        rollback: None,
        resume: None,
        hold: None,
        step: None,
        failure: None,
    }
}

#[test]
#[allow(clippy::too_many_lines, reason = "one walk of a generated run, each invariant checked on the way")]
fn plans_account_for_every_node_and_runs_roll_back_exactly_what_they_changed() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for case in 0..500 {
        let scheduler = if rng.below(2) == 0 { Scheduler::Slurm } else { Scheduler::None };
        let scope = if rng.below(2) == 0 { Scope::Batch } else { Scope::All };
        let nodes = inventory(&mut rng, scheduler);
        let input = PlanInput {
            source: "http://mirror/".into(),
            release: None,
            bundle: Resolved { id: BundleId::parse(ID).unwrap(), name: Some("rocm".into()), version: Some("2".into()) },
            batches: batches(&mut rng),
            capacity: None,
            scheduler,
            rollback_scope: scope,
            adopt: None,
            adopt_release: None,
            stage: false,
            nodes: nodes.clone(),
            scheduler_states: None,
            approval_required: false,
            approval: None,
            approval_root: None,
            approved: None,
        };
        let p = plan("r1".parse().unwrap(), Timestamp::from_unix(0), input).unwrap();
        // Every node once, in inventory order.
        let planned: Vec<&NodeName> = p.nodes.iter().map(|n| &n.node).collect();
        let given: Vec<&NodeName> = nodes.iter().map(|n| &n.node).collect();
        assert_eq!(planned, given, "case {case}");
        // Skip exactly the eligible-by-scheduler nodes already on the run's bundle.
        for (n, facts) in p.nodes.iter().zip(&nodes) {
            let on_id = facts.probe.as_ref().and_then(|p| p.current.as_ref()).and_then(|c| c.id.as_deref()) == Some(ID);
            if n.part == Part::Skip {
                assert!(on_id, "case {case}: {n:?}");
            }
            if matches!(n.part, Part::Canary | Part::Batch) {
                assert!(!on_id, "case {case}: {n:?}");
            }
        }
        // One canary per tuple with an eligible node: its first.
        let mut seen = BTreeSet::new();
        for n in p.nodes.iter().filter(|n| matches!(n.part, Part::Canary | Part::Batch)) {
            let first = seen.insert(n.tuple.clone());
            assert_eq!(n.part == Part::Canary, first, "case {case}: {n:?}");
        }
        // The waves partition the eligible nodes, batches in inventory order, sizes as planned.
        let mut in_waves: Vec<&NodeName> = p.waves.iter().flat_map(|w| &w.nodes).collect();
        let eligible: Vec<&NodeName> = p.groups.eligible.iter().collect();
        assert_eq!(in_waves.len(), eligible.len(), "case {case}");
        in_waves.sort();
        in_waves.dedup();
        assert_eq!(in_waves.len(), eligible.len(), "case {case}: a node in two waves");
        let expand: Vec<&NodeName> = p.waves.iter().filter(|w| w.name != "canary").flat_map(|w| &w.nodes).collect();
        assert_eq!(expand, p.groups.expand.iter().collect::<Vec<_>>(), "case {case}");
        let sizes: Vec<usize> = p.waves.iter().filter(|w| w.name != "canary").map(|w| w.nodes.len()).collect();
        assert!(sizes == p.sizes && sizes.iter().all(|s| *s >= 1), "case {case}");

        // Walk the run: canaries one at a time, then each batch; one node fails somewhere.
        let all_waves: Vec<(String, Vec<NodeName>)> = p
            .groups
            .canary
            .iter()
            .map(|c| ("canary".to_owned(), vec![c.clone()]))
            .chain(p.waves.iter().filter(|w| w.name != "canary").map(|w| (w.name.clone(), w.nodes.clone())))
            .collect();
        let fail_at =
            if all_waves.is_empty() { 0 } else { usize::try_from(rng.below(all_waves.len() as u64 * 2)).unwrap() };
        let mut lines: Vec<Line> = Vec::new();
        let mut changed: Vec<NodeName> = Vec::new();
        let drained = scheduler == Scheduler::Slurm;
        for (i, (wave, batch)) in all_waves.iter().enumerate() {
            let progress = Progress::of(&lines);
            let n = next(&p, &progress, if wave == "canary" { wave } else { "" }, batch, None).unwrap();
            assert!(n.go, "case {case}: {n:?}");
            lines.extend(next_events(&n, batch).into_iter().map(|event| Line { at: Timestamp::from_unix(0), event }));
            let mut results: Vec<NodeResults> = batch.iter().map(|b| green(b, drained)).collect();
            let failing = i == fail_at;
            if failing {
                results[0].apply = Some(serde_json::json!({"failed": true, "msg": "red"}));
            }
            let j = judge(&p, &Progress::of(&lines), &n.wave, &results);
            lines.extend(j.events.iter().cloned().map(|event| Line { at: Timestamp::from_unix(0), event }));
            let here: Vec<NodeName> = batch.iter().skip(usize::from(failing)).cloned().collect();
            if !failing {
                assert!(j.go_on && j.rollback.is_empty() && j.failed.is_empty(), "case {case}: {j:?}");
                assert_eq!(j.resume, here, "case {case}");
                if drained {
                    lines.extend(here.iter().map(|node| Line {
                        at: Timestamp::from_unix(0),
                        event: Event::Resumed { node: node.clone() },
                    }));
                }
                changed.extend(here);
                continue;
            }
            assert!(!j.go_on && j.failed == [batch[0].clone()], "case {case}: {j:?}");
            let mut want: Vec<NodeName> = here.clone();
            if scope == Scope::All {
                want.extend(changed.iter().cloned());
            }
            let mut got: Vec<NodeName> = j.rollback.iter().map(|r| r.node.clone()).collect();
            want.sort();
            got.sort();
            assert_eq!(got, want, "case {case}: exactly what the run changed");
            for r in &j.rollback {
                assert_eq!(r.drain, drained && !here.contains(&r.node), "case {case}: {r:?}");
                assert_eq!(r.to.as_deref(), p.node(&r.node).unwrap().current.as_deref(), "case {case}");
            }
            // Nothing after a stop starts.
            if let Some((wave, batch)) = all_waves.get(i + 1) {
                let n = next(&p, &Progress::of(&lines), if wave == "canary" { wave } else { "" }, batch, None).unwrap();
                assert!(!n.go, "case {case}");
            }
            break;
        }
    }
}
