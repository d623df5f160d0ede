//! Argument groups several verbs flatten: trust keys, the cache, the network, a run's id, the
//! site root's lock, an amber acceptance.

use std::path::PathBuf;

use clap::Args;

/// Who must have signed a bundle: shared by every verb that verifies one.
#[derive(Debug, Args)]
pub struct TrustArgs {
    /// A trusted public key (SPKI PEM); repeat for several.
    #[arg(long = "trust", value_name = "PUB")]
    pub trust: Vec<PathBuf>,
    /// Distinct trusted keys that must have signed the manifest; the embedded signature and the
    /// co-signatures beside the bundle (`BUNDLE.KEYID.sig`, from `airlock sign`) count.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threshold: u32,
    /// A private Sigstore instance's `trusted_root.json` to check the bundle's upstream
    /// signatures against again (without it: a site trust root's Sigstore target, else the
    /// public-good instance's, shipped with airlock).
    #[arg(long, value_name = "FILE")]
    pub trusted_root: Option<PathBuf>,
}

/// Where downloads go and how many run at once: shared by `lock` and `build`.
#[derive(Debug, Args)]
pub struct CacheArgs {
    /// Content-addressed download cache [default: `$AIRLOCK_CACHE`, else `~/.cache/airlock`].
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Downloads in flight at once.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: u16,
    #[command(flatten)]
    pub net: NetArgs,
}

/// How requests are retried and timed out.
#[derive(Debug, Args)]
pub struct NetArgs {
    /// Tries after the first for every request (registry, index, hub, blob) that fails with a
    /// 5xx, a 429 or a dropped connection; waits double from 0.25 s (up to 30 s, with jitter),
    /// or follow `Retry-After` (up to 120 s).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub retries: u32,
    /// Seconds without data before a response is given up (then tried again).
    #[arg(long, value_name = "SECS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
    /// Seconds to wait for a connection.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub connect_timeout: u64,
    /// Give up a mirror or index transfer averaging fewer bytes a second (K, M, G: 1024s; 0: none).
    #[arg(long, value_name = "RATE", default_value = "64K", value_parser = parse_rate)]
    pub min_rate: u64,
    /// Seconds a transfer runs before `--min-rate` is judged.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub min_rate_window: u64,
}

pub(super) fn parse_digest(value: &str) -> Result<crate::digest::Sha256, crate::digest::DigestParseError> {
    crate::digest::prefixed::parse(value)
}

/// A rate in bytes per second: a number, with K, M or G for powers of 1024 (`64K`).
pub(super) fn parse_rate(value: &str) -> Result<u64, String> {
    let v = value.trim();
    let (digits, unit) = match v.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => v.split_at(i),
        None => (v, ""),
    };
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KIB" => 10,
        "M" | "MIB" => 20,
        "G" | "GIB" => 30,
        _ => return Err(format!("`{value}` is not a rate: a number of bytes per second, with K, M or G (`64K`)")),
    };
    let n: u64 = digits.parse().map_err(|_| format!("`{value}` is not a rate: bytes per second, such as `64K`"))?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("`{value}` is too large a rate"))
}

impl NetArgs {
    pub fn options(&self) -> crate::fetch::NetOptions {
        crate::fetch::NetOptions {
            attempts: self.retries.saturating_add(1),
            connect_timeout: std::time::Duration::from_secs(self.connect_timeout),
            read_timeout: std::time::Duration::from_secs(self.timeout),
            min_rate: self.min_rate,
            rate_window: std::time::Duration::from_secs(self.min_rate_window),
            ..crate::fetch::NetOptions::default()
        }
    }
}

/// The rollout run a command that writes a record belongs to.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The rollout run this action is part of, kept in its record (`airlock report --fleet
    /// DIR --run ID` judges one run); the Ansible collection passes its own.
    #[arg(long = "run-id", value_name = "ID", env = "AIRLOCK_RUN_ID")]
    pub id: Option<crate::site::records::RunId>,
}

/// How a command shares the site root: `install`, `rollback`, `validate` and `check` take its lock.
#[derive(Debug, Args)]
pub struct SiteArgs {
    /// Wait up to SECONDS for another airlock writing this root, instead of failing at once.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub wait: u64,
}

/// Who owns an amber acceptance and until when (`status`, `report` and `outdated --root` flag
/// it once expired).
#[derive(Debug, Clone, Args)]
pub struct AmberArgs {
    /// The person or team accepting the amber verdict; the record keeps it.
    #[arg(long, value_name = "NAME", requires = "accept_amber")]
    pub owner: Option<String>,
    /// Until when the acceptance holds: a date (`2027-03-31`), an RFC 3339 time, or a duration
    /// from now (`90d`).
    #[arg(long, value_name = "DATE", requires = "accept_amber")]
    pub expires: Option<String>,
}

pub(super) fn parse_release(value: &str) -> Result<crate::site::mirror::Release, crate::site::mirror::NotARelease> {
    crate::site::mirror::Release::parse(value)
}
