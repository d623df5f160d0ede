//! The upgrade guide's capacity rule, checked before each batch: *available = total − nodes in
//! change × units per node − reserved* must stay at or above *demand + headroom*. `total` and
//! `reserved` come from the scheduler where it is Slurm (every node of the run's partitions,
//! and those out of service for someone else's reason), else from the run's variables. Every
//! figure is checked arithmetic: a figure that overflows is an error naming it, never a wrap.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::FleetError;
use super::scheduler::{SchedulerNode, Service, service};

/// The rule as the run's variables give it (`airlock_capacity`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Every unit of the site; read from the scheduler on Slurm.
    #[serde(default)]
    pub total: Option<i64>,
    /// Units out of service for other reasons; read from the scheduler on Slurm.
    #[serde(default)]
    pub reserved: Option<i64>,
    pub demand: i64,
    #[serde(default)]
    pub headroom: i64,
    /// The units one node counts for.
    #[serde(default = "one")]
    pub per_node: i64,
}

fn one() -> i64 {
    1
}

/// The figures before a batch, and where they came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Figures {
    pub total: i64,
    pub reserved: i64,
    pub in_change: i64,
    pub per_node: i64,
    pub demand: i64,
    pub headroom: i64,
    pub available: i64,
    pub ok: bool,
    /// `variables`, or `sinfo, partitions P`.
    pub source: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserved_nodes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_change_nodes: Vec<String>,
}

/// The counts behind the figures: from the variables, or from the scheduler.
#[derive(Debug, Clone)]
pub struct Counts {
    pub total: i64,
    pub reserved: i64,
    pub in_change: i64,
    pub source: String,
    pub reserved_nodes: Vec<String>,
    pub in_change_nodes: Vec<String>,
}

impl Counts {
    /// From the variables: the batch is what is in change.
    pub fn of_variables(rule: &Rule, batch: usize) -> Result<Self, FleetError> {
        let total = rule.total.ok_or_else(|| FleetError::Input {
            what: "airlock_capacity".into(),
            detail: "`total` is required without a scheduler to read it from (airlock_scheduler: slurm)".into(),
        })?;
        Ok(Self {
            total,
            reserved: rule.reserved.unwrap_or(0),
            in_change: count(batch, "in_change")?,
            source: "variables".into(),
            reserved_nodes: Vec::new(),
            in_change_nodes: Vec::new(),
        })
    }

    /// From the scheduler's rows for the run's partitions: every node counted once; out of
    /// service for the rollout (`ours`) or about to change (`batch`) is in change, out of
    /// service for anyone else is reserved.
    pub fn of_scheduler(
        rows: &[SchedulerNode],
        batch: &[String],
        ours: &dyn Fn(&str) -> bool,
    ) -> Result<Self, FleetError> {
        let mut seen: BTreeMap<&str, &SchedulerNode> = BTreeMap::new();
        for r in rows {
            seen.entry(r.node.as_str()).or_insert(r);
        }
        let mut partitions: Vec<&str> = rows.iter().map(|r| r.partition.as_str()).filter(|p| !p.is_empty()).collect();
        partitions.sort_unstable();
        partitions.dedup();
        let mut reserved = Vec::new();
        let mut in_change: Vec<String> = Vec::new();
        for (name, r) in &seen {
            let out = service(&r.state) != Service::In;
            if out && ours(&r.reason) {
                in_change.push((*name).to_owned());
            } else if out {
                let why = if r.reason.is_empty() { "no reason" } else { r.reason.as_str() };
                reserved.push(((*name).to_owned(), format!("{name} ({}: {why})", r.state)));
            }
        }
        for b in batch {
            if !in_change.contains(b) && !reserved.iter().any(|(n, _)| n == b) {
                in_change.push(b.clone());
            }
        }
        in_change.sort();
        Ok(Self {
            total: count(seen.len(), "total")?,
            reserved: count(reserved.len(), "reserved")?,
            in_change: count(in_change.len(), "in_change")?,
            source: format!("sinfo, partitions {}", partitions.join(",")),
            reserved_nodes: reserved.into_iter().map(|(_, line)| line).collect(),
            in_change_nodes: in_change,
        })
    }
}

fn count(n: usize, figure: &'static str) -> Result<i64, FleetError> {
    i64::try_from(n).map_err(|_| FleetError::Overflow { figure, detail: format!("{n} nodes") })
}

/// The rule judged on `counts`.
pub fn judge(rule: &Rule, counts: Counts) -> Result<Figures, FleetError> {
    let over = |figure: &'static str, detail: String| FleetError::Overflow { figure, detail };
    let changing = counts
        .in_change
        .checked_mul(rule.per_node)
        .ok_or_else(|| over("in change × per node", format!("{} × {}", counts.in_change, rule.per_node)))?;
    let available = counts
        .total
        .checked_sub(changing)
        .and_then(|a| a.checked_sub(counts.reserved))
        .ok_or_else(|| over("available", format!("{} - {changing} - {}", counts.total, counts.reserved)))?;
    let needed = rule
        .demand
        .checked_add(rule.headroom)
        .ok_or_else(|| over("demand + headroom", format!("{} + {}", rule.demand, rule.headroom)))?;
    Ok(Figures {
        total: counts.total,
        reserved: counts.reserved,
        in_change: counts.in_change,
        per_node: rule.per_node,
        demand: rule.demand,
        headroom: rule.headroom,
        available,
        ok: available >= needed,
        source: counts.source,
        reserved_nodes: counts.reserved_nodes,
        in_change_nodes: counts.in_change_nodes,
    })
}

/// Why a batch does not start, every number named with its source.
pub fn broken(batch: &[String], f: &Figures) -> String {
    let needed = f.demand.saturating_add(f.headroom);
    let from = if f.source == "variables" {
        String::new()
    } else {
        let reserved = if f.reserved_nodes.is_empty() { "none".to_owned() } else { f.reserved_nodes.join(", ") };
        format!(
            " (total and reserved from {}; reserved: {reserved}; in change: {})",
            f.source,
            f.in_change_nodes.join(", ")
        )
    };
    format!(
        "capacity rule broken before the batch {}: available {} total - {} in change x {} - {} reserved = {} is below \
         demand {} + headroom {} = {needed}{from}; nothing in this batch was changed",
        batch.join(", "),
        f.total,
        f.in_change,
        f.per_node,
        f.reserved,
        f.available,
        f.demand,
        f.headroom,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(total: Option<i64>, reserved: Option<i64>, demand: i64) -> Rule {
        Rule { total, reserved, demand, headroom: 0, per_node: 1 }
    }

    fn row(node: &str, state: &str, reason: &str) -> SchedulerNode {
        SchedulerNode { node: node.into(), partition: "gpu".into(), state: state.into(), reason: reason.into() }
    }

    #[test]
    fn from_variables_the_batch_is_in_change() {
        let r = rule(Some(6), Some(2), 3);
        let f = judge(&r, Counts::of_variables(&r, 1).unwrap()).unwrap();
        assert_eq!((f.available, f.ok), (3, true));
        let f = judge(&r, Counts::of_variables(&r, 2).unwrap()).unwrap();
        assert_eq!((f.available, f.ok), (2, false));
        let msg = broken(&["n4".into(), "n6".into()], &f);
        assert!(
            msg.starts_with("capacity rule broken before the batch n4, n6: available 6 total - 2 in change"),
            "{msg}"
        );
        assert!(msg.contains("= 2 is below demand 3 + headroom 0 = 3; nothing"), "{msg}");
        let missing = Counts::of_variables(&rule(None, None, 1), 1).unwrap_err();
        assert!(matches!(missing, FleetError::Input { .. }), "{missing}");
    }

    #[test]
    fn from_the_scheduler_every_number_has_its_nodes() {
        let rows = [
            row("n1", "idle", ""),
            row("n2", "idle", ""),
            row("n3", "drained", "airlock red demo run r0 record x.json"),
            row("n5", "drained", "bad DIMM, ticket 4711"),
            row("n5", "drained", "bad DIMM, ticket 4711"),
            row("n6", "down", ""),
        ];
        let ours = |r: &str| super::super::scheduler::is_airlock_hold(r);
        let counts = Counts::of_scheduler(&rows, &["n2".into(), "n5".into()], &ours).unwrap();
        let f = judge(&rule(Some(999), Some(0), 3), counts).unwrap();
        assert_eq!((f.total, f.reserved, f.in_change), (5, 2, 2), "{f:?}");
        assert_eq!(f.in_change_nodes, ["n2", "n3"], "a reserved node in the batch is not counted twice");
        assert_eq!(f.reserved_nodes, ["n5 (drained: bad DIMM, ticket 4711)", "n6 (down: no reason)"]);
        assert_eq!((f.available, f.ok, f.source.as_str()), (1, false, "sinfo, partitions gpu"));
        let msg = broken(&["n2".into()], &f);
        assert!(msg.contains("(total and reserved from sinfo, partitions gpu; reserved: n5 (drained"), "{msg}");
    }

    #[test]
    fn figures_that_overflow_are_named_not_wrapped() {
        let huge = Rule { total: Some(i64::MAX), reserved: Some(0), demand: 1, headroom: 0, per_node: i64::MAX };
        let e = judge(&huge, Counts::of_variables(&huge, 2).unwrap()).unwrap_err();
        assert!(matches!(e, FleetError::Overflow { figure: "in change × per node", .. }), "{e}");
        let low = Rule { total: Some(i64::MIN), reserved: Some(1), demand: 1, headroom: 0, per_node: 1 };
        let e = judge(&low, Counts::of_variables(&low, 0).unwrap()).unwrap_err();
        assert!(matches!(e, FleetError::Overflow { figure: "available", .. }), "{e}");
        let demand = Rule { total: Some(1), reserved: None, demand: i64::MAX, headroom: 1, per_node: 1 };
        let e = judge(&demand, Counts::of_variables(&demand, 0).unwrap()).unwrap_err();
        assert!(matches!(e, FleetError::Overflow { figure: "demand + headroom", .. }), "{e}");
        assert_eq!(e.to_string(), format!("capacity rule: demand + headroom overflows ({} + 1)", i64::MAX));
    }
}
