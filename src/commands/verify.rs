//! `airlock verify BUNDLE --trust PUB [--trust PUB…] [--json]`

use std::fs::File;
use std::io::{BufReader, Write};

use anyhow::Context as _;
use serde::Serialize;

use super::VerificationFailed;
use crate::bundle::reader::{Discard, OnProblem, Problem, read_bundle};
use crate::cli::{TerminalReporter, VerifyArgs};
use crate::sign::KeyId;

#[derive(Serialize)]
struct VerifyJson<'a> {
    verified: bool,
    name: Option<String>,
    version: Option<String>,
    manifest_sha256: Option<String>,
    signers: &'a [KeyId],
    entries: usize,
    /// `{verified, signers}` for the DSSE provenance, or null when the bundle has none.
    provenance: Option<serde_json::Value>,
    problems: &'a [Problem],
}

pub fn run(args: &VerifyArgs) -> anyhow::Result<u8> {
    let trusted = super::load_trusted(&args.trust)?;
    let file = File::open(&args.bundle).with_context(|| format!("cannot open bundle `{}`", args.bundle.display()))?;
    let reporter = TerminalReporter::new(args.json);
    let report =
        read_bundle(BufReader::with_capacity(1 << 20, file), &trusted, &mut Discard, OnProblem::Continue, &reporter)?;
    let verified = report.verified();
    let manifest = report.manifest.as_ref();
    if args.json {
        super::print_json(&VerifyJson {
            verified,
            name: manifest.map(|m| m.name.to_string()),
            version: manifest.map(|m| m.version.to_string()),
            manifest_sha256: report.manifest_sha256.map(|d| d.to_string()),
            signers: &report.signers,
            entries: report.entries_verified,
            provenance: report
                .provenance
                .as_ref()
                .map(|signers| serde_json::json!({ "verified": !signers.is_empty(), "signers": signers })),
            problems: &report.problems,
        })?;
    } else {
        let mut out = std::io::stdout().lock();
        for p in &report.problems {
            writeln!(out, "REJECTED {p}")?;
        }
        if let (true, Some(m)) = (verified, manifest) {
            let signers: Vec<_> = report.signers.iter().map(KeyId::as_str).collect();
            writeln!(
                out,
                "verified {} {} {}: {} entries, signed by {}",
                args.bundle.display(),
                m.name,
                m.version,
                report.entries_verified,
                signers.join(", ")
            )?;
            let provenance = match &report.provenance {
                Some(signers) if !signers.is_empty() => "provenance verified",
                Some(_) => "provenance NOT verified",
                None => "no provenance in the bundle",
            };
            writeln!(out, "  {provenance}")?;
        }
    }
    if verified {
        Ok(super::EXIT_OK)
    } else {
        let n = report.problems.len();
        Err(VerificationFailed(format!(
            "bundle `{}` failed verification ({n} problem{})",
            args.bundle.display(),
            if n == 1 { "" } else { "s" }
        ))
        .into())
    }
}
