//! `airlock sign BUNDLE --key KEY [--trust PUB… [--threshold N]] [--json]`: a detached
//! co-signature `BUNDLE.KEYID.sig` beside the bundle, over the same manifest bytes as the
//! embedded signature. The bundle itself is not rewritten.

use std::io::Write;

use serde::Serialize;

use super::VerificationFailed;
use crate::bundle::parts::Input;
use crate::bundle::reader::{OnProblem, read_head};
use crate::cli::SignArgs;
use crate::commands::terminal::TerminalReporter;
use crate::failure::{Exit, Result};
use crate::sign::policy::cosignature_path;
use crate::sign::{KeyId, SigningKey};

#[derive(Serialize)]
struct SignJson<'a> {
    signature: String,
    key_id: &'a KeyId,
    manifest_sha256: String,
    /// Whether the whole bundle verified (`--trust`) before it was co-signed.
    verified_first: bool,
}

pub fn run(args: &SignArgs) -> Result<Exit> {
    let input = Input::resolve(&args.bundle)?;
    let key = SigningKey::load(&args.key, super::key_password().as_deref())?;
    let verified_first = !args.trust.trust.is_empty();
    let mut verified_manifest = None;
    if verified_first {
        let policy = super::load_policy(&args.trust, input.bundle())?;
        let reporter = TerminalReporter::new(args.json);
        let (report, _) = super::verify_discarding(&input, &policy, OnProblem::Stop, &reporter)?;
        if !report.verified() {
            let why = report.problems.first().map_or_else(|| "no manifest".to_owned(), ToString::to_string);
            return Err(VerificationFailed(format!(
                "refusing to co-sign `{}`: it does not verify: {why}",
                args.bundle.display()
            ))
            .into());
        }
        verified_manifest = report.manifest_sha256;
    } else {
        tracing::warn!("no --trust key given: co-signing the manifest WITHOUT verifying the bundle's content first");
    }
    let head = read_head(input.open()?).map_err(|p| VerificationFailed(format!("`{}`: {p}", args.bundle.display())))?;
    if verified_manifest.is_some_and(|d| d != head.manifest_sha256) {
        return Err(VerificationFailed(format!(
            "refusing to co-sign `{}`: its manifest changed while it was being verified",
            args.bundle.display()
        ))
        .into());
    }
    head.manifest.check().map_err(|e| {
        VerificationFailed(format!("`{}`: refusing to co-sign an invalid manifest: {e}", args.bundle.display()))
    })?;
    if &head.manifest.builder.key_id == key.key_id() {
        tracing::warn!(
            "`{}` is the key that built the bundle: a co-signature by the same key adds no second signer",
            args.key.display()
        );
    }
    // Beside the bundle as one file (a split bundle's too): where readers look for it.
    let path = cosignature_path(input.bundle(), key.key_id());
    super::write_atomic(&path, key.sign_blob(&head.manifest_bytes).as_bytes())?;
    if args.json {
        super::print_json(&SignJson {
            signature: path.display().to_string(),
            key_id: key.key_id(),
            manifest_sha256: head.manifest_sha256.to_string(),
            verified_first,
        })?;
    } else {
        writeln!(
            std::io::stdout().lock(),
            "co-signed {} (manifest {}) with key {}: wrote {}",
            args.bundle.display(),
            head.manifest_sha256.short(16),
            key.key_id().short(),
            path.display()
        )?;
    }
    Ok(Exit::Ok)
}
