//! `airlock status`: what is current and previous, the history, and the last rollback's
//! measured duration. Read without the lock: `state.json` is replaced whole and the links are
//! swapped atomically. A bundle's name and version come from its own tree, read unverified
//! (`check` verifies); a tree or state that cannot be read is shown as damaged beside the
//! rest, never in place of it.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::SiteError;
use super::root::read_bounded;
use super::root::{BundleId, Link, SiteRoot};
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
    /// Every rollback's duration, as the guide's rehearsed rollback figure: median and worst.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollbacks: Option<Rehearsals>,
    /// A node's apply waiting for a reboot (`validate --commit` after it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingEntry>,
    /// The amber acceptance the current bundle runs under, if it was activated amber.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amber: Option<OpenAcceptance>,
    /// A mirror's candidates: the releases it retains and serves by version and id that are not
    /// its current (what `promote` takes).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<Entry>,
    /// A mirror's signed promotion as `public/promotion.json` says it (not verified here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub promotion: Option<PromotionEntry>,
    /// The last change that did not activate (refused, failed, restored), when nothing activated
    /// since: what a held node's operator looks for first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_attempt: Option<AttemptEntry>,
    /// Why `state.json` could not be read (then history and install times are missing, and the
    /// rest is shown from the links and trees).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_damaged: Option<String>,
}

/// A mirror's promotion, as its file says.
#[derive(Debug, Serialize)]
pub struct PromotionEntry {
    pub number: u64,
    pub id: BundleId,
    pub version: String,
    pub expires: Timestamp,
    pub approved_on_run: Option<String>,
    pub without_approval: Option<String>,
}

/// A change that did not activate, from its record.
#[derive(Debug, Serialize)]
pub struct AttemptEntry {
    pub action: String,
    pub outcome: String,
    pub at: Timestamp,
    pub bundle: String,
    pub reason: Option<String>,
    pub record: String,
}

/// One activation: what became current, when, by which action, and how long it took.
#[derive(Debug, Serialize)]
pub struct HistoryEntry {
    pub action: String,
    pub id: BundleId,
    pub name: String,
    pub version: String,
    /// When it became current.
    pub installed_at: Timestamp,
    pub seconds: f64,
}

/// The rehearsed rollback duration over all rollbacks this root has done.
#[derive(Debug, Serialize)]
pub struct Rehearsals {
    pub count: usize,
    pub median_seconds: f64,
    pub worst_seconds: f64,
}

impl Rehearsals {
    pub fn of(history: &[Event]) -> Option<Self> {
        Self::of_seconds(history.iter().filter(|e| e.action == "rollback").map(|e| e.seconds).collect())
    }

    /// From each rollback's duration.
    pub fn of_seconds(mut seconds: Vec<f64>) -> Option<Self> {
        if seconds.is_empty() {
            return None;
        }
        seconds.sort_by(f64::total_cmp);
        let n = seconds.len();
        let median = if n % 2 == 1 { seconds[n / 2] } else { f64::midpoint(seconds[n / 2 - 1], seconds[n / 2]) };
        Some(Self { count: n, median_seconds: median, worst_seconds: seconds[n - 1] })
    }
}

/// An amber acceptance still in force (or expired: a requalification is due).
#[derive(Debug, Serialize)]
pub struct OpenAcceptance {
    #[serde(flatten)]
    pub acceptance: super::records::Acceptance,
    pub expired: bool,
    /// The record that activated the bundle under it.
    pub record: PathBuf,
}

impl OpenAcceptance {
    /// The acceptance `current` runs under, judged at `now`.
    pub fn of(root: &SiteRoot, current: &BundleId, now: Timestamp) -> Option<Self> {
        let (record, acceptance) = super::records::open_acceptance(root, current)?;
        Some(Self { expired: acceptance.expired(now), acceptance, record })
    }

    /// `by OWNER until DATE (EXPIRED): REASON`, escaped for a terminal.
    pub fn describe(&self) -> String {
        let flag = if self.expired { " — EXPIRED: requalify or accept again" } else { "" };
        crate::escape::value(&format!("{}{flag}: {}", self.acceptance.terms(), self.acceptance.reason)).into_owned()
    }
}

/// An apply waiting for a reboot.
#[derive(Debug, Serialize)]
pub struct PendingEntry {
    pub id: BundleId,
    pub name: String,
    pub version: String,
    pub since: Timestamp,
    pub reason: String,
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

#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    pub id: BundleId,
    pub name: String,
    pub version: String,
    pub installed_at: Option<Timestamp>,
    /// Why its tree could not be described (then name and version are what `state.json`
    /// recorded, if anything): `airlock check` says what is wrong with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub damaged: Option<String>,
}

/// What `root` holds. A directory that is no site root is an error; a damaged `state.json`
/// is reported beside everything else that can still be read.
pub fn status(root: &Path) -> Result<Status, SiteError> {
    let root = &SiteRoot::new(root);
    if !root.is_site() {
        return Err(SiteError::NotASite { root: root.path().to_owned() });
    }
    let (state, state_damaged) = match State::load(root) {
        Ok(state) => (state, None),
        Err(e) => (State::default(), Some(crate::failure::chain(&e))),
    };
    // One damaged bundle must not hide the others: each entry says what it can.
    let entry = |id: &BundleId| -> Entry {
        let recorded = state.bundles.get(id);
        let path = root.bundle_dir(id).join(MANIFEST);
        let described = read_bounded(&path, MAX_MANIFEST_BYTES).and_then(|bytes| {
            let bytes = bytes.ok_or_else(|| SiteError::State { path: path.clone(), detail: "missing".into() })?;
            serde_json::from_slice::<Manifest>(&bytes)
                .map_err(|e| SiteError::State { path: path.clone(), detail: e.to_string() })
        });
        let installed_at = recorded.map(|b| b.installed_at);
        match described {
            Ok(m) => Entry {
                id: id.clone(),
                name: m.name.to_string(),
                version: m.version.to_string(),
                installed_at,
                damaged: None,
            },
            Err(e) => Entry {
                id: id.clone(),
                name: recorded.map(|b| b.name.clone()).unwrap_or_default(),
                version: recorded.map(|b| b.version.to_string()).unwrap_or_default(),
                installed_at,
                damaged: Some(e.to_string()),
            },
        }
    };
    let retained: Vec<Entry> = root.retained().iter().map(entry).collect();
    let amber = root.link(Link::Current).and_then(|c| OpenAcceptance::of(root, &c, Timestamp::started()));
    let current = root.link(Link::Current);
    let candidates = if super::public::served(root) {
        retained.iter().filter(|e| Some(&e.id) != current.as_ref()).map(Entry::clone).collect()
    } else {
        Vec::new()
    };
    let promotion = super::promotion::current(&root.public()).map(|p| PromotionEntry {
        number: p.version,
        id: p.bundle.id,
        version: p.bundle.version,
        expires: p.expires,
        approved_on_run: p.approval.map(|a| a.run),
        without_approval: p.without_approval,
    });
    Ok(Status {
        amber,
        candidates,
        promotion,
        last_attempt: last_attempt(root),
        root: root.path().to_owned(),
        current: root.link(Link::Current).as_ref().map(entry),
        previous: root.link(Link::Previous).as_ref().map(entry),
        retained,
        rollbacks: Rehearsals::of(&state.history),
        pending: state.pending.map(|p| PendingEntry {
            id: p.id,
            name: p.name,
            version: p.version.to_string(),
            since: p.since,
            reason: p.reason,
        }),
        history: state.history.into_iter().map(HistoryEntry::from).collect(),
        last_rollback: state.last_rollback.map(HistoryEntry::from),
        state_damaged,
    })
}

/// The newest record of a change that did not activate (refused, failed, restored), when no
/// change activated after it.
fn last_attempt(root: &SiteRoot) -> Option<AttemptEntry> {
    use super::records::{Action, Outcome};
    let records = super::records::read_all(root).ok()?;
    let mut changes = records.iter().filter(|(_, r)| {
        matches!(r.action, Action::Install | Action::Apply | Action::Adopt | Action::Promote | Action::Rollback)
    });
    let (path, r) = changes.rfind(|(_, r)| r.outcome() != Outcome::Staged)?;
    if !matches!(r.outcome(), Outcome::Refused | Outcome::Failed | Outcome::Restored) {
        return None;
    }
    let b = r.bundle.clone().unwrap_or_default();
    Some(AttemptEntry {
        action: r.action.as_str().to_owned(),
        outcome: format!("{:?}", r.outcome()).to_lowercase(),
        at: r.at,
        bundle: format!(
            "{} {}",
            b.name.as_deref().unwrap_or("?"),
            b.version.as_deref().or(b.file.as_deref()).unwrap_or("?")
        ),
        reason: r.reason.clone(),
        record: path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
    })
}
