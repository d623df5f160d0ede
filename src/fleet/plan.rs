//! `rollout plan`: every inventory node's part in the run, decided once at its start from what
//! the nodes and the scheduler said, and the one bundle id the whole run takes.
//!
//! Each node is exactly one of: `skip` (already on the run's bundle: no drain, no apply),
//! `reserved` or `unavailable` (the scheduler's reason, or a probe that failed), `canary` (the
//! first eligible node of its hardware tuple, in inventory order), or in a numbered `batch`.
//! Batches take Ansible's `serial` sizes (a count, or a percentage of the nodes to expand to,
//! at least one; the last size repeats) over the non-canary nodes in inventory order.

use std::collections::BTreeSet;

use serde::{Deserialize, Deserializer, Serialize};

use super::capacity::Rule;
use super::scheduler::{self, Service};
use super::{FleetError, NodeName};
use crate::clock::Timestamp;
use crate::site::BundleId;
use crate::site::records::RunId;

pub const PLAN_FILE: &str = "plan.json";
pub const SCHEMA: &str = "airlock.rollout-plan/v1";
/// The most bytes of a plan read back, and of the facts a plan is made from.
pub const MAX_PLAN_BYTES: u64 = 64 << 20;

/// The bundle the run takes, as resolved once at its start (`rollout resolve`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolved {
    pub id: BundleId,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
}

impl Resolved {
    /// What Slurm reasons and the page call it: `NAME-VERSION`, else its id.
    pub fn label(&self) -> String {
        match (&self.name, &self.version) {
            (Some(n), Some(v)) => format!("{n}-{v}"),
            _ => self.id.to_string(),
        }
    }
}

/// One of Ansible's `serial` sizes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum BatchSize {
    Count(u64),
    /// `"10%"`, or a count written as a string.
    Text(String),
}

impl BatchSize {
    /// The batch's size out of `of` nodes, as Ansible computes it: a percentage rounds down
    /// and is at least one.
    fn of(&self, of: usize) -> Result<usize, FleetError> {
        let bad = |detail: String| FleetError::Input { what: "airlock_batches".into(), detail };
        let n = match self {
            BatchSize::Count(n) => usize::try_from(*n).map_err(|_| bad(format!("{n} is too large")))?,
            BatchSize::Text(t) => match t.trim().strip_suffix('%') {
                Some(pct) => {
                    let pct: usize = pct.trim().parse().map_err(|_| bad(format!("`{t}` is not a percentage")))?;
                    if pct == 0 || pct > 100 {
                        return Err(bad(format!("`{t}`: a percentage from 1% to 100%")));
                    }
                    (of.saturating_mul(pct) / 100).max(1)
                }
                None => t.trim().parse().map_err(|_| bad(format!("`{t}` is neither a count nor a percentage")))?,
            },
        };
        if n == 0 {
            return Err(bad("a batch of 0 nodes".into()));
        }
        Ok(n)
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheduler {
    #[default]
    None,
    Slurm,
    Kubernetes,
}

/// What a failed batch rolls back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The failed batch's nodes that changed.
    #[default]
    Batch,
    /// Every node this run changed, earlier waves included.
    All,
}

/// What the probe step returned for a node (the collection's `probe` module, as registered).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ProbeFacts {
    #[serde(default)]
    pub tuple: Option<String>,
    #[serde(default)]
    pub current: Option<CurrentBundle>,
    #[serde(default)]
    pub failed: bool,
    #[serde(default)]
    pub msg: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct CurrentBundle {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
}

/// What the scheduler step returned for a node (the `slurm` module's `state`, as registered).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SchedulerFacts {
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub failed: bool,
    #[serde(default)]
    pub msg: Option<String>,
}

/// What the scheduler step that reads every node's state returned (its rows, or its failure).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SchedulerStates {
    #[serde(default)]
    pub rows: Option<Vec<scheduler::SchedulerNode>>,
    #[serde(default)]
    pub failed: bool,
    #[serde(default)]
    pub msg: Option<String>,
}

/// One inventory node as the playbook saw it before the run.
#[derive(Debug, Clone, Deserialize)]
pub struct NodeFacts {
    pub node: NodeName,
    /// Its scheduler name (`airlock_slurm_node`), when not its inventory name.
    #[serde(default, deserialize_with = "empty_none")]
    pub scheduler_name: Option<String>,
    #[serde(default)]
    pub probe: Option<ProbeFacts>,
    #[serde(default)]
    pub scheduler: Option<SchedulerFacts>,
}

/// The run's parameters and every node's facts, from the playbook.
#[derive(Debug, Clone, Deserialize)]
pub struct PlanInput {
    pub source: String,
    #[serde(default, deserialize_with = "empty_none")]
    pub release: Option<String>,
    pub bundle: Resolved,
    #[serde(default = "default_batches")]
    pub batches: Vec<BatchSize>,
    #[serde(default, deserialize_with = "empty_rule")]
    pub capacity: Option<Rule>,
    #[serde(default)]
    pub scheduler: Scheduler,
    #[serde(default)]
    pub rollback_scope: Scope,
    #[serde(default, deserialize_with = "empty_none")]
    pub adopt: Option<String>,
    #[serde(default, deserialize_with = "empty_none")]
    pub adopt_release: Option<String>,
    #[serde(default)]
    pub stage: bool,
    pub nodes: Vec<NodeFacts>,
    /// Every node the scheduler lists, read once for the whole run (the `slurm` module's
    /// `states`, as registered: one `sinfo` call, not one per node): a node's state and reason
    /// where its own facts carry none.
    #[serde(default)]
    pub scheduler_states: Option<SchedulerStates>,
    /// The canaries' evidence must be approved before any batch (`airlock_approval_required`).
    #[serde(default)]
    pub approval_required: bool,
    /// The approval this run expands on (`airlock_approval`), a file on the controller…
    #[serde(default, deserialize_with = "empty_none")]
    pub approval: Option<String>,
    /// … checked against this site root's trust (`airlock_approval_root`: its `approvers` role).
    #[serde(default, deserialize_with = "empty_none")]
    pub approval_root: Option<String>,
    /// The approval as `rollout plan` verified it (never read from the input).
    #[serde(skip)]
    pub approved: Option<Approved>,
}

/// Whether the run's batches wait for an approval, and the one it expands on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalGate {
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved: Option<Approved>,
}

/// An approval verified against the site's `approvers` role for the run's bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approved {
    pub file: String,
    pub sha256: crate::digest::Sha256,
    /// The run whose canaries it approved.
    pub run: String,
    pub approvers: Vec<crate::sign::KeyId>,
}

/// The reason `next` gives a batch that waits for the approval (and the journal keeps).
pub const AWAITING_APPROVAL: &str = "awaiting approval";

fn default_batches() -> Vec<BatchSize> {
    ["1", "10%", "25%", "100%"].iter().map(|s| BatchSize::Text((*s).to_owned())).collect()
}

/// An absent, null or empty string is none (Ansible's variables default to `""`).
fn empty_none<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.filter(|s| !s.trim().is_empty()))
}

/// An absent, null or empty mapping is no rule (`airlock_capacity: {}`).
fn empty_rule<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Rule>, D::Error> {
    let value = Option::<serde_json::Value>::deserialize(d)?;
    match value {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::Object(o)) if o.is_empty() => Ok(None),
        Some(v) => serde_json::from_value(v).map(Some).map_err(serde::de::Error::custom),
    }
}

/// A node's part in the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Part {
    /// Already on the run's bundle: nothing is done to it.
    Skip,
    /// Out of service for someone else's reason (an admin's drain, maintenance, a reservation).
    Reserved,
    /// Down, failed, or its probe failed.
    Unavailable,
    Canary,
    Batch,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedNode {
    pub node: NodeName,
    /// Its scheduler name.
    pub scheduler_name: String,
    pub tuple: Option<String>,
    /// The bundle it ran when the run started.
    pub current: Option<String>,
    pub current_version: Option<String>,
    pub part: Part,
    /// `canary` or `batch N`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wave: Option<String>,
    /// Why it is skipped, reserved or unavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// It adopts the baseline first (no current bundle, `airlock_adopt` set).
    #[serde(default)]
    pub adopt: bool,
    /// A reason of an earlier run's hold the drain may take over (the node is airlock's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub take_over: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedWave {
    pub name: String,
    pub nodes: Vec<NodeName>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Adopt {
    pub source: String,
    pub release: Option<String>,
}

/// The inventory's nodes in the groups the playbook's plays run on, in wave order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Groups {
    pub adopt: Vec<NodeName>,
    pub stage: Vec<NodeName>,
    pub canary: Vec<NodeName>,
    /// Every batch's nodes, batch after batch (the play's `serial` is `sizes`).
    pub expand: Vec<NodeName>,
    /// Every node the run may touch: adopt, stage, canary and batches.
    pub eligible: Vec<NodeName>,
}

/// The run's plan (`plan.json`, `schemas/rollout-plan.v1.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub schema: String,
    pub run: RunId,
    pub started: Timestamp,
    pub source: String,
    /// The release the run asked for (`airlock_release`), if any.
    pub release: Option<String>,
    /// The bundle every apply of the run takes.
    pub bundle: Resolved,
    /// `--release` for every apply of the run: the pinned id, when the source is a mirror.
    pub apply_release: Option<String>,
    /// The bundle as reasons name it.
    pub label: String,
    /// The exact reason a node drained for this run carries.
    pub drain_reason: String,
    pub scheduler: Scheduler,
    pub rollback_scope: Scope,
    pub capacity: Option<Rule>,
    pub batches: Vec<BatchSize>,
    pub adopt: Option<Adopt>,
    pub stage: bool,
    pub nodes: Vec<PlannedNode>,
    pub waves: Vec<PlannedWave>,
    pub groups: Groups,
    /// The expansion batches' sizes, in order (the playbook's `serial`).
    pub sizes: Vec<usize>,
    /// By node: an earlier run's hold reason its drain may take over (`take_over` of its node).
    pub take_over: std::collections::BTreeMap<NodeName, String>,
    /// One line a node, as a person reads the plan (`--check` prints it).
    #[serde(default)]
    pub summary: Vec<String>,
    /// Every node's scheduler name (what the capacity rule reads the partitions of).
    #[serde(default)]
    pub scheduler_names: Vec<String>,
    /// Whether the batches wait for an approval of the canaries, and the one the run expands on.
    #[serde(default)]
    pub approval: ApprovalGate,
}

impl Plan {
    pub fn node(&self, name: &NodeName) -> Option<&PlannedNode> {
        self.nodes.iter().find(|n| &n.node == name)
    }

    pub fn wave(&self, name: &str) -> Option<&PlannedWave> {
        self.waves.iter().find(|w| w.name == name)
    }

    /// The reason a node held after this run carries, before its record.
    pub fn hold_reason(&self, verdict: &str) -> String {
        scheduler::hold_reason(verdict, &self.label, &self.run)
    }
}

/// The plan for run `run` from `input`, started at `started`.
pub fn plan(run: RunId, started: Timestamp, input: PlanInput) -> Result<Plan, FleetError> {
    let mut seen = BTreeSet::new();
    for n in &input.nodes {
        if !seen.insert(&n.node) {
            return Err(FleetError::Input { what: "nodes".into(), detail: format!("`{}` is listed twice", n.node) });
        }
    }
    let id = input.bundle.id.to_string();
    let states = input.scheduler_states.as_ref().map(StatesByName::of);
    let mut nodes: Vec<PlannedNode> = input
        .nodes
        .iter()
        .map(|facts| {
            let state = facts.scheduler.clone().or_else(|| states.as_ref().and_then(|s| s.of_node(facts)));
            part_of(facts, state, &id, input.scheduler)
        })
        .collect();
    for n in &mut nodes {
        n.adopt = input.adopt.is_some() && n.current.is_none() && eligible(n.part);
    }
    // One canary per tuple: the first eligible node of it, in inventory order.
    let mut tuples = BTreeSet::new();
    for n in nodes.iter_mut().filter(|n| n.part == Part::Batch) {
        if tuples.insert(n.tuple.clone().unwrap_or_default()) {
            n.part = Part::Canary;
            n.wave = Some("canary".into());
        }
    }
    let canaries: Vec<NodeName> = nodes.iter().filter(|n| n.part == Part::Canary).map(|n| n.node.clone()).collect();
    let mut waves = Vec::new();
    if !canaries.is_empty() {
        waves.push(PlannedWave { name: "canary".into(), nodes: canaries.clone() });
    }
    let (batches, sizes) = batches(&mut nodes, &input.batches)?;
    waves.extend(batches);
    let pick = |f: &dyn Fn(&PlannedNode) -> bool| nodes.iter().filter(|n| f(n)).map(|n| n.node.clone()).collect();
    let groups = Groups {
        adopt: pick(&|n| n.adopt),
        stage: if input.stage { pick(&|n| eligible(n.part)) } else { Vec::new() },
        canary: canaries,
        expand: waves.iter().filter(|w| w.name != "canary").flat_map(|w| w.nodes.clone()).collect(),
        eligible: pick(&|n| eligible(n.part)),
    };
    let label = input.bundle.label();
    let apply_release = crate::site::mirror::is_mirror(&input.source).then(|| id.clone());
    let take_over = nodes.iter().filter_map(|n| Some((n.node.clone(), n.take_over.clone()?))).collect();
    let summary = nodes.iter().map(summary_line).collect();
    let scheduler_names = nodes.iter().map(|n| n.scheduler_name.clone()).collect();
    let required = input.approval_required || input.approved.is_some();
    Ok(Plan {
        approval: ApprovalGate { required, approved: input.approved },
        take_over,
        summary,
        scheduler_names,
        schema: SCHEMA.into(),
        drain_reason: scheduler::drain_reason(&label, &run),
        run,
        started,
        source: input.source,
        release: input.release,
        bundle: input.bundle,
        apply_release,
        label,
        scheduler: input.scheduler,
        rollback_scope: input.rollback_scope,
        capacity: input.capacity,
        batches: input.batches,
        adopt: input.adopt.map(|source| Adopt { source, release: input.adopt_release }),
        stage: input.stage,
        nodes,
        waves,
        groups,
        sizes,
    })
}

/// The non-canary eligible nodes in batches of Ansible's `serial` sizes, in inventory order;
/// each node gets its batch's name. The batches, and their sizes.
fn batches(nodes: &mut [PlannedNode], specs: &[BatchSize]) -> Result<(Vec<PlannedWave>, Vec<usize>), FleetError> {
    let rest: Vec<usize> = (0..nodes.len()).filter(|&i| nodes[i].part == Part::Batch).collect();
    let mut sizes = Vec::new();
    let mut waves = Vec::new();
    let mut at = 0;
    while at < rest.len() {
        let spec = specs
            .get(sizes.len())
            .or_else(|| specs.last())
            .ok_or_else(|| FleetError::Input { what: "airlock_batches".into(), detail: "no batch size".into() })?;
        let size = spec.of(rest.len())?.min(rest.len() - at);
        let name = format!("batch {}", sizes.len() + 1);
        let members: Vec<NodeName> = rest[at..at + size].iter().map(|&i| nodes[i].node.clone()).collect();
        for &i in &rest[at..at + size] {
            nodes[i].wave = Some(name.clone());
        }
        waves.push(PlannedWave { name, nodes: members });
        sizes.push(size);
        at += size;
    }
    Ok((waves, sizes))
}

/// A node's line of the plan as a person reads it.
fn summary_line(n: &PlannedNode) -> String {
    let what = n.wave.clone().unwrap_or_else(|| format!("{:?}", n.part).to_lowercase());
    let adopt = if n.adopt { ", adopts the baseline first" } else { "" };
    let why = n.reason.as_ref().map_or_else(String::new, |r| format!(" ({})", super::results::one_line(r)));
    format!("{}: {what}{why}{adopt}", n.node)
}

fn eligible(part: Part) -> bool {
    matches!(part, Part::Canary | Part::Batch)
}

/// The run's scheduler states by scheduler name (its first row of each), read once for every
/// node: a lookup, not a scan of the rows per node.
struct StatesByName<'a> {
    states: &'a SchedulerStates,
    rows: std::collections::BTreeMap<&'a str, &'a scheduler::SchedulerNode>,
}

impl<'a> StatesByName<'a> {
    fn of(states: &'a SchedulerStates) -> Self {
        let mut rows = std::collections::BTreeMap::new();
        for r in states.rows.iter().flatten() {
            rows.entry(r.node.as_str()).or_insert(r);
        }
        Self { states, rows }
    }

    /// A node's state from them: its row; a failure naming it when the scheduler does not list
    /// it, or the step's own when the states could not be read; none when the step did not run.
    fn of_node(&self, facts: &NodeFacts) -> Option<SchedulerFacts> {
        let failed = |msg: String| SchedulerFacts { state: None, reason: None, failed: true, msg: Some(msg) };
        if self.states.failed {
            return Some(failed(self.states.msg.clone().unwrap_or_else(|| "reading the states failed".into())));
        }
        self.states.rows.as_ref()?;
        let name = facts.scheduler_name.as_deref().unwrap_or(facts.node.as_str());
        Some(match self.rows.get(name) {
            Some(r) => SchedulerFacts {
                state: Some(r.state.clone()),
                reason: Some(r.reason.clone()),
                failed: false,
                msg: None,
            },
            None => failed(format!("the scheduler lists no node {name} (sinfo --Node)")),
        })
    }
}

/// A node's part before canaries and batches are told apart (every eligible node is `Batch`);
/// `state` is what the scheduler says of it (its own facts, else the run's states).
fn part_of(facts: &NodeFacts, state: Option<SchedulerFacts>, id: &str, scheduler: Scheduler) -> PlannedNode {
    let probe = facts.probe.clone().unwrap_or_default();
    let current = probe.current.as_ref().and_then(|c| c.id.clone());
    let mut n = PlannedNode {
        node: facts.node.clone(),
        scheduler_name: facts.scheduler_name.clone().unwrap_or_else(|| facts.node.to_string()),
        tuple: probe.tuple.clone(),
        current_version: probe.current.as_ref().and_then(|c| c.version.clone()),
        current: current.clone(),
        part: Part::Batch,
        wave: None,
        reason: None,
        adopt: false,
        take_over: None,
    };
    let mut set = |part: Part, reason: String| {
        n.part = part;
        n.reason = Some(reason);
    };
    if facts.probe.is_none() || probe.failed || probe.tuple.is_none() {
        let why = probe.msg.unwrap_or_else(|| "no probe result".into());
        set(Part::Unavailable, format!("probe failed: {why}"));
        return n;
    }
    if scheduler == Scheduler::Slurm {
        let s = state.unwrap_or_default();
        let (state, reason) = (s.state.unwrap_or_default(), s.reason.unwrap_or_default());
        let reason_or = if reason.is_empty() { "no reason".to_owned() } else { reason.clone() };
        if s.failed || state.is_empty() {
            let why = s.msg.unwrap_or_else(|| "no state".into());
            set(Part::Unavailable, format!("the scheduler does not know it: {why}"));
            return n;
        }
        match scheduler::service(&state) {
            Service::Broken => {
                set(Part::Unavailable, format!("{state}: {reason_or}"));
                return n;
            }
            Service::Held if scheduler::is_airlock_hold(&reason) => n.take_over = Some(reason),
            Service::Held => {
                set(Part::Reserved, format!("{state}: {reason_or}"));
                return n;
            }
            Service::In => {}
        }
    }
    if current.as_deref() == Some(id) {
        let at = probe.current.and_then(|c| c.version).map_or_else(String::new, |v| format!(" ({v})"));
        n.part = Part::Skip;
        n.reason = Some(format!("already on {id}{at}"));
        n.take_over = None;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0123456789abcdef";
    const OLD: &str = "fedcba9876543210";

    fn node(name: &str, tuple: &str, current: Option<&str>) -> NodeFacts {
        NodeFacts {
            node: NodeName::try_from(name.to_owned()).unwrap(),
            scheduler_name: None,
            probe: Some(ProbeFacts {
                tuple: Some(tuple.into()),
                current: current.map(|c| CurrentBundle { id: Some(c.into()), version: Some("v".into()) }),
                failed: false,
                msg: None,
            }),
            scheduler: None,
        }
    }

    fn slurm(mut n: NodeFacts, state: &str, reason: &str) -> NodeFacts {
        n.scheduler =
            Some(SchedulerFacts { state: Some(state.into()), reason: Some(reason.into()), failed: false, msg: None });
        n
    }

    fn input(nodes: Vec<NodeFacts>, batches: &[&str]) -> PlanInput {
        PlanInput {
            source: "http://mirror/".into(),
            release: None,
            bundle: Resolved { id: BundleId::parse(ID).unwrap(), name: Some("rocm".into()), version: Some("1".into()) },
            batches: batches.iter().map(|b| BatchSize::Text((*b).to_owned())).collect(),
            capacity: None,
            scheduler: Scheduler::None,
            rollback_scope: Scope::Batch,
            adopt: None,
            adopt_release: None,
            stage: false,
            nodes,
            scheduler_states: None,
            approval_required: false,
            approval: None,
            approval_root: None,
            approved: None,
        }
    }

    fn run() -> RunId {
        "r1".parse().unwrap()
    }

    fn names(v: &[NodeName]) -> Vec<&str> {
        v.iter().map(NodeName::as_str).collect()
    }

    #[test]
    fn one_canary_per_tuple_then_batches_in_inventory_order() {
        let nodes = vec![
            node("a1", "A", Some(OLD)),
            node("a2", "A", Some(OLD)),
            node("b1", "B", Some(OLD)),
            node("a3", "A", None),
            node("b2", "B", Some(OLD)),
            node("a4", "A", Some(OLD)),
        ];
        let p = plan(run(), Timestamp::from_unix(0), input(nodes, &["1", "2"])).unwrap();
        assert_eq!(names(&p.groups.canary), ["a1", "b1"]);
        let waves: Vec<(&str, Vec<&str>)> = p.waves.iter().map(|w| (w.name.as_str(), names(&w.nodes))).collect();
        assert_eq!(
            waves,
            [
                ("canary", vec!["a1", "b1"]),
                ("batch 1", vec!["a2"]),
                ("batch 2", vec!["a3", "b2"]),
                ("batch 3", vec!["a4"])
            ]
        );
        assert_eq!(p.sizes, [1, 2, 1], "the last size repeats, the remainder is the last batch");
        assert_eq!(names(&p.groups.expand), ["a2", "a3", "b2", "a4"]);
        assert_eq!(p.apply_release.as_deref(), Some(ID), "every apply from a mirror takes the pinned id");
        assert_eq!(p.drain_reason, "airlock rocm-1 run r1");
    }

    #[test]
    fn percentages_round_down_to_at_least_one() {
        let nodes: Vec<NodeFacts> = (0..11).map(|i| node(&format!("n{i}"), "A", None)).collect();
        let p = plan(run(), Timestamp::from_unix(0), input(nodes, &["10%", "50%", "100%"])).unwrap();
        assert_eq!(p.sizes, [1, 5, 4], "10 to expand: 10% is 1, 50% is 5, 100% takes the rest");
        for bad in ["0%", "101%", "x", "0", "-1"] {
            let nodes = vec![node("a", "A", None), node("b", "A", None)];
            let e = plan(run(), Timestamp::from_unix(0), input(nodes, &[bad])).unwrap_err();
            assert!(matches!(e, FleetError::Input { .. }), "{bad}: {e}");
        }
    }

    #[test]
    fn a_node_on_the_runs_bundle_is_skipped_and_never_a_canary() {
        let nodes = vec![node("a1", "A", Some(ID)), node("a2", "A", Some(OLD)), node("a3", "A", Some(ID))];
        let p = plan(run(), Timestamp::from_unix(0), input(nodes, &["100%"])).unwrap();
        let parts: Vec<Part> = p.nodes.iter().map(|n| n.part).collect();
        assert_eq!(parts, [Part::Skip, Part::Canary, Part::Skip]);
        assert!(p.nodes[0].reason.as_deref().is_some_and(|r| r.starts_with("already on 0123456789abcdef")));
        assert_eq!(names(&p.groups.eligible), ["a2"]);
    }

    #[test]
    fn a_re_run_of_a_finished_run_has_nothing_to_do() {
        let nodes = vec![node("a1", "A", Some(ID)), node("b1", "B", Some(ID))];
        let p = plan(run(), Timestamp::from_unix(0), input(nodes, &["1"])).unwrap();
        assert!(p.waves.is_empty() && p.sizes.is_empty() && p.groups.eligible.is_empty(), "{p:?}");
        assert!(p.nodes.iter().all(|n| n.part == Part::Skip));
    }

    #[test]
    fn the_scheduler_keeps_admins_nodes_out_and_gives_airlocks_holds_back() {
        let mut i = input(
            vec![
                slurm(node("n1", "A", Some(OLD)), "drained", "bad DIMM, ticket 4711"),
                slurm(node("n2", "A", Some(OLD)), "down", ""),
                slurm(node("n3", "A", Some(OLD)), "drained", "airlock red rocm-0 run r0 record x.json"),
                slurm(node("n4", "A", Some(OLD)), "drained", "airlock: red rocm 1 (bundles/x) record y"),
                slurm(node("n5", "A", Some(OLD)), "idle", ""),
                slurm(node("n6", "A", Some(OLD)), "drained", "airlock-room 4 cooling"),
            ],
            &["1"],
        );
        i.scheduler = Scheduler::Slurm;
        let p = plan(run(), Timestamp::from_unix(0), i).unwrap();
        let parts: Vec<(Part, Option<&str>)> = p.nodes.iter().map(|n| (n.part, n.reason.as_deref())).collect();
        assert_eq!(
            parts,
            [
                (Part::Reserved, Some("drained: bad DIMM, ticket 4711")),
                (Part::Unavailable, Some("down: no reason")),
                (Part::Canary, None),
                (Part::Reserved, Some("drained: airlock: red rocm 1 (bundles/x) record y")),
                (Part::Batch, None),
                (Part::Reserved, Some("drained: airlock-room 4 cooling")),
            ]
        );
        assert_eq!(p.nodes[2].take_over.as_deref(), Some("airlock red rocm-0 run r0 record x.json"));
    }

    #[test]
    fn the_schedulers_rows_read_once_give_each_node_its_state_by_its_scheduler_name() {
        let mut named = node("gpu-a01", "A", Some(OLD));
        named.scheduler_name = Some("a01".into());
        let mut i = input(vec![node("n1", "A", Some(OLD)), named, node("n9", "A", Some(OLD))], &["1"]);
        i.scheduler = Scheduler::Slurm;
        let row = |node: &str, state: &str, reason: &str| scheduler::SchedulerNode {
            node: node.into(),
            partition: "gpu".into(),
            state: state.into(),
            reason: reason.into(),
        };
        i.scheduler_states = Some(SchedulerStates {
            rows: Some(vec![row("n1", "idle", ""), row("a01", "drained", "bad DIMM"), row("n7", "idle", "")]),
            ..SchedulerStates::default()
        });
        let p = plan(run(), Timestamp::from_unix(0), i.clone()).unwrap();
        let parts: Vec<(Part, Option<&str>)> = p.nodes.iter().map(|n| (n.part, n.reason.as_deref())).collect();
        assert_eq!(
            parts,
            [
                (Part::Canary, None),
                (Part::Reserved, Some("drained: bad DIMM")),
                (
                    Part::Unavailable,
                    Some("the scheduler does not know it: the scheduler lists no node n9 (sinfo --Node)")
                ),
            ]
        );
        // The states could not be read: every node is unavailable, the step's failure its reason.
        i.scheduler_states =
            Some(SchedulerStates { failed: true, msg: Some("sinfo failed: no controller".into()), rows: None });
        let p = plan(run(), Timestamp::from_unix(0), i).unwrap();
        assert!(p.nodes.iter().all(|n| n.part == Part::Unavailable
            && n.reason.as_deref() == Some("the scheduler does not know it: sinfo failed: no controller")));
    }

    #[test]
    fn a_failed_probe_is_unavailable_and_adoption_is_for_nodes_with_nothing_current() {
        let mut broken = node("x", "A", None);
        broken.probe = Some(ProbeFacts { failed: true, msg: Some("unreachable".into()), ..ProbeFacts::default() });
        let mut i = input(vec![broken, node("a1", "A", None), node("a2", "A", Some(OLD))], &["1"]);
        i.adopt = Some("http://mirror/".into());
        i.adopt_release = Some("0.0.0-baseline".into());
        i.stage = true;
        let p = plan(run(), Timestamp::from_unix(0), i).unwrap();
        assert_eq!(
            (p.nodes[0].part, p.nodes[0].reason.as_deref()),
            (Part::Unavailable, Some("probe failed: unreachable"))
        );
        assert_eq!(names(&p.groups.adopt), ["a1"]);
        assert_eq!(names(&p.groups.stage), ["a1", "a2"]);
        assert_eq!(p.adopt, Some(Adopt { source: "http://mirror/".into(), release: Some("0.0.0-baseline".into()) }));
    }

    #[test]
    fn a_node_twice_or_a_bad_name_is_refused() {
        let e = plan(run(), Timestamp::from_unix(0), input(vec![node("a", "A", None), node("a", "B", None)], &["1"]));
        assert!(matches!(e, Err(FleetError::Input { .. })));
        let bad: Result<NodeFacts, _> = serde_json::from_value(serde_json::json!({"node": "../x"}));
        assert!(bad.is_err());
    }

    #[test]
    fn the_playbooks_empty_defaults_mean_none() {
        let i: PlanInput = serde_json::from_value(serde_json::json!({
            "source": "/srv/b.airlock", "release": "", "bundle": {"id": ID}, "capacity": {},
            "adopt": "", "nodes": [{"node": "n1", "scheduler_name": "", "probe": {"tuple": "A", "current": null}}]
        }))
        .unwrap();
        assert!(i.release.is_none() && i.capacity.is_none() && i.adopt.is_none());
        let p = plan(run(), Timestamp::from_unix(0), i).unwrap();
        assert_eq!(p.apply_release, None, "a bundle file is applied as it is");
        assert_eq!(p.nodes[0].scheduler_name, "n1");
        assert_eq!(p.label, ID);
    }
}
