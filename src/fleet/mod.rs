//! The rollout's decisions, made here and executed by the Ansible collection `airlock.site`
//! (and Slurm through it): which node is a canary, which nodes are skipped, reserved or
//! unavailable, each batch's capacity, when to stop, what to roll back, which release every
//! wave takes, and what the run's evidence holds. The playbook calls `airlock rollout …` on its
//! controller at each step and passes back what the nodes returned; every decision is a typed
//! function here with its unit tests, never a Jinja expression.
//!
//! One run lives in one directory on the controller, written only through this module:
//!
//! ```text
//! EVIDENCE/runs/RUN/plan.json            the plan: one bundle id, every inventory node's part
//! EVIDENCE/runs/RUN/journal.jsonl        what happened, one JSON object a line, appended and synced
//! EVIDENCE/runs/RUN/run.json             id, started, ended, aborted and why
//! EVIDENCE/runs/RUN/nodes/NODE/          node.json, status.json, records/, report.html (made here)
//! ```
//!
//! Nothing a node returns is trusted: its records and status are type-checked and bounded as
//! they arrive, one node's bad evidence is refused for that node alone, and the page a reader
//! opens is made here from the records (`evidence`), never the HTML a node wrote.

pub mod capacity;
pub mod evidence;
pub mod journal;
pub mod judge;
pub mod plan;
#[cfg(test)]
mod properties;
pub mod results;
pub mod scheduler;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::site::records::RunId;

/// What went wrong in a rollout step.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// What the playbook passed cannot be used as it is (a usage error: exit 2).
    #[error("{what}: {detail}")]
    Input { what: String, detail: String },
    /// A figure of the capacity rule does not fit in 64 bits once multiplied or added.
    #[error("capacity rule: {figure} overflows ({detail})")]
    Overflow { figure: &'static str, detail: String },
    /// The run's directory does not hold what this step needs, or holds what it must not.
    #[error("run `{run}`: {detail}")]
    Run { run: String, detail: String },
    /// A file of the run's evidence that cannot be read back as written.
    #[error("`{path}`: {detail}")]
    Evidence { path: PathBuf, detail: String },
    #[error("`{path}`: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl crate::failure::Classify for FleetError {
    fn class(&self) -> crate::failure::Class {
        use crate::failure::Class;
        match self {
            FleetError::Input { .. } | FleetError::Overflow { .. } | FleetError::Run { .. } => Class::Usage,
            FleetError::Evidence { .. } | FleetError::Io { .. } => Class::Runtime,
        }
    }
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> FleetError + '_ {
    move |source| FleetError::Io { path: path.to_owned(), source }
}

/// An inventory host's name as the evidence uses it (a directory of its own): 1 to 253 of
/// `A-Z a-z 0-9 . _ : -`, starting with a letter or digit. Checked when built, so a name can
/// never climb out of `nodes/`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NodeName(String);

impl NodeName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for NodeName {
    type Error = String;

    fn try_from(value: String) -> Result<Self, String> {
        let first_ok = value.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
        let rest_ok = value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'));
        if first_ok && rest_ok && value.len() <= 253 {
            Ok(Self(value))
        } else {
            Err(format!(
                "`{}` is not a node name: 1 to 253 of A-Z a-z 0-9 . _ : -, starting with a letter or digit",
                crate::escape::value(&value)
            ))
        }
    }
}

impl From<NodeName> for String {
    fn from(n: NodeName) -> Self {
        n.0
    }
}

impl std::fmt::Display for NodeName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One run's directory on the controller. Built from a checked [`RunId`], so no path of the
/// run can leave `EVIDENCE/runs/`.
#[derive(Debug, Clone)]
pub struct RunDir {
    pub id: RunId,
    pub path: PathBuf,
}

impl RunDir {
    pub fn new(evidence: &Path, id: RunId) -> Self {
        let path = evidence.join("runs").join(id.as_str());
        Self { id, path }
    }

    pub fn plan_file(&self) -> PathBuf {
        self.path.join(plan::PLAN_FILE)
    }

    pub fn journal_file(&self) -> PathBuf {
        self.path.join(journal::JOURNAL_FILE)
    }

    pub fn run_file(&self) -> PathBuf {
        self.path.join("run.json")
    }

    pub fn node_dir(&self, node: &NodeName) -> PathBuf {
        self.path.join("nodes").join(node.as_str())
    }

    /// The run's plan, as `rollout plan` wrote it.
    pub fn plan(&self) -> Result<plan::Plan, FleetError> {
        let path = self.plan_file();
        let bytes = crate::site::root::read_bounded(&path, plan::MAX_PLAN_BYTES)
            .map_err(|e| FleetError::Evidence { path: path.clone(), detail: e.to_string() })?
            .ok_or_else(|| FleetError::Run {
                run: self.id.to_string(),
                detail: format!("no plan at `{}`: `airlock rollout plan` starts a run", path.display()),
            })?;
        serde_json::from_slice(&bytes).map_err(|e| FleetError::Evidence { path, detail: e.to_string() })
    }

    /// The run's journal so far.
    pub fn journal(&self) -> Result<Vec<journal::Line>, FleetError> {
        journal::read(&self.journal_file())
    }

    /// Append `events` to the journal, each line written and synced.
    pub fn note(&self, events: Vec<journal::Event>) -> Result<(), FleetError> {
        journal::append(&self.journal_file(), events)
    }
}

/// Read a JSON document the playbook passes on standard input, bounded.
pub fn read_input<T: serde::de::DeserializeOwned>(
    reader: impl std::io::Read,
    what: &str,
    limit: u64,
) -> Result<T, FleetError> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    reader.take(limit + 1).read_to_end(&mut bytes).map_err(|source| FleetError::Io { path: "-".into(), source })?;
    if bytes.len() as u64 > limit {
        return Err(FleetError::Input { what: what.to_owned(), detail: format!("more than {limit} bytes") });
    }
    serde_json::from_slice(&bytes).map_err(|e| FleetError::Input { what: what.to_owned(), detail: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_name_never_leaves_its_directory() {
        for bad in ["", ".", "..", "../x", "a/b", ".hidden", "n\n1", "a b", &"x".repeat(254)] {
            assert!(NodeName::try_from(bad.to_owned()).is_err(), "{bad:?}");
        }
        for good in ["n1", "gpu-a01.example.org", "10.0.0.1", "fe80::1", "node_7"] {
            assert!(NodeName::try_from(good.to_owned()).is_ok(), "{good}");
        }
    }
}
