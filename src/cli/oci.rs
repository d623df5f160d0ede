//! Bundles as OCI artifacts: `push`, `pull`, `copy`, and how a registry is reached.

use std::path::PathBuf;

use clap::Args;

use super::shared::{NetArgs, TrustArgs};

/// How to reach the registries a command names: `[registries."HOST"]` of a spec, for bundles.
#[derive(Debug, Args)]
pub struct ReachArgs {
    /// Talk plain HTTP to the registries named here; `--insecure-registry=HOST[:PORT]` to that
    /// one only (repeat for several). Never implied, not even for loopback.
    #[arg(long, value_name = "HOST", num_args = 0..=1, default_missing_value = "*")]
    pub insecure_registry: Vec<String>,
    /// An extra CA bundle (PEM) for the TLS registries named here.
    #[arg(long, value_name = "FILE")]
    pub registry_ca: Option<PathBuf>,
    #[command(flatten)]
    pub net: NetArgs,
}

impl ReachArgs {
    pub fn reach(&self) -> crate::oci::Reach {
        crate::oci::Reach {
            insecure: self.insecure_registry.clone(),
            ca: self.registry_ca.clone(),
            options: self.net.options(),
        }
    }
}

#[derive(Debug, Args)]
pub struct PushArgs {
    /// The bundle: a file, a parts file or a first part.
    pub bundle: PathBuf,
    /// Where: `oci://HOST/REPO:TAG` (or `oci-layout:DIR[:TAG]`).
    #[arg(value_name = "oci://HOST/REPO:TAG")]
    pub target: String,
    /// Upload the bundle's layers in chunks of SIZE (`16M`; smaller behind a proxy that caps
    /// request bodies). A failed chunk is resumed from what the registry holds.
    #[arg(long, value_name = "SIZE", default_value = "16M", value_parser = crate::bundle::parts::parse_size)]
    pub chunk_size: u64,
    #[command(flatten)]
    pub reach: ReachArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(mut_arg("trust", |a| a.required(true)))]
pub struct PullArgs {
    /// `oci://HOST/REPO:TAG`, `oci://HOST/REPO@sha256:HEX` or `oci-layout:DIR[:TAG]`.
    #[arg(value_name = "oci://HOST/REPO:TAG|@DIGEST")]
    pub source: String,
    /// The bundle file to write (it appears only once the bundle verified).
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub trust: TrustArgs,
    #[command(flatten)]
    pub reach: ReachArgs,
    /// Where layers download to (resumed from there when a pull is run again) [default:
    /// `$AIRLOCK_CACHE`, else `~/.cache/airlock`].
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CopyArgs {
    /// `oci://HOST/REPO:TAG|@DIGEST` or `oci-layout:DIR[:TAG]`.
    pub from: String,
    /// `oci://HOST/REPO[:TAG]` or `oci-layout:DIR[:TAG]` (the source's tag when none is given).
    pub to: String,
    #[command(flatten)]
    pub reach: ReachArgs,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}
