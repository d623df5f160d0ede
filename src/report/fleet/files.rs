//! A run's directory as the collection and `airlock rollout` write it (`run.json`, each node's
//! part and status, each wave's batch and capacity), read bounded and trusting nothing.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::MAX_EVIDENCE_BYTES;
use crate::clock::Timestamp;
use crate::report::ReportError;

/// `run.json`, as the playbook writes it.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RunFile {
    #[serde(default)]
    pub(super) started: Option<Timestamp>,
    #[serde(default)]
    pub(super) ended: Option<Timestamp>,
    #[serde(default)]
    pub(super) aborted: bool,
    #[serde(default)]
    pub(super) reason: Option<String>,
    #[serde(default)]
    pub(super) source: Option<String>,
}

/// A node's part, as the playbook (older runs) or `rollout evidence` writes it.
#[derive(Debug, Default, Deserialize)]
pub(super) struct NodeFile {
    #[serde(default, deserialize_with = "text_or_none")]
    pub(super) tuple: String,
    #[serde(default, deserialize_with = "text_or_none")]
    pub(super) wave: String,
    /// Why `rollout evidence` refused what the node returned.
    #[serde(default)]
    pub(super) refused: Option<String>,
}

fn text_or_none<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

/// The fields of `airlock status --json` the page shows.
#[derive(Debug, Default, Deserialize)]
pub(super) struct StatusFile {
    #[serde(default)]
    pub(super) current: Option<StatusEntry>,
}

#[derive(Debug, Deserialize)]
pub(super) struct StatusEntry {
    #[serde(default)]
    pub(super) version: Option<String>,
    #[serde(default)]
    pub(super) id: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct BatchFile {
    #[serde(default)]
    pub(super) nodes: Vec<String>,
    #[serde(default)]
    pub(super) capacity: Option<CapacityFile>,
}

#[derive(Debug, Deserialize)]
pub(super) struct CapacityFile {
    pub(super) total: i64,
    #[serde(default)]
    pub(super) reserved: i64,
    #[serde(default)]
    pub(super) in_change: i64,
    #[serde(default = "one")]
    pub(super) per_node: i64,
    pub(super) demand: i64,
    #[serde(default)]
    pub(super) headroom: i64,
    #[serde(default)]
    pub(super) source: Option<String>,
    #[serde(default)]
    pub(super) reserved_nodes: Vec<String>,
    #[serde(default)]
    pub(super) in_change_nodes: Vec<String>,
}

fn one() -> i64 {
    1
}

pub(super) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, ReportError> {
    let bad = |detail: String| ReportError::Records { path: path.to_owned(), detail };
    let Some(bytes) = crate::site::root::read_bounded(path, MAX_EVIDENCE_BYTES)? else { return Ok(None) };
    serde_json::from_slice(&bytes).map(Some).map_err(|e| bad(e.to_string()))
}

pub(super) fn sorted_dirs(dir: &Path) -> Result<Vec<(String, PathBuf)>, ReportError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ReportError::Records { path: dir.to_owned(), detail: e.to_string() }),
    };
    let mut out: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| Some((e.file_name().to_str()?.to_owned(), e.path())))
        .collect();
    out.sort();
    Ok(out)
}
