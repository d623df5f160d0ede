//! As-built evidence: every install and rollback that changed the site writes
//! `ROOT/records/TIME-ACTION.json` (never rewritten), with what was activated, who signed it,
//! which keys were trusted, what was published, and how long each phase took.

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::SiteError;

/// The durations of an action's phases, in the order they ran.
#[derive(Debug)]
pub struct Phases {
    started: Instant,
    last: Instant,
    done: Vec<(&'static str, f64)>,
}

impl Phases {
    pub fn start() -> Self {
        let now = Instant::now();
        Self { started: now, last: now, done: Vec::new() }
    }

    /// The phase `name` ended now.
    pub fn mark(&mut self, name: &'static str) {
        let now = Instant::now();
        self.done.push((name, (now - self.last).as_secs_f64()));
        self.last = now;
    }

    pub fn total(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// `{phase: seconds}`, in order.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Object(self.done.iter().map(|(k, v)| ((*k).to_owned(), serde_json::json!(v))).collect())
    }
}

/// Write one record; its name sorts by time (`20261130T064012.345Z-install.json`).
pub fn write(root: &Path, action: &str, record: &impl Serialize) -> Result<PathBuf, SiteError> {
    let dir = root.join("records");
    std::fs::create_dir_all(&dir).map_err(|source| SiteError::Io { path: dir.clone(), source })?;
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = i64::try_from(since.as_secs()).unwrap_or(0);
    let stamp = time::OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .and_then(|t| t.format(time::macros::format_description!("[year][month][day]T[hour][minute][second]")).ok())
        .unwrap_or_else(|| secs.to_string());
    let millis = since.subsec_millis();
    let mut bytes = serde_json::to_vec_pretty(record).expect("a record serialises");
    bytes.push(b'\n');
    for n in 0..100 {
        let suffix = if n == 0 { String::new() } else { format!("-{n}") };
        let path = dir.join(format!("{stamp}.{millis:03}Z-{action}{suffix}.json"));
        if path.exists() {
            continue;
        }
        crate::atomic::write(&path, &bytes).map_err(|source| SiteError::Io { path: path.clone(), source })?;
        return Ok(path);
    }
    Err(SiteError::Io { path: dir, source: std::io::Error::other("too many records in one millisecond") })
}
