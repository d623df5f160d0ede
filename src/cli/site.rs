//! The site's verbs: `install`, `apply`, `rollback`, `probe`, `validate`, `check`, `status`,
//! `report`.

use std::path::PathBuf;

use clap::Args;

use super::shared::{AmberArgs, NetArgs, RunArgs, SiteArgs, TrustArgs, parse_release};

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A bundle (file, parts file or first part): what it carries, who signed, what changed.
    #[arg(required_unless_present_any = ["root", "fleet"], conflicts_with_all = ["root", "fleet"])]
    pub bundle: Option<PathBuf>,
    /// The release it replaces: the BOM diff is against it.
    #[arg(long, value_name = "OLD.airlock", requires = "bundle")]
    pub base: Option<PathBuf>,
    /// A site root: its active bundle (verified again), validation evidence and records.
    #[arg(long, conflicts_with = "fleet")]
    pub root: Option<PathBuf>,
    /// A fleet's evidence directory (the Ansible collection's `airlock_evidence_dir`): one page
    /// for one rollout run.
    #[arg(long, value_name = "DIR")]
    pub fleet: Option<PathBuf>,
    /// With `--fleet`: the run to judge (its id, as the records and `DIR/runs/` name it)
    /// [default: the newest].
    #[arg(long, value_name = "ID", requires = "fleet")]
    pub run: Option<crate::site::records::RunId>,
    /// Verify the bundle (and the base) with these keys; without, the page says NOT verified.
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Write the HTML page here (atomically) instead of stdout.
    #[arg(long, value_name = "FILE.html")]
    pub out: Option<PathBuf>,
    /// Print the report's data as one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("acceptance").multiple(true)))]
#[allow(clippy::struct_excessive_bools, reason = "each is a command-line switch of its own")]
pub struct InstallArgs {
    /// The bundle: a file, a parts file or first part, or `oci://HOST/REPO:TAG|@DIGEST`
    /// (streamed from the registry; its co-signature referrers count).
    pub bundle: PathBuf,
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Site state root.
    #[arg(long, default_value = "/var/lib/airlock")]
    pub root: PathBuf,
    /// Push the bundle's images to this registry (credentials from the docker config).
    #[arg(long, value_name = "HOST[:PORT]")]
    pub registry: Option<String>,
    /// Talk plain HTTP to `--registry` and to an `oci://` bundle's registry (never implied).
    #[arg(long)]
    pub insecure_registry: bool,
    /// An extra CA bundle (PEM) for an `oci://` bundle's registry.
    #[arg(long, value_name = "FILE")]
    pub registry_ca: Option<PathBuf>,
    /// Sign the site's apt view with this armored `OpenPGP` secret key (passphrase, if any,
    /// from `AIRLOCK_APT_KEY_PASSWORD`).
    #[arg(long, value_name = "KEY.asc")]
    pub apt_signing_key: Option<PathBuf>,
    /// Bundles kept under the root: the newest N, and never fewer than current and previous
    /// (default 2; 3 for a mirror, which serves every one it keeps as a release).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub keep: Option<u16>,
    /// A mirror's candidate release (`--role mirror`): retained and served by version and id
    /// (`public/releases/`), not made current; nodes pinned to it (`apply URL --release`) take
    /// it, and `airlock promote` makes it the mirror's current.
    #[arg(long)]
    pub candidate: bool,
    /// Install a lower version than this site has already activated for that bundle name
    /// (logged and recorded); `airlock rollback` is the usual way back.
    #[arg(long)]
    pub allow_downgrade: bool,
    /// Activate even when validation is amber (the matrix is silent about a field, or one
    /// cannot be determined); needs `--reason`, which the record keeps.
    #[arg(long, requires = "reason", group = "acceptance")]
    pub accept_amber: bool,
    /// Use expired trust metadata or an expired bundle anyway (the freeze-attack guard waived
    /// on purpose); needs `--reason`, which the record keeps.
    #[arg(long, requires = "reason", group = "acceptance")]
    pub allow_expired: bool,
    /// Why the acceptance holds here (a documented exception, a ticket); the record keeps it.
    #[arg(long, value_name = "TEXT", requires = "acceptance")]
    pub reason: Option<String>,
    #[command(flatten)]
    pub amber: AmberArgs,
    /// `host`: this host is judged as it is against the bundle's matrix. `mirror`: a host
    /// without GPUs that serves the views to nodes (no validation; nodes run `airlock apply`).
    /// `relay`: a mirror fed from the mirror whose URL is BUNDLE (a hall's, a rack's).
    #[arg(long, value_enum, default_value = "host")]
    pub role: RoleArg,
    /// A relay's (`--role relay`): keep every member of the release (wheels, models, images'
    /// blobs, files), not only what nodes install from (packages, trust metadata).
    #[arg(long)]
    pub all: bool,
    /// A relay's (`--role relay`): the upstream's release by version or id, kept as a candidate
    /// (served by version and id, `current` unchanged), instead of following its current.
    #[arg(long, value_name = "VERSION|ID", value_parser = parse_release)]
    pub release: Option<crate::site::mirror::Release>,
    /// A relay's: the host its upstream may redirect to besides its own (repeat).
    #[arg(long, value_name = "HOST")]
    pub allow_redirect_host: Vec<String>,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub site: SiteArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

impl InstallArgs {
    /// `--keep`, or its default for the role.
    pub fn kept(&self) -> u16 {
        self.keep.unwrap_or(match self.role {
            RoleArg::Host => 2,
            RoleArg::Mirror | RoleArg::Relay => 3,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RoleArg {
    Host,
    Mirror,
    Relay,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("acceptance").multiple(true)))]
#[allow(clippy::struct_excessive_bools, reason = "each is a command-line switch of its own")]
pub struct ApplyArgs {
    /// What to apply: a bundle file (or its parts file or first part),
    /// `oci://HOST/REPO:TAG|@DIGEST` (streamed; its co-signature referrers count), or a
    /// mirror's site root served by any web server (`http(s)://HOST/PATH/`) or mounted
    /// (`file:///PATH/`): its current bundle, whose signed manifest is checked before the
    /// bundle is downloaded.
    pub source: PathBuf,
    #[command(flatten)]
    pub trust: TrustArgs,
    /// This node's state root (its retained bundles are the views it can restore from).
    #[arg(long, default_value = "/var/lib/airlock")]
    pub root: PathBuf,
    /// Talk plain HTTP to an `oci://` source's registry (never implied).
    #[arg(long)]
    pub insecure_registry: bool,
    /// An extra CA bundle (PEM) for an `oci://` source's registry.
    #[arg(long, value_name = "FILE")]
    pub registry_ca: Option<PathBuf>,
    /// Bundles kept under the root: the newest N, and never fewer than current and previous.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..))]
    pub keep: u16,
    /// Apply a lower version than this node has already activated (logged and recorded).
    #[arg(long)]
    pub allow_downgrade: bool,
    /// Commit even when the new stack validates amber; needs `--reason`.
    #[arg(long, requires = "reason", group = "acceptance")]
    pub accept_amber: bool,
    /// Change packages even when some could not be put back (their before-version is in no
    /// view this root retains); needs `--reason`.
    #[arg(long, requires = "reason", group = "acceptance")]
    pub accept_unrestorable: bool,
    /// Use expired trust metadata or an expired bundle anyway (the freeze-attack guard waived
    /// on purpose); needs `--reason`, which the record keeps.
    #[arg(long, requires = "reason", group = "acceptance")]
    pub allow_expired: bool,

    /// Why the acceptance holds here (a documented exception, a ticket); the record keeps it.
    #[arg(long, value_name = "TEXT", requires = "acceptance")]
    pub reason: Option<String>,
    #[command(flatten)]
    pub amber: AmberArgs,
    /// Verify and say what would change (with apt's own simulation); change nothing. From a
    /// mirror only the package indexes are fetched, no package.
    #[arg(long, conflicts_with = "download_only")]
    pub dry_run: bool,
    /// A mirror's release by version or bundle id (its `releases/VERSION|ID/`), instead of its
    /// current: a canary takes the candidate while the mirror's current stays the qualified one.
    #[arg(long, value_name = "VERSION|ID", value_parser = parse_release)]
    pub release: Option<crate::site::mirror::Release>,
    /// Fetch and verify the release's packages into `ROOT/downloads/` ahead of the maintenance
    /// window (no package manager call, nothing activated; recorded as staged): the later apply
    /// of that release fetches nothing.
    #[arg(long)]
    pub download_only: bool,
    /// Adopt the stack this node already runs: verify the bundle (a baseline from `airlock
    /// freeze`), check that every package it pins is installed at exactly that version (exit 3
    /// naming each difference, nothing changed), then retain it as the node's current bundle
    /// without calling the package manager or judging the stack. Later releases restore those
    /// packages from it.
    #[arg(long, conflicts_with_all = ["dry_run", "download_only"])]
    pub adopt: bool,
    /// Leave a node that already runs this bundle as it is when none of its packages would
    /// change: exit 0 with `unchanged` in `--json`, no record, nothing validated (what a
    /// configuration tool's re-run wants). Without it, applying the current bundle again
    /// validates the stack again, on record.
    #[arg(long, conflicts_with_all = ["download_only", "adopt"])]
    pub unless_current: bool,
    /// Let a mirror (`http(s)://…`) redirect to this other host (`HOST` or `HOST:PORT`); again
    /// for more. Without it a mirror's redirects stay on its own origin.
    #[arg(long, value_name = "HOST")]
    pub allow_redirect_host: Vec<String>,
    /// Seconds to wait for the dpkg lock held by another package manager.
    #[arg(long, value_name = "SECONDS", default_value_t = crate::site::packages::DEFAULT_LOCK_TIMEOUT)]
    pub lock_timeout: u64,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub site: SiteArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// Site state root.
    #[arg(long, default_value = "/var/lib/airlock")]
    pub root: PathBuf,
    /// Verify the retained bundle with these keys [default: the keys it was installed with].
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Sign the restaged apt view with this armored `OpenPGP` secret key, as at install.
    #[arg(long, value_name = "KEY.asc")]
    pub apt_signing_key: Option<PathBuf>,
    /// Use expired trust metadata or an expired bundle anyway (the freeze-attack guard waived
    /// on purpose); needs `--reason`, which the record keeps.
    #[arg(long, requires = "reason")]
    pub allow_expired: bool,
    /// Why the expired metadata or bundle is acceptable here; the record keeps it.
    #[arg(long, value_name = "TEXT", requires = "allow_expired")]
    pub reason: Option<String>,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub site: SiteArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// Compare with an earlier record (`airlock probe --json > OLD.json`), field by field.
    #[arg(long, value_name = "OLD.json")]
    pub diff: Option<PathBuf>,
    /// Compare the installed packages of two nodes' records (`airlock probe --json`), this host
    /// not probed: exit 0 when they run the same set (one baseline per tuple is enough), 10
    /// when they differ.
    #[arg(long, num_args = 2, value_names = ["A.json", "B.json"], conflicts_with = "diff")]
    pub inventory_diff: Vec<PathBuf>,
    /// A site root: the packages its active bundle carries are listed too, whatever their names.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// A Python environment whose packages are listed (`pip list`); again for more. Also
    /// `AIRLOCK_PROBE_VENVS` (paths separated by `:`), which install and apply read too.
    #[arg(long, value_name = "DIR")]
    pub venv: Vec<PathBuf>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[allow(clippy::struct_excessive_bools, reason = "each is a command-line switch of its own")]
pub struct ValidateArgs {
    /// Site state root.
    #[arg(long, default_value = "/var/lib/airlock")]
    pub root: PathBuf,
    /// After the reboot an `apply` waited for (exit 5): judge the stack now running and
    /// commit the bundle, or put the host's packages back (exit 4).
    #[arg(long)]
    pub commit: bool,
    /// Measure the current stack's metrics (the checks of the active bundle that declare
    /// `[[validation.check.metric]]`) and keep them as `ROOT/baseline.json`: the current side
    /// `install` compares the candidate with.
    #[arg(long, conflicts_with = "commit")]
    pub baseline: bool,
    /// For Node Health Check and Slurm's `HealthCheckProgram`: one line on stdout (`airlock:
    /// green …`, `airlock: red NAME VERSION (bundles/ID) record FILE: SUMMARY`) and exit 0 healthy, 1 red or not
    /// judgeable; the line is the node's drain reason (docs/fleet.md, "Slurm").
    #[arg(long, conflicts_with_all = ["commit", "baseline", "json"])]
    pub nhc: bool,
    #[command(flatten)]
    pub site: SiteArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Site state root.
    #[arg(long, default_value = "/var/lib/airlock")]
    pub root: PathBuf,
    #[command(flatten)]
    pub site: SiteArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Site state root.
    #[arg(long, default_value = "/var/lib/airlock")]
    pub root: PathBuf,
    /// With `--json`: also the records this run wrote (`run_records`: file name → its exact
    /// text), what a rollout's evidence gathers from each node in the same call.
    #[arg(long, value_name = "ID", requires = "json")]
    pub run: Option<crate::site::records::RunId>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}
