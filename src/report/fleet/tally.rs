//! What the run's evidence adds up to: the stacks its nodes ended on, each wave's outcome, the
//! capacity each wave kept, and the metrics' medians.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::files::{BatchFile, read_json};
use super::{Capacity, MetricMedian, NodeEvidence, Tuple, Wave};
use crate::clock::Timestamp;
use crate::report::ReportError;
use crate::site::records::Action;
use crate::site::status::Rehearsals;

pub(super) fn read_batches(dir: &Path) -> Result<Vec<(String, BatchFile)>, ReportError> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir.join("batches")) else { return Ok(out) };
    let mut paths: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    paths.sort();
    for path in &paths {
        if let Some(b) = read_json::<BatchFile>(path)? {
            out.push((format!("batch {}", out.len() + 1), b));
        }
    }
    Ok(out)
}

pub(super) fn tuples(nodes: &[NodeEvidence]) -> Vec<Tuple> {
    let mut by_tuple: BTreeMap<&str, Vec<&NodeEvidence>> = BTreeMap::new();
    for n in nodes {
        by_tuple.entry(&n.line.tuple).or_default().push(n);
    }
    by_tuple
        .into_iter()
        .map(|(tuple, nodes)| {
            let rollbacks = Rehearsals::of_seconds(nodes.iter().filter_map(|n| n.line.rolled_back_s).collect());
            let mut rows: MetricRows = BTreeMap::new();
            for n in &nodes {
                // The node's latest validation evidence with metrics in this run.
                let latest = n.records.iter().rev().filter(|(_, r)| r.action != Action::Rollback).find_map(|(_, r)| {
                    let e = r.validation.as_ref()?.evidence()?;
                    e.checks.iter().any(|c| !c.metrics.is_empty()).then_some(e)
                });
                for c in latest.iter().flat_map(|e| &e.checks) {
                    for m in &c.metrics {
                        rows.entry((c.name.clone(), m.name.clone())).or_default().push(m.clone());
                    }
                }
            }
            Tuple {
                tuple: tuple.to_owned(),
                nodes: nodes.iter().map(|n| n.line.node.clone()).collect(),
                rollbacks,
                results: medians(rows),
            }
        })
        .collect()
}

/// The waves in the order they ran: the canaries, then each batch, with the first and last
/// time one of its nodes' changes was recorded in this run.
pub(super) fn waves(nodes: &[NodeEvidence], batches: &[(String, BatchFile)]) -> Vec<Wave> {
    let mut by_wave: BTreeMap<&str, Vec<&NodeEvidence>> = BTreeMap::new();
    for n in nodes {
        by_wave.entry(&n.line.wave).or_default().push(n);
    }
    let mut out: Vec<Wave> = by_wave
        .into_iter()
        .filter(|(wave, _)| *wave != "untouched")
        .map(|(wave, nodes)| {
            let times: Vec<Timestamp> = nodes
                .iter()
                .flat_map(|n| &n.records)
                .filter(|(_, r)| matches!(r.action, Action::Apply | Action::Install))
                .map(|(_, r)| r.at)
                .collect();
            let mut names: Vec<String> = nodes.iter().map(|n| n.line.node.clone()).collect();
            names.sort();
            Wave {
                name: wave.to_owned(),
                nodes: names,
                from: times.iter().min().copied(),
                to: times.iter().max().copied(),
            }
        })
        .collect();
    let order = |w: &Wave| {
        let batch = batches.iter().position(|(name, _)| *name == w.name);
        (w.name != "canary", batch, w.from, w.name.clone())
    };
    out.sort_by_key(order);
    out
}

/// The capacity rule before each batch of a run the playbook itself judged (evidence written
/// before `airlock rollout`): judged again here, in checked arithmetic.
pub(super) fn capacity(dir: &Path, batches: &[(String, BatchFile)]) -> Result<Vec<Capacity>, ReportError> {
    use crate::fleet::capacity::{Counts, Rule, judge};
    let mut out = Vec::new();
    for (name, b) in batches {
        let Some(c) = b.capacity.as_ref() else { continue };
        let rule = Rule {
            total: Some(c.total),
            reserved: Some(c.reserved),
            demand: c.demand,
            headroom: c.headroom,
            per_node: c.per_node,
        };
        let counts = Counts {
            total: c.total,
            reserved: c.reserved,
            in_change: c.in_change,
            source: c.source.clone().unwrap_or_else(|| "variables".to_owned()),
            reserved_nodes: c.reserved_nodes.clone(),
            in_change_nodes: c.in_change_nodes.clone(),
        };
        let figures = judge(&rule, counts)
            .map_err(|e| ReportError::Records { path: dir.join("batches"), detail: format!("{name}: {e}") })?;
        out.push(Capacity { before_wave: name.clone(), figures });
    }
    Ok(out)
}

pub(super) fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 { values[n / 2] } else { f64::midpoint(values[n / 2 - 1], values[n / 2]) })
}

/// Per (check, metric): every node's latest metric row.
type MetricRows = BTreeMap<(String, String), Vec<crate::validate::metrics::MetricResult>>;

pub(super) fn medians(rows: MetricRows) -> Vec<MetricMedian> {
    rows.into_iter()
        .map(|((check, metric), rows)| {
            let current_median = median(rows.iter().filter_map(|r| r.current).collect());
            let candidate_median = median(rows.iter().filter_map(|r| r.candidate).collect());
            let change_percent = match (current_median, candidate_median) {
                (Some(c), Some(v)) if c != 0.0 => Some((v - c) / c * 100.0),
                _ => None,
            };
            MetricMedian {
                check,
                metric,
                nodes: rows.len(),
                current_median,
                candidate_median,
                change_percent,
                threshold: rows.first().map(|r| r.threshold.clone()).unwrap_or_default(),
                passed: rows.iter().filter(|r| r.decision == "pass").count(),
                failed: rows.iter().filter(|r| r.decision != "pass").count(),
            }
        })
        .collect()
}
