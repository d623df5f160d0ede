//! `airlock validate --root DIR [--json]`: this host against the active bundle's support matrix
//! and acceptance checks. Exit 0 green, 0 amber (with a warning), 4 red.

use std::fmt::Write as _;
use std::io::Write as _;

use anyhow::Context as _;

use crate::bundle::Manifest;
use crate::cli::ValidateArgs;
use crate::failure::Class;
use crate::validate::matrix::Verdict;
use crate::validate::probe::HostRoot;
use crate::validate::{not_green, validate, word};

pub fn run(args: &ValidateArgs) -> anyhow::Result<u8> {
    let path = args.root.join("current/airlock/manifest.json");
    let bytes = std::fs::read(&path).with_context(|| format!("no active bundle at `{}`", args.root.display()))?;
    let manifest: Manifest = serde_json::from_slice(&bytes).with_context(|| format!("`{}`", path.display()))?;
    let evidence =
        validate(&manifest.validation, &HostRoot::from_env()).with_context(|| format!("`{}`", path.display()))?;
    let Some(evidence) = evidence else {
        if args.json {
            super::print_json(&serde_json::json!({ "verdict": "skipped", "reason": "the bundle names no targets" }))?;
        } else {
            writeln!(
                std::io::stdout().lock(),
                "skipped: {} {} names no [[validation.target]]",
                manifest.name,
                manifest.version
            )?;
        }
        return Ok(super::EXIT_OK);
    };
    // As-built evidence: a record of its own beside the installs and rollbacks (written whole,
    // under a name no other writer uses, so no lock is needed).
    let bundle_id = std::fs::read_link(args.root.join("current"))
        .ok()
        .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()));
    let record = crate::site::records::write(
        &args.root,
        "validate",
        &serde_json::json!({
            "action": "validate",
            "at": crate::clock::Timestamp::now(),
            "bundle": { "id": bundle_id, "name": manifest.name, "version": manifest.version.to_string() },
            "validation": evidence,
        }),
    )?;
    if args.json {
        super::print_json(&serde_json::json!({
            "verdict": evidence.verdict, "summary": evidence.summary, "detected": evidence.detected,
            "rows": evidence.rows, "checks": evidence.checks, "probe": evidence.probe, "record": record,
        }))?;
    } else {
        // Tools' and checks' words are untrusted text: escaped for the terminal.
        let mut text = format!("{}\n", evidence.summary);
        for f in not_green(&evidence.rows) {
            let _ = writeln!(
                text,
                "  {:<22} {}: {} (expected `{}`, found `{}`)",
                f.field,
                word(f.verdict),
                f.reason,
                f.expected,
                f.actual
            );
        }
        for c in &evidence.checks {
            let _ = writeln!(text, "  check {:<16} {}: {} ({:.2} s)", c.name, word(c.verdict), c.summary, c.duration_s);
        }
        let _ = writeln!(text, "record {}", record.display());
        std::io::stdout().lock().write_all(crate::escape::lines(&text).as_bytes())?;
    }
    match evidence.verdict {
        Verdict::Green => Ok(super::EXIT_OK),
        Verdict::Amber => {
            tracing::warn!("amber: {}", evidence.summary);
            Ok(super::EXIT_OK)
        }
        Verdict::Red => Ok(Class::ValidationRed.exit_code()),
    }
}
