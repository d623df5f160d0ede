//! `ROOT/records/`: a record written once and durably, and read back (every record, a run's,
//! the activations and trust versions they name, the acceptance the current bundle holds).

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use super::{Acceptance, Action, MAX_RECORD_BYTES, Outcome, Record, RecordHead, RunId, outcome_of};
use crate::site::SiteError;
use crate::site::root::{BundleId, SiteRoot};

/// Write one record, durably (the file and its directory synced); its name sorts by time
/// (`20261130T064012.345Z-install.json`).
pub fn write(root: &SiteRoot, record: &Record) -> Result<PathBuf, SiteError> {
    let dir = root.records();
    let action = record.action.as_str();
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
        root.commit_dir(&dir)?;
        return Ok(path);
    }
    Err(SiteError::Io { path: dir, source: std::io::Error::other("too many records in one millisecond") })
}

/// Every record under `root/records`, oldest first (names sort by time), with its path.
/// Records that are too large or do not parse are skipped with a warning: evidence is read,
/// never trusted to be well-formed.
pub fn read_all(root: &SiteRoot) -> Result<Vec<(PathBuf, Record)>, SiteError> {
    read_as(root)
}

/// The records run `run` wrote, by file name, each as its exact text (what the Ansible
/// collection's evidence keeps), oldest first. Unreadable or oversized ones are skipped, as by
/// [`read_all`].
pub fn of_run(root: &SiteRoot, run: &RunId) -> Result<Vec<(String, String)>, SiteError> {
    #[derive(serde::Deserialize)]
    struct RunOf {
        #[serde(default)]
        run_id: Option<RunId>,
    }
    let mut out = Vec::new();
    for (path, r) in read_as::<RunOf>(root)? {
        if r.run_id.as_ref() != Some(run) {
            continue;
        }
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else { continue };
        // Read again for its exact text: the evidence is the file, not a re-serialisation.
        match crate::site::root::read_bounded(&path, MAX_RECORD_BYTES) {
            Ok(Some(bytes)) => out.push((name, String::from_utf8_lossy(&bytes).into_owned())),
            Ok(None) => {}
            Err(e) => tracing::warn!("skipping record: {e}"),
        }
    }
    Ok(out)
}

/// Every record read as `T` (a `Record`, or a view of some of its fields).
fn read_as<T: serde::de::DeserializeOwned>(root: &SiteRoot) -> Result<Vec<(PathBuf, T)>, SiteError> {
    let dir = root.records();
    let entries = match std::fs::read_dir(&dir) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(SiteError::Io { path: dir, source }),
    };
    let mut paths = Vec::new();
    for entry in entries {
        let path = entry.map_err(|source| SiteError::Io { path: dir.clone(), source })?.path();
        if path.extension().is_some_and(|e| e == "json") {
            paths.push(path);
        }
    }
    paths.sort();
    let mut out = Vec::new();
    for path in paths {
        let parsed = crate::site::root::read_bounded(&path, MAX_RECORD_BYTES).and_then(|bytes| {
            serde_json::from_slice::<T>(&bytes.unwrap_or_default())
                .map_err(|e| SiteError::State { path: path.clone(), detail: e.to_string() })
        });
        match parsed {
            Ok(record) => out.push((path, record)),
            Err(e) => tracing::warn!("skipping record: {e}"),
        }
    }
    Ok(out)
}

/// A bundle some record says was made current.
#[derive(Debug, Clone)]
pub struct Activation {
    pub name: String,
    pub version: semver::Version,
}

/// The highest trust root and targets versions any record names: a site never goes back below
/// what it has used, whatever `state.json` says.
pub fn trust_versions(root: &SiteRoot) -> Result<Option<crate::sign::policy::Origin>, SiteError> {
    Ok(read_as::<RecordHead>(root)?.into_iter().filter_map(|(_, r)| r.trust?.trust_root).reduce(|a, b| {
        crate::sign::policy::Origin {
            root_version: a.root_version.max(b.root_version),
            targets_version: a.targets_version.max(b.targets_version),
        }
    }))
}

/// Every activation `records/` shows: installs and rollbacks that made a bundle current (a
/// record of a refused or failed action activated nothing).
pub fn activations(root: &SiteRoot) -> Result<Vec<Activation>, SiteError> {
    Ok(read_as::<RecordHead>(root)?
        .into_iter()
        .filter(|(_, r)| outcome_of(r.action, r.outcome) == Outcome::Activated)
        .filter_map(|(_, r)| {
            let b = r.bundle?;
            Some(Activation { name: b.name?, version: b.version?.parse().ok()? })
        })
        .collect())
}

/// The acceptance under which the current bundle `current` was activated, if it was amber:
/// from the newest record of an install, apply or `validate --commit` that activated it.
pub fn open_acceptance(root: &SiteRoot, current: &BundleId) -> Option<(PathBuf, Acceptance)> {
    let all = read_all(root).ok()?;
    let (path, record) = all.into_iter().rev().find(|(_, r)| {
        matches!(r.action, Action::Install | Action::Apply | Action::Validate)
            && r.outcome() == Outcome::Activated
            && r.bundle.as_ref().and_then(|b| b.id.as_ref()) == Some(current)
    })?;
    let acceptance = record
        .amber
        .clone()
        .or_else(|| record.accepted_amber.clone().map(|reason| Acceptance { reason, owner: None, expires: None }))?;
    Some((path, acceptance))
}
