//! `ROOT/state.json`: what the site has installed and when, the highest version of each bundle
//! name it has activated (the anti-downgrade mark), the site registry it publishes to, and the
//! last rollback's measured duration. Written whole and atomically (temp file, fsync, rename):
//! a reader, or a writer after a crash, sees the old state or the new one, never half of each.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::root::{BundleId, Link, SiteRoot};
use super::{SiteError, records};
use crate::clock::Timestamp;
use crate::sign::KeyId;

pub const SCHEMA: &str = "airlock.site/v1";
/// The largest `state.json` read: years of history are a few hundred kilobytes, so a larger
/// file is not one airlock wrote, and is refused before it is read into memory.
pub const MAX_STATE_BYTES: u64 = 16 << 20;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    pub schema: String,
    /// Highest version activated per bundle name.
    #[serde(default)]
    pub high_water: BTreeMap<String, semver::Version>,
    /// Bundles retained under `bundles/ID`, by id.
    #[serde(default)]
    pub bundles: BTreeMap<BundleId, Retained>,
    /// Every install and rollback that changed `current`, oldest first.
    #[serde(default)]
    pub history: Vec<Event>,
    /// Where images are published, remembered so that a rollback can publish there too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<RegistryMemo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_rollback: Option<Event>,
    /// A node's apply waiting for a reboot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<Pending>,
    /// The site trust root this site has used: its anchor and the highest versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<TrustPin>,
    /// The highest signed promotion number this root issued (a mirror: `promote`) or accepted
    /// (a node following a mirror's `current`): a lower one is a replay.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub promotion: u64,
}

#[allow(clippy::trivially_copy_pass_by_ref, reason = "serde's skip_serializing_if passes a reference")]
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What pins a site's trust root: `1.root.json`'s sha256 (a whole other trust root planted in
/// its place is refused) and the highest root and targets versions used (metadata replayed
/// from before a rotation or a revocation is refused).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustPin {
    pub anchor: crate::digest::Sha256,
    pub root_version: u64,
    pub targets_version: u64,
}

impl TrustPin {
    /// What pins `trust`: its anchor and the versions it holds now.
    pub fn of(trust: &crate::trust::SiteTrust) -> Self {
        let origin = trust.origin();
        Self { anchor: trust.anchor, root_version: origin.root_version, targets_version: origin.targets_version }
    }
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
    pub base: Option<BundleId>,
    /// On a node: the host packages applying it changed (what a restore or a rollback puts
    /// back). Empty for a bundle only installed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied: Vec<super::packages::Change>,
    /// A node (or relay) took it from a mirror and keeps only its signed manifest and some
    /// members (`kept`), no bundle file: verified again from those.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
    /// Which part a `partial` bundle keeps: a node's (the default), or a relay's.
    #[serde(default, skip_serializing_if = "Kept::is_packages")]
    pub kept: Kept,
}

/// The members a node keeps of a bundle it applied from a mirror.
pub fn kept_by_node(path: &str) -> bool {
    path.starts_with("debs/")
        || path.starts_with("rpms/")
        || path == crate::bundle::manifest::MANIFEST
        || path == crate::bundle::manifest::SIGNATURE
}

/// What of a release a root keeps when it takes the release from a mirror (`kept` beside
/// `partial`): what its views, its check and its rollback are made from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kept {
    /// A node's part: the signed manifest, its signature, the package files (`kept_by_node`).
    #[default]
    Packages,
    /// A relay's: a node's part and the trust metadata the bundle carries (`airlock/trust/`),
    /// which the nodes and relays reading from it take a rotated trust root from.
    Relay,
    /// A relay's with `--all`: every member, as the mirror serves them.
    All,
}

impl Kept {
    /// Whether a member at `path` is kept.
    pub fn holds(self, path: &str) -> bool {
        match self {
            Self::Packages => kept_by_node(path),
            Self::Relay => kept_by_node(path) || path.starts_with(crate::bundle::manifest::TRUST_PREFIX),
            Self::All => true,
        }
    }

    pub fn is_packages(&self) -> bool {
        *self == Self::Packages
    }
}

/// An apply whose change needs a reboot before its stack can be judged: `validate --commit`
/// after the reboot commits it or restores the host; another apply is refused until then.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pending {
    pub id: BundleId,
    pub name: String,
    pub version: semver::Version,
    pub since: Timestamp,
    /// Why a reboot is needed.
    pub reason: String,
    /// The packages the apply changed.
    pub changes: Vec<super::packages::Change>,
    /// The apply retained the bundle (it was not under `bundles/` before): a restore removes it.
    #[serde(default)]
    pub retained_here: bool,
    /// The apply's `--keep` (what the commit prunes to) and whether it was a downgrade.
    #[serde(default = "two")]
    pub keep: usize,
    #[serde(default)]
    pub downgrade: bool,
    /// `--accept-amber --reason [--owner] [--expires]`, given to the apply (a state written
    /// before owners and expiries holds the reason alone).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "acceptance")]
    pub accept_amber: Option<super::records::Acceptance>,
}

fn acceptance<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<super::records::Acceptance>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Reason(String),
        Whole(super::records::Acceptance),
    }
    Ok(Option::<Either>::deserialize(d)?.map(|e| match e {
        Either::Reason(reason) => super::records::Acceptance { reason, owner: None, expires: None },
        Either::Whole(a) => a,
    }))
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    pub action: String,
    pub id: BundleId,
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

impl From<&RegistryMemo> for super::registry::SiteRegistry {
    fn from(memo: &RegistryMemo) -> Self {
        let transport = if memo.insecure { crate::oci::Transport::InsecureHttp } else { crate::oci::Transport::Https };
        Self { host: memo.host.clone(), transport }
    }
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
            pending: None,
            trust: None,
            promotion: 0,
        }
    }
}

fn path(root: &SiteRoot) -> PathBuf {
    root.path().join("state.json")
}

impl State {
    /// The state of `root`; a site that has installed nothing has the empty state.
    pub fn load(root: &SiteRoot) -> Result<Self, SiteError> {
        let path = path(root);
        let Some(bytes) = super::root::read_bounded(&path, MAX_STATE_BYTES)? else { return Ok(Self::default()) };
        let state: Self = serde_json::from_slice(&bytes)
            .map_err(|e| SiteError::State { path: path.clone(), detail: e.to_string() })?;
        if state.schema != SCHEMA {
            let detail = format!("schema is `{}`, this airlock reads `{SCHEMA}`", state.schema);
            return Err(SiteError::State { path, detail });
        }
        Ok(state)
    }

    /// The state a writer (install, rollback) starts from. A missing `state.json` in a root
    /// whose `records/` shows earlier activations is not a new site: its anti-downgrade mark
    /// and the policies of its retained bundles are gone, and a writer stops there.
    pub fn load_for_writer(root: &SiteRoot) -> Result<Self, SiteError> {
        let state = Self::load(root)?;
        if path(root).exists() {
            return Ok(state);
        }
        let activations = records::activations(root)?;
        if !activations.is_empty() {
            return Err(SiteError::StateMissing { root: root.path().to_owned(), records: activations.len() });
        }
        Ok(state)
    }

    /// The highest version of `name` this site has activated: the mark `state.json` keeps,
    /// raised by every activation the records show and every bundle retained under
    /// `bundles/`, so that editing or deleting the state does not lower it. (What is read
    /// here unverified can only raise the mark: refuse more, never allow more.)
    pub fn high_water(&self, root: &SiteRoot, name: &str) -> Result<Option<semver::Version>, SiteError> {
        let mut mark = self.high_water.get(name).cloned();
        let mut raise = |v: semver::Version| {
            if mark.as_ref().is_none_or(|m| v > *m) {
                mark = Some(v);
            }
        };
        for a in records::activations(root)? {
            if a.name == name {
                raise(a.version);
            }
        }
        // A retained bundle counts once it ran here: named by `current` or `previous`, in the
        // history, or waiting for its reboot. One retained for an apply that was stopped before
        // its gate (power lost between retaining and judging it) never ran, and must not hold
        // the node to its version; records and the links still raise the mark if state.json is
        // edited.
        let ran = |id: &BundleId| {
            [Link::Current, Link::Previous].iter().any(|l| root.link(*l).as_ref() == Some(id))
                || self.history.iter().any(|e| e.id == *id)
                || self.pending.as_ref().is_some_and(|p| p.id == *id)
        };
        for (n, v) in retained_versions(root, &ran) {
            if n == name {
                raise(v);
            }
        }
        Ok(mark)
    }

    /// Written beside, synced, renamed, the root synced. Only a writer's `Transaction` saves,
    /// at a step of the crash table.
    pub(super) fn save(&self, root: &SiteRoot) -> Result<(), SiteError> {
        let path = path(root);
        let mut bytes = serde_json::to_vec_pretty(self).expect("a state serialises");
        bytes.push(b'\n');
        crate::atomic::write(&path, &bytes).map_err(|source| SiteError::Io { path, source })?;
        // The rename is durable once the directory is.
        root.commit_dir(root.path())
    }
}

/// The name and version each retained tree's manifest claims (unverified; unreadable ones
/// are skipped).
fn retained_versions(root: &SiteRoot, ran: &dyn Fn(&BundleId) -> bool) -> Vec<(String, semver::Version)> {
    #[derive(Deserialize)]
    struct Head {
        name: String,
        version: semver::Version,
    }
    root.retained()
        .into_iter()
        .filter(|id| ran(id))
        .filter_map(|id| {
            let path = root.bundle_dir(&id).join(crate::bundle::manifest::MANIFEST);
            let bytes = super::root::read_bounded(&path, crate::bundle::manifest::MAX_MANIFEST_BYTES).ok().flatten()?;
            let head: Head = serde_json::from_slice(&bytes).ok()?;
            Some((head.name, head.version))
        })
        .collect()
}

fn two() -> usize {
    2
}
