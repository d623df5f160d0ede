//! The build side's verbs: `lock`, `outdated`, `freeze`, `build`, `rebuild`, `verify`, `sign`,
//! `inspect`, `diff`, `sbom`, `provenance`, `keygen`.

use std::path::PathBuf;

use clap::Args;

use super::shared::{CacheArgs, TrustArgs};

#[derive(Debug, Args)]
pub struct OutdatedArgs {
    /// The spec whose lock is compared with upstream now.
    #[arg(default_value = "airlock.toml")]
    pub spec: PathBuf,
    /// Lock file [default: the spec's path with `.lock` for `.toml`].
    #[arg(long)]
    pub lock: Option<PathBuf>,
    /// Download files named by URL and hash them (otherwise their size is compared).
    #[arg(long)]
    pub deep: bool,
    /// A site root too: an amber acceptance its current bundle runs under that has expired is a
    /// finding (a requalification is due). Without a spec at SPEC, only the site is looked at.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    #[command(flatten)]
    pub cache: CacheArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// A bundle or a lock file.
    pub old: PathBuf,
    /// A bundle or a lock file.
    pub new: PathBuf,
    /// Verify both bundles with these keys first; without it, diff compares what the bundles
    /// claim, unverified.
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ProvenanceArgs {
    /// The bundle file (`NAME-VERSION.airlock`).
    pub bundle: PathBuf,
    /// Check the envelope's signature with these public keys (and that it names this manifest).
    #[arg(long = "trust", value_name = "PUB")]
    pub trust: Vec<PathBuf>,
    /// Print `{verified, signers, statement}` instead of the bare statement.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SbomArgs {
    /// The bundle file (`NAME-VERSION.airlock`).
    pub bundle: PathBuf,
    /// Write here instead of stdout (atomically).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// With `--out`: print `{sbom, sha256, bytes}` for what was written (without `--out`, the
    /// SBOM itself is the JSON on stdout).
    #[arg(long, requires = "out")]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Directory for NAME.key and NAME.pub (created if missing; existing keys are never overwritten).
    #[arg(long)]
    pub out_dir: PathBuf,
    /// The key's file names: NAME.key (private) and NAME.pub (public).
    #[arg(long, default_value = "airlock")]
    pub name: String,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LockArgs {
    /// The spec: what to carry.
    #[arg(default_value = "airlock.toml")]
    pub spec: PathBuf,
    /// Lock file to write [default: the spec's path with `.lock` for `.toml`].
    #[arg(long)]
    pub lock: Option<PathBuf>,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub upstream: UpstreamRootArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The Sigstore trusted root upstream signatures (`verify = …`) are checked against at lock time.
#[derive(Debug, Args)]
pub struct UpstreamRootArgs {
    /// A private Sigstore instance's `trusted_root.json` for the spec's `verify` policies
    /// (without it: the public-good instance's, shipped with airlock).
    #[arg(long, value_name = "FILE")]
    pub trusted_root: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct FreezeArgs {
    /// The node's inventory: `airlock probe --json > NODE.json` on the node.
    #[arg(value_name = "NODE.json")]
    pub node: PathBuf,
    /// The spec that names the stack: its `[[deb]]` entries and their archives.
    #[arg(long, value_name = "SPEC")]
    pub spec: PathBuf,
    /// The baseline spec to write, beside SPEC; its lock is written beside it (`BASE.lock`).
    #[arg(long, value_name = "BASE.toml")]
    pub out: PathBuf,
    /// The baseline's bundle version (below every release of the stack).
    #[arg(long, default_value = crate::build::freeze::BASELINE_VERSION)]
    pub version: semver::Version,
    #[command(flatten)]
    pub cache: CacheArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    /// The spec: what to carry.
    #[arg(default_value = "airlock.toml")]
    pub spec: PathBuf,
    /// Private signing key (PEM); its passphrase comes from `AIRLOCK_KEY_PASSWORD`.
    #[arg(long)]
    pub key: PathBuf,
    /// The bundle file to write (written beside it first, renamed when complete).
    #[arg(long)]
    pub out: PathBuf,
    /// Fail if the lock is missing or does not cover the spec, instead of updating it.
    #[arg(long)]
    pub locked: bool,
    /// Lock file [default: the spec's path with `.lock` for `.toml`].
    #[arg(long)]
    pub lock: Option<PathBuf>,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub upstream: UpstreamRootArgs,
    /// Image blobs not in the cache go from their registry (or layout) straight into the
    /// bundle as they download, and are not kept: each layer is written once, and the build
    /// host needs room for the bundle alone. A dropped connection resumes with `Range`; the
    /// next build downloads them again. Everything else is cached as always.
    #[arg(long)]
    pub no_blob_cache: bool,
    #[command(flatten)]
    pub compression: CompressionArgs,
    /// Write the bundle as parts of SIZE bytes (`4G`, `4095M`, `700M`; K/M/G/T are powers of
    /// 1024, KB/MB/GB/TB of 1000): `OUT.001`, `OUT.002`, … and the signed `OUT.parts.json`.
    /// `cat OUT.0*` gives the ordinary bundle. FAT32 holds files up to 4095M and a bit.
    #[arg(long, value_name = "SIZE", value_parser = crate::bundle::parts::parse_size)]
    pub split_size: Option<u64>,
    /// Build a delta against this earlier bundle (file, parts file or first part): content
    /// it holds is listed as `from_base` and left out. The site must have the base retained.
    #[arg(long, value_name = "OLD.airlock", conflicts_with = "base_lock")]
    pub base: Option<PathBuf>,
    /// Build a delta against whatever bundle was built from this lock (image layers are
    /// looked up in the cache's image manifests).
    #[arg(long, value_name = "OLD.lock")]
    pub base_lock: Option<PathBuf>,
    /// Carry this site root's trust metadata (`DIR/trust/N.root.json`, `targets.json`, verified
    /// first) as `airlock/trust/`: a site or node behind on rotations or revocations catches up
    /// when it installs or applies the bundle.
    #[arg(long, value_name = "DIR")]
    pub trust_root: Option<PathBuf>,
    /// The `CycloneDX` version of the bundle's SBOM: 1.5, or 1.6.
    #[arg(long, value_name = "1.5|1.6", default_value = "1.5")]
    pub sbom_spec: crate::attest::sbom::SbomSpec,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// How `build` compresses the bundle (`docs/performance.md` has the measurements).
#[derive(Debug, Args)]
pub struct CompressionArgs {
    /// zstd level, 1 (fastest) to 19 (smallest). Content that does not compress (weights,
    /// gzipped layers) costs little at any level; text and wheels gain a few percent per step
    /// above 3 at a large cost in time.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..=19))]
    pub compression_level: i32,
    /// Long-distance matching with a window of 2^LOG bytes (20 to 27; 27 if no value): finds
    /// content repeated far apart, e.g. the same libraries in wheels for several Pythons. Every
    /// reader of the bundle must then hold the whole window in memory (128 MiB at 27).
    #[arg(long, value_name = "LOG", num_args = 0..=1, default_missing_value = "27",
          value_parser = clap::value_parser!(u32).range(20..=27))]
    pub long: Option<u32>,
}

impl CompressionArgs {
    pub fn compression(&self) -> crate::bundle::writer::Compression {
        crate::bundle::writer::Compression { level: self.compression_level, long_window_log: self.long }
    }
}

#[derive(Debug, Args)]
#[command(mut_arg("trust", |a| a.required_unless_present("root")))]
pub struct VerifyArgs {
    /// The bundle file (`NAME-VERSION.airlock`).
    pub bundle: PathBuf,
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Verify under this site root's trust root (`ROOT/trust/`: its signing roles, revocations
    /// and expiry) instead of `--trust`.
    #[arg(long, value_name = "DIR", conflicts_with = "trust")]
    pub root: Option<PathBuf>,
    /// Use expired trust metadata or an expired bundle anyway (the freeze-attack guard waived
    /// on purpose); needs `--reason`, which the record keeps.
    #[arg(long, requires = "reason")]
    pub allow_expired: bool,
    /// Why the expired metadata or bundle is acceptable for this check.
    #[arg(long, value_name = "TEXT", requires = "allow_expired")]
    pub reason: Option<String>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SignArgs {
    /// The bundle file (`NAME-VERSION.airlock`).
    pub bundle: PathBuf,
    /// Private key (PEM) to co-sign with; its passphrase comes from `AIRLOCK_KEY_PASSWORD`.
    #[arg(long)]
    pub key: PathBuf,
    /// Verify the whole bundle with these keys first, and refuse to co-sign if it fails.
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The bundle file (`NAME-VERSION.airlock`).
    pub bundle: PathBuf,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RebuildArgs {
    /// The bundle to rebuild and, when the rebuild is the same, co-sign.
    #[arg(value_name = "BUNDLE")]
    pub bundle: PathBuf,
    /// The spec it was built from (its sha256 must be the one the bundle's manifest names).
    #[arg(long, default_value = "airlock.toml")]
    pub spec: PathBuf,
    /// The lock [default: `airlock.lock` beside the spec]; never resolved again.
    #[arg(long)]
    pub lock: Option<PathBuf>,
    /// The rebuilder's private key: what the co-signature is made with.
    #[arg(long)]
    pub key: PathBuf,
    /// The site trust root the bundle carries (`build --trust-root`), when it carries one.
    #[arg(long, value_name = "DIR")]
    pub trust_root: Option<PathBuf>,
    /// The `CycloneDX` version the bundle's SBOM was written in.
    #[arg(long, value_name = "1.5|1.6", default_value = "1.5")]
    pub sbom_spec: crate::attest::sbom::SbomSpec,
    /// Keep the rebuilt bundle here (by default it is removed once compared).
    #[arg(long, value_name = "FILE")]
    pub keep: Option<PathBuf>,
    #[command(flatten)]
    pub cache: CacheArgs,
    #[command(flatten)]
    pub upstream: UpstreamRootArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}
