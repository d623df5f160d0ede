//! What an apply keeps aside: a release fetched ahead (`downloads/ID`), a refused or unfinished
//! staged tree, and a bundle retained only for an apply that did not commit.

use std::path::{Path, PathBuf};

use crate::clock::Timestamp;
use crate::site::install::Attempt;
use crate::site::root::{BundleId, SiteRoot};
use crate::site::transaction::{Step, Transaction};
use crate::site::{SiteError, io_err, records};

/// `--download-only`: the verified part moved to `downloads/ID` (replacing an older copy; other
/// releases fetched ahead are dropped: a node waits for one), synced, and on record as staged.
pub(super) fn keep_downloaded(
    root: &SiteRoot,
    dir: tempfile::TempDir,
    id: &BundleId,
    attempt: &mut Attempt,
) -> Result<(PathBuf, PathBuf), SiteError> {
    crate::site::stage::sync_tree(dir.path()).map_err(io_err(dir.path()))?;
    let kept = dir.keep();
    let target = into_downloads(root, &kept, id, Replacing::Every).inspect_err(|_| {
        let _ = std::fs::remove_dir_all(&kept);
    })?;
    let r = &mut attempt.record;
    r.outcome = Some(records::Outcome::Staged);
    r.phases = attempt.phases.times();
    r.seconds = Some(attempt.phases.total());
    r.at = Timestamp::now();
    let record = records::write(root, r)?;
    tracing::info!("staged: {} waits for the apply of its release", target.display());
    Ok((target, record))
}

/// What a tree moved into `downloads/` replaces: every release fetched ahead (one fetched
/// ahead now takes their place), or only an older copy of the same release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Replacing {
    Every,
    Same,
}

/// `from`, a synced tree, renamed to `downloads/ID`; what it replaces goes aside into `staging/`
/// first (the next writer cleans what is left there) and is removed after. Returns `downloads/ID`.
pub(super) fn into_downloads(
    root: &SiteRoot,
    from: &Path,
    id: &BundleId,
    replacing: Replacing,
) -> Result<PathBuf, SiteError> {
    let downloads = root.downloads();
    std::fs::create_dir_all(&downloads).map_err(io_err(&downloads))?;
    let target = downloads.join(id.as_str());
    let mut aside = Vec::new();
    for old in std::fs::read_dir(&downloads).map_err(io_err(&downloads))? {
        let old = old.map_err(io_err(&downloads))?.path();
        if replacing == Replacing::Every || old == target {
            let name = old.file_name().unwrap_or_default().to_string_lossy().into_owned();
            let to = root.staging().join(format!("dropped-{name}"));
            let _ = std::fs::remove_dir_all(&to);
            std::fs::rename(&old, &to).map_err(io_err(&old))?;
            aside.push(to);
        }
    }
    std::fs::rename(from, &target).map_err(io_err(&target))?;
    if let Some(parent) = from.parent() {
        root.commit_dir(parent)?;
    }
    root.commit_dir(&downloads)?;
    for dir in aside {
        let _ = std::fs::remove_dir_all(dir);
    }
    Ok(target)
}

/// Once a release is retained, its copy fetched ahead is not needed any more.
pub(super) fn drop_downloaded(root: &SiteRoot, id: &BundleId) {
    let dir = root.downloads().join(id.as_str());
    if dir.exists()
        && let Err(e) = std::fs::remove_dir_all(&dir)
    {
        tracing::warn!("`{}` could not be removed: {e}", dir.display());
    }
}

/// A bundle retained for an apply that did not commit leaves `bundles/` (with its policy in
/// `state.json`; a failure here is warned about, the apply's own error is the one reported); what a node fetched
/// from a mirror (`fetched`) stays under `downloads/ID` as a release fetched ahead would, so
/// the next apply of it fetches nothing again (it verifies what it takes from there).
pub(super) fn forget(tx: &mut Transaction<'_>, id: &BundleId, fetched: bool) {
    let root = tx.root();
    let held = fetched && hold_fetched(root, id).inspect_err(|e| tracing::warn!("{e}")).is_ok();
    let removed = if held {
        tx.state.bundles.remove(id);
        Ok(())
    } else {
        crate::site::activate::discard(root, &mut tx.state, id)
    };
    match removed.and_then(|()| tx.save(Step::Forgotten)) {
        Ok(()) if held => tracing::info!("bundles/{id} was retained for this apply only: kept as downloads/{id}"),
        Ok(()) => tracing::info!("bundles/{id} was retained for this apply only: removed"),
        Err(e) => tracing::warn!("bundles/{id} was retained for this apply only and could not be removed: {e}"),
    }
}

/// A refusal before anything changed: what was fetched from a mirror waits for the next try.
pub(super) fn refused(
    root: &SiteRoot,
    dir: tempfile::TempDir,
    id: &BundleId,
    fetched: bool,
    e: SiteError,
) -> SiteError {
    if fetched {
        hold_staged(root, dir, id);
    }
    e
}

/// A staged tree fetched from a mirror kept as `downloads/ID` for the next apply of it (warned
/// about when it cannot be: the refusal is what the apply reports).
pub(super) fn hold_staged(root: &SiteRoot, dir: tempfile::TempDir, id: &BundleId) {
    let held = crate::site::stage::sync_tree(dir.path()).map_err(io_err(dir.path())).and_then(|()| {
        let kept = dir.keep();
        into_downloads(root, &kept, id, Replacing::Same).inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&kept);
        })
    });
    match held {
        Ok(_) => tracing::info!("what was fetched is kept as downloads/{id} for the next apply of it"),
        Err(e) => tracing::warn!("what was fetched could not be kept for the next apply: {e}"),
    }
}

/// `bundles/ID` moved to `downloads/ID` (replacing an older copy of the same release).
pub(super) fn hold_fetched(root: &SiteRoot, id: &BundleId) -> Result<(), SiteError> {
    into_downloads(root, &root.bundle_dir(id), id, Replacing::Same).map(drop)
}
