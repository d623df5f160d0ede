//! A check's metrics: numbers read from what it prints (`json:/pointer` or `regex:` with one
//! capture group), measured on the current stack before a change (the baseline) and on the
//! candidate after it, the same command both times, and decided against a threshold the bundle
//! declared before either run (`<= 1.05 * current`, `<= 250`). A metric that cannot be read,
//! or a relative threshold without a baseline, is red: the evidence is missing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::clock::Timestamp;
use crate::spec::{Better, Check, Metric};

pub use crate::spec::metric::{Source, Threshold};

/// The current stack's metric values, measured before a change (`apply`) or by `airlock
/// validate --baseline` (for `install`): by check, by metric; `None` where it could not be read.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Baseline {
    pub taken_at: Option<Timestamp>,
    /// The bundle that was current when it was taken, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub under: Option<String>,
    pub values: BTreeMap<String, BTreeMap<String, Option<f64>>>,
}

/// A metric's value read from a check's output.
pub(super) fn read(m: &Metric, stdout: &str) -> Result<f64, crate::spec::metric::MetricError> {
    Source::parse(&m.from)?.read(stdout)
}

/// One row of the results sheet.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MetricResult {
    pub name: String,
    pub better: Better,
    pub current: Option<f64>,
    pub candidate: Option<f64>,
    /// `(candidate - current) / current`, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_percent: Option<f64>,
    pub threshold: String,
    /// The bound the threshold gave (for a relative one, from the current value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<f64>,
    /// `pass`; `fail` or `missing` (the candidate's value cannot be read: the evidence is
    /// missing), both red; `no-baseline` (a relative threshold with no current value), amber.
    pub decision: String,
    pub reason: String,
}

/// Every metric of `check`, decided from its output on the candidate and the baseline.
pub fn decide(check: &Check, stdout: &str, baseline: Option<&Baseline>) -> Vec<MetricResult> {
    check
        .metric
        .iter()
        .map(|m| {
            let current = baseline.and_then(|b| b.values.get(&check.name)).and_then(|v| v.get(&m.name)).copied().flatten();
            let candidate = read(m, stdout);
            let threshold = Threshold::parse(&m.threshold);
            let bound = threshold.as_ref().ok().and_then(|t| t.bound(current));
            let change_percent = match (current, candidate.as_ref()) {
                (Some(c), Ok(v)) if c != 0.0 => Some((v - c) / c * 100.0),
                _ => None,
            };
            let (decision, reason) = match (&threshold, &candidate, bound) {
                (Err(e), _, _) => ("missing", e.to_string()),
                (_, Err(e), _) => ("missing", format!("the candidate's value cannot be read: {e}; the evidence is missing")),
                (Ok(_), Ok(_), None) => ("no-baseline", "no current value to compare with: run the check on the current stack first (`airlock validate --baseline`; `apply` does it itself)".to_owned()),
                (Ok(t), Ok(v), Some(b)) if t.holds(*v, b) => ("pass", format!("{v} meets {} ({b:.4})", m.threshold)),
                (Ok(_), Ok(v), Some(b)) => ("fail", format!("{v} misses {} ({b:.4})", m.threshold)),
            };
            MetricResult {
                name: m.name.clone(),
                better: m.better,
                current,
                candidate: candidate.ok(),
                change_percent,
                threshold: m.threshold.clone(),
                bound,
                decision: decision.to_owned(),
                reason,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::metric::MetricError;

    #[test]
    fn thresholds_parse_relative_and_absolute_and_decide() {
        let t = Threshold::parse("<= 1.05 * current").unwrap();
        assert_eq!(t.bound(Some(100.0)), Some(105.0));
        assert!(t.holds(104.0, 105.0) && !t.holds(120.0, 105.0));
        assert_eq!(Threshold::parse(">= current - 5").unwrap().bound(Some(50.0)), Some(45.0));
        assert_eq!(Threshold::parse("<= 250").unwrap().bound(None), Some(250.0));
        assert_eq!(Threshold::parse("<= 1.05 * current").unwrap().bound(None), None);
        for bad in ["1.05 * current", "<= fast", "<= 2 current", "<= current * 2"] {
            assert!(Threshold::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn values_are_read_by_json_pointer_or_regex() {
        let json = Source::parse("json:/ttft/p99").unwrap();
        assert_eq!(json.read(r#"{"ttft": {"p99": 120.5}}"#), Ok(120.5));
        assert!(json.read("not json").is_err());
        assert_eq!(json.read(r#"{"ttft": {}}"#).unwrap_err(), MetricError::NoPointer("/ttft/p99".into()));
        let re = Source::parse(r"regex:throughput: ([0-9.]+) tok/s").unwrap();
        assert_eq!(re.read("run 3\nthroughput: 1834.2 tok/s\n"), Ok(1834.2));
        assert!(Source::parse("regex:(a)(b)").is_err());
        assert!(Source::parse("xpath://x").is_err());
    }
}
