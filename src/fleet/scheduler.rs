//! What the scheduler says of a node, and the reasons airlock writes into it. Slurm's words
//! (`sinfo -o %T`, marks such as `*` and `~` already dropped by the collection's module).
//!
//! A node is the rollout's own only by an exact reason: its drain reason names the bundle and
//! the run (`airlock rocm10-2026.11.1 run 20261205T101500Z-3f9c2a`), its hold reason the verdict
//! too (`airlock red rocm10-2026.11.1 run 20261205T101500Z-3f9c2a record FILE`). Anything else
//! — an admin's `airlock-room 4 cooling`, NHC's own `airlock: red …` line, a drain by hand — is
//! someone else's, and the rollout leaves that node alone.

use serde::{Deserialize, Serialize};

use crate::site::records::RunId;

/// One node as the scheduler lists it (one row per node and partition).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedulerNode {
    /// The node's scheduler name (Slurm's `NodeName`).
    pub node: String,
    #[serde(default)]
    pub partition: String,
    pub state: String,
    #[serde(default)]
    pub reason: String,
}

/// State words a node is out of service in, for someone's reason.
const HELD: [&str; 6] = ["drained", "draining", "drain", "maint", "reserved", "planned"];
/// State words of a node that cannot run anything now.
const BROKEN: [&str; 8] = ["down", "fail", "failing", "inval", "future", "not_responding", "unknown", "powered_down"];

/// How the scheduler's state keeps a node from the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// Running jobs or idle: the rollout may drain it.
    In,
    /// Drained, in maintenance or reserved (for the reason it gives).
    Held,
    /// Down, failed, not responding.
    Broken,
}

pub fn service(state: &str) -> Service {
    let words: Vec<String> = state.split('+').map(|w| w.trim().to_ascii_lowercase()).collect();
    if words.iter().any(|w| BROKEN.contains(&w.as_str())) {
        Service::Broken
    } else if words.iter().any(|w| HELD.contains(&w.as_str())) {
        Service::Held
    } else {
        Service::In
    }
}

/// The reason a node drained for this run's change carries: exactly this, nothing appended.
pub fn drain_reason(label: &str, run: &RunId) -> String {
    format!("airlock {label} run {run}")
}

/// The reason a node kept out of service after this run's change carries, before ` record
/// FILE` (which names its record): the verdict first.
pub fn hold_reason(verdict: &str, label: &str, run: &RunId) -> String {
    format!("airlock {verdict} {label} run {run}")
}

/// Whether `reason` is one the rollout wrote when it kept a node out of service (a red or
/// amber hold of any run): `airlock red|amber LABEL run RUN_ID[ record NAME]`. Such a node is
/// airlock's: a later run drains it again, changes it and resumes it when green.
pub fn is_airlock_hold(reason: &str) -> bool {
    let Some(rest) = reason.strip_prefix("airlock red ").or_else(|| reason.strip_prefix("airlock amber ")) else {
        return false;
    };
    let words: Vec<&str> = rest.split(' ').collect();
    let Some(run_at) = words.iter().rposition(|w| *w == "run") else { return false };
    if run_at == 0 || words.iter().take(run_at).any(|w| w.is_empty()) {
        return false;
    }
    let tail = &words[run_at + 1..];
    let run_ok = tail.first().is_some_and(|id| id.parse::<RunId>().is_ok());
    run_ok
        && match tail.len() {
            1 => true,
            3 => {
                let file = std::path::Path::new(tail[2]);
                tail[1] == "record" && file.extension().is_some_and(|e| e == "json") && !tail[2].contains('/')
            }
            _ => false,
        }
}

/// Whether a node in `reason` was put out of service by this run: drained for its change, or
/// held after it.
pub fn is_this_runs(reason: &str, label: &str, run: &RunId) -> bool {
    if reason == drain_reason(label, run) {
        return true;
    }
    ["red", "amber"].iter().any(|v| {
        let hold = hold_reason(v, label, run);
        reason == hold
            || reason.strip_prefix(&hold).is_some_and(|r| r.starts_with(" record ") && is_airlock_hold(reason))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> RunId {
        "20261205T101500Z-3f9c2a".parse().unwrap()
    }

    #[test]
    fn states_as_slurm_names_them() {
        assert_eq!(service("idle"), Service::In);
        assert_eq!(service("mixed"), Service::In);
        assert_eq!(service("allocated"), Service::In);
        assert_eq!(service("drained"), Service::Held);
        assert_eq!(service("idle+drain"), Service::Held);
        assert_eq!(service("maint"), Service::Held);
        assert_eq!(service("down"), Service::Broken);
        assert_eq!(service("down+drain"), Service::Broken);
        assert_eq!(service("idle+not_responding"), Service::Broken);
    }

    #[test]
    fn only_the_rollouts_exact_reasons_are_its_own() {
        let (label, run) = ("rocm10-2026.11.1", run());
        let drain = drain_reason(label, &run);
        assert_eq!(drain, "airlock rocm10-2026.11.1 run 20261205T101500Z-3f9c2a");
        assert!(is_this_runs(&drain, label, &run));
        let held = format!("{} record 20261205T101731.042Z-apply.json", hold_reason("red", label, &run));
        assert!(is_this_runs(&held, label, &run));
        assert!(is_airlock_hold(&held));
        assert!(is_airlock_hold("airlock amber rocm10-2026.11.0 run other-1"));
        for other in [
            "airlock",
            "airlock-room 4 cooling",
            "airlock: red rocm10-demo 2026.11.0 (bundles/203199b879a82a9c) record X",
            "airlock rocm10-2026.11.1 run 20261205T101500Z-3f9c2a extra",
            "airlock red rocm10 run ../x",
            "airlock red rocm10 run r1 record ../../x.json",
            "airlock red  run r1",
            "bad DIMM, ticket 4711",
        ] {
            assert!(!is_this_runs(other, label, &run), "{other}");
            assert!(!is_airlock_hold(other), "{other}");
        }
        // Another run's drain is not this run's, nor a hold.
        let earlier = drain_reason(label, &"earlier-1".parse().unwrap());
        assert!(!is_this_runs(&earlier, label, &run) && !is_airlock_hold(&earlier));
    }
}
