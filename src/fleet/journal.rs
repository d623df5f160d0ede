//! The run journal: one JSON object a line (`journal.jsonl`), appended as the run goes and
//! synced line by line, so an aborted run keeps everything that happened up to its stop. Only
//! airlock writes it (`rollout plan`, `next`, `judge`, `note`, `evidence`, `end`); the fleet
//! report reads it back (`schemas/rollout-journal-line.v1.json`).

use std::io::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::capacity::Figures;
use super::{FleetError, NodeName, io_err};
use crate::clock::Timestamp;

pub const JOURNAL_FILE: &str = "journal.jsonl";
/// The most bytes of journal read back: a line is a few hundred bytes, a run of 10,000 nodes
/// writes some 20 lines a node.
pub const MAX_JOURNAL_BYTES: u64 = 256 << 20;

/// One line: when, and what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    pub at: Timestamp,
    #[serde(flatten)]
    pub event: Event,
}

/// What happened. Each node event names its node; the run's own events do not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The plan was made: the bundle every apply of the run takes.
    Planned { bundle: String, nodes: usize, waves: usize },
    /// A node recorded the stack it runs as its current bundle (`apply --adopt`).
    Adopted { node: NodeName, bundle: Option<String>, record: Option<String> },
    /// A node fetched the release ahead (`apply --download-only`).
    Staged { node: NodeName, record: Option<String> },
    /// A wave starts: its nodes and the capacity figures it started under.
    Wave { wave: String, nodes: Vec<NodeName>, capacity: Option<Figures> },
    /// The scheduler drained the node for its change and its jobs ended.
    Drained { node: NodeName, waited_s: Option<f64> },
    /// The scheduler found the node out of service for someone else's reason: not changed.
    LeftAlone { node: NodeName, reason: String },
    /// The node took the run's bundle (or already ran it).
    Applied {
        node: NodeName,
        wave: String,
        changed: bool,
        bundle: Option<String>,
        verdict: Option<String>,
        pending_reboot: Option<String>,
        record: Option<String>,
    },
    /// The stack after a reboot, judged and committed (`validate --commit`).
    Committed { node: NodeName, verdict: Option<String> },
    /// The node's change failed or was not green: airlock put the node back itself (a red
    /// verdict restores) or the step failed; the run stops.
    Failed { node: NodeName, wave: String, reason: String },
    /// Back in service.
    Resumed { node: NodeName },
    /// Kept out of service, the scheduler's reason naming the verdict.
    Held { node: NodeName, reason: String },
    /// Rolled back to the bundle it ran before the run.
    RolledBack { node: NodeName, to: Option<String>, seconds: Option<f64> },
    /// A rollback that failed, or took longer than the run allows.
    RollbackFailed { node: NodeName, reason: String },
    /// The run stops here; no later wave starts.
    Stopped { reason: String },
    /// The canaries are done and the batches wait for an approval of their evidence; the run
    /// ends here, not aborted.
    AwaitingApproval { reason: String },
    /// A node's evidence could not be taken as it came; the other nodes' evidence was.
    EvidenceRefused { node: NodeName, reason: String },
    /// The run's end.
    Ended { aborted: bool, reason: Option<String> },
}

impl Event {
    /// The node the event is about, if any.
    pub fn node(&self) -> Option<&NodeName> {
        match self {
            Event::Adopted { node, .. }
            | Event::Staged { node, .. }
            | Event::Drained { node, .. }
            | Event::LeftAlone { node, .. }
            | Event::Applied { node, .. }
            | Event::Committed { node, .. }
            | Event::Failed { node, .. }
            | Event::Resumed { node }
            | Event::Held { node, .. }
            | Event::RolledBack { node, .. }
            | Event::RollbackFailed { node, .. }
            | Event::EvidenceRefused { node, .. } => Some(node),
            Event::Planned { .. }
            | Event::Wave { .. }
            | Event::Stopped { .. }
            | Event::AwaitingApproval { .. }
            | Event::Ended { .. } => None,
        }
    }
}

/// Append each event as one line, each written and synced before the next (the directory is
/// synced when the journal is created).
pub fn append(path: &Path, events: Vec<Event>) -> Result<(), FleetError> {
    if events.is_empty() {
        return Ok(());
    }
    let created = !path.exists();
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(io_err(path))?;
    if created && let Some(dir) = path.parent() {
        crate::atomic::sync_dir(dir).map_err(io_err(dir))?;
    }
    let at = Timestamp::now();
    for event in events {
        let mut line = serde_json::to_vec(&Line { at, event }).expect("a journal line serialises");
        line.push(b'\n');
        file.write_all(&line).map_err(io_err(path))?;
        file.sync_data().map_err(io_err(path))?;
    }
    Ok(())
}

/// Every line of the journal at `path` (none when there is no journal), bounded; a line that
/// does not parse is an error naming it (only airlock writes the journal, so it was damaged).
pub fn read(path: &Path) -> Result<Vec<Line>, FleetError> {
    let bad = |detail: String| FleetError::Evidence { path: path.to_owned(), detail };
    let Some(bytes) = crate::site::root::read_bounded(path, MAX_JOURNAL_BYTES).map_err(|e| bad(e.to_string()))? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (n, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        out.push(serde_json::from_slice(line).map_err(|e| bad(format!("line {}: {e}", n + 1)))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(n: &str) -> NodeName {
        NodeName::try_from(n.to_owned()).unwrap()
    }

    #[test]
    fn lines_are_appended_and_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(JOURNAL_FILE);
        append(&path, vec![Event::Stopped { reason: "first".into() }]).unwrap();
        append(&path, vec![Event::Resumed { node: node("n1") }, Event::Ended { aborted: true, reason: None }]).unwrap();
        let lines = read(&path).unwrap();
        let events: Vec<Event> = lines.into_iter().map(|l| l.event).collect();
        assert_eq!(
            events,
            [
                Event::Stopped { reason: "first".into() },
                Event::Resumed { node: node("n1") },
                Event::Ended { aborted: true, reason: None }
            ]
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.lines().all(|l| l.starts_with("{\"at\":")), "{text}");
        assert!(text.contains(r#""event":"resumed","node":"n1""#), "{text}");
    }

    #[test]
    fn a_damaged_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(JOURNAL_FILE);
        append(&path, vec![Event::Resumed { node: node("n1") }]).unwrap();
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"{\"at\": 1}\n").unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(e.contains("line 2"), "{e}");
        assert!(read(&dir.path().join("none")).unwrap().is_empty());
    }
}
