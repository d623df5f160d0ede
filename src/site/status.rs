//! `airlock status`: what is current and previous, the history, and the last rollback's
//! measured duration. Read without the lock: `state.json` is replaced whole and the links are
//! swapped atomically, and a bundle's name and version come from its own verified tree, so
//! what `current` names is always described by what `current` points at.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::SiteError;
use super::state::read_bounded;
use super::state::{Event, State};
use crate::bundle::Manifest;
use crate::bundle::manifest::{MANIFEST, MAX_MANIFEST_BYTES};
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
    /// Why its tree could not be described (then name and version are what `state.json`
    /// recorded, if anything): `airlock check` says what is wrong with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub damaged: Option<String>,
}

pub fn status(root: &Path) -> Result<Status, SiteError> {
    let state = State::load(root)?;
    // One damaged bundle must not hide the others: each entry says what it can.
    let entry = |id: &str| -> Entry {
        let recorded = state.bundles.get(id);
        let path = root.join("bundles").join(id).join(MANIFEST);
        let described = read_bounded(&path, MAX_MANIFEST_BYTES).and_then(|bytes| {
            let bytes = bytes.ok_or_else(|| SiteError::State { path: path.clone(), detail: "missing".into() })?;
            serde_json::from_slice::<Manifest>(&bytes)
                .map_err(|e| SiteError::State { path: path.clone(), detail: e.to_string() })
        });
        let installed_at = recorded.map(|b| b.installed_at);
        match described {
            Ok(m) => Entry {
                id: id.to_owned(),
                name: m.name.to_string(),
                version: m.version.to_string(),
                installed_at,
                damaged: None,
            },
            Err(e) => Entry {
                id: id.to_owned(),
                name: recorded.map(|b| b.name.clone()).unwrap_or_default(),
                version: recorded.map(|b| b.version.to_string()).unwrap_or_default(),
                installed_at,
                damaged: Some(e.to_string()),
            },
        }
    };
    let linked = |name: &str| -> Option<Entry> {
        let target = std::fs::read_link(root.join(name)).ok()?;
        Some(entry(&target.file_name().unwrap_or_default().to_string_lossy()))
    };
    let mut retained = Vec::new();
    if let Ok(dir) = std::fs::read_dir(root.join("bundles")) {
        let mut ids: Vec<String> =
            dir.filter_map(Result::ok).map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        ids.sort();
        for id in ids {
            retained.push(entry(&id));
        }
    }
    Ok(Status {
        root: root.to_owned(),
        current: linked("current"),
        previous: linked("previous"),
        retained,
        history: state.history.into_iter().map(HistoryEntry::from).collect(),
        last_rollback: state.last_rollback.map(HistoryEntry::from),
    })
}
