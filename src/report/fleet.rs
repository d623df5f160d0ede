//! `airlock report --fleet DIR`: one page for a fleet's rollout, from the evidence the Ansible
//! collection `airlock.site` collects on its controller:
//!
//! ```text
//! DIR/plan.json                 the rollout: source, batches, capacity rule, canaries
//! DIR/batches/TIME.json         each expansion batch: its nodes, when, the capacity figures
//! DIR/NODE/node.json            the node's hardware tuple, its wave, its failure, its rollback
//! DIR/NODE/records/*.json       the node's own airlock records (schemas/record.v1.json)
//! ```
//!
//! Nodes grouped by tuple with the bundle each runs, the waves in the order they ran, every
//! refusal, restore and accepted amber with its reason, rollback durations per tuple (median and
//! worst), the capacity figures. Everything is read back bounded and shown escaped; the page
//! depends only on the evidence (sorted, no time of its own), so the same evidence gives the
//! same page.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ReportError;
use super::html::{STYLE, esc};
use crate::site::SiteRoot;
use crate::site::records::{Action, Outcome, Record};
use crate::site::status::Rehearsals;

/// The largest evidence document read (plan, batch, node): they are a few kilobytes.
const MAX_EVIDENCE_BYTES: u64 = 1 << 20;

#[derive(Debug, Serialize)]
pub struct Fleet {
    pub dir: PathBuf,
    pub plan: Option<serde_json::Value>,
    /// green: every touched node committed; red: a refusal, restore or failure stopped it.
    pub verdict: String,
    pub tuples: Vec<Tuple>,
    /// Canaries, then batches, in the order they ran.
    pub waves: Vec<Wave>,
    /// Every refusal, restore, failure and accepted amber, with its reason.
    pub problems: Vec<Problem>,
    pub capacity: Vec<serde_json::Value>,
}

#[derive(Debug, Serialize)]
pub struct Tuple {
    pub tuple: String,
    pub nodes: Vec<NodeLine>,
    /// Rollback durations of this tuple's nodes.
    pub rollbacks: Option<Rehearsals>,
    /// The results sheet of the tuple: each metric's median over its nodes' latest validation.
    pub results: Vec<MetricMedian>,
}

/// One metric over a tuple's nodes: the medians of the current and candidate values, and how
/// many nodes met the threshold.
#[derive(Debug, Serialize)]
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

fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 { values[n / 2] } else { f64::midpoint(values[n / 2 - 1], values[n / 2]) })
}

/// Per (check, metric): every node's latest metric row.
type MetricRows = BTreeMap<(String, String), Vec<crate::validate::metrics::MetricResult>>;

fn medians(rows: MetricRows) -> Vec<MetricMedian> {
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

#[derive(Debug, Serialize)]
pub struct NodeLine {
    pub node: String,
    pub wave: String,
    /// The bundle its last activation made current (`name version (id)`), if any.
    pub bundle: Option<String>,
    pub verdict: Option<String>,
    pub rolled_back: bool,
}

#[derive(Debug, Serialize)]
pub struct Wave {
    pub wave: String,
    pub nodes: Vec<String>,
    /// The first and last time an apply of this wave's nodes was recorded.
    pub from: Option<String>,
    pub to: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Problem {
    pub node: String,
    pub at: String,
    pub action: String,
    pub outcome: String,
    pub reason: String,
}

/// A node's part, as the playbook writes it.
#[derive(Debug, Deserialize)]
struct NodeFile {
    #[serde(default)]
    tuple: String,
    #[serde(default)]
    wave: String,
    #[serde(default)]
    rolled_back: bool,
}

#[derive(Debug, Deserialize)]
struct BatchFile {
    #[serde(default)]
    nodes: Vec<String>,
    #[serde(default)]
    capacity: serde_json::Value,
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, ReportError> {
    let bad = |detail: String| ReportError::Records { path: path.to_owned(), detail };
    let Some(bytes) = crate::site::state::read_bounded(path, MAX_EVIDENCE_BYTES)? else { return Ok(None) };
    serde_json::from_slice(&bytes).map(Some).map_err(|e| bad(e.to_string()))
}

/// The fleet's evidence under `dir`, read back.
pub fn fleet(dir: &Path) -> Result<Fleet, ReportError> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| ReportError::Records { path: dir.to_owned(), detail: e.to_string() })?;
    let mut nodes: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().join("records").is_dir())
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .collect();
    nodes.sort();
    if nodes.is_empty() {
        return Err(ReportError::Records {
            path: dir.to_owned(),
            detail: "no node's records here (NODE/records/*.json): is it an airlock_evidence_dir?".into(),
        });
    }
    let batches = read_batches(dir)?;
    let mut tuples: BTreeMap<String, Vec<NodeLine>> = BTreeMap::new();
    let mut rollbacks: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut applies: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut metrics: BTreeMap<String, MetricRows> = BTreeMap::new();
    let mut problems = Vec::new();
    for node in &nodes {
        let file: Option<NodeFile> = read_json(&dir.join(node).join("node.json"))?;
        let records = crate::site::records::read_all(&SiteRoot::new(&dir.join(node)))?;
        let tuple = file.as_ref().map_or_else(|| "unknown".to_owned(), |f| f.tuple.clone());
        let wave = wave_of(node, file.as_ref(), &batches);
        let mut line = NodeLine {
            node: node.clone(),
            wave: wave.clone(),
            bundle: None,
            verdict: None,
            rolled_back: file.as_ref().is_some_and(|f| f.rolled_back),
        };
        // The node's latest validation evidence with metrics: its row of each metric.
        let latest = records.iter().rev().find_map(|(_, r)| {
            let e = r.validation.as_ref()?.evidence()?;
            e.checks.iter().any(|c| !c.metrics.is_empty()).then_some(e)
        });
        for c in latest.iter().flat_map(|e| &e.checks) {
            for m in &c.metrics {
                let rows = metrics.entry(tuple.clone()).or_default();
                rows.entry((c.name.clone(), m.name.clone())).or_default().push(m.clone());
            }
        }
        for (_, r) in &records {
            note(node, r, &mut line, &mut problems);
            if r.action == Action::Rollback && r.outcome() == Outcome::Activated {
                rollbacks.entry(tuple.clone()).or_default().extend(r.seconds);
            }
            if r.action == Action::Apply {
                applies.entry(wave.clone()).or_default().push(r.at.to_string());
            }
        }
        tuples.entry(tuple).or_default().push(line);
    }
    problems.sort_by(|a, b| (&a.at, &a.node).cmp(&(&b.at, &b.node)));
    let red = problems.iter().any(|p| p.outcome != "activated");
    let waves = waves(&tuples, &applies);
    let capacity = batches
        .iter()
        .map(|(_, b)| b.capacity.clone())
        .filter(|c| c.as_object().is_some_and(|o| !o.is_empty()))
        .collect();
    Ok(Fleet {
        dir: dir.to_owned(),
        plan: read_json(&dir.join("plan.json"))?,
        verdict: if red { "red" } else { "green" }.to_owned(),
        tuples: tuples
            .into_iter()
            .map(|(tuple, nodes)| {
                let rollbacks = Rehearsals::of_seconds(rollbacks.remove(&tuple).unwrap_or_default());
                let results = medians(metrics.remove(&tuple).unwrap_or_default());
                Tuple { tuple, nodes, rollbacks, results }
            })
            .collect(),
        waves,
        problems,
        capacity,
    })
}

/// What one record says about its node: the bundle it made current, and any problem.
fn note(node: &str, r: &Record, line: &mut NodeLine, problems: &mut Vec<Problem>) {
    let outcome = r.outcome();
    let bundle = r.bundle.as_ref().map(|b| {
        format!(
            "{} {} ({})",
            b.name.as_deref().unwrap_or("?"),
            b.version.as_deref().unwrap_or("?"),
            b.id.as_ref().map(ToString::to_string).unwrap_or_default()
        )
    });
    let verdict = r.validation.as_ref().and_then(|v| v.evidence()).map(|e| crate::validate::word(e.verdict).to_owned());
    if outcome == Outcome::Activated {
        line.bundle = bundle;
        line.verdict = verdict.clone().or_else(|| Some("skipped".to_owned()));
    }
    let word = match outcome {
        Outcome::Refused => "refused",
        Outcome::Failed => "failed",
        Outcome::Restored => "restored",
        Outcome::PendingReboot => "pending reboot",
        Outcome::Activated | Outcome::Validated => {
            if let Some(reason) = &r.accepted_amber {
                let terms = r.amber.as_ref().map_or_else(String::new, |a| format!(" ({})", a.terms()));
                problems.push(Problem {
                    node: node.to_owned(),
                    at: r.at.to_string(),
                    action: r.action.as_str().to_owned(),
                    outcome: "activated".to_owned(),
                    reason: format!("amber accepted{terms}: {reason}"),
                });
            }
            return;
        }
    };
    problems.push(Problem {
        node: node.to_owned(),
        at: r.at.to_string(),
        action: r.action.as_str().to_owned(),
        outcome: word.to_owned(),
        reason: r.reason.clone().unwrap_or_default(),
    });
}

fn read_batches(dir: &Path) -> Result<Vec<(String, BatchFile)>, ReportError> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir.join("batches")) else { return Ok(out) };
    let mut paths: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    paths.sort();
    for (i, path) in paths.iter().enumerate() {
        if let Some(b) = read_json::<BatchFile>(path)? {
            out.push((format!("batch {}", i + 1), b));
        }
    }
    Ok(out)
}

/// `canary`, or `batch N` for the expansion batch that held the node.
fn wave_of(node: &str, file: Option<&NodeFile>, batches: &[(String, BatchFile)]) -> String {
    if let Some((name, _)) = batches.iter().find(|(_, b)| b.nodes.iter().any(|n| n == node)) {
        return name.clone();
    }
    file.map_or_else(
        || "untouched".to_owned(),
        |f| if f.wave.is_empty() { "untouched".to_owned() } else { f.wave.clone() },
    )
}

/// The waves in the order they ran (by their first apply), each with its nodes and times.
fn waves(tuples: &BTreeMap<String, Vec<NodeLine>>, applies: &BTreeMap<String, Vec<String>>) -> Vec<Wave> {
    let mut by_wave: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in tuples.values().flatten() {
        by_wave.entry(line.wave.clone()).or_default().push(line.node.clone());
    }
    let mut out: Vec<Wave> = by_wave
        .into_iter()
        .map(|(wave, mut nodes)| {
            nodes.sort();
            let times = applies.get(&wave);
            let from = times.and_then(|t| t.iter().min().cloned());
            let to = times.and_then(|t| t.iter().max().cloned());
            Wave { wave, nodes, from, to }
        })
        .collect();
    out.sort_by(|a, b| (a.from.is_none(), &a.from, &a.wave).cmp(&(b.from.is_none(), &b.from, &b.wave)));
    out
}

/// The page.
pub fn render(f: &Fleet) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>airlock fleet rollout</title><style>{STYLE}</style></head><body>\n"
    );
    let source = f.plan.as_ref().and_then(|p| p.get("source")).and_then(|s| s.as_str()).unwrap_or("");
    let _ = writeln!(o, "<h1>Fleet rollout</h1>\n<p>{}</p>", esc(source));
    let _ = writeln!(
        o,
        "<p><span id=\"verdict\" class=\"verdict {}\">{}</span> {} node(s) in {} tuple(s), {} problem(s)</p>",
        f.verdict,
        f.verdict.to_uppercase(),
        f.tuples.iter().map(|t| t.nodes.len()).sum::<usize>(),
        f.tuples.len(),
        f.problems.len()
    );
    tuples(&mut o, f);
    waves_and_problems(&mut o, f);
    if !f.capacity.is_empty() {
        let _ = writeln!(o, "<h2>Capacity before each batch</h2><pre>");
        for c in &f.capacity {
            let _ = writeln!(o, "{}", esc(&c.to_string()));
        }
        let _ = writeln!(o, "</pre>");
    }
    let _ = writeln!(
        o,
        "<p class=\"muted\">Made by airlock {} from the evidence in {}: each node's own records.</p>\n</body></html>",
        env!("CARGO_PKG_VERSION"),
        esc(&f.dir.display().to_string())
    );
    o
}

fn tuples(o: &mut String, f: &Fleet) {
    let _ = writeln!(o, "<h2>Nodes by hardware tuple</h2>");
    for t in &f.tuples {
        let _ = writeln!(o, "<h3 class=\"mono\">{}</h3>", esc(&t.tuple));
        let _ =
            writeln!(o, "<table><tr><th>node</th><th>wave</th><th>runs</th><th>verdict</th><th>rolled back</th></tr>");
        for n in &t.nodes {
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td>{}</td></tr>",
                esc(&n.node),
                esc(&n.wave),
                esc(n.bundle.as_deref().unwrap_or("nothing yet")),
                esc(n.verdict.as_deref().unwrap_or("")),
                esc(n.verdict.as_deref().unwrap_or("-")),
                if n.rolled_back { "yes" } else { "" }
            );
        }
        let _ = writeln!(o, "</table>");
        if let Some(r) = &t.rollbacks {
            let _ = writeln!(
                o,
                "<p class=\"rollbacks\">Rollbacks: median {:.2} s, worst {:.2} s over {}.</p>",
                r.median_seconds, r.worst_seconds, r.count
            );
        }
        results(o, &t.results);
    }
}

fn waves_and_problems(o: &mut String, f: &Fleet) {
    let _ = writeln!(
        o,
        "<h2>Waves, in the order they ran</h2><table><tr><th>wave</th><th>nodes</th><th>from</th><th>to</th></tr>"
    );
    for w in &f.waves {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&w.wave),
            esc(&w.nodes.join(", ")),
            esc(w.from.as_deref().unwrap_or("")),
            esc(w.to.as_deref().unwrap_or(""))
        );
    }
    let _ = writeln!(o, "</table>\n<h2>Refusals, restores and exceptions</h2>");
    if f.problems.is_empty() {
        let _ = writeln!(o, "<p class=\"ok\">None.</p>");
    } else {
        let _ = writeln!(
            o,
            "<table id=\"problems\"><tr><th>node</th><th>at</th><th>action</th><th>outcome</th><th>reason</th></tr>"
        );
        for p in &f.problems {
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"bad\">{}</td><td>{}</td></tr>",
                esc(&p.node),
                esc(&p.at),
                esc(&p.action),
                esc(&p.outcome),
                esc(&p.reason)
            );
        }
        let _ = writeln!(o, "</table>");
    }
}

/// A tuple's results sheet: medians over its nodes.
fn results(o: &mut String, rows: &[MetricMedian]) {
    if rows.is_empty() {
        return;
    }
    let num = |v: Option<f64>| v.map_or_else(|| "—".to_owned(), |v| format!("{v}"));
    let _ = writeln!(
        o,
        "<table class=\"results\"><tr><th>check</th><th>metric</th><th>nodes</th><th>current (median)</th><th>candidate (median)</th><th>change</th><th>threshold</th><th>met / missed</th></tr>"
    );
    for r in rows {
        let class = if r.failed == 0 { "green" } else { "red" };
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"mono\">{}</td><td class=\"{class}\">{} / {}</td></tr>",
            esc(&r.check),
            esc(&r.metric),
            r.nodes,
            num(r.current_median),
            num(r.candidate_median),
            r.change_percent.map_or_else(|| "—".to_owned(), |p| format!("{p:+.1}%")),
            esc(&r.threshold),
            r.passed,
            r.failed
        );
    }
    let _ = writeln!(o, "</table>");
}
