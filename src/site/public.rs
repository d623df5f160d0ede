//! A mirror's served tree, `ROOT/public/`: what its nodes read and nothing else. Serve this
//! directory (never the root: `state.json`, `records/`, `staging/`, `downloads/` and the lock
//! are the mirror's own).
//!
//! ```text
//! public/current -> ../bundles/ID               the qualified release (what `apply URL` takes)
//! public/releases/VERSION -> ../../bundles/ID   every retained release by version …
//! public/releases/ID -> ../../bundles/ID        … and by id (`apply URL --release VERSION|ID`)
//! public/releases.json                          the releases served and the current one (a list)
//! public/promotion.json                         the signed promotion (`site::promotion`)
//! ```
//!
//! Each entry is a relative symbolic link into `bundles/`, replaced by renaming a new link
//! over it (a reader sees the old release or the new, never none), its directory synced after.
//! A web server follows them (nginx and `python3 -m http.server` do by default); what they
//! lead to is a retained tree: the signed manifest, co-signatures, trust keys and views, all of
//! which nodes verify and none of which is secret.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::root::{BundleId, Link, SiteRoot};
use super::state::State;
use super::{SiteError, io_err};

/// Where nodes find the releases, under `public/`.
pub const RELEASES: &str = "releases";
/// The releases served, by version and id, and the current one (`public/releases.json`): what a
/// node lists when it asks for a release the mirror does not serve.
pub const INDEX: &str = "releases.json";

/// `public/releases.json`: the releases a mirror serves (by version, each with its id, name and
/// the co-signatures beside it) and its current one. `refresh` writes it; nodes and relays read
/// it (`site::mirror`) as a hint only — which co-signatures to ask for, where a release's
/// members are by id, what to list when a release is not served — never as a fact: each
/// manifest is verified on its own.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReleaseIndex {
    pub current: Option<BundleId>,
    #[serde(default)]
    pub releases: Vec<ListedRelease>,
}

/// One release of the index, under its version.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ListedRelease {
    pub version: String,
    pub id: BundleId,
    #[serde(default)]
    pub name: String,
    /// The key ids of the co-signatures beside it; absent in an index written before they were
    /// listed (a node then asks for each trusted key's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cosignatures: Option<Vec<String>>,
}

impl ReleaseIndex {
    /// The release the index lists under `name`: a version or an id.
    pub fn find(&self, name: &str) -> Option<&ListedRelease> {
        self.releases.iter().find(|r| r.id.as_str() == name || r.version == name)
    }
}

/// Make `public/` say what the root holds now: `current`, and every retained release by version
/// and by id; links to releases no longer retained are removed. Where two retained bundles of
/// different names share a version, the one installed last answers for it (by id, both do).
pub(super) fn refresh(root: &SiteRoot, state: &State) -> Result<(), SiteError> {
    let public = root.public();
    let releases = public.join(RELEASES);
    std::fs::create_dir_all(&releases).map_err(io_err(&releases))?;
    let retained = root.retained();
    let mut wanted: BTreeMap<String, BundleId> = BTreeMap::new();
    let mut by_time: Vec<_> = state.bundles.iter().filter(|(id, _)| retained.contains(id)).collect();
    by_time.sort_by_key(|(_, b)| b.installed_at);
    for (id, b) in by_time {
        wanted.insert(b.version.to_string(), id.clone());
        wanted.insert(id.to_string(), id.clone());
    }
    for (name, id) in &wanted {
        set_link(&releases, name, &format!("../../bundles/{id}")).map_err(io_err(&releases.join(name)))?;
    }
    for entry in std::fs::read_dir(&releases).map_err(io_err(&releases))? {
        let entry = entry.map_err(io_err(&releases))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !wanted.contains_key(&name) {
            std::fs::remove_file(entry.path()).map_err(io_err(&entry.path()))?;
        }
    }
    root.commit_dir(&releases)?;
    // What a node lists when it asks for a release the mirror does not serve.
    let releases: Vec<ListedRelease> = wanted
        .iter()
        .filter(|(name, id)| name.as_str() != id.as_str())
        .filter_map(|(version, id)| {
            let name = &state.bundles.get(id)?.name;
            // The co-signatures beside it, by key id: a node fetches only these (not one
            // request per trusted key, most of them answered 404).
            let cosignatures: Vec<String> =
                crate::sign::policy::cosignatures_beside(&root.bundle_dir(id).join(super::root::RETAINED_BUNDLE))
                    .unwrap_or_default()
                    .into_iter()
                    .map(|c| c.key_id.to_string())
                    .collect();
            Some(ListedRelease {
                version: version.clone(),
                id: id.clone(),
                name: name.clone(),
                cosignatures: Some(cosignatures),
            })
        })
        .collect();
    let index = ReleaseIndex { current: root.link(Link::Current), releases };
    let path = public.join(INDEX);
    let mut bytes = serde_json::to_vec_pretty(&index).expect("the index serialises");
    bytes.push(b'\n');
    crate::atomic::write_durable(&path, &bytes).map_err(io_err(&path))?;
    match root.link(Link::Current) {
        Some(id) => set_link(&public, "current", &format!("../bundles/{id}")).map_err(io_err(&public))?,
        None => remove_if_present(&public.join("current")).map_err(io_err(&public))?,
    }
    root.commit_dir(&public)?;
    root.commit_dir(root.path())
}

/// Whether the root serves a public tree (a mirror's).
pub(super) fn served(root: &SiteRoot) -> bool {
    std::fs::symlink_metadata(root.public()).is_ok_and(|m| m.is_dir())
}

/// `dir/name` made a link to `target`, by renaming a new link over it when it differs.
fn set_link(dir: &Path, name: &str, target: &str) -> io::Result<()> {
    let path = dir.join(name);
    if std::fs::read_link(&path).is_ok_and(|t| t == Path::new(target)) {
        return Ok(());
    }
    let tmp = dir.join(format!(".{name}.new"));
    remove_if_present(&tmp)?;
    std::os::unix::fs::symlink(target, &tmp)?;
    std::fs::rename(&tmp, &path)
}

fn remove_if_present(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
