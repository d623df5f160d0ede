//! Activation: `current` and `previous` are symlinks swapped by renaming a new link over the
//! old one, which is atomic on POSIX file systems: a reader sees the old or the new target,
//! never a missing link. Pruning, after a successful activation only.

use std::io;

use super::root::{BundleId, Link, SiteRoot};
use super::state::State;
use super::{SiteError, io_err};
use crate::clock::Timestamp;

/// Make `bundles/ID` current; the old current, if another, becomes previous. Returns the old
/// current.
pub(super) fn activate(root: &SiteRoot, id: &BundleId) -> Result<Option<BundleId>, SiteError> {
    tracing::info!("activate: current -> bundles/{id}");
    let old = root.link(Link::Current);
    if let Some(old) = old.as_ref().filter(|o| *o != id) {
        replace_link(root, Link::Previous, old).map_err(io_err(root.path()))?;
    }
    replace_link(root, Link::Current, id).map_err(io_err(root.path()))?;
    Ok(old.filter(|o| o != id))
}

/// Point `link` at `bundles/ID` by renaming a new link over it; the root is synced after.
fn replace_link(root: &SiteRoot, link: Link, id: &BundleId) -> io::Result<()> {
    let tmp = root.path().join(format!(".{}.new", link.name()));
    match std::fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::os::unix::fs::symlink(format!("bundles/{id}"), &tmp)?;
    std::fs::rename(&tmp, root.link_path(link))?;
    crate::atomic::sync_dir(root.path())
}

/// Remove retained bundles beyond the newest `keep`, never `current` or `previous`: after a
/// successful activation only. A pruned tree is first moved into `staging/`, so an
/// interruption leaves no half-removed bundle under `bundles/`.
pub(super) fn prune(root: &SiteRoot, state: &mut State, keep: usize) -> Result<Vec<BundleId>, SiteError> {
    let linked: Vec<BundleId> = [Link::Current, Link::Previous].into_iter().filter_map(|l| root.link(l)).collect();
    let mut others: Vec<(Timestamp, BundleId)> = root
        .retained()
        .into_iter()
        .filter(|id| !linked.contains(id))
        .map(|id| (state.bundles.get(&id).map_or(Timestamp::from_unix(0), |b| b.installed_at), id))
        .collect();
    others.sort();
    let spare = keep.saturating_sub(linked.len());
    let excess = others.len().saturating_sub(spare);
    // A kept delta needs its base (and that one its own): those stay too.
    let mut needed: Vec<BundleId> =
        linked.iter().chain(others.iter().skip(excess).map(|(_, id)| id)).cloned().collect();
    let mut i = 0;
    while let Some(id) = needed.get(i) {
        if let Some(base) = state.bundles.get(id).and_then(|b| b.base.clone())
            && !needed.contains(&base)
        {
            needed.push(base);
        }
        i += 1;
    }
    let mut pruned = Vec::new();
    for (_, id) in others.into_iter().take(excess) {
        if needed.contains(&id) {
            tracing::info!("prune: keeping bundles/{id}, the base of a kept delta bundle");
            continue;
        }
        discard(root, state, &id)?;
        tracing::info!("prune: bundles/{id} (--keep {keep})");
        pruned.push(id);
    }
    Ok(pruned)
}

/// Remove `bundles/ID` and its entry in `state` (saved by the caller). The tree is first moved
/// into `staging/`, so an interruption leaves no half-removed bundle under `bundles/`.
pub(super) fn discard(root: &SiteRoot, state: &mut State, id: &BundleId) -> Result<(), SiteError> {
    let from = root.bundle_dir(id);
    let aside = root.staging().join(format!("pruned-{id}"));
    std::fs::rename(&from, &aside).map_err(io_err(&from))?;
    root.commit_dir(&root.bundles())?;
    std::fs::remove_dir_all(&aside).map_err(io_err(&aside))?;
    state.bundles.remove(id);
    Ok(())
}
