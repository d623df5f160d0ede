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

use crate::bundle::reader::{OnProblem, Problem, read_bundle};
use crate::digest::Sha256;
use crate::progress::Reporter;
use crate::sign::policy::{Outcome, cosignature_path};
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
    reporter: &dyn Reporter,
) -> Result<Installed, SiteError> {
    let input = File::open(bundle).map_err(|source| SiteError::Open { path: bundle.to_owned(), source })?;
    let mut created = Created::default();
    let result = install_tracked(bundle, input, trust, root, publish, &mut created, reporter);
    if result.is_err() {
        created.undo();
    }
    result
}

fn install_tracked(
    bundle: &Path,
    input: File,
    trust: &Policy,
    root: &Path,
    publish: &Publish,
    created: &mut Created,
    reporter: &dyn Reporter,
) -> Result<Installed, SiteError> {
    let io_err = |path: &Path| {
        let path = path.to_owned();
        move |source| SiteError::Io { path, source }
    };
    created.create_dir_all(root).map_err(io_err(root))?;
    let lock_path = root.join(".lock");
    let lock = created.open_or_create(&lock_path).map_err(io_err(&lock_path))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(SiteError::Busy { root: root.to_owned() });
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(io_err(&lock_path)(e)),
    }

    // Removed with everything in it when dropped, unless renamed into `bundles/` below.
    // 0777 less the umask, like `mkdir`: the views are served to other users (web server, pip).
    let staging = tempfile::Builder::new()
        .prefix(".staging-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o777))
        .tempdir_in(root)
        .map_err(io_err(root))?;
    let copy_path = staging.path().join(RETAINED_BUNDLE);
    let copy = File::create_new(&copy_path).map_err(io_err(&copy_path))?;
    let mut tee = Tee::new(BufReader::with_capacity(1 << 20, input), copy);
    let mut sink = StageSink::new(staging.path());
    let report = read_bundle(&mut tee, trust, &mut sink, OnProblem::Stop, reporter)
        .map_err(|e| SiteError::Io { path: e.path.under(staging.path()), source: e.source })?;
    tee.finish().map_err(io_err(&copy_path))?;
    if !report.verified() {
        return Err(SiteError::Rejected { path: bundle.to_owned(), problems: report.problems });
    }
    let (Some(manifest), Some(manifest_sha256)) = (report.manifest, report.manifest_sha256) else {
        unreachable!("a verified report has a manifest");
    };

    // Views derived from verified content are part of the staged tree, so they appear with it.
    views::write_wheel_index(staging.path(), &manifest).map_err(io_err(&staging.path().join("wheels/simple")))?;
    views::write_hf_cache(staging.path(), &manifest).map_err(io_err(&staging.path().join("models")))?;
    views::write_apt_repo(staging.path(), &manifest, publish.apt_key.as_ref())
        .map_err(io_err(&staging.path().join("debs")))?;
    let id = bundle_id(&manifest_sha256);
    let bundles = root.join("bundles");
    created.create_dir_all(&bundles).map_err(io_err(&bundles))?;
    let target = bundles.join(&id);
    let already_present = target.is_dir();
    let retained_dir = if already_present { &target } else { staging.path() };
    let cosignatures = retain_cosignatures(retained_dir, trust, &report.signatures).map_err(io_err(retained_dir))?;
    if !already_present {
        let staged = staging.keep();
        std::fs::rename(&staged, &target).map_err(io_err(&target))?;
    }
    // From here the bundle is retained: nothing below undoes that.
    created.forget();
    let cosignatures = cosignatures.iter().map(|p| target.join(p.file_name().unwrap_or_default())).collect();
    let publish_err = |source| SiteError::Publish { id: id.clone(), source };
    let (images, images_not_published) = if let Some(site) = &publish.registry {
        (registry::publish(&target, site).map_err(publish_err)?, 0)
    } else {
        let carried = registry::staged_images(&target).map_err(publish_err)?.len();
        if carried > 0 {
            tracing::warn!(
                "the bundle carries {carried} image manifest(s); pass --registry HOST[:PORT] to publish them"
            );
        }
        (Vec::new(), carried)
    };
    let current = format!("bundles/{id}");
    let previous = activate::switch(root, &current).map_err(io_err(root))?.filter(|p| *p != current);
    drop(lock);
    Ok(Installed {
        id,
        name: manifest.name.to_string(),
        version: manifest.version.to_string(),
        manifest_sha256,
        signers: report.signers,
        path: target,
        cosignatures,
        previous,
        already_present,
        images,
        images_not_published,
    })
}

/// Copy the co-signatures that counted beside the retained bundle file in `dir`, so that the
/// retained bundle still meets the policy it was installed under (each file written whole,
/// through a temporary file, so a re-install that adds a signer never leaves a partial one).
fn retain_cosignatures(
    dir: &Path,
    trust: &Policy,
    checked: &[crate::sign::policy::SignatureCheck],
) -> io::Result<Vec<PathBuf>> {
    let retained = dir.join(RETAINED_BUNDLE);
    let mut written = Vec::new();
    // `checked` is the embedded signature followed by the co-signatures, in the policy's order.
    for (co, check) in trust.cosignatures.iter().zip(checked.iter().skip(1)) {
        if check.outcome != Outcome::Valid {
            continue;
        }
        let path = cosignature_path(&retained, &co.key_id);
        crate::atomic::write(&path, &co.signature)?;
        written.push(path);
    }
    Ok(written)
}
