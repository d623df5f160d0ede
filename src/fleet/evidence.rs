//! `rollout evidence`: each node's evidence of the run, checked as it arrives and written into
//! that node's own directory. What a node returns is its `airlock status --run ID --json` as
//! text; nothing of it is trusted: the document must be an object, its `run_records` an
//! object of at most [`MAX_RECORDS`] records named as airlock names them
//! (`YYYYMMDDTHHMMSS.mmmZ-ACTION.json`), each at most [`MAX_RECORD_BYTES`], each a record of this
//! run. Anything else is refused for that node alone (journaled as its problem) while every
//! other node's evidence is written. The node's page is made on the controller from what was
//! accepted, never taken from HTML the node wrote.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::journal::Event;
use super::plan::Plan;
use super::results::one_line;
use super::{FleetError, NodeName, RunDir, io_err};
use crate::site::records::{Action, Record};

/// The most records one node may return for one run: a run writes a handful per node.
pub const MAX_RECORDS: usize = 1000;
/// The most bytes of one record (a validation's check output is bounded at 1 MiB per check).
pub const MAX_RECORD_BYTES: usize = 16 << 20;
/// The most bytes of one node's whole answer.
pub const MAX_NODE_BYTES: usize = 64 << 20;

/// One node's answer, as the playbook passes it.
#[derive(Debug, Clone, Deserialize)]
pub struct NodeAnswer {
    pub node: NodeName,
    /// `airlock status --run ID --json` as the node printed it; none when the call failed.
    #[serde(default)]
    pub text: Option<serde_json::Value>,
    #[serde(default)]
    pub msg: Option<serde_json::Value>,
}

/// The parts of a node's status the evidence keeps, typed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeStatus {
    #[serde(default)]
    pub current: Option<StatusEntry>,
    #[serde(default)]
    pub previous: Option<StatusEntry>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusEntry {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
}

/// A node's evidence once checked.
#[derive(Debug, Clone)]
pub struct Checked {
    pub node: NodeName,
    pub status: NodeStatus,
    /// File name, exact text, and the record read from it.
    pub records: Vec<(String, String, Record)>,
}

/// What `node.json` says: the node's part in the plan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeFile {
    pub node: NodeName,
    pub tuple: Option<String>,
    pub wave: Option<String>,
    pub part: super::plan::Part,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// A record's file name as airlock writes it.
pub fn is_record_name(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".json") else { return false };
    let b = stem.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    let head = b.len() > 20 && digits(0..8) && b[8] == b'T' && digits(9..15) && b[15] == b'.' && digits(16..19);
    if !(head && b[19] == b'Z' && b[20] == b'-') {
        return false;
    }
    let rest = &stem[21..];
    let (action, n) = rest.split_once('-').unwrap_or((rest, ""));
    ["install", "apply", "rollback", "validate", "promote", "adopt"].contains(&action)
        && (n.is_empty() || (n.len() <= 2 && n.bytes().all(|c| c.is_ascii_digit())))
}

/// Why a node's answer is refused as evidence: what it returned, in bounded words (every
/// text from the node is cut to one line of at most 120 characters).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("its status is not text but {0}")]
    NotText(String),
    /// Ansible's message, or `no answer`.
    #[error("its status could not be read: {0}")]
    NoStatus(String),
    #[error("its status is more than {MAX_NODE_BYTES} bytes")]
    TooLarge,
    #[error("its status is not a JSON document: {0}")]
    NotJson(String),
    #[error("its status is not a JSON object")]
    NotAnObject,
    #[error("its run_records is not an object but {0}")]
    RecordsNotAnObject(String),
    #[error("it returned {0} records for one run, more than {MAX_RECORDS}")]
    TooManyRecords(usize),
    #[error("its status does not read as airlock's: {0}")]
    NotAirlocks(String),
    #[error("a record named `{0}`, not as airlock names records")]
    RecordName(String),
    #[error("record `{0}` is not text")]
    RecordNotText(String),
    #[error("record `{0}` is more than {MAX_RECORD_BYTES} bytes")]
    RecordTooLarge(String),
    #[error("record `{name}` is not a record: {detail}")]
    NotARecord { name: String, detail: String },
    #[error("record `{name}` is not of run `{run}`")]
    OtherRun { name: String, run: String },
}

impl crate::failure::Classify for Refused {
    /// A node's evidence that does not hold: that node is refused, the run goes on.
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Verification
    }
}

/// The answer of one node, checked against run `dir`.
pub fn check(dir: &RunDir, answer: &NodeAnswer) -> Result<Checked, Refused> {
    let text = match &answer.text {
        Some(serde_json::Value::String(t)) => t,
        Some(other) => return Err(Refused::NotText(short(&other.to_string()))),
        None => {
            let msg = answer.msg.as_ref().map_or_else(|| "no answer".to_owned(), |m| short(&m.to_string()));
            return Err(Refused::NoStatus(msg));
        }
    };
    if text.len() > MAX_NODE_BYTES {
        return Err(Refused::TooLarge);
    }
    let doc: serde_json::Value = serde_json::from_str(text).map_err(|e| Refused::NotJson(e.to_string()))?;
    let serde_json::Value::Object(mut doc) = doc else { return Err(Refused::NotAnObject) };
    let records = match doc.remove("run_records") {
        None | Some(serde_json::Value::Null) => serde_json::Map::new(),
        Some(serde_json::Value::Object(m)) => m,
        Some(other) => return Err(Refused::RecordsNotAnObject(short(&other.to_string()))),
    };
    if records.len() > MAX_RECORDS {
        return Err(Refused::TooManyRecords(records.len()));
    }
    let status: NodeStatus =
        serde_json::from_value(serde_json::Value::Object(doc)).map_err(|e| Refused::NotAirlocks(e.to_string()))?;
    let mut checked = Vec::new();
    for (name, text) in records {
        if !is_record_name(&name) {
            return Err(Refused::RecordName(one_line(&name)));
        }
        let serde_json::Value::String(text) = text else {
            return Err(Refused::RecordNotText(name));
        };
        if text.len() > MAX_RECORD_BYTES {
            return Err(Refused::RecordTooLarge(name));
        }
        let record: Record = serde_json::from_str(&text)
            .map_err(|e| Refused::NotARecord { name: name.clone(), detail: one_line(&e.to_string()) })?;
        if record.run_id.as_ref() != Some(&dir.id) {
            return Err(Refused::OtherRun { name, run: dir.id.to_string() });
        }
        checked.push((name, text, record));
    }
    checked.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Checked { node: answer.node.clone(), status, records: checked })
}

fn short(s: &str) -> String {
    let line = one_line(s);
    if line.chars().count() > 120 { format!("{}…", line.chars().take(120).collect::<String>()) } else { line }
}

/// Every answer written under `dir/nodes/`: a node's accepted evidence in full, a refused
/// one's `node.json` alone, with the refusal journaled. A node the journal never names
/// (`touched` says no: the run stopped before it) that has no status to give (no site root
/// yet) has nothing to refuse: its `node.json` alone. `page` makes a node's page from its
/// checked evidence. Returns the files written.
pub fn write_all(
    dir: &RunDir,
    plan: &Plan,
    answers: &[NodeAnswer],
    touched: &dyn Fn(&NodeName) -> bool,
    page: &dyn Fn(&Plan, &Checked) -> String,
) -> Result<(Vec<PathBuf>, Vec<Event>), FleetError> {
    let mut written = Vec::new();
    let mut events = Vec::new();
    for answer in answers {
        let Some(planned) = plan.node(&answer.node) else {
            events.push(Event::EvidenceRefused {
                node: answer.node.clone(),
                reason: "it is not a node of the run's plan".into(),
            });
            continue;
        };
        let top = dir.node_dir(&answer.node);
        let mut node_file = NodeFile {
            node: answer.node.clone(),
            tuple: planned.tuple.clone(),
            wave: planned.wave.clone(),
            part: planned.part,
            refused: None,
        };
        let checked = check(dir, answer);
        let untouched_without_status = answer.text.is_none() && !touched(&answer.node);
        if let (Err(reason), false) = (&checked, untouched_without_status) {
            node_file.refused = Some(reason.to_string());
            events.push(Event::EvidenceRefused { node: answer.node.clone(), reason: reason.to_string() });
        }
        std::fs::create_dir_all(&top).map_err(io_err(&top))?;
        let mut files = vec![(top.join("node.json"), pretty(&node_file))];
        if let Ok(c) = &checked {
            let records = top.join("records");
            std::fs::create_dir_all(&records).map_err(io_err(&records))?;
            files.push((top.join("status.json"), pretty(&c.status)));
            for (name, text, _) in &c.records {
                files.push((records.join(name), text.clone()));
            }
            files.push((top.join("report.html"), page(plan, c)));
        }
        for (path, text) in files {
            if std::fs::read(&path).is_ok_and(|old| old == text.as_bytes()) {
                continue;
            }
            crate::atomic::write(&path, text.as_bytes()).map_err(io_err(&path))?;
            written.push(path);
        }
        crate::atomic::sync_dir(&top).map_err(io_err(&top))?;
    }
    Ok((written, events))
}

fn pretty<T: Serialize>(v: &T) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("evidence serialises");
    s.push('\n');
    s
}

/// The change that decided a node's verdict in the run: its last apply or install that was
/// not only a staging.
pub fn deciding(records: &[(String, String, Record)]) -> Option<&(String, String, Record)> {
    records.iter().rev().find(|(_, _, r)| {
        matches!(r.action, Action::Apply | Action::Install) && r.outcome() != crate::site::records::Outcome::Staged
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_names_are_airlocks_own() {
        for good in ["20261205T101731.042Z-apply.json", "20261205T101731.042Z-rollback-12.json"] {
            assert!(is_record_name(good), "{good}");
        }
        for bad in [
            "",
            "x.json",
            "../20261205T101731.042Z-apply.json",
            "20261205T101731.042Z-apply.json/..",
            "20261205T101731.042Z-evil.json",
            "20261205T101731.042Z-apply-123.json",
            "20261205T101731.042Z-apply\0.json",
            "20261205T101731Z-apply.json",
        ] {
            assert!(!is_record_name(bad), "{bad:?}");
        }
    }
}
