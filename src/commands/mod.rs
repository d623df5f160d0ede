//! One module per verb: glue between parsed arguments and the library. Errors leave as
//! `anyhow::Error` and are mapped to exit codes here, once.

mod build;
mod diff;
mod inspect;
mod install;
mod keygen;
mod lock;
mod provenance;
mod sbom;
mod sign;
mod verify;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::bundle::writer::PackError;
use crate::cli::{Cli, Command};
use crate::site::SiteError;
use crate::sources::SourceError;
use crate::spec::SpecError;
use crate::spec::lock::LockError;

pub const EXIT_OK: u8 = 0;
pub const EXIT_RUNTIME: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_VERIFY: u8 = 3;

/// Verification failed (signature, digest, policy): exit 3. The details were already printed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct VerificationFailed(pub String);

pub fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Keygen(a) => keygen::run(&a),
        Command::Lock(a) => lock::run(&a),
        Command::Build(a) => build::run(&a),
        Command::Verify(a) => verify::run(&a),
        Command::Inspect(a) => inspect::run(&a),
        Command::Install(a) => install::run(&a),
        Command::Sbom(a) => sbom::run(&a),
        Command::Provenance(a) => provenance::run(&a),
        Command::Diff(a) => diff::run(&a),
        Command::Sign(a) => sign::run(&a),
    }
}

/// The exit code for an error, from the most specific error in its chain (DESIGN.md: 1 runtime,
/// 2 usage or invalid spec, 3 verification failed).
pub fn exit_code(err: &anyhow::Error) -> u8 {
    for cause in err.chain() {
        if cause.is::<VerificationFailed>() {
            return EXIT_VERIFY;
        }
        if cause.is::<crate::sign::policy::PolicyError>() {
            return EXIT_USAGE;
        }
        if let Some(e) = cause.downcast_ref::<SpecError>() {
            return spec_code(e);
        }
        if let Some(e) = cause.downcast_ref::<LockError>() {
            return if let LockError::Spec(e) = e { spec_code(e) } else { EXIT_RUNTIME };
        }
        if let Some(e) = cause.downcast_ref::<SourceError>() {
            return source_code(e);
        }
        if let Some(PackError::Source(e)) = cause.downcast_ref::<PackError>() {
            return source_code(e);
        }
        if let Some(SiteError::Rejected { .. }) = cause.downcast_ref::<SiteError>() {
            return EXIT_VERIFY;
        }
        if let Some(crate::cache::CacheError::DigestMismatch { .. } | crate::cache::CacheError::SizeMismatch { .. }) =
            cause.downcast_ref::<crate::cache::CacheError>()
        {
            return EXIT_VERIFY;
        }
    }
    EXIT_RUNTIME
}

fn source_code(e: &SourceError) -> u8 {
    use crate::cache::CacheError;
    let mismatch = match e {
        SourceError::DigestMismatch { .. } | SourceError::SizeMismatch { .. } => true,
        SourceError::Image(image) => image.is_mismatch(),
        SourceError::Cache(cache) => {
            matches!(cache, CacheError::DigestMismatch { .. } | CacheError::SizeMismatch { .. })
        }
        SourceError::Deb(deb) => deb.is_verification(),
        _ => false,
    };
    match e {
        _ if mismatch => EXIT_VERIFY,
        SourceError::Spec(e) | SourceError::Lock(LockError::Spec(e)) => spec_code(e),
        _ => EXIT_RUNTIME,
    }
}

/// A spec that cannot be read is a runtime error; one that is wrong is a usage error.
fn spec_code(e: &SpecError) -> u8 {
    if matches!(e, SpecError::Read { .. }) { EXIT_RUNTIME } else { EXIT_USAGE }
}

/// Writing to a closed pipe (`airlock inspect B | head`) is not a failure.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().filter_map(|c| c.downcast_ref::<std::io::Error>()).any(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}

/// Print one JSON document on stdout.
fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

/// The private-key passphrase from the environment, if set.
fn key_password() -> Option<Vec<u8>> {
    std::env::var_os(crate::sign::PASSWORD_ENV).map(std::ffi::OsString::into_encoded_bytes)
}

fn load_trusted(paths: &[std::path::PathBuf]) -> anyhow::Result<Vec<crate::sign::TrustedKey>> {
    paths.iter().map(|p| Ok(crate::sign::TrustedKey::load(p)?)).collect()
}

/// The signature policy for `bundle`: the `--trust` keys, `--threshold`, and the co-signatures
/// found beside the bundle file.
fn load_policy(trust: &[PathBuf], threshold: u32, bundle: &Path) -> anyhow::Result<crate::sign::Policy> {
    let keys = load_trusted(trust)?;
    let cosignatures = cosignatures_beside(bundle);
    let threshold = usize::try_from(threshold).unwrap_or(usize::MAX);
    Ok(crate::sign::Policy::new(keys, threshold, cosignatures)?)
}

/// The co-signature files beside `bundle`. Unreadable ones count as absent (with a warning):
/// they can only help a bundle meet a threshold, never make it fail one.
fn cosignatures_beside(bundle: &Path) -> Vec<crate::sign::CoSignature> {
    crate::sign::policy::cosignatures_beside(bundle).unwrap_or_else(|e| {
        tracing::warn!("cannot read the co-signatures beside `{}`: {e}; none are counted", bundle.display());
        Vec::new()
    })
}

/// Write `bytes` to `path` through a temporary file beside it, renamed when complete.
fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    crate::atomic::write(path, bytes).with_context(|| format!("cannot write `{}`", path.display()))
}
