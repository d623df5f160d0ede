//! GPU validation on the site: probe the host's stack (`probe`), compare it with the bundle's
//! support matrix field by field (`matrix`, versions compared as numbers by `version`), and run
//! the bundle's acceptance checks (`checks`). The verdict is the worst of the matrix and the
//! checks; `install` activates on green, on amber only when the operator accepts it, never on
//! red.

mod bounded;
pub mod checks;
pub mod matrix;
pub mod probe;
pub mod version;

use serde::Serialize;

use matrix::{FieldResult, RowResult, Verdict};

/// What validation found, kept as evidence in the site's records.
#[derive(Debug, Clone, Serialize)]
pub struct Evidence {
    pub verdict: Verdict,
    pub summary: String,
    pub detected: Vec<String>,
    pub rows: Vec<RowResult>,
    pub checks: Vec<checks::CheckResult>,
    pub probe: probe::Probe,
}

/// Validate this host against a manifest's `validation` section; `None` when it names no
/// targets (nothing to decide; the record says validation was skipped).
pub fn validate(validation: &serde_json::Value, host: &probe::HostRoot) -> Option<Evidence> {
    let targets: Vec<crate::spec::Target> =
        serde_json::from_value(validation.get("target").cloned().unwrap_or_default()).unwrap_or_default();
    let probed = probe::probe(host);
    let outcome = matrix::classify(&targets, &probed)?;
    let specs: Vec<checks::Check> =
        serde_json::from_value(validation.get("check").cloned().unwrap_or_default()).unwrap_or_default();
    let results: Vec<checks::CheckResult> = specs.iter().map(checks::run).collect();
    let (mut verdict, mut summary) = (outcome.verdict, outcome.summary);
    if let Some(worst) = results.iter().filter(|c| c.verdict > verdict).max_by_key(|c| c.verdict) {
        verdict = worst.verdict;
        summary = format!("{}: check `{}`: {}", word(verdict), worst.name, worst.summary);
    }
    Some(Evidence { verdict, summary, detected: outcome.detected, rows: outcome.rows, checks: results, probe: probed })
}

pub fn word(v: Verdict) -> &'static str {
    match v {
        Verdict::Green => "green",
        Verdict::Amber => "amber",
        Verdict::Red => "red",
    }
}

/// The fields of an outcome that are not green, as lines for a person.
pub fn not_green(rows: &[RowResult]) -> Vec<&FieldResult> {
    rows.iter().flat_map(|r| r.fields.iter()).filter(|f| f.verdict != Verdict::Green).collect()
}
