//! Staging: a bundle verified while it is extracted (with a copy of its file) into a new
//! private directory under `staging/`, its views written beside its content, the whole tree
//! synced; nothing there is visible until `retain` names it under `bundles/`.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use super::records;
use super::root::{BundleId, RETAINED_BUNDLE, SiteRoot};
use super::sink::StageSink;
use super::state::{Event, State};
use super::{SiteError, base, io_err, views};
use crate::bundle::manifest::VerifiedManifest;
use crate::bundle::parts::Opened;
use crate::bundle::reader::{OnProblem, Problem, Report, read_bundle};
use crate::clock::Timestamp;
use crate::digest::Sha256;
use crate::progress::Reporter;
use crate::sign::policy::SignatureCheck;
use crate::sign::{KeyId, Policy};
use crate::tee::{Tee, TeeError};

/// A bundle verified into a directory under `staging/`: invisible until it is retained.
pub(super) struct Staged {
    /// Removed with everything in it when dropped, unless `retain` moved it.
    pub dir: tempfile::TempDir,
    pub verified: Verified,
}

/// What verification established about a staged bundle.
pub(super) struct Verified {
    pub manifest: VerifiedManifest,
    pub manifest_sha256: Sha256,
    pub signers: Vec<KeyId>,
    pub signatures: Vec<SignatureCheck>,
    /// A delta's base, which supplied its `from_base` members.
    pub base: Option<BundleId>,
}

impl Verified {
    /// The history event for `action` that made this bundle, retained as `id`, current now.
    pub fn event(&self, action: &str, id: &BundleId, seconds: f64) -> Event {
        let m = &self.manifest;
        Event {
            action: action.to_owned(),
            id: id.clone(),
            name: m.name.to_string(),
            version: m.version.clone(),
            at: Timestamp::now(),
            seconds,
        }
    }

    /// The `bundle` object of a record.
    pub fn record(&self, id: &BundleId) -> records::RecordBundle {
        let m = &self.manifest;
        records::RecordBundle {
            id: Some(id.clone()),
            name: Some(m.name.to_string()),
            version: Some(m.version.to_string()),
            manifest_sha256: Some(self.manifest_sha256),
            base: self.base.clone(),
            file: None,
        }
    }
}

/// Verify the bundle while extracting it into a new private directory under `staging/`, beside
/// the site's copy of its file (which shares the file's blocks where the file system can:
/// XFS with reflink, btrfs; and is then what is read); a delta's omitted members come from its base, verified again.
pub(super) fn stage(
    bundle: &Path,
    opened: Opened,
    trust: &Policy,
    root: &SiteRoot,
    state: &State,
    reporter: &dyn Reporter,
) -> Result<Staged, SiteError> {
    let staging = root.staging();
    // Private (0700) until the tree is complete; `retain` gives it the usual mode.
    let dir = tempfile::Builder::new().prefix("stage-").tempdir_in(&staging).map_err(io_err(&staging))?;
    crate::interrupt::remove_tree_on_interrupt(dir.path());
    let copy_path = dir.path().join(RETAINED_BUNDLE);
    let copy = File::options().read(true).write(true).create_new(true).open(&copy_path).map_err(io_err(&copy_path))?;
    // A file whose blocks the copy shares is read from the copy, which nobody else writes: the
    // bundle's bytes are not written again. Elsewhere (ext4, tmpfs, NFS, another file system)
    // the copy is written as the bundle is read.
    let stream = match opened {
        Opened::File { file, .. } if shares_blocks(&copy, &file, &copy_path)? => None,
        Opened::File { file, .. } => Some(Box::new(BufReader::with_capacity(1 << 20, file)) as Box<dyn Read + Send>),
        Opened::Stream { stream, .. } => Some(stream),
    };
    let mut sink = StageSink::new(dir.path());
    let mut read = |input: &mut (dyn Read + Send)| {
        read_bundle(input, trust, &mut sink, OnProblem::Stop, reporter)
            .map_err(|e| SiteError::Io { path: e.path.under(dir.path()), source: e.source })
    };
    let (report, tee) = if let Some(stream) = stream {
        let mut tee = Tee::new(stream, copy);
        (read(&mut tee)?, Some(tee))
    } else {
        tracing::info!("stage: the copy shares the bundle file's blocks; verifying the copy");
        (read(&mut BufReader::with_capacity(1 << 20, copy))?, None)
    };
    let Report {
        manifest: Some(manifest), manifest_sha256: Some(manifest_sha256), signers, signatures, problems, ..
    } = report
    else {
        return Err(SiteError::Rejected { path: bundle.to_owned(), problems: report.problems });
    };
    if !problems.is_empty() {
        return Err(SiteError::Rejected { path: bundle.to_owned(), problems });
    }
    // The rest of the file (past the zstd frame's end) is kept too; a read failure there is
    // the bundle's, a write failure the site's. Not synced here: the copy is part of the
    // staged tree, which `retain` syncs whole.
    match tee.map_or(Ok(()), Tee::finish) {
        Ok(()) => {}
        Err(TeeError::Read(e)) => {
            let reason = crate::bundle::reader::Rejection::Truncated(e.to_string());
            return Err(SiteError::Rejected {
                path: bundle.to_owned(),
                problems: vec![Problem { member: None, reason }],
            });
        }
        Err(TeeError::Write(e)) => return Err(io_err(&copy_path)(e)),
    }
    let base = base::fill(root, state, &manifest, dir.path(), reporter)?;
    Ok(Staged { dir, verified: Verified { manifest, manifest_sha256, signers, signatures, base } })
}

/// Whether `copy` (new, empty) now shares all of `file`'s blocks, the file system copying on
/// write from here on. Where the file system refuses, `copy` is left empty.
fn shares_blocks(copy: &File, file: &File, copy_path: &Path) -> Result<bool, SiteError> {
    match rustix::fs::ioctl_ficlone(copy, file) {
        Ok(()) => Ok(true),
        Err(e) => {
            tracing::debug!("stage: the bundle file's blocks cannot be shared ({e}); copying it as it is read");
            // A clone that failed part way (out of space) may have shared some blocks.
            copy.set_len(0).map_err(io_err(copy_path))?;
            Ok(false)
        }
    }
}

/// Whether a copy of `file` made under `dir` will share its blocks, as `stage` makes it: tried
/// on an unnamed file there, gone when dropped (the blocks stay the bundle file's alone).
pub(super) fn would_share_blocks(file: &File, dir: &Path) -> bool {
    let shares = tempfile::tempfile_in(dir).is_ok_and(|probe| rustix::fs::ioctl_ficlone(&probe, file).is_ok());
    tracing::debug!(
        "preflight: the site's copy will {}share the bundle file's blocks",
        if shares { "" } else { "not " }
    );
    shares
}

/// Views derived from verified content are part of the staged tree, so they appear with it.
pub(super) fn write_views(
    dir: &Path,
    manifest: &VerifiedManifest,
    apt_key: Option<&views::AptSigningKey>,
) -> Result<(), SiteError> {
    views::write_wheel_index(dir, manifest).map_err(io_err(&dir.join("wheels/simple")))?;
    views::write_hf_cache(dir, manifest).map_err(io_err(&dir.join("models")))?;
    views::write_apt_repo(dir, manifest, apt_key).map_err(io_err(&dir.join("debs")))?;
    views::write_rpm_repo(dir, manifest, apt_key).map_err(io_err(&dir.join("rpms")))?;
    Ok(())
}

/// Every file and directory of a staged tree on disk: the filesystem holding it synced at once
/// (`syncfs`: data and metadata, the directories included; since Linux 5.8 it reports a
/// write-back error), rather than one `fsync` per file. Where `syncfs` fails, every file and
/// directory is synced one by one.
pub(super) fn sync_tree(dir: &Path) -> io::Result<()> {
    match rustix::fs::syncfs(File::open(dir)?) {
        Ok(()) => return Ok(()),
        Err(e) => tracing::debug!("syncfs on `{}`: {e}; syncing file by file", dir.display()),
    }
    for entry in walkdir::WalkDir::new(dir).follow_links(false).contents_first(true) {
        let entry = entry?;
        if entry.file_type().is_file() || entry.file_type().is_dir() {
            File::open(entry.path())?.sync_all()?;
        }
    }
    Ok(())
}

/// The staged tree's top directory gets the usual mode (that of the directories the sink made
/// inside it, `mkdir`'s 0777 less the umask) now that it is complete: views are served to
/// other users (web server, pip).
pub(super) fn publish_mode(dir: &Path) -> io::Result<()> {
    let inner = std::fs::metadata(dir.join("airlock"))?.permissions();
    std::fs::set_permissions(dir, inner)
}
