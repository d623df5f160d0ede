//! The site state root (`--root`): staging, retained bundles and atomic activation.
//!
//! ```text
//! ROOT/bundles/ID/              the retained bundle file (bundle.airlock), the co-signatures
//!                               that counted (bundle.airlock.KEYID.sig) + its staged tree
//! ROOT/current -> bundles/ID    swapped atomically (rename of a symlink)
//! ROOT/previous -> bundles/ID
//! ROOT/.lock                    one writer at a time
//! ```
//!
//! A bundle is verified while it is extracted into a fresh staging directory under ROOT, and
//! renamed into `bundles/` only when the whole of it verified. A rejected bundle leaves ROOT
//! exactly as it was: the staging directory and anything this install created are removed.

mod activate;
pub mod registry;
mod stage;
pub mod views;

use std::fs::File;
use std::io::{self, BufReader};
use std::path::{Path, PathBuf};

use crate::bundle::Manifest;
use crate::bundle::reader::{OnProblem, Problem, Report, read_bundle};
use crate::digest::Sha256;
use crate::failure::{Class, Classify};
use crate::fetch::Net;
use crate::progress::Reporter;
use crate::sign::policy::{SignatureCheck, cosignature_path, counted};
use crate::sign::{KeyId, Policy};
use stage::{Created, StageSink, Tee};

/// The retained copy of the bundle file inside `bundles/ID/`.
pub const RETAINED_BUNDLE: &str = "bundle.airlock";

#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    #[error("cannot open bundle `{}`", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("bundle `{}` failed verification; the site was not changed: {}", path.display(), first(problems))]
    Rejected { path: PathBuf, problems: Vec<Problem> },
    #[error("site root `{}` is in use by another airlock (lock `{}` is held)", root.display(), root.join(".lock").display())]
    Busy { root: PathBuf },
    #[error("publishing the images of bundles/{id} failed; `current` was not changed")]
    Publish {
        id: String,
        #[source]
        source: registry::PublishError,
    },
    #[error("site I/O failed at `{}`", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl Classify for SiteError {
    fn class(&self) -> Class {
        match self {
            SiteError::Rejected { .. } => Class::Verification,
            SiteError::Open { .. } | SiteError::Busy { .. } | SiteError::Publish { .. } | SiteError::Io { .. } => {
                Class::Runtime
            }
        }
    }
}

fn first(problems: &[Problem]) -> String {
    let more = problems.len().saturating_sub(1);
    let head = problems.first().map_or_else(|| "no manifest".to_owned(), ToString::to_string);
    if more > 0 { format!("{head} (and {more} more)") } else { head }
}

/// What an install did.
#[derive(Debug, serde::Serialize)]
pub struct Installed {
    pub id: String,
    pub name: String,
    pub version: String,
    pub manifest_sha256: Sha256,
    pub signers: Vec<KeyId>,
    pub path: PathBuf,
    /// Co-signatures that counted, retained beside the bundle file.
    pub cosignatures: Vec<PathBuf>,
    pub previous: Option<String>,
    /// The same bundle was already retained; it was re-verified and activated.
    pub already_present: bool,
    /// Images pushed to the site registry.
    pub images: Vec<registry::Pushed>,
    /// Images the bundle carries that were not published (no `--registry`).
    pub images_not_published: usize,
}

/// Where install publishes what the bundle carries.
#[derive(Default)]
pub struct Publish {
    pub registry: Option<registry::SiteRegistry>,
    /// Signs the apt view's `Release` when given.
    pub apt_key: Option<views::AptSigningKey>,
}

/// The short id of a bundle at a site: the first 16 hex characters of its manifest's sha256.
pub fn bundle_id(manifest_sha256: &Sha256) -> String {
    manifest_sha256.short(16)
}

/// Verify `bundle` while staging it under `root`, then make it `current`.
pub fn install(
    bundle: &Path,
    trust: &Policy,
    root: &Path,
    publish: &Publish,
    net: &Net,
    reporter: &dyn Reporter,
) -> Result<Installed, SiteError> {
    let input = File::open(bundle).map_err(|source| SiteError::Open { path: bundle.to_owned(), source })?;
    let mut created = Created::default();
    let result = install_tracked(bundle, input, trust, root, publish, net, &mut created, reporter);
    if result.is_err() {
        created.undo();
    }
    result
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> SiteError + use<> {
    let path = path.to_owned();
    move |source| SiteError::Io { path, source }
}

/// The phases of an install, in order. Until `retain` has renamed the staged tree into
/// `bundles/`, everything it created is undone on failure; after, the bundle stays retained.
#[allow(clippy::too_many_arguments, reason = "the phases' inputs, passed once from `install`")]
fn install_tracked(
    bundle: &Path,
    input: File,
    trust: &Policy,
    root: &Path,
    publish: &Publish,
    net: &Net,
    created: &mut Created,
    reporter: &dyn Reporter,
) -> Result<Installed, SiteError> {
    let lock = lock_root(root, created)?;
    tracing::info!("stage: verifying `{}` into `{}`", bundle.display(), root.display());
    let Staged { dir, verified } = stage(bundle, input, trust, root, reporter)?;
    tracing::info!("views: pip index, apt repository, Hugging Face cache");
    write_views(dir.path(), &verified.manifest, publish)?;
    let retained = retain(dir, &verified, trust, root, created)?;
    tracing::info!("retain: bundles/{}", retained.id);
    // From here the bundle is retained: nothing below undoes that.
    created.forget();
    let (images, images_not_published) = publish_images(&retained, publish, net)?;
    let current = format!("bundles/{}", retained.id);
    tracing::info!("activate: current -> {current}");
    let previous = activate::switch(root, &current).map_err(io_err(root))?.filter(|p| *p != current);
    drop(lock);
    Ok(Installed {
        id: retained.id,
        name: verified.manifest.name.to_string(),
        version: verified.manifest.version.to_string(),
        manifest_sha256: verified.manifest_sha256,
        signers: verified.signers,
        path: retained.path,
        cosignatures: retained.cosignatures,
        previous,
        already_present: retained.already_present,
        images,
        images_not_published,
    })
}

/// Take `ROOT/.lock` (creating the root if needed): one writer at a time.
fn lock_root(root: &Path, created: &mut Created) -> Result<File, SiteError> {
    created.create_dir_all(root).map_err(io_err(root))?;
    let lock_path = root.join(".lock");
    let lock = created.open_or_create(&lock_path).map_err(io_err(&lock_path))?;
    match lock.try_lock() {
        Ok(()) => Ok(lock),
        Err(std::fs::TryLockError::WouldBlock) => Err(SiteError::Busy { root: root.to_owned() }),
        Err(std::fs::TryLockError::Error(e)) => Err(io_err(&lock_path)(e)),
    }
}

/// A bundle verified into a staging directory under ROOT: invisible until it is retained.
struct Staged {
    /// Removed with everything in it when dropped, unless `retain` renamed it.
    dir: tempfile::TempDir,
    verified: Verified,
}

/// What verification established about a staged bundle.
struct Verified {
    manifest: Manifest,
    manifest_sha256: Sha256,
    signers: Vec<KeyId>,
    signatures: Vec<SignatureCheck>,
}

/// Verify the bundle while extracting it (and a copy of the file) into a fresh staging
/// directory under `root`.
fn stage(
    bundle: &Path,
    input: File,
    trust: &Policy,
    root: &Path,
    reporter: &dyn Reporter,
) -> Result<Staged, SiteError> {
    // 0777 less the umask, like `mkdir`: the views are served to other users (web server, pip).
    let dir = tempfile::Builder::new()
        .prefix(".staging-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o777))
        .tempdir_in(root)
        .map_err(io_err(root))?;
    let copy_path = dir.path().join(RETAINED_BUNDLE);
    let copy = File::create_new(&copy_path).map_err(io_err(&copy_path))?;
    let mut tee = Tee::new(BufReader::with_capacity(1 << 20, input), copy);
    let mut sink = StageSink::new(dir.path());
    let report = read_bundle(&mut tee, trust, &mut sink, OnProblem::Stop, reporter)
        .map_err(|e| SiteError::Io { path: e.path.under(dir.path()), source: e.source })?;
    tee.finish().map_err(io_err(&copy_path))?;
    let Report {
        manifest: Some(manifest), manifest_sha256: Some(manifest_sha256), signers, signatures, problems, ..
    } = report
    else {
        return Err(SiteError::Rejected { path: bundle.to_owned(), problems: report.problems });
    };
    if !problems.is_empty() {
        return Err(SiteError::Rejected { path: bundle.to_owned(), problems });
    }
    Ok(Staged { dir, verified: Verified { manifest, manifest_sha256, signers, signatures } })
}

/// Views derived from verified content are part of the staged tree, so they appear with it.
fn write_views(dir: &Path, manifest: &Manifest, publish: &Publish) -> Result<(), SiteError> {
    views::write_wheel_index(dir, manifest).map_err(io_err(&dir.join("wheels/simple")))?;
    views::write_hf_cache(dir, manifest).map_err(io_err(&dir.join("models")))?;
    views::write_apt_repo(dir, manifest, publish.apt_key.as_ref()).map_err(io_err(&dir.join("debs")))?;
    Ok(())
}

/// A bundle kept under `bundles/ID/`.
struct Retained {
    id: String,
    path: PathBuf,
    already_present: bool,
    /// Co-signatures that counted, retained beside the bundle file.
    cosignatures: Vec<PathBuf>,
}

/// Rename the staged tree to `bundles/ID/` (or, when that bundle is already retained, keep the
/// one there), with the co-signatures that counted beside the bundle file.
fn retain(
    staged: tempfile::TempDir,
    verified: &Verified,
    trust: &Policy,
    root: &Path,
    created: &mut Created,
) -> Result<Retained, SiteError> {
    let id = bundle_id(&verified.manifest_sha256);
    let bundles = root.join("bundles");
    created.create_dir_all(&bundles).map_err(io_err(&bundles))?;
    let path = bundles.join(&id);
    let already_present = path.is_dir();
    let dir = if already_present { &path } else { staged.path() };
    let written = retain_cosignatures(dir, trust, &verified.signatures).map_err(io_err(dir))?;
    if !already_present {
        // No longer a temporary directory: renamed into place, or removed if that fails.
        let kept = staged.keep();
        if let Err(e) = std::fs::rename(&kept, &path) {
            let _ = std::fs::remove_dir_all(&kept);
            return Err(io_err(&path)(e));
        }
    }
    let cosignatures = written.iter().map(|p| path.join(p.file_name().unwrap_or_default())).collect();
    Ok(Retained { id, path, already_present, cosignatures })
}

/// Push the retained bundle's images to `--registry`, or say how many were not published.
fn publish_images(
    retained: &Retained,
    publish: &Publish,
    net: &Net,
) -> Result<(Vec<registry::Pushed>, usize), SiteError> {
    let publish_err = |source| SiteError::Publish { id: retained.id.clone(), source };
    if let Some(site) = &publish.registry {
        return Ok((registry::publish(&retained.path, site, net).map_err(publish_err)?, 0));
    }
    let carried = registry::staged_images(&retained.path).map_err(publish_err)?.len();
    if carried > 0 {
        tracing::warn!("the bundle carries {carried} image manifest(s); pass --registry HOST[:PORT] to publish them");
    }
    Ok((Vec::new(), carried))
}

/// Copy the co-signatures that counted beside the retained bundle file in `dir`, so that the
/// retained bundle still meets the policy it was installed under (each file written whole,
/// through a temporary file, so a re-install that adds a signer never leaves a partial one).
fn retain_cosignatures(dir: &Path, trust: &Policy, checked: &[SignatureCheck]) -> io::Result<Vec<PathBuf>> {
    let retained = dir.join(RETAINED_BUNDLE);
    let mut written = Vec::new();
    for co in counted(trust, checked) {
        let path = cosignature_path(&retained, &co.key_id);
        crate::atomic::write(&path, &co.signature)?;
        written.push(path);
    }
    Ok(written)
}
