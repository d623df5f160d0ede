//! `airlock validate --root DIR [--json]`: this host against the active bundle's support matrix.
//! Exit 0 green, 0 amber (with a warning), 4 red.

use std::io::Write as _;

use anyhow::Context as _;

use crate::bundle::Manifest;
use crate::cli::ValidateArgs;
use crate::validate::matrix::{Verdict, classify};
use crate::validate::probe::{HostRoot, probe};

/// Validation verdict red.
pub const EXIT_RED: u8 = 4;

pub fn run(args: &ValidateArgs) -> anyhow::Result<u8> {
    let path = args.root.join("current/airlock/manifest.json");
    let bytes = std::fs::read(&path).with_context(|| format!("no active bundle at `{}`", args.root.display()))?;
    let manifest: Manifest = serde_json::from_slice(&bytes).with_context(|| format!("`{}`", path.display()))?;
    let targets: Vec<crate::spec::Target> =
        serde_json::from_value(manifest.validation.get("target").cloned().unwrap_or_default()).unwrap_or_default();
    let p = probe(&HostRoot::from_env());
    let Some(outcome) = classify(&targets, &p) else {
        if args.json {
            super::print_json(
                &serde_json::json!({ "verdict": "skipped", "reason": "the bundle names no targets", "probe": p }),
            )?;
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
    if args.json {
        super::print_json(
            &serde_json::json!({ "verdict": outcome.verdict, "detected": outcome.detected, "rows": outcome.rows, "summary": outcome.summary, "probe": p }),
        )?;
    } else {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", crate::escape::value(&outcome.summary))?;
        for r in &outcome.rows {
            writeln!(out, "row {} ({}) vs {}: {:?}", r.target, r.gpu, r.detected, r.verdict)?;
            for f in r.fields.iter().filter(|f| f.verdict != Verdict::Green) {
                let line = format!(
                    "  {:<20} {:?}: {} (expected `{}`, found `{}`)",
                    f.field, f.verdict, f.reason, f.expected, f.actual
                );
                writeln!(out, "{}", crate::escape::value(&line))?;
            }
        }
    }
    match outcome.verdict {
        Verdict::Green => Ok(super::EXIT_OK),
        Verdict::Amber => {
            tracing::warn!("amber: {}", outcome.summary);
            Ok(super::EXIT_OK)
        }
        Verdict::Red => Ok(EXIT_RED),
    }
}
