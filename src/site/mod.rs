//! The site state root (`--root`): install, rollback and status.
//!
//! ```text
//! ROOT/bundles/ID/              the retained bundle file (bundle.airlock), the co-signatures
//!                               that counted (bundle.airlock.KEYID.sig), the trust keys it was
//!                               installed with (trust/KEYID.pub) + its staged tree and views
//! ROOT/current -> bundles/ID    swapped atomically (rename of a symlink)
//! ROOT/previous -> bundles/ID
//! ROOT/state.json               history, high-water version per bundle name (written atomically)
//! ROOT/records/TIME-ACTION.json as-built evidence of every install and rollback
//! ROOT/staging/                 private (0700) work space; whatever is left there is cleaned
//! ROOT/.lock                    one writer at a time (flock; never unlinked)
//! ```
//!
//! A bundle is verified while it is extracted into a fresh directory under `staging/`, and
//! only a tree that verified whole is moved into `bundles/` (an exchange of two directories,
//! atomic where the file system can) and then activated. `current` and `previous` therefore
//! always name complete, verified trees, whatever moment a process is killed at. A bundle that
//! is rejected leaves the site as it was. A retained tree on disk is never trusted as it is:
//! re-installing and rolling back restage it from the verified bundle file.

mod activate;
mod base;
pub mod check;
mod lock;
pub mod records;
pub mod registry;
pub mod retained;
mod stage;
pub mod state;
pub mod views;

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::bundle::Manifest;
use crate::bundle::parts::{Input, PartsError};
use crate::bundle::reader::{OnProblem, Problem, Report, read_bundle, read_head};
use crate::clock::Timestamp;
use crate::digest::Sha256;
use crate::failure::{Class, Classify};
use crate::fetch::Net;
use crate::progress::Reporter;
use crate::sign::policy::{SignatureCheck, cosignature_path, counted};
use crate::sign::{KeyId, Policy};
use crate::tee::{Tee, TeeError};
pub use lock::RootLock;
use records::Phases;
use stage::StageSink;
use state::{Event, RegistryMemo, State};

/// The retained copy of the bundle file inside `bundles/ID/`.
pub const RETAINED_BUNDLE: &str = "bundle.airlock";
/// The trust keys a bundle was installed with, inside `bundles/ID/`.
pub const TRUST_DIR: &str = "trust";

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
    #[error(
        "site root `{}` is in use: {holder} holds `.lock`{}",
        root.display(),
        if waited.is_zero() { "; pass --wait SECONDS to wait for it".to_owned() } else { format!(" (waited {} s)", waited.as_secs()) }
    )]
    Busy { root: PathBuf, holder: String, waited: Duration },
    #[error(
        "refusing to install {name} {version}: this site has already activated {name} {high_water}; \
         `airlock rollback` goes back, `--allow-downgrade` installs an older bundle on purpose; the site was not changed"
    )]
    Downgrade { name: String, version: semver::Version, high_water: semver::Version },
    #[error(
        "not enough space under `{}`: the bundle needs about {needed} bytes (the file kept and its content \
         unpacked), {available} are available; the site was not changed",
        root.display()
    )]
    NoSpace { root: PathBuf, needed: u64, available: u64 },
    #[error(
        "this is a delta bundle: it needs its base, {base}, retained on this site (current or previous); \
         retained here: {retained}; install the base first, or the full bundle; the site was not changed"
    )]
    NoBase { base: String, retained: String },
    #[error(
        "the delta's base bundles/{id} does not hold `{path}` (sha256 {sha256}) that the delta leaves to it; \
         the site was not changed"
    )]
    NotInBase { id: String, path: String, sha256: Sha256 },
    #[error("the delta's base bundles/{id} failed verification; the site was not changed: {}", first(problems))]
    BaseRejected { id: String, problems: Vec<Problem> },
    #[error(transparent)]
    Parts(#[from] PartsError),
    #[error(
        "`state.json` records no policy for bundles/{id}: the keys that may verify it are unknown here; \
         pass --trust KEY (and --threshold N) to name them; the site was not changed"
    )]
    NotRecorded { id: String },
    #[error(
        "bundles/{id} was installed under a threshold of {threshold} recorded keys, and only {keys} of them are \
         intact in bundles/{id}/trust/; pass --trust KEY (and --threshold N) to name them; the site was not changed"
    )]
    RecordedKeysMissing { id: String, threshold: usize, keys: usize },
    #[error(
        "bundles/{id}/bundle.airlock is not the bundle this site retained as {id}: it is {actual}; \
         run `airlock check`; the site was not changed"
    )]
    NotRetained { id: String, actual: String },
    #[error(
        "the tag `{tag}` names version {tag_version} but the bundle it points at is {name} {version}; \
         the tag was moved or mislabelled; nothing was written or changed",
        tag_version = tag.strip_prefix('v').unwrap_or(tag)
    )]
    TagMismatch { tag: String, name: String, version: semver::Version },
    #[error("`{}` is not a site root (no `.lock`): nothing was installed there", root.display())]
    NotASite { root: PathBuf },
    #[error("`{}` has no current bundle: install one first", root.display())]
    NoCurrent { root: PathBuf },
    #[error(
        "the active bundle bundles/{id} is not as it was verified ({}); run `airlock check --root {}`; nothing was run",
        damage_summary(damage),
        root.display()
    )]
    Damaged { root: PathBuf, id: String, damage: Vec<check::Damage> },
    #[error("`{}` has no previous bundle to roll back to", root.display())]
    NoPrevious { root: PathBuf },
    #[error("validation is {verdict}: {summary}; `current` was not changed{hint}")]
    Validation { verdict: &'static str, summary: String, hint: &'static str },
    #[error("`{}` is a symbolic link; the site root's own directories must be real directories", path.display())]
    Symlink { path: PathBuf },
    #[error(
        "`{}` is missing, but `records/` shows {records} earlier activation(s): this site's anti-downgrade mark \
         and the policies of its retained bundles are gone; restore `state.json` from a backup of the root \
         (then run `airlock check`), or, to start the site's history anew on purpose, move `records/` aside; \
         the site was not changed",
        root.join("state.json").display()
    )]
    StateMissing { root: PathBuf, records: usize },
    #[error("`{}` is larger than {limit} bytes: it is not a file airlock wrote", path.display())]
    TooLarge { path: PathBuf, limit: u64 },
    #[error("site state `{}`: {detail}", path.display())]
    State { path: PathBuf, detail: String },
    #[error(transparent)]
    Policy(#[from] crate::sign::policy::PolicyError),
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
            SiteError::Rejected { .. }
            | SiteError::Downgrade { .. }
            | SiteError::NoBase { .. }
            | SiteError::NotInBase { .. }
            | SiteError::BaseRejected { .. }
            | SiteError::NotRecorded { .. }
            | SiteError::RecordedKeysMissing { .. }
            | SiteError::NotRetained { .. }
            | SiteError::StateMissing { .. }
            | SiteError::Damaged { .. }
            | SiteError::TagMismatch { .. } => Class::Verification,
            SiteError::Parts(e) => e.class(),
            SiteError::Validation { .. } => Class::ValidationRed,
            SiteError::Open { .. }
            | SiteError::Busy { .. }
            | SiteError::NoSpace { .. }
            | SiteError::NoPrevious { .. }
            | SiteError::NotASite { .. }
            | SiteError::NoCurrent { .. }
            | SiteError::Symlink { .. }
            | SiteError::State { .. }
            | SiteError::TooLarge { .. }
            | SiteError::Publish { .. }
            | SiteError::Io { .. } => Class::Runtime,
            SiteError::Policy(e) => e.class(),
        }
    }
}

fn damage_summary(damage: &[check::Damage]) -> String {
    let more = damage.len().saturating_sub(1);
    let head = damage.first().map_or_else(|| "no detail".to_owned(), |d| format!("`{}` {}", d.path, d.problem));
    if more > 0 { format!("{head}, and {more} more") } else { head }
}

fn first(problems: &[Problem]) -> String {
    let more = problems.len().saturating_sub(1);
    let head = problems.first().map_or_else(|| "no manifest".to_owned(), ToString::to_string);
    if more > 0 { format!("{head} (and {more} more)") } else { head }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> SiteError + use<> {
    let path = path.to_owned();
    move |source| SiteError::Io { path, source }
}

/// Whether an older version of a bundle than the site has activated may be installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Downgrade {
    #[default]
    Refuse,
    /// `--allow-downgrade`: installed, logged and recorded.
    Allow,
}

/// What install does with an amber validation verdict.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Amber {
    #[default]
    Refuse,
    /// `--accept-amber --reason TEXT`: activated, and the reason recorded.
    Accept { reason: String },
}

/// How install publishes what the bundle carries, and how it keeps the site.
#[derive(Default)]
pub struct Options {
    /// Whether an amber verdict activates.
    pub amber: Amber,
    pub registry: Option<registry::SiteRegistry>,
    /// Signs the apt view's `Release` when given.
    pub apt_key: Option<views::AptSigningKey>,
    /// Bundles kept under `bundles/` (at least `current` and `previous` always are).
    pub keep: usize,
    pub downgrade: Downgrade,
    /// How long to wait for another writer's `.lock`.
    pub wait: Duration,
    /// The tag an `oci://…:TAG` source was named by: when it is a version, the bundle must be
    /// that version.
    pub tag_version: Option<String>,
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
    /// A delta's base, which supplied the members it leaves out.
    pub base: Option<String>,
    /// The same bundle was already retained; it was restaged from the verified file and activated.
    pub already_present: bool,
    /// Installed below the site's high-water version, with `--allow-downgrade`.
    pub downgrade: bool,
    /// Images pushed to the site registry.
    pub images: Vec<registry::Pushed>,
    /// Images the bundle carries that were not published (no `--registry`).
    pub images_not_published: usize,
    /// Older bundles removed under `--keep`.
    pub pruned: Vec<String>,
    pub record: PathBuf,
    pub seconds: f64,
    /// The validation evidence, when the bundle names targets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation: Option<crate::validate::Evidence>,
}

/// The policy a retained bundle was installed under: the keys and threshold `state.json`
/// records for it, and the co-signatures kept beside it.
pub fn retained_policy(root: &Path, id: &str) -> Result<Policy, SiteError> {
    let state = State::load(root)?;
    retained::policy(root, &state, id, retained::Trust::AsInstalled)
}

/// The short id of a bundle at a site: the first 16 hex characters of its manifest's sha256.
pub fn bundle_id(manifest_sha256: &Sha256) -> String {
    manifest_sha256.short(16)
}

/// Verify `bundle` while staging it under `root`, then make it `current`.
pub fn install(
    input: &Input,
    trust: &Policy,
    root: &Path,
    opts: &Options,
    net: &Net,
    reporter: &dyn Reporter,
) -> Result<Installed, SiteError> {
    let (stream, _) = input.open_trusted(&trust.keys)?;
    let _lock = open_root(root, "install", opts.wait)?;
    let mut attempt = Attempt::new(records::Action::Install, "verify", input.display().to_string(), Some(trust));
    let installed = install_locked(input, stream, trust, root, opts, net, reporter, &mut attempt);
    // Once the lock is held, every outcome is on record: a refused or failed install too.
    installed.inspect_err(|e| attempt.record_failure(root, e))
}

/// What an install or rollback has established so far, for the record of its failure.
pub(crate) struct Attempt {
    record: records::Record,
    phases: Phases,
}

impl Attempt {
    fn new(action: records::Action, first: &'static str, file: String, trust: Option<&Policy>) -> Self {
        let bundle = records::RecordBundle { file: Some(file), ..records::RecordBundle::default() };
        let record = records::Record::new(action, records::Outcome::Failed, Some(bundle));
        let mut attempt = Self { record, phases: Phases::start(first) };
        if let Some(trust) = trust {
            attempt.trusted(trust);
        }
        attempt
    }

    /// The policy the bundle is verified under.
    fn trusted(&mut self, trust: &Policy) {
        self.record.trust = Some(records::TrustUsed { keys: trust.key_ids(), threshold: trust.threshold });
    }

    /// The bundle verified: what the record says it is.
    fn verified(&mut self, verified: &Verified) {
        let file = self.record.bundle.take().and_then(|b| b.file);
        self.record.bundle =
            Some(records::RecordBundle { file, ..verified.record(&bundle_id(&verified.manifest_sha256)) });
        self.record.signers.clone_from(&verified.signers);
        self.record.verdict = Some(records::Verdicts { verified: true, downgrade: None, validation: None });
    }

    /// Write the record of a refusal (the bundle's fault, or the host's verdict) or a failure
    /// (the site's). A record that cannot be written is warned about: the error that stopped
    /// the action is the one reported.
    fn record_failure(&mut self, root: &Path, e: &SiteError) {
        let r = &mut self.record;
        r.outcome = Some(match e.class() {
            Class::Runtime => records::Outcome::Failed,
            Class::Usage | Class::Verification | Class::ValidationRed => records::Outcome::Refused,
        });
        r.reason = Some(crate::failure::chain(e));
        r.failed_in = Some(self.phases.running.to_owned());
        r.phases = self.phases.times();
        r.seconds = Some(self.phases.total());
        r.at = Timestamp::now();
        if let Err(w) = records::write(root, r) {
            tracing::warn!("the record of this failure could not be written: {w}");
        }
    }
}

#[allow(clippy::too_many_arguments, reason = "install's phases, with the attempt they report to")]
fn install_locked(
    input: &Input,
    stream: Box<dyn Read + Send>,
    trust: &Policy,
    root: &Path,
    opts: &Options,
    net: &Net,
    reporter: &dyn Reporter,
    attempt: &mut Attempt,
) -> Result<Installed, SiteError> {
    let mut state = State::load_for_writer(root)?;
    preflight(input, root, &state)?;
    tracing::info!("stage: verifying `{}` into `{}`", input.display(), root.join("staging").display());
    let staged = stage(input.bundle(), stream, trust, root, &state, reporter);
    let Staged { dir, verified } = staged.map_err(|e| name_damaged_part(e, input))?;
    if let Some(split) = input.split() {
        split.check_manifest(&verified.manifest_sha256)?;
    }
    if let Some(tag) = &opts.tag_version {
        check_tag(tag, &verified.manifest)?;
    }
    attempt.verified(&verified);
    attempt.phases.mark("verify", "validate");
    crash_point("verified");
    let downgrade = check_downgrade(root, &state, &verified.manifest, opts.downgrade)?;
    let validation = gate(&verified.manifest, &opts.amber, &mut attempt.record)?;
    attempt.phases.mark("validate", "stage");
    tracing::info!("views: {}", views::describe(&verified.manifest));
    write_views(dir.path(), &verified.manifest, opts.apt_key.as_ref())?;
    // What rollback and anti-downgrade rely on is durable before the tree is named under
    // `bundles/` (and so long before `current` moves): a retained bundle always has its policy.
    remember_retained(&mut state, &verified, &bundle_id(&verified.manifest_sha256), trust, opts);
    state.save(root)?;
    crash_point("remembered");
    let retained = retain(dir, &verified, trust, root)?;
    tracing::info!("retain: bundles/{}", retained.id);
    attempt.phases.mark("stage", "publish");
    crash_point("retained");
    let (images, images_not_published) = publish_images(&retained, opts.registry.as_ref(), net)?;
    attempt.phases.mark("publish", "switch");
    crash_point("published");
    let previous = activate(root, &retained.id)?;
    crash_point("activated");
    let pruned = prune(root, &mut state, opts.keep.max(2))?;
    attempt.phases.mark("switch", "record");

    let m = &verified.manifest;
    let event = verified.event("install", &retained.id, attempt.phases.total());
    state.history.push(event.clone());
    state.save(root)?;
    crash_point("saved");
    let verdict = validation.as_ref().map(|e| e.verdict);
    let r = &mut attempt.record;
    r.outcome = Some(records::Outcome::Activated);
    r.at = event.at;
    r.verdict = Some(records::Verdicts {
        verified: true,
        downgrade: Some(downgrade),
        validation: Some(verdict.map_or("skipped", crate::validate::word).to_owned()),
    });
    r.accepted_amber = match &opts.amber {
        Amber::Accept { reason } if verdict == Some(crate::validate::matrix::Verdict::Amber) => Some(reason.clone()),
        _ => None,
    };
    r.previous.clone_from(&previous);
    r.published.clone_from(&images);
    r.images_not_published = Some(images_not_published);
    r.pruned.clone_from(&pruned);
    r.phases = attempt.phases.times();
    r.seconds = Some(event.seconds);
    let record = records::write(root, r)?;
    Ok(Installed {
        id: retained.id,
        name: m.name.to_string(),
        version: m.version.to_string(),
        manifest_sha256: verified.manifest_sha256,
        signers: verified.signers,
        path: retained.path,
        cosignatures: retained.cosignatures,
        previous,
        base: verified.base.clone(),
        already_present: retained.already_present,
        downgrade,
        images,
        images_not_published,
        pruned,
        record,
        seconds: event.seconds,
        validation,
    })
}

/// A test build stops dead at the named point when `AIRLOCK_TEST_CRASH_AT` names it, as a
/// power loss would (no destructors, no cleanup): the crash-consistency test stops installs
/// and rollbacks at every point and checks the root. Release builds have no such points.
#[cfg(debug_assertions)]
pub(crate) fn crash_point(point: &str) {
    if std::env::var_os("AIRLOCK_TEST_CRASH_AT").is_some_and(|p| p == point) {
        std::process::abort();
    }
}

#[cfg(not(debug_assertions))]
#[inline]
pub(crate) fn crash_point(_: &str) {}

/// A version tag (`oci://…:2.0.0`, `v2.0.0`) must name the version the bundle is: a tag moved
/// to another release is refused, like any bundle that is not what it claims.
pub fn check_tag(tag: &str, manifest: &Manifest) -> Result<(), SiteError> {
    let Ok(tagged) = semver::Version::parse(tag.strip_prefix('v').unwrap_or(tag)) else { return Ok(()) };
    if tagged == manifest.version {
        return Ok(());
    }
    Err(SiteError::TagMismatch {
        tag: tag.to_owned(),
        name: manifest.name.to_string(),
        version: manifest.version.clone(),
    })
}

/// The state before activation: the bundle retained with its policy, the high-water mark, and
/// the registry to publish to.
fn remember_retained(state: &mut State, verified: &Verified, id: &str, trust: &Policy, opts: &Options) {
    let m = &verified.manifest;
    let retained = state::Retained {
        name: m.name.to_string(),
        version: m.version.clone(),
        installed_at: Timestamp::now(),
        signers: verified.signers.clone(),
        trust: trust.key_ids(),
        threshold: trust.threshold,
        base: verified.base.clone(),
    };
    state.bundles.insert(id.to_owned(), retained);
    let mark = state.high_water.entry(m.name.to_string()).or_insert_with(|| m.version.clone());
    if m.version > *mark {
        *mark = m.version.clone();
    }
    if let Some(site) = &opts.registry {
        state.registry = Some(RegistryMemo { host: site.host.clone(), insecure: site.is_insecure() });
    }
}

/// The root made ready for a writer: its directories real (never symbolic links planted to
/// lead writes elsewhere), the lock held, and whatever a killed writer left in `staging/`
/// removed.
fn open_root(root: &Path, action: &str, wait: Duration) -> Result<RootLock, SiteError> {
    std::fs::create_dir_all(root).map_err(io_err(root))?;
    for name in [".lock", "staging", "bundles", "records", "state.json"] {
        let path = root.join(name);
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(SiteError::Symlink { path });
        }
    }
    let lock = RootLock::acquire(root, action, wait)?;
    let staging = root.join("staging");
    match std::fs::create_dir(&staging) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_err(&staging)(e)),
    }
    std::fs::set_permissions(&staging, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .map_err(io_err(&staging))?;
    recover_aside(root).map_err(io_err(&staging))?;
    for leftover in std::fs::read_dir(&staging).map_err(io_err(&staging))? {
        let path = leftover.map_err(io_err(&staging))?.path();
        tracing::info!("cleaning `{}`, left by an interrupted writer", path.display());
        let removed = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
        removed.map_err(io_err(&path))?;
    }
    Ok(lock)
}

/// A tree moved aside by `exchange`'s fallback (`staging/aside-ID`) whose replacement never
/// arrived (a crash between the two renames) is moved back to `bundles/ID`, so `current` and
/// `previous` never stay dangling; one whose replacement did arrive is left for the cleanup.
fn recover_aside(root: &Path) -> io::Result<()> {
    let staging = root.join("staging");
    for entry in std::fs::read_dir(&staging)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let Some(id) = name.strip_prefix(ASIDE_PREFIX) else { continue };
        let target = root.join("bundles").join(id);
        if std::fs::symlink_metadata(&target).is_err() {
            tracing::warn!("restoring bundles/{id}, moved aside by an interrupted writer");
            std::fs::rename(staging.join(&name), &target)?;
            crate::atomic::sync_dir(&root.join("bundles"))?;
            crate::atomic::sync_dir(&staging)?;
        }
    }
    Ok(())
}

/// A split bundle that failed verification: if a part is damaged, that is the first problem
/// (the member or stream problem it caused is only its symptom).
fn name_damaged_part(e: SiteError, input: &Input) -> SiteError {
    match (e, input.split()) {
        (SiteError::Rejected { path, mut problems }, Some(split)) => {
            split.name_damage(&mut problems);
            SiteError::Rejected { path, problems }
        }
        (e, _) => e,
    }
}

/// Fail early, before anything is written, when the bundle will not fit (its file is kept and
/// its content unpacked once) or is a delta whose base this site does not have.
fn preflight(input: &Input, root: &Path, state: &State) -> Result<(), SiteError> {
    let file_bytes = input.bytes()?;
    // The head is read unverified, only to refuse early; a lie there fails verification later
    // (a manifest the check refuses, absurd sizes included, is left to verification too).
    let Ok(head) = read_head(input.open()?) else { return Ok(()) };
    if head.manifest.check().is_err() {
        return Ok(());
    }
    if let Some(b) = &head.manifest.base {
        base::find(root, state, b)?;
    }
    let needed = file_bytes.saturating_add(head.manifest.content_bytes());
    let stat = rustix::fs::statvfs(root).map_err(|e| io_err(root)(e.into()))?;
    let available = stat.f_bavail.saturating_mul(stat.f_frsize);
    if needed > available {
        return Err(SiteError::NoSpace { root: root.to_owned(), needed, available });
    }
    Ok(())
}

/// A bundle verified into a directory under `staging/`: invisible until it is retained.
struct Staged {
    /// Removed with everything in it when dropped, unless `retain` moved it.
    dir: tempfile::TempDir,
    verified: Verified,
}

/// What verification established about a staged bundle.
struct Verified {
    manifest: Manifest,
    manifest_sha256: Sha256,
    signers: Vec<KeyId>,
    signatures: Vec<SignatureCheck>,
    /// A delta's base, which supplied its `from_base` members.
    base: Option<String>,
}

impl Verified {
    /// The history event for `action` that made this bundle, retained as `id`, current now.
    fn event(&self, action: &str, id: &str, seconds: f64) -> Event {
        let m = &self.manifest;
        Event {
            action: action.to_owned(),
            id: id.to_owned(),
            name: m.name.to_string(),
            version: m.version.clone(),
            at: Timestamp::now(),
            seconds,
        }
    }

    /// The `bundle` object of a record.
    fn record(&self, id: &str) -> records::RecordBundle {
        let m = &self.manifest;
        records::RecordBundle {
            id: Some(id.to_owned()),
            name: Some(m.name.to_string()),
            version: Some(m.version.to_string()),
            manifest_sha256: Some(self.manifest_sha256),
            base: self.base.clone(),
            file: None,
        }
    }
}

/// Verify the bundle while extracting it (and a copy of the file) into a new private
/// directory under `staging/`; a delta's omitted members come from its base, verified again.
fn stage(
    bundle: &Path,
    input: Box<dyn Read + Send>,
    trust: &Policy,
    root: &Path,
    state: &State,
    reporter: &dyn Reporter,
) -> Result<Staged, SiteError> {
    let staging = root.join("staging");
    // Private (0700) until the tree is complete; `retain` gives it the usual mode.
    let dir = tempfile::Builder::new().prefix("stage-").tempdir_in(&staging).map_err(io_err(&staging))?;
    let copy_path = dir.path().join(RETAINED_BUNDLE);
    let copy = File::create_new(&copy_path).map_err(io_err(&copy_path))?;
    let mut tee = Tee::new(input, copy);
    let mut sink = StageSink::new(dir.path());
    let report = read_bundle(&mut tee, trust, &mut sink, OnProblem::Stop, reporter)
        .map_err(|e| SiteError::Io { path: e.path.under(dir.path()), source: e.source })?;
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
    // the bundle's, a write failure the site's.
    match tee.finish() {
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

/// `Ok(true)` when a downgrade is allowed and happening, `Ok(false)` when this is none.
fn check_downgrade(root: &Path, state: &State, manifest: &Manifest, policy: Downgrade) -> Result<bool, SiteError> {
    let Some(high_water) = state.high_water(root, manifest.name.as_str())? else { return Ok(false) };
    if manifest.version >= high_water {
        return Ok(false);
    }
    let (name, version) = (manifest.name.to_string(), manifest.version.clone());
    match policy {
        Downgrade::Refuse => Err(SiteError::Downgrade { name, version, high_water }),
        Downgrade::Allow => {
            tracing::warn!("--allow-downgrade: installing {name} {version} below the {high_water} this site has run");
            Ok(true)
        }
    }
}

/// Validate this host against the verified manifest's support matrix before anything becomes
/// visible: green goes on, amber only when accepted, red never (exit 4; the staged bundle is
/// discarded). A bundle with no targets is not validated.
fn gate(
    manifest: &Manifest,
    amber: &Amber,
    record: &mut records::Record,
) -> Result<Option<crate::validate::Evidence>, SiteError> {
    use crate::validate::matrix::Verdict;
    tracing::info!("validate: probing this host against the bundle's support matrix");
    let host = crate::validate::probe::HostRoot::from_env();
    let evidence = crate::validate::validate(&manifest.validation, &host).map_err(|e| SiteError::Validation {
        verdict: "red",
        summary: e.0,
        hint: "; an airlock as new as the one that built the bundle can read it",
    })?;
    let Some(evidence) = evidence else {
        tracing::info!("validate: skipped, the bundle names no [[validation.target]]");
        record.validation = Some(records::Validation::skipped());
        return Ok(None);
    };
    // Evidence first: a verdict that stops the install is on record with what it saw.
    record.validation = Some(records::Validation::Evidence(Box::new(evidence.clone())));
    let summary = crate::escape::value(&evidence.summary).into_owned();
    match (evidence.verdict, amber) {
        (Verdict::Green, _) => Ok(Some(evidence)),
        (Verdict::Amber, Amber::Accept { reason }) => {
            tracing::warn!("amber accepted ({reason}): {summary}");
            Ok(Some(evidence))
        }
        (Verdict::Amber, Amber::Refuse) => Err(SiteError::Validation {
            verdict: "amber",
            summary,
            hint: "; review `airlock validate`, then pass --accept-amber --reason TEXT to activate it",
        }),
        (Verdict::Red, _) => {
            Err(SiteError::Validation { verdict: "red", summary, hint: "; a red stack never activates" })
        }
    }
}

/// Views derived from verified content are part of the staged tree, so they appear with it.
fn write_views(dir: &Path, manifest: &Manifest, apt_key: Option<&views::AptSigningKey>) -> Result<(), SiteError> {
    views::write_wheel_index(dir, manifest).map_err(io_err(&dir.join("wheels/simple")))?;
    views::write_hf_cache(dir, manifest).map_err(io_err(&dir.join("models")))?;
    views::write_apt_repo(dir, manifest, apt_key).map_err(io_err(&dir.join("debs")))?;
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

/// Move the staged tree to `bundles/ID/`, with the co-signatures that counted and the trust
/// keys beside the bundle file. A tree already there is replaced by the one just verified (it
/// is never trusted as it is); its co-signatures are carried over (they count again only if
/// they verify, at the next rollback).
fn retain(staged: tempfile::TempDir, verified: &Verified, trust: &Policy, root: &Path) -> Result<Retained, SiteError> {
    let id = bundle_id(&verified.manifest_sha256);
    let bundles = root.join("bundles");
    std::fs::create_dir_all(&bundles).map_err(io_err(&bundles))?;
    let path = bundles.join(&id);
    let dir = staged.path();
    let mut cosignatures = retain_cosignatures(dir, trust, &verified.signatures).map_err(io_err(dir))?;
    retain_trust(dir, trust).map_err(io_err(dir))?;
    let already_present = std::fs::symlink_metadata(&path).is_ok();
    if already_present {
        cosignatures.extend(carry_cosignatures(&path, dir).map_err(io_err(dir))?);
        carry_trust(&path, dir).map_err(io_err(dir))?;
    }
    publish_mode(dir).map_err(io_err(dir))?;
    // The whole tree on disk before it is named under `bundles/`.
    sync_tree(dir).map_err(io_err(dir))?;
    // No longer a temporary directory: moved into place below, or removed if that fails.
    let kept = staged.keep();
    let moved = if already_present { exchange(&kept, &path, root) } else { std::fs::rename(&kept, &path) };
    if let Err(e) = moved {
        let _ = std::fs::remove_dir_all(&kept);
        return Err(io_err(&path)(e));
    }
    crate::atomic::sync_dir(&bundles).map_err(io_err(&bundles))?;
    crate::atomic::sync_dir(&root.join("staging")).map_err(io_err(&root.join("staging")))?;
    // After an exchange `kept` holds the old tree.
    if already_present {
        std::fs::remove_dir_all(&kept).map_err(io_err(&kept))?;
    }
    let cosignatures = cosignatures.iter().map(|p| path.join(p.file_name().unwrap_or_default())).collect();
    Ok(Retained { id, path, already_present, cosignatures })
}

/// Where `exchange`'s fallback keeps the old tree of `bundles/ID` for a moment.
const ASIDE_PREFIX: &str = "aside-";

/// Swap two directories in one step where the file system can (`renameat2` with
/// `RENAME_EXCHANGE`), so `bundles/ID` never goes missing while `current` may point at it.
/// Where it cannot, the old tree goes to `staging/aside-ID` first: a crash before the new
/// one is in place leaves it there, and the next writer's `recover_aside` moves it back.
fn exchange(new: &Path, target: &Path, root: &Path) -> io::Result<()> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    match renameat_with(CWD, new, CWD, target, RenameFlags::EXCHANGE) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::INVAL || e == rustix::io::Errno::NOSYS => {
            let id = target.file_name().unwrap_or_default().to_string_lossy();
            let aside = root.join("staging").join(format!("{ASIDE_PREFIX}{id}"));
            std::fs::rename(target, &aside)?;
            crate::atomic::sync_dir(&root.join("staging"))?;
            std::fs::rename(new, target)?;
            crate::atomic::sync_dir(&root.join("bundles"))?;
            std::fs::rename(&aside, new)
        }
        Err(e) => Err(e.into()),
    }
}

/// Every file and directory of a staged tree synced (members already are, as they are
/// written; views and the directories that name them are not).
fn sync_tree(dir: &Path) -> io::Result<()> {
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
fn publish_mode(dir: &Path) -> io::Result<()> {
    let inner = std::fs::metadata(dir.join("airlock"))?.permissions();
    std::fs::set_permissions(dir, inner)
}

/// Copy the co-signatures that counted beside the retained bundle file in `dir`, so that the
/// retained bundle still meets the policy it was installed under.
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

/// Co-signature files of an earlier install of the same bundle that the new tree lacks.
fn carry_cosignatures(old: &Path, new: &Path) -> io::Result<Vec<PathBuf>> {
    let mut carried = Vec::new();
    for co in crate::sign::policy::cosignatures_beside(&old.join(RETAINED_BUNDLE))? {
        let path = cosignature_path(&new.join(RETAINED_BUNDLE), &co.key_id);
        if !path.exists() {
            crate::atomic::write(&path, &co.signature)?;
            carried.push(path);
        }
    }
    Ok(carried)
}

/// Public keys of an earlier install of the same bundle that the new tree lacks: the policy
/// `state.json` records may still name them (they are used only if it does).
fn carry_trust(old: &Path, new: &Path) -> io::Result<()> {
    let Ok(entries) = std::fs::read_dir(old.join(TRUST_DIR)) else { return Ok(()) };
    for entry in entries {
        let entry = entry?;
        let to = new.join(TRUST_DIR).join(entry.file_name());
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_key_file = name.strip_suffix(".pub").and_then(KeyId::parse).is_some();
        if is_key_file && !to.exists() && entry.file_type()?.is_file() {
            let bytes = crate::site::state::read_bounded(&entry.path(), 64 << 10)
                .map_err(|e| io::Error::other(e.to_string()))?
                .unwrap_or_default();
            crate::atomic::write(&to, &bytes)?;
        }
    }
    Ok(())
}

/// Keep the trust keys the bundle was installed with, so `rollback` can use the same policy.
fn retain_trust(dir: &Path, trust: &Policy) -> io::Result<()> {
    let keys = dir.join(TRUST_DIR);
    std::fs::create_dir_all(&keys)?;
    for key in &trust.keys {
        crate::atomic::write(&keys.join(format!("{}.pub", key.key_id())), key.spki_pem().as_bytes())?;
    }
    Ok(())
}

/// Push the retained bundle's images to the site registry, or say how many were not published.
fn publish_images(
    retained: &Retained,
    site: Option<&registry::SiteRegistry>,
    net: &Net,
) -> Result<(Vec<registry::Pushed>, usize), SiteError> {
    let publish_err = |source| SiteError::Publish { id: retained.id.clone(), source };
    if let Some(site) = site {
        return Ok((registry::publish(&retained.path, site, net).map_err(publish_err)?, 0));
    }
    let carried = registry::staged_images(&retained.path).map_err(publish_err)?.len();
    if carried > 0 {
        tracing::warn!("the bundle carries {carried} image manifest(s); pass --registry HOST[:PORT] to publish them");
    }
    Ok((Vec::new(), carried))
}

/// Make `bundles/ID` current; the old current becomes previous. Returns the old current.
fn activate(root: &Path, id: &str) -> Result<Option<String>, SiteError> {
    let current = format!("bundles/{id}");
    tracing::info!("activate: current -> {current}");
    Ok(activate::switch(root, &current).map_err(io_err(root))?.filter(|p| *p != current))
}

/// Remove retained bundles beyond the newest `keep`, never `current` or `previous`: after a
/// successful activation only. A pruned tree is first moved into `staging/`, so an
/// interruption leaves no half-removed bundle under `bundles/`.
fn prune(root: &Path, state: &mut State, keep: usize) -> Result<Vec<String>, SiteError> {
    let linked: Vec<String> = ["current", "previous"]
        .iter()
        .filter_map(|l| std::fs::read_link(root.join(l)).ok())
        .filter_map(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    let bundles = root.join("bundles");
    let mut others: Vec<(Timestamp, String)> = Vec::new();
    for entry in std::fs::read_dir(&bundles).map_err(io_err(&bundles))? {
        let id = entry.map_err(io_err(&bundles))?.file_name().to_string_lossy().into_owned();
        if !linked.contains(&id) {
            let installed = state.bundles.get(&id).map_or(Timestamp::from_unix(0), |b| b.installed_at);
            others.push((installed, id));
        }
    }
    others.sort();
    let spare = keep.saturating_sub(linked.len());
    let excess = others.len().saturating_sub(spare);
    // A kept delta needs its base (and that one its own): those stay too.
    let mut needed: Vec<String> = linked.iter().chain(others.iter().skip(excess).map(|(_, id)| id)).cloned().collect();
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
        let from = bundles.join(&id);
        let aside = root.join("staging").join(format!("pruned-{id}"));
        std::fs::rename(&from, &aside).map_err(io_err(&from))?;
        crate::atomic::sync_dir(&bundles).map_err(io_err(&bundles))?;
        std::fs::remove_dir_all(&aside).map_err(io_err(&aside))?;
        state.bundles.remove(&id);
        tracing::info!("prune: bundles/{id} (--keep {keep})");
        pruned.push(id);
    }
    Ok(pruned)
}

pub mod rollback;
pub mod status;
pub use rollback::{RolledBack, rollback};
pub use status::{Status, status};
