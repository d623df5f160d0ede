//! `airlock status`: what is current and previous, the history, and the last rollback's
//! measured duration. Read without the lock: `state.json` is replaced whole and the links are
//! swapped atomically, and a bundle's name and version come from its own verified tree, so
//! what `current` names is always described by what `current` points at.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::SiteError;
use super::state::{Event, State};
use crate::bundle::Manifest;
use crate::clock::Timestamp;

#[derive(Debug, Serialize)]
pub struct Status {
    pub root: PathBuf,
    pub current: Option<Entry>,
    pub previous: Option<Entry>,
    /// Every bundle kept under `bundles/`.
    pub retained: Vec<Entry>,
    /// Every install and rollback that changed `current`, oldest first.
    pub history: Vec<HistoryEntry>,
    pub last_rollback: Option<HistoryEntry>,
}

/// One activation: what became current, when, by which action, and how long it took.
#[derive(Debug, Serialize)]
pub struct HistoryEntry {
    pub action: String,
    pub id: String,
    pub name: String,
    pub version: String,
    /// When it became current.
    pub installed_at: Timestamp,
    pub seconds: f64,
}

impl From<Event> for HistoryEntry {
    fn from(e: Event) -> Self {
        Self {
            action: e.action,
            id: e.id,
            name: e.name,
            version: e.version.to_string(),
            installed_at: e.at,
            seconds: e.seconds,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Entry {
    pub id: String,
    pub name: String,
    pub version: String,
    pub installed_at: Option<Timestamp>,
}

pub fn status(root: &Path) -> Result<Status, SiteError> {
    let state = State::load(root)?;
    let entry = |id: &str| -> Result<Entry, SiteError> {
        let path = root.join("bundles").join(id).join("airlock/manifest.json");
        let bytes = std::fs::read(&path).map_err(|source| SiteError::Io { path: path.clone(), source })?;
        let m: Manifest = serde_json::from_slice(&bytes)
            .map_err(|e| SiteError::State { path: path.clone(), detail: e.to_string() })?;
        let installed_at = state.bundles.get(id).map(|b| b.installed_at);
        Ok(Entry { id: id.to_owned(), name: m.name.to_string(), version: m.version.to_string(), installed_at })
    };
    let linked = |name: &str| -> Result<Option<Entry>, SiteError> {
        match std::fs::read_link(root.join(name)) {
            Ok(target) => entry(&target.file_name().unwrap_or_default().to_string_lossy()).map(Some),
            Err(_) => Ok(None),
        }
    };
    let mut retained = Vec::new();
    if let Ok(dir) = std::fs::read_dir(root.join("bundles")) {
        let mut ids: Vec<String> =
            dir.filter_map(Result::ok).map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        ids.sort();
        for id in ids {
            retained.push(entry(&id)?);
        }
    }
    Ok(Status {
        root: root.to_owned(),
        current: linked("current")?,
        previous: linked("previous")?,
        retained,
        history: state.history.into_iter().map(HistoryEntry::from).collect(),
        last_rollback: state.last_rollback.map(HistoryEntry::from),
    })
}
