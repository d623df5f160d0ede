//! One module per verb: glue between parsed arguments and the library. Errors leave as a
//! [`Failure`](crate::failure::Failure), which knows its exit class from the error it was made
//! of.

mod apply;
mod approve;
mod build;
mod check;
mod copy;
mod diff;
mod freeze;
mod inspect;
mod install;
mod keygen;
mod lock;
mod meta;
mod outdated;
mod probe;
mod provenance;
mod pull;
mod push;
mod rebuild;
mod relay;
mod report;
mod rollback;
mod rollout;
mod sbom;
mod sign;
mod sigstore;
mod status;
pub mod terminal;
mod trust;
mod validate;
mod verify;

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::cli::{CacheArgs, Cli, Command, TrustArgs};
use crate::failure::{Class, Classify, Context as _, Exit, Failure, Result};

/// Verification failed (signature, digest, policy): exit 3. The details were already printed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct VerificationFailed(pub String);

impl Classify for VerificationFailed {
    fn class(&self) -> Class {
        Class::Verification
    }
}

pub fn run(cli: Cli) -> Result<Exit> {
    match cli.command {
        Command::Keygen(a) => keygen::run(&a),
        Command::Lock(a) => lock::run(&a),
        Command::Freeze(a) => freeze::run(&a),
        Command::Build(a) => build::run(&a),
        Command::Verify(a) => verify::run(&a),
        Command::Inspect(a) => inspect::run(&a),
        // A relay is a mirror fed from another mirror: its own verb's file.
        Command::Install(a) if a.role == crate::cli::RoleArg::Relay => relay::run(&a),
        Command::Install(a) => install::run(&a),
        Command::Apply(a) => apply::run(&a),
        Command::Sbom(a) => sbom::run(&a),
        Command::Provenance(a) => provenance::run(&a),
        Command::Diff(a) => diff::run(&a),
        Command::Sign(a) => sign::run(&a),
        Command::Rebuild(a) => rebuild::run(&a),
        Command::Rollback(a) => rollback::run(&a),
        Command::Promote(a) => rollback::promote(&a),
        Command::Approve(a) => approve::run(&a),
        Command::VerifyApproval(a) => approve::verify(&a),
        Command::Status(a) => status::run(&a),
        Command::Check(a) => check::run(&a),
        Command::Probe(a) => probe::run(&a),
        Command::Validate(a) => validate::run(&a),
        Command::Push(a) => push::run(&a),
        Command::Pull(a) => pull::run(&a),
        Command::Copy(a) => copy::run(&a),
        Command::Report(a) => report::run(&a),
        Command::Outdated(a) => outdated::run(&a),
        Command::Completions(a) => meta::completions(&a),
        Command::Version(a) => meta::version(&a),
        Command::Man(a) => meta::man(&a),
        Command::Trust(a) => trust::run(&a),
        Command::VerifyBlob(a) | Command::Sigstore(crate::cli::SigstoreCommand::Verify(a)) => sigstore::verify(&a),
        Command::SelfUpgrade(a) => meta::self_upgrade(&a),
        Command::Rollout(a) => rollout::run(&a),
    }
}

/// A failure found after the command printed its `--json` document (which says what failed):
/// the error goes to stderr and the exit code is its class's, without a second document.
/// Without `--json` it is returned as any error is.
pub fn after_document(json: bool, err: Failure) -> Result<Exit> {
    if !json {
        return Err(err);
    }
    let error = crate::commands::terminal::paint(
        "error:",
        crate::commands::terminal::Paint::Bad,
        crate::commands::terminal::Stream::Stderr,
    );
    eprintln!("{error} {}", crate::escape::lines(&format!("{err:#}")));
    Ok(err.exit())
}

/// The `--json` document of a command that failed before it could print its own: one JSON
/// document with `error: {class, exit_code, message}`.
pub fn error_document(err: &Failure) -> serde_json::Value {
    let exit = err.exit();
    let mut doc = serde_json::json!({ "error": { "class": exit.name(), "exit_code": exit.code(), "message": format!("{err:#}") } });
    // A stack that did not pass says its verdict (red, or amber not accepted): what a
    // scheduler's hold reason names.
    let verdict = err.chain().find_map(|cause| match cause.downcast_ref::<crate::site::SiteError>()? {
        crate::site::SiteError::Validation { verdict, .. } => Some(crate::validate::word(*verdict)),
        _ => None,
    });
    if let Some(v) = verdict {
        doc["error"]["verdict"] = serde_json::json!(v);
    }
    doc
}

/// A size as a person reads it (`812 bytes`, `261.3 KiB`, `1.3 GiB`); `--json` keeps the
/// exact count.
pub(crate) fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    #[allow(clippy::cast_precision_loss, reason = "one decimal of a size shown to a person")]
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A flag value that cannot be used (exit 2), found after clap parsed it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl crate::failure::Classify for UsageError {
    fn class(&self) -> Class {
        Class::Usage
    }
}

/// `--accept-amber --reason TEXT [--owner NAME] [--expires DATE]` as the site takes it.
fn amber(accept: bool, reason: Option<&String>, args: &crate::cli::AmberArgs) -> Result<crate::site::Amber> {
    if !accept {
        return Ok(crate::site::Amber::Refuse);
    }
    let now = crate::clock::Timestamp::started();
    let expires = args
        .expires
        .as_deref()
        .map(|v| {
            crate::clock::Timestamp::parse_expires_after(v, now)
                .map_err(|e| UsageError(format!("--expires `{v}`: {e} (a date such as 2027-03-31, or 90d)")))
        })
        .transpose()?;
    if expires.is_some_and(|e| e <= now) {
        return Err(UsageError(format!("--expires `{}` is already past", args.expires.as_deref().unwrap_or(""))).into());
    }
    Ok(crate::site::Amber::Accept(crate::site::records::Acceptance {
        reason: reason.cloned().unwrap_or_default(),
        owner: args.owner.clone(),
        expires,
    }))
}

/// Writing to a closed pipe (`airlock inspect B | head`) is not a failure.
pub fn is_broken_pipe(err: &Failure) -> bool {
    err.chain().any(|c| {
        let kind = c
            .downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind)
            // `--json` output goes through serde_json, which wraps the write error.
            .or_else(|| c.downcast_ref::<serde_json::Error>().and_then(serde_json::Error::io_error_kind));
        kind == Some(std::io::ErrorKind::BrokenPipe)
    })
}

/// Print one JSON document on stdout.
fn print_json(value: &impl serde::Serialize) -> Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

/// The private-key passphrase from the environment, if set.
fn key_password() -> Option<Vec<u8>> {
    std::env::var_os(crate::sign::PASSWORD_ENV).map(std::ffi::OsString::into_encoded_bytes)
}

fn load_trusted(paths: &[PathBuf]) -> Result<Vec<crate::sign::TrustedKey>> {
    paths.iter().map(|p| Ok(crate::sign::TrustedKey::load(p)?)).collect()
}

/// Why a bundle could not be read to its end by [`verify_discarding`].
#[derive(Debug, thiserror::Error)]
enum ReadError {
    #[error(transparent)]
    Parts(#[from] crate::bundle::parts::PartsError),
    #[error(transparent)]
    Sink(#[from] crate::bundle::reader::SinkError),
}

impl crate::failure::Classify for ReadError {
    fn class(&self) -> Class {
        match self {
            Self::Parts(e) => e.class(),
            Self::Sink(_) => Class::Runtime,
        }
    }
}

/// Read and verify `input`, keeping nothing: a regular file by position (its stored members
/// hashed ahead of the stream, `reader::verify_file`), anything else (a pipe, parts, a
/// registry) as a stream. The key that signed a split bundle's parts file, if any.
fn verify_discarding(
    input: &crate::bundle::parts::Input,
    policy: &crate::sign::Policy,
    on_problem: crate::bundle::reader::OnProblem,
    reporter: &dyn crate::progress::Reporter,
) -> Result<(crate::bundle::reader::Report, Option<crate::sign::KeyId>), ReadError> {
    use crate::bundle::parts::Opened;
    use crate::bundle::reader::{Discard, read_bundle, verify_file};
    Ok(match input.open_for_reading(&policy.keys)? {
        Opened::File { file, len } => (verify_file(file, len, policy, on_problem, reporter)?, None),
        Opened::Stream { stream, signer } => (read_bundle(stream, policy, &mut Discard, on_problem, reporter)?, signer),
    })
}

/// The signature policy for `bundle`: the `--trust` keys, `--threshold`, and the co-signatures
/// found beside the bundle file.
fn load_policy(trust: &TrustArgs, bundle: &Path) -> Result<crate::sign::Policy> {
    let keys = load_trusted(&trust.trust)?;
    let cosignatures = cosignatures_beside(bundle);
    let threshold = usize::try_from(trust.threshold).unwrap_or(usize::MAX);
    with_trusted_root(crate::sign::Policy::new(keys, threshold, cosignatures)?, trust)
}

/// `policy`, re-checking upstream Sigstore signatures under `--trusted-root` when it is given.
fn with_trusted_root(policy: crate::sign::Policy, trust: &TrustArgs) -> Result<crate::sign::Policy> {
    let Some(path) = &trust.trusted_root else { return Ok(policy) };
    Ok(policy.with_sigstore_root(crate::sign::sigstore::Root::checked_file(path)?))
}

/// The policy for a bundle activated on the site at `root` (install, apply): `--trust` on a site
/// without a trust root; else the site's signing roles, after the site adopted the newer trust
/// metadata the bundle carries (`carried`, read lazily: only a site with a trust root asks) and
/// pinned its trust root if nothing had (its first use). With `Writes::No` (`apply --dry-run`)
/// nothing is adopted or pinned: the site's trust as it stands decides.
fn site_policy(
    root: &Path,
    trust: &TrustArgs,
    cosignatures: Vec<crate::sign::CoSignature>,
    carried: impl FnOnce() -> Vec<(PathBuf, Vec<u8>)>,
    rule: &crate::site::trust::ExpiryRule,
    wait: std::time::Duration,
    writes: Writes,
) -> Result<crate::sign::Policy> {
    let site = crate::site::root::SiteRoot::new(root);
    let has_root = crate::trust::SiteTrust::exists(root);
    if let Some(path) = &trust.trusted_root {
        // What a site activates is checked again later (check, report, rollback) under the
        // same root: one the site keeps, not one a command line gave once.
        return Err(crate::trust::TrustError::Usage(format!(
            "--trusted-root `{}`: a site's Sigstore root is its trust root's `{}` target (`airlock trust \
             sigstore-root`, then `airlock trust update`), else the public-good one; --trusted-root is for \
             `verify` and `report` of a bundle file",
            path.display(),
            crate::trust::SIGSTORE_TARGET
        ))
        .into());
    }
    if !trust.trust.is_empty() {
        if has_root {
            return Err(crate::site::SiteError::TrustGiven { dir: root.join(crate::trust::TRUST_DIR) }.into());
        }
        // A site that has used a trust root keeps deciding by it: with `trust/` gone, `--trust`
        // is refused (exit 3, naming the repair), never taken instead.
        if site.path().is_dir() {
            crate::site::trust::load(&site, &crate::site::state::State::load(&site)?)?;
        }
        let keys = load_trusted(&trust.trust)?;
        let threshold = usize::try_from(trust.threshold).unwrap_or(usize::MAX);
        return Ok(crate::sign::Policy::new(keys, threshold, cosignatures)?);
    }
    if has_root && writes == Writes::Yes {
        crate::site::trust::adopt(root, wait, &carried(), crate::trust::Presented::Carried)?;
        crate::site::trust::pin_first_use(root, wait)?;
    }
    let state = crate::site::state::State::load(&site)?;
    match crate::site::trust::policy(&site, &state, cosignatures, rule)? {
        Some(policy) => Ok(policy),
        None => Err(crate::trust::TrustError::Usage(format!(
            "no trusted key: pass --trust PUB, or give the site at `{}` a trust root (`airlock trust init`)",
            root.display()
        ))
        .into()),
    }
}

/// A refusal or failure of `install` or `apply` before the root's lock was taken (the site's
/// trust root, trust metadata the bundle or mirror carries, a bundle that cannot be opened),
/// written as a record when `root` is a site: what stopped it is evidence like any refusal.
/// Written whole under a name no other writer uses, so no lock is needed; a record that cannot
/// be written is warned about, the error that stopped the command is the one reported.
fn record_early(
    root: &Path,
    action: crate::site::records::Action,
    source: &Path,
    run: Option<&crate::site::records::RunId>,
    e: &Failure,
) {
    use crate::site::records::{Outcome, Record, RecordBundle};
    let site = crate::site::root::SiteRoot::new(root);
    if !site.is_site() {
        return;
    }
    let outcome = if e.class() == Class::Runtime { Outcome::Failed } else { Outcome::Refused };
    let bundle = RecordBundle { file: Some(source.display().to_string()), ..RecordBundle::default() };
    let mut record = Record::new(action, outcome, Some(bundle));
    record.reason = Some(format!("{e:#}"));
    record.failed_in = Some("verify".to_owned());
    record.run_id = run.cloned();
    if let Err(w) = crate::site::records::write(&site, &record) {
        tracing::warn!("the record of this refusal could not be written: {w}");
    }
}

/// Whether a command may write the site root (adopt trust metadata, pin the trust root): not a
/// dry run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writes {
    Yes,
    No,
}

/// The trust metadata a bundle carries (`airlock/trust/…`, leading members read without
/// trusting them: each root version is checked against the one before it). Unreadable: none.
fn carried_trust(input: &crate::bundle::parts::Input) -> Vec<(PathBuf, Vec<u8>)> {
    let read = || -> Result<Vec<(PathBuf, Vec<u8>)>, String> {
        let input = input.open().map_err(|e| e.to_string())?;
        let found = crate::bundle::reader::leading_trust(input).map_err(|p| p.to_string())?;
        Ok(found.into_iter().map(|(name, bytes)| (PathBuf::from(name), bytes)).collect())
    };
    read().unwrap_or_else(|e| {
        tracing::warn!("cannot read the trust metadata the bundle carries: {e}");
        Vec::new()
    })
}

/// The co-signature files beside `bundle`. Unreadable ones count as absent (with a warning):
/// they can only help a bundle meet a threshold, never make it fail one.
fn cosignatures_beside(bundle: &Path) -> Vec<crate::sign::CoSignature> {
    crate::sign::policy::cosignatures_beside(bundle).unwrap_or_else(|e| {
        tracing::warn!("cannot read the co-signatures beside `{}`: {e}; none are counted", bundle.display());
        Vec::new()
    })
}

/// The Sigstore root for a spec's `verify` policies: `--trusted-root`, checked to be one, else
/// the shipped public-good root.
fn upstream_root(args: &crate::cli::UpstreamRootArgs) -> Result<crate::sign::sigstore::Root> {
    use crate::sign::sigstore::Root;
    Ok(args.trusted_root.as_deref().map(Root::checked_file).transpose()?.unwrap_or(Root::PublicGood))
}

/// The spec at `path`, with a warning when it would make an empty bundle.
fn load_spec(path: &Path) -> Result<crate::spec::SpecFile> {
    let spec = crate::spec::SpecFile::load(path)?;
    if spec.spec.entries() == 0 {
        tracing::warn!(
            "`{}` has no entries ({}): the bundle will carry nothing but its manifest, SBOM and provenance",
            path.display(),
            crate::spec::ENTRY_KINDS.map(|k| format!("[[{k}]]")).join(", ")
        );
    }
    Ok(spec)
}

/// The cache `--cache` names, else the default one.
fn open_cache(args: &CacheArgs) -> Result<crate::cache::Cache> {
    Ok(crate::cache::Cache::open(&args.cache.clone().unwrap_or_else(crate::cache::Cache::default_dir))?)
}

/// Write `bytes` to `path` through a temporary file beside it, renamed when complete.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::atomic::write(path, bytes).with_context(|| format!("cannot write `{}`", path.display()))
}

/// `current -> bundles/ID (was bundles/OLD) in N s; record PATH`: the last line of an
/// install, apply or commit.
pub(crate) fn switched(
    id: &crate::site::BundleId,
    previous: Option<&crate::site::BundleId>,
    seconds: f64,
    record: &Path,
) -> String {
    format!(
        "current -> bundles/{id}{} in {seconds:.2} s; record {}",
        previous.map(|p| format!(" (was bundles/{p})")).unwrap_or_default(),
        record.display()
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_read_as_a_person_reads_them() {
        assert_eq!(super::size(812), "812 bytes");
        assert_eq!(super::size(267_521), "261.3 KiB");
        assert_eq!(super::size(1_395_864_371), "1.3 GiB");
        assert_eq!(super::size(u64::MAX), "16384.0 PiB");
    }
}
