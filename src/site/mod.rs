//! The site state root (`--root`): install, rollback, check and status. The layout is
//! `root::SiteRoot`'s; the phases of an install are named and run in order in `install`.
//!
//! A bundle is verified while it is extracted into a fresh directory under `staging/`, and
//! only a tree that verified whole is moved into `bundles/` (an exchange of two directories,
//! atomic where the file system can) and then activated. `current` and `previous` therefore
//! always name complete, verified trees, whatever moment a process is killed or the power
//! fails at (`docs/architecture.md`, "Crash consistency"). A bundle that is rejected leaves
//! the site as it was, and a record of why. Nothing under `bundles/` is trusted as it lies:
//! the keys that verify a retained bundle come from `state.json` (`retained`), re-installing
//! and rolling back restage a tree from the verified bundle file, and `check` compares every
//! tree with what verified.

mod activate;
pub mod apply;
mod base;
pub mod check;
mod install;
mod lock;
pub mod mirror;
pub mod packages;
pub mod promotion;
pub mod public;
pub mod records;
pub mod registry;
pub mod relay;
mod retain;
pub mod retained;
pub mod root;
mod sink;
mod stage;
pub mod state;
mod transaction;
pub mod trust;
pub mod views;

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::bundle::parts::PartsError;
use crate::bundle::reader::Problem;
use crate::digest::Sha256;
use crate::failure::{Class, Classify};
use crate::sign::Policy;
use crate::validate::matrix::Verdict;
pub use apply::{Applied, Arrival, Committed, Mode, NodeOptions, apply, commit_pending};
pub use install::{Installed, install};
pub use lock::RootLock;
pub use relay::{RelayOptions, Relayed, relay};
pub use root::{BundleId, RETAINED_BUNDLE, SiteRoot, TRUST_DIR};
use state::State;

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
        "refusing to promote {name} {version}: this mirror has had {name} {high_water} current; \
         `airlock promote --allow-downgrade` promotes an older release on purpose (recorded); the mirror was not changed"
    )]
    PromoteDowngrade { name: String, version: semver::Version, high_water: semver::Version },
    #[error(
        "not enough space under `{}`: the bundle needs about {needed} bytes ({}), {available} are available; \
         the site was not changed",
        root.display(),
        if *shares { "its content unpacked; the kept file shares the bundle file's blocks" }
        else { "the file kept and its content unpacked" }
    )]
    NoSpace { root: PathBuf, needed: u64, available: u64, shares: bool },
    #[error(
        "this is a delta bundle: it needs its base, {base}, retained on this site (current or previous); \
         retained here: {retained}; install the base first, or the full bundle; the site was not changed"
    )]
    NoBase { base: String, retained: String },
    #[error(
        "the delta's base bundles/{id} does not hold `{path}` (sha256 {sha256}) that the delta leaves to it; \
         the site was not changed"
    )]
    NotInBase { id: BundleId, path: String, sha256: Sha256 },
    #[error("the delta's base bundles/{id} failed verification; the site was not changed: {}", first(problems))]
    BaseRejected { id: BundleId, problems: Vec<Problem> },
    #[error(transparent)]
    Parts(#[from] PartsError),
    #[error(
        "`state.json` records no policy for bundles/{id}: the keys that may verify it are unknown here; \
         pass --trust KEY (and --threshold N) to name them; the site was not changed"
    )]
    NotRecorded { id: BundleId },
    #[error(
        "bundles/{id} was installed under a threshold of {threshold} recorded keys, and only {keys} of them are \
         intact in bundles/{id}/trust/; pass --trust KEY (and --threshold N) to name them; the site was not changed"
    )]
    RecordedKeysMissing { id: BundleId, threshold: usize, keys: usize },
    #[error(
        "bundles/{id}/bundle.airlock is not the bundle this site retained as {id}: it is {actual}; \
         run `airlock check`; the site was not changed"
    )]
    NotRetained { id: BundleId, actual: String },
    #[error(transparent)]
    TagMismatch(#[from] crate::bundle::manifest::TagMismatch),
    #[error("`{}` is not a site root (no `.lock`): nothing was installed there", root.display())]
    NotASite { root: PathBuf },
    #[error("`{}` has no current bundle: install one first", root.display())]
    NoCurrent { root: PathBuf },
    #[error(
        "the active bundle bundles/{id} is not as it was verified ({}); run `airlock check --root {}`; nothing was run",
        damage_summary(damage),
        root.display()
    )]
    Damaged { root: PathBuf, id: BundleId, damage: Vec<check::Damage> },
    #[error(
        "nothing older to roll back to: `previous` is {name} {previous}, newer than the current {current} (the \
         release rolled back from); moving forward is `airlock install {} --root {}{}`",
        file.display(),
        root.display(),
        if *site_trust { "" } else { " --trust KEY.pub" }
    )]
    NoOlder {
        name: String,
        previous: semver::Version,
        current: semver::Version,
        file: PathBuf,
        root: PathBuf,
        /// Whether the site has a trust root (else the hint names `--trust`, to fill in).
        site_trust: bool,
    },
    #[error(
        "`{}` has no previous bundle to roll back to{}",
        root.display(),
        if *node {
            ": this node has run no older release; to go back, `airlock apply` the release to go back to \
             (from its mirror, or its bundle file) with --allow-downgrade --reason TEXT"
        } else {
            ""
        }
    )]
    NoPrevious { root: PathBuf, node: bool },
    #[error("`{}` retains no release `{release}`; it retains: {retained}", root.display())]
    NoRelease { root: PathBuf, release: String, retained: String },
    #[error(
        "`{}` is a node's root (its current release changed this host's packages): promote is a mirror's; a node \
         applies a release (`airlock apply URL --release VERSION`) and rolls back",
        root.display()
    )]
    NotAMirror { root: PathBuf },
    #[error(
        "`{}` is a relay's root: it follows its upstream's promotions (run `airlock install URL --role relay` \
         again); promote on the site's mirror",
        root.display()
    )]
    Relay { root: PathBuf },
    #[error("validation is {}: {summary}; `current` was not changed{hint}", crate::validate::word(*verdict))]
    Validation { verdict: Verdict, summary: String, hint: &'static str },
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
    #[error("`{}` is not a regular file (a FIFO, a device or a directory where a file belongs): refused, not read", path.display())]
    NotRegular { path: PathBuf },
    #[error("site state `{}`: {detail}", path.display())]
    State { path: PathBuf, detail: String },
    #[error(transparent)]
    Policy(#[from] crate::sign::policy::PolicyError),
    #[error(transparent)]
    Trust(#[from] crate::trust::TrustError),
    #[error(
        "`{}` is gone, but this site has used its trust root (root version {root_version}, targets version \
         {targets_version}): restore it from a backup of the root or the provisioning media; nothing was changed",
        dir.display()
    )]
    TrustRootGone { dir: PathBuf, root_version: u64, targets_version: u64 },
    #[error(
        "`{}/1.root.json` is not the trust root this site was provisioned with (its sha256 is {found}, \
         state.json pins {pinned}): refused; nothing was changed",
        dir.display()
    )]
    TrustAnchor { dir: PathBuf, pinned: Sha256, found: Sha256 },
    #[error(
        "`{}` holds root version {}, targets version {}: older than what this site has used (root version {}, \
         targets version {}); replayed trust metadata is refused; nothing was changed",
        dir.display(), found.root_version, found.targets_version, pinned.root_version, pinned.targets_version
    )]
    TrustRolledBack { dir: PathBuf, pinned: crate::sign::policy::Origin, found: crate::sign::policy::Origin },
    #[error(
        "bundle {what} expired at {expires} (this command started at {now}): an old bundle replayed is refused; \
         install a newer release, or pass --allow-expired --reason TEXT to use it anyway (recorded); \
         nothing was changed"
    )]
    BundleExpired { what: String, expires: crate::clock::Timestamp, now: crate::clock::Timestamp },
    #[error(
        "this site has a trust root (`{}`): its signing roles decide what is activated here, not --trust \
         (which is for sites without one, and for `airlock verify`)",
        dir.display()
    )]
    TrustGiven { dir: PathBuf },
    #[error("publishing the images of bundles/{id} failed; `current` was not changed")]
    Publish {
        id: BundleId,
        #[source]
        source: registry::PublishError,
    },
    #[error(
        "{name} {version} (bundles/{id}) was applied and waits for a reboot: reboot, then run \
         `airlock validate --commit` to judge its stack and commit it or restore the host"
    )]
    PendingReboot { id: BundleId, name: String, version: semver::Version },
    #[error(
        "refusing to change packages that could not be put back (their version now is in no view this root \
         retains): {}; pass --accept-unrestorable --reason TEXT to change them anyway; nothing was changed",
        changes.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    )]
    Unrestorable { changes: Vec<packages::Change> },
    #[error(
        "not adopted: this node does not run what the baseline pins ({} package(s) differ: {}; installed → pinned); \
         freeze this node's own inventory (`airlock probe --json`, `airlock freeze`), or bring the stack's own \
         packages to the baseline first (not the OS's updates: a baseline frozen with `[[deb]] dependencies` accepts \
         a newer one the stack still meets); nothing was changed",
        differences.len(),
        differences.iter().map(|c| format!(
            "{} {} → {}",
            c.name,
            c.before.as_deref().unwrap_or("(not installed)"),
            c.after.as_deref().unwrap_or("(none)")
        )).collect::<Vec<_>>().join(", ")
    )]
    NotAdoptable { differences: Vec<packages::Change> },
    #[error(
        "{} package(s) the baseline pins are not fully installed: {}; finish them first (`dpkg --configure -a`, or \
         reinstall), then adopt; nothing was changed",
        packages.len(),
        packages.iter().map(|(n, s)| format!("{n} {s}")).collect::<Vec<_>>().join(", ")
    )]
    Unsettled { packages: Vec<(String, String)> },
    #[error(
        "applying the packages failed; {}",
        match restore {
            None => "the host's packages were put back as they were".to_owned(),
            Some(e) => format!("putting them back failed too: {e}"),
        }
    )]
    Packages {
        #[source]
        source: packages::PackageError,
        restore: Option<Box<packages::PackageError>>,
    },
    #[error("`{}` has no apply waiting for a reboot: nothing to commit", root.display())]
    NotPending { root: PathBuf },
    #[error("the reboot the apply waits for has not happened yet: {reason}; reboot, then run this again")]
    StillPending { reason: String },
    #[error(transparent)]
    Mirror(#[from] mirror::MirrorError),
    #[error(transparent)]
    Promotion(#[from] promotion::PromotionError),
    /// A scratch directory outside the root (`TMPDIR`) that cannot be made: not the site's
    /// problem, and not said as one.
    #[error("cannot make a scratch directory under `{}` (TMPDIR): {source}; set TMPDIR to a directory this user may write", path.display())]
    Scratch {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("the host's package manager could not say what would change; nothing was changed")]
    Plan(#[from] packages::PackageError),
    #[error("site I/O failed at `{}`{}", path.display(), permission_hint(source))]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// What a reader of "Permission denied" needs to know: who may write a site root.
fn permission_hint(e: &io::Error) -> &'static str {
    if e.kind() == io::ErrorKind::PermissionDenied {
        " (this user may not write there: a site root is written by root, or by the user that owns it; run airlock \
         as that user, or name a root this user owns with --root)"
    } else {
        ""
    }
}

impl Classify for SiteError {
    fn class(&self) -> Class {
        match self {
            SiteError::Rejected { .. }
            | SiteError::Downgrade { .. }
            | SiteError::PromoteDowngrade { .. }
            | SiteError::NoBase { .. }
            | SiteError::NotInBase { .. }
            | SiteError::BaseRejected { .. }
            | SiteError::NotRecorded { .. }
            | SiteError::RecordedKeysMissing { .. }
            | SiteError::NotRetained { .. }
            | SiteError::StateMissing { .. }
            | SiteError::Damaged { .. }
            | SiteError::TrustRootGone { .. }
            | SiteError::NotRegular { .. }
            | SiteError::TrustAnchor { .. }
            | SiteError::TrustRolledBack { .. }
            | SiteError::BundleExpired { .. }
            | SiteError::NotAdoptable { .. }
            | SiteError::Unsettled { .. }
            | SiteError::TagMismatch(_) => Class::Verification,
            SiteError::TrustGiven { .. }
            | SiteError::NoRelease { .. }
            | SiteError::NotAMirror { .. }
            | SiteError::Relay { .. } => Class::Usage,
            SiteError::Trust(e) => e.class(),
            SiteError::Parts(e) => e.class(),
            SiteError::Validation { .. } => Class::ValidationRed,
            SiteError::Open { .. }
            | SiteError::Busy { .. }
            | SiteError::NoSpace { .. }
            | SiteError::NoPrevious { .. }
            | SiteError::NoOlder { .. }
            | SiteError::NotASite { .. }
            | SiteError::NoCurrent { .. }
            | SiteError::Symlink { .. }
            | SiteError::State { .. }
            | SiteError::TooLarge { .. }
            | SiteError::Publish { .. }
            | SiteError::PendingReboot { .. }
            | SiteError::NotPending { .. }
            | SiteError::StillPending { .. }
            | SiteError::Unrestorable { .. }
            | SiteError::Packages { .. }
            | SiteError::Plan(_)
            | SiteError::Scratch { .. }
            | SiteError::Io { .. } => Class::Runtime,
            SiteError::Policy(e) => e.class(),
            SiteError::Mirror(e) => e.class(),
            SiteError::Promotion(e) => e.class(),
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
    /// `--accept-amber --reason TEXT [--owner NAME] [--expires DATE]`: activated, and the
    /// acceptance recorded.
    Accept(records::Acceptance),
}

impl Amber {
    /// An acceptance with a reason only (a rollback to a bundle the node ran before).
    pub fn because(reason: &str) -> Self {
        Amber::Accept(records::Acceptance { reason: reason.to_owned(), owner: None, expires: None })
    }
}

/// What a host is to the site (`install --role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    /// The host is judged as it is, against the bundle's matrix (one host that is mirror and
    /// node, its packages installed by other means).
    #[default]
    Host,
    /// Receives bundles and serves their views (registry, apt, pip, models) to nodes: no GPU
    /// validation; the matrix is kept for the nodes, which `apply`.
    Mirror,
}

/// How install publishes what the bundle carries, and how it keeps the site.
#[derive(Default)]
pub struct Options {
    pub role: Role,
    /// Whether an amber verdict activates.
    pub amber: Amber,
    pub registry: Option<registry::SiteRegistry>,
    /// Signs the apt view's `Release` when given.
    pub apt_key: Option<views::AptSigningKey>,
    /// Bundles kept under `bundles/` (at least `current` and `previous` always are).
    pub keep: usize,
    /// A mirror's candidate release (`install --candidate`): retained and served by version
    /// and id, not made current (`airlock promote` does).
    pub candidate: bool,
    pub downgrade: Downgrade,
    /// How long to wait for another writer's `.lock`.
    pub wait: Duration,
    /// The tag an `oci://…:TAG` source was named by: when it is a version, the bundle must be
    /// that version.
    pub tag_version: Option<String>,
    /// What a bundle past its `expires` does.
    pub expiry: trust::ExpiryRule,
    /// The rollout run this action is part of (`--run-id`), kept in its record.
    pub run: Option<records::RunId>,
}

/// How a command writes the root: how long it waits for another writer's lock, and the
/// rollout run its record belongs to.
#[derive(Debug, Clone, Default)]
pub struct Writer {
    pub wait: Duration,
    pub run: Option<records::RunId>,
}

/// The policy a retained bundle was installed under: the keys and threshold `state.json`
/// records for it, and the co-signatures kept beside it.
pub fn retained_policy(root: &SiteRoot, id: &BundleId) -> Result<Policy, SiteError> {
    let state = State::load(root)?;
    retained::policy(root, &state, id, retained::Trust::Site(trust::ExpiryRule::Ignore))
}

/// Where a test build can stop dead (`AIRLOCK_TEST_CRASH_AT` names it), as a power loss
/// would (no destructors, no cleanup): the crash-consistency test stops installs, applies and
/// rollbacks at every point and checks the root. Release builds have no such points.
#[derive(Debug, Clone, Copy)]
pub(in crate::site) enum CrashPoint {
    /// The bundle verified, nothing under the root changed yet.
    Verified,
    /// The bundle retained under `bundles/ID`.
    Retained,
    /// Site views published.
    Published,
    /// `current` moved.
    Activated,
    /// `state.json` saved at a step.
    Saved(transaction::Step),
}

impl CrashPoint {
    fn name(self) -> &'static str {
        match self {
            CrashPoint::Verified => "verified",
            CrashPoint::Retained => "retained",
            CrashPoint::Published => "published",
            CrashPoint::Activated => "activated",
            CrashPoint::Saved(step) => step.name(),
        }
    }
}

#[cfg(debug_assertions)]
pub(in crate::site) fn crash_point(point: CrashPoint) {
    if std::env::var_os("AIRLOCK_TEST_CRASH_AT").is_some_and(|p| p == point.name()) {
        std::process::abort();
    }
}

#[cfg(not(debug_assertions))]
#[inline]
pub(in crate::site) fn crash_point(_: CrashPoint) {}

pub mod rollback;
pub mod status;
pub use rollback::{RolledBack, rollback};
pub use status::{Status, status};

/// `ROOT/baseline.json`: the current stack's metric values (`airlock validate --baseline`, or
/// taken by `apply` just before it changes packages); the gate compares the candidate's with
/// them.
pub const BASELINE_FILE: &str = "baseline.json";

/// The baseline a root holds, if any (bounded; one that cannot be read is none: the metrics
/// that need it are then red, "the evidence is missing").
pub fn load_baseline(root: &std::path::Path) -> Option<crate::validate::metrics::Baseline> {
    let path = root.join(BASELINE_FILE);
    let bytes = root::read_bounded(&path, 1 << 20).ok()??;
    serde_json::from_slice(&bytes).inspect_err(|e| tracing::warn!("`{}` cannot be read: {e}", path.display())).ok()
}

/// Keep `baseline` as the root's (written atomically and durably).
pub fn save_baseline(root: &std::path::Path, baseline: &crate::validate::metrics::Baseline) -> Result<(), SiteError> {
    let path = root.join(BASELINE_FILE);
    let bytes = serde_json::to_vec_pretty(baseline)
        .map_err(|e| SiteError::State { path: path.clone(), detail: e.to_string() })?;
    crate::atomic::write_durable(&path, &bytes).map_err(io_err(&path))
}
