//! `ROOT/state.json`: what the site has installed and when, the highest version of each bundle
//! name it has activated (the anti-downgrade mark), the site registry it publishes to, and the
//! last rollback's measured duration. Written whole and atomically (temp file, fsync, rename):
//! a reader, or a writer after a crash, sees the old state or the new one, never half of each.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::SiteError;
use crate::clock::Timestamp;
use crate::sign::KeyId;

pub const SCHEMA: &str = "airlock.site/v1";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    pub schema: String,
    /// Highest version activated per bundle name.
    #[serde(default)]
    pub high_water: BTreeMap<String, semver::Version>,
    /// Bundles retained under `bundles/ID`, by id.
    #[serde(default)]
    pub bundles: BTreeMap<String, Retained>,
    /// Every install and rollback that changed `current`, oldest first.
    #[serde(default)]
    pub history: Vec<Event>,
    /// Where images are published, remembered so that a rollback can publish there too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<RegistryMemo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_rollback: Option<Event>,
}

/// A retained bundle and the policy it was installed under.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Retained {
    pub name: String,
    pub version: semver::Version,
    pub installed_at: Timestamp,
    pub signers: Vec<KeyId>,
    /// The `--trust` keys it was installed with (kept as `bundles/ID/trust/KEYID.pub`).
    pub trust: Vec<KeyId>,
    pub threshold: usize,
    /// For a delta bundle: the retained bundle its omitted members came from, which is kept
    /// as long as this one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    pub action: String,
    pub id: String,
    pub name: String,
    pub version: semver::Version,
    pub at: Timestamp,
    /// Wall time of the whole action.
    pub seconds: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryMemo {
    pub host: String,
    pub insecure: bool,
}

impl Default for State {
    fn default() -> Self {
        Self {
            schema: SCHEMA.to_owned(),
            high_water: BTreeMap::new(),
            bundles: BTreeMap::new(),
            history: Vec::new(),
            registry: None,
            last_rollback: None,
        }
    }
}

fn path(root: &Path) -> PathBuf {
    root.join("state.json")
}

impl State {
    /// The state of `root`; a site that has installed nothing has the empty state.
    pub fn load(root: &Path) -> Result<Self, SiteError> {
        let path = path(root);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(source) => return Err(SiteError::Io { path, source }),
        };
        let state: Self = serde_json::from_slice(&bytes)
            .map_err(|e| SiteError::State { path: path.clone(), detail: e.to_string() })?;
        if state.schema != SCHEMA {
            let detail = format!("schema is `{}`, this airlock reads `{SCHEMA}`", state.schema);
            return Err(SiteError::State { path, detail });
        }
        Ok(state)
    }

    pub fn save(&self, root: &Path) -> Result<(), SiteError> {
        let path = path(root);
        let mut bytes = serde_json::to_vec_pretty(self).expect("a state serialises");
        bytes.push(b'\n');
        crate::atomic::write(&path, &bytes).map_err(|source| SiteError::Io { path, source })?;
        // The rename is durable once the directory is.
        std::fs::File::open(root)
            .and_then(|d| d.sync_all())
            .map_err(|source| SiteError::Io { path: root.to_owned(), source })
    }
}
