//! `trust` (a site's trust root) and `sigstore` (`verify-blob` of a Sigstore bundle offline).

use std::path::PathBuf;

use clap::Args;

use super::shared::{SiteArgs, parse_digest};

#[derive(Debug, clap::Subcommand)]
pub enum SigstoreCommand {
    /// `airlock verify-blob`, as it was first spelled.
    Verify(SigstoreVerifyArgs),
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("signer").required(true).args(["identity", "identity_regexp", "key"])))]
pub struct SigstoreVerifyArgs {
    /// The Sigstore bundle (`*.sigstore.json`).
    #[arg(long, value_name = "FILE")]
    pub bundle: PathBuf,
    /// The signer's identity: the certificate's SAN, exactly.
    #[arg(long, value_name = "IDENTITY", requires = "issuer", alias = "certificate-identity")]
    pub identity: Option<String>,
    /// The signer's identity as a regular expression that must match the whole SAN.
    #[arg(
        long,
        value_name = "REGEX",
        requires = "issuer",
        conflicts_with = "identity",
        alias = "certificate-identity-regexp"
    )]
    pub identity_regexp: Option<String>,
    /// The OIDC issuer that vouched for the identity (`https://token.actions.githubusercontent.com`).
    #[arg(long, value_name = "URL", alias = "certificate-oidc-issuer")]
    pub issuer: Option<String>,
    /// A managed key's PEM public key, instead of a keyless identity.
    #[arg(long, value_name = "PEM", conflicts_with_all = ["identity", "identity_regexp", "issuer"])]
    pub key: Option<PathBuf>,
    /// A private Sigstore instance's `trusted_root.json` [default: the public-good instance's,
    /// shipped with airlock].
    #[arg(long, value_name = "FILE", conflicts_with = "root")]
    pub trusted_root: Option<PathBuf>,
    /// Use this site's Sigstore root: its trust root's `sigstore/trusted_root.json` target,
    /// else the public-good one.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// The signed file (always a file: a digest goes in `--digest`).
    #[arg(value_name = "FILE", required_unless_present = "digest", conflicts_with = "digest")]
    pub subject: Option<String>,
    /// The signed file's digest instead of the file, `sha256:HEX`.
    #[arg(long, value_name = "sha256:HEX", value_parser = parse_digest)]
    pub digest: Option<crate::digest::Sha256>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum TrustCommand {
    /// Write root version 1 and targets version 1: the root keys and threshold, the targets
    /// keys, and the signing roles a bundle must satisfy.
    Init(TrustInitArgs),
    /// Write root version N+1 (signed by a threshold of version N's root keys and of its own):
    /// add or remove root or targets keys, change thresholds, renew the root's expiry.
    Rotate(TrustRotateArgs),
    /// Write a new targets version that sets or removes signing roles.
    Role(TrustRoleArgs),
    /// Write a new targets version without a key: no bundle counts its signature any more,
    /// retained ones included.
    Revoke(TrustRevokeArgs),
    /// Extend the expiry of the root and the targets metadata.
    Renew(TrustRenewArgs),
    /// Adopt newer metadata from files (`N.root.json` one version at a time, `targets.json`),
    /// each verified against what the site has.
    Update(TrustUpdateArgs),
    /// Write a new targets version whose `sigstore/trusted_root.json` target is FILE: the
    /// site's Sigstore trusted root (a private instance's), which `sigstore verify --root` uses.
    SigstoreRoot(TrustSigstoreRootArgs),
    /// The versions, roles, keys, thresholds and expiry.
    Show(TrustShowArgs),
}

impl TrustCommand {
    pub fn json(&self) -> bool {
        match self {
            TrustCommand::Init(a) => a.common.json,
            TrustCommand::Rotate(a) => a.common.json,
            TrustCommand::Role(a) => a.common.json,
            TrustCommand::Revoke(a) => a.common.json,
            TrustCommand::Renew(a) => a.common.json,
            TrustCommand::Update(a) => a.common.json,
            TrustCommand::SigstoreRoot(a) => a.common.json,
            TrustCommand::Show(a) => a.json,
        }
    }
}

/// What every `trust` change takes.
#[derive(Debug, Args)]
pub struct TrustCommon {
    /// Site state root (the metadata is `ROOT/trust/`).
    #[arg(long, default_value = "/var/lib/airlock")]
    pub root: PathBuf,
    /// A private key to sign the new metadata with (passphrase from `AIRLOCK_KEY_PASSWORD`);
    /// repeat until every threshold the change needs is met.
    #[arg(long = "sign", value_name = "KEY")]
    pub sign: Vec<PathBuf>,
    #[command(flatten)]
    pub site: SiteArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct TrustInitArgs {
    #[command(flatten)]
    pub common: TrustCommon,
    /// A root key (SPKI PEM); repeat for several. Keep their private halves offline.
    #[arg(long = "root-key", value_name = "PUB", required = true)]
    pub root_key: Vec<PathBuf>,
    /// Root keys that must sign every new root version.
    #[arg(long, default_value_t = 1)]
    pub root_threshold: u64,
    /// A key of the targets role, which signs the signing roles [default: the root keys].
    #[arg(long = "targets-key", value_name = "PUB")]
    pub targets_key: Vec<PathBuf>,
    /// Targets keys that must sign every targets version [default: the root threshold with
    /// the root keys, else 1].
    #[arg(long)]
    pub targets_threshold: Option<u64>,
    /// A signing role: `NAME=PUB[,PUB…]:THRESHOLD` (`build=build.pub:1`,
    /// `security=sec1.pub,sec2.pub:1`); every role must be met for a bundle to be accepted.
    #[arg(long = "role", value_name = "NAME=PUB[,PUB…]:N", required = true)]
    pub role: Vec<String>,
    /// When the metadata expires: a duration (`365d`, `1y`, `12h`) or a date (`2027-12-31`).
    #[arg(long, default_value = "1y")]
    pub expires: String,
}

#[derive(Debug, Args)]
pub struct TrustRotateArgs {
    #[command(flatten)]
    pub common: TrustCommon,
    /// A public key (SPKI PEM) that becomes a root key; repeat for several. The new root
    /// version is signed by a threshold of the old root keys and of the new ones.
    #[arg(long = "add-root-key", value_name = "PUB")]
    pub add_root_key: Vec<PathBuf>,
    /// A root key that stops being one (lost, retired); repeat for several.
    #[arg(long = "remove-root-key", value_name = "PUB")]
    pub remove_root_key: Vec<PathBuf>,
    /// How many root keys must sign the next root version [default: unchanged].
    #[arg(long, value_name = "N")]
    pub root_threshold: Option<u64>,
    /// A public key that may sign the targets metadata (the signing roles); repeat for several.
    #[arg(long = "add-targets-key", value_name = "PUB")]
    pub add_targets_key: Vec<PathBuf>,
    /// A targets key that may no longer sign the targets metadata; repeat for several.
    #[arg(long = "remove-targets-key", value_name = "PUB")]
    pub remove_targets_key: Vec<PathBuf>,
    /// How many targets keys must sign the targets metadata [default: unchanged].
    #[arg(long, value_name = "N")]
    pub targets_threshold: Option<u64>,
    /// The new root version's expiry (a duration or a date) [default: unchanged].
    #[arg(long)]
    pub expires: Option<String>,
}

#[derive(Debug, Args)]
pub struct TrustRoleArgs {
    #[command(flatten)]
    pub common: TrustCommon,
    /// Set a signing role: `NAME=PUB[,PUB…]:THRESHOLD` (replaces a role of that name).
    #[arg(long = "role", value_name = "NAME=PUB[,PUB…]:N")]
    pub role: Vec<String>,
    /// Remove a signing role.
    #[arg(long = "remove-role", value_name = "NAME")]
    pub remove_role: Vec<String>,
    /// The new targets version's expiry [default: unchanged].
    #[arg(long)]
    pub expires: Option<String>,
}

#[derive(Debug, Args)]
pub struct TrustRevokeArgs {
    #[command(flatten)]
    pub common: TrustCommon,
    /// The public key (SPKI PEM) to revoke; repeat for several.
    #[arg(long = "key", value_name = "PUB", required = true)]
    pub key: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TrustRenewArgs {
    #[command(flatten)]
    pub common: TrustCommon,
    /// The new expiry: a duration from now (`1y`, `90d`) or a date.
    #[arg(long)]
    pub expires: String,
    /// Renew only this metadata [default: both].
    #[arg(long, value_parser = ["root", "targets"])]
    pub only: Option<String>,
}

#[derive(Debug, Args)]
pub struct TrustSigstoreRootArgs {
    #[command(flatten)]
    pub common: TrustCommon,
    /// The Sigstore instance's `trusted_root.json` (checked to be one before it is written).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The new targets version's expiry [default: unchanged].
    #[arg(long)]
    pub expires: Option<String>,
}

#[derive(Debug, Args)]
pub struct TrustUpdateArgs {
    #[command(flatten)]
    pub common: TrustCommon,
    /// `N.root.json` and `targets.json` files (from another site root, or the provisioning media),
    /// and the Sigstore `trusted_root.json` the new targets list, when they list one.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TrustShowArgs {
    /// Site state root.
    #[arg(long, default_value = "/var/lib/airlock")]
    pub root: PathBuf,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}
