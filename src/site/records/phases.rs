//! How long each phase of an action took, as records keep it: the phases by name
//! (`Phase`), timed as they run (`Phases`), and the seconds a record holds (`PhaseTimes`).

use std::time::Instant;

use serde::{Deserialize, Serialize};

/// Seconds per phase, in the order they ran (a JSON object whose keys keep that order).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PhaseTimes(pub Vec<(String, f64)>);

impl PhaseTimes {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, phase: &str) -> Option<f64> {
        self.0.iter().find(|(p, _)| p == phase).map(|(_, s)| *s)
    }
}

impl Serialize for PhaseTimes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (phase, seconds) in &self.0 {
            map.serialize_entry(phase, seconds)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for PhaseTimes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // serde_json keeps the order of an object's keys (`preserve_order`).
        let map = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
        let mut out = Vec::with_capacity(map.len());
        for (phase, seconds) in map {
            let seconds =
                seconds.as_f64().ok_or_else(|| serde::de::Error::custom(format!("phase `{phase}`: not seconds")))?;
            out.push((phase, seconds));
        }
        Ok(Self(out))
    }
}

/// A phase of an action on the root, as records name it (`phases`' keys, `failed_in`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The bundle's signature, members and policy checked.
    Verify,
    /// A node's matrix judged on what the probe knew before anything changed.
    Preflight,
    /// The package manager's simulation of the change.
    Plan,
    /// The bundle retained (or a retained one taken up again).
    Stage,
    /// The current stack's metrics measured before the packages change.
    Baseline,
    /// The host's packages changed (or put back for a rollback).
    Packages,
    /// The new stack judged against the bundle's matrix.
    Validate,
    /// Only the checks' metrics missed their thresholds (a failed step inside `validate`;
    /// never timed on its own).
    Metrics,
    /// A red node's packages put back.
    Restore,
    /// Site views published (registry, indexes).
    Publish,
    /// `current` moved.
    Switch,
    /// History and the record written.
    Record,
}

impl Phase {
    pub const fn name(self) -> &'static str {
        match self {
            Phase::Verify => "verify",
            Phase::Preflight => "preflight",
            Phase::Plan => "plan",
            Phase::Stage => "stage",
            Phase::Baseline => "baseline",
            Phase::Packages => "packages",
            Phase::Validate => "validate",
            Phase::Metrics => "metrics",
            Phase::Restore => "restore",
            Phase::Publish => "publish",
            Phase::Switch => "switch",
            Phase::Record => "record",
        }
    }
}

/// The durations of an action's phases, in the order they ran.
#[derive(Debug)]
pub struct Phases {
    started: Instant,
    last: Instant,
    done: Vec<(Phase, f64)>,
    /// The phase running now (the one a failure happened in).
    pub running: Phase,
}

impl Phases {
    pub fn start(first: Phase) -> Self {
        let now = Instant::now();
        Self { started: now, last: now, done: Vec::new(), running: first }
    }

    /// The phase running ended now; `next` runs from here.
    pub fn mark(&mut self, next: Phase) {
        let now = Instant::now();
        self.done.push((self.running, (now - self.last).as_secs_f64()));
        self.last = now;
        self.running = next;
    }

    pub fn total(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    pub fn times(&self) -> PhaseTimes {
        PhaseTimes(self.done.iter().map(|(k, v)| (k.name().to_owned(), *v)).collect())
    }
}
