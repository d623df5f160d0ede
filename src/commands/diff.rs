//! `airlock diff OLD NEW [--trust PUB… [--threshold N]] [--json]`: what changed between two
//! bundles or two locks — the change-approval BOM diff. Without `--trust` it compares what the
//! bundles' manifests claim, unverified, and says so; with it, each bundle is verified whole
//! first (content included) and a bundle that fails is refused.

use std::fmt::Write as _;
use std::fs::File;
use std::io::Write;
use std::path::Path;

use serde::Serialize;

use super::VerificationFailed;
use crate::bundle::Manifest;
use crate::bundle::parts::Input;
use crate::bundle::reader::{OnProblem, read_head};
use crate::cli::{DiffArgs, TrustArgs};
use crate::commands::terminal::TerminalReporter;
use crate::failure::{Class, Context as _, Exit, Failure, Result};
use crate::report::bom::{Diff, Inventory, compare, from_artifacts, from_lock};
use crate::spec::lock::LockFile;

/// The first bytes of every zstd frame (RFC 8878 §3.1.1): a bundle, never a lock.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// What one side of the diff is: its inventory, its support matrix (the manifest's
/// `validation`; for a lock, its spec's, when the spec is beside it), and, for a bundle, its
/// name and version.
struct Side {
    inventory: Inventory,
    validation: crate::bundle::manifest::Validation,
    bundle: Option<(String, String)>,
}

/// A bundle (by its zstd magic) or else a lock, whose parse error is then the one reported.
fn side(path: &Path, trust: &TrustArgs, json: bool) -> Result<Side> {
    let input = Input::resolve(path)?;
    let mut magic = [0u8; 4];
    let is_bundle = input.split().is_some() || {
        let mut file = File::open(path).with_context(|| format!("cannot open `{}`", path.display()))?;
        std::io::Read::read_exact(&mut file, &mut magic).is_ok() && magic == ZSTD_MAGIC
    };
    if !is_bundle {
        let lock = LockFile::load(path)?
            .ok_or_else(|| Failure::new(Class::Runtime, format!("cannot open `{}`", path.display())))?;
        return Ok(Side { inventory: from_lock(&lock.lock), validation: spec_validation(path)?, bundle: None });
    }
    let manifest =
        if trust.trust.is_empty() { claimed_manifest(&input)? } else { verified_manifest(&input, trust, json)? };
    let bundle = Some((manifest.name.to_string(), manifest.version.to_string()));
    Ok(Side { inventory: from_artifacts(&manifest.artifacts), validation: manifest.validation, bundle })
}

/// The `validation` a bundle built from the spec beside `lock` would carry (`X.lock` →
/// `X.toml`), or nothing when there is no such spec: a lock pins inputs, its spec holds the matrix.
fn spec_validation(lock: &Path) -> Result<crate::bundle::manifest::Validation> {
    let spec = lock.with_extension("toml");
    if !spec.is_file() {
        return Ok(crate::bundle::manifest::Validation::default());
    }
    let spec = crate::spec::SpecFile::load(&spec)?;
    Ok(crate::bundle::manifest::Validation::of_spec(&spec.spec))
}

/// What the bundle's manifest says, nothing verified.
fn claimed_manifest(input: &Input) -> Result<Manifest> {
    let head = read_head(input.open()?)
        .map_err(|p| VerificationFailed(format!("`{}` is not a readable bundle: {p}", input.display())))?;
    Ok(head.manifest)
}

/// The bundle's manifest once the whole bundle verified under the `--trust` policy.
fn verified_manifest(input: &Input, trust: &TrustArgs, json: bool) -> Result<Manifest> {
    let policy = super::load_policy(trust, input.bundle())?;
    let reporter = TerminalReporter::new(json);
    let (report, _) = super::verify_discarding(input, &policy, OnProblem::Stop, &reporter)?;
    match report.manifest {
        Some(manifest) if report.problems.is_empty() => Ok(manifest.into_manifest()),
        _ => {
            let why = report.problems.first().map_or_else(|| "no manifest".to_owned(), ToString::to_string);
            Err(VerificationFailed(format!("`{}` does not verify: {why}", input.display())).into())
        }
    }
}

#[derive(Serialize)]
struct DiffJson<'a> {
    /// Whether every bundle compared was verified (`--trust`) first.
    verified: bool,
    /// `{name, version}` of each side that is a bundle (null for a lock).
    old: Option<serde_json::Value>,
    new: Option<serde_json::Value>,
    #[serde(flatten)]
    diff: &'a Diff,
}

pub fn run(args: &DiffArgs) -> Result<Exit> {
    let (old, new) = (side(&args.old, &args.trust, args.json)?, side(&args.new, &args.trust, args.json)?);
    let verified = !args.trust.trust.is_empty();
    if !verified && (old.bundle.is_some() || new.bundle.is_some()) {
        tracing::warn!("comparing what the bundles claim, unverified: pass --trust PUB to verify them first");
    }
    if let (Some((old_name, old_version)), Some((new_name, new_version))) = (&old.bundle, &new.bundle)
        && old_name != new_name
    {
        tracing::warn!(
            "these are two different bundles, `{}` {old_version} and `{}` {new_version}: \
             a diff usually compares versions of one bundle",
            crate::escape::value(old_name),
            crate::escape::value(new_name)
        );
    }
    let mut diff = compare(&old.inventory, &new.inventory);
    diff.extend(crate::report::bom::compare_validation(&old.validation, &new.validation));
    if args.json {
        let name = |s: &Side| s.bundle.as_ref().map(|(n, v)| serde_json::json!({ "name": n, "version": v }));
        super::print_json(&DiffJson { verified, old: name(&old), new: name(&new), diff: &diff })?;
        return Ok(Exit::Ok);
    }
    // Names come from the bundles (claims, when unverified): escaped for the terminal.
    let mut text = String::new();
    for i in &diff.added {
        let _ = writeln!(text, "+ {:<6} {}  {}", i.kind, i.name, i.version);
    }
    for i in &diff.removed {
        let _ = writeln!(text, "- {:<6} {}  {}", i.kind, i.name, i.version);
    }
    for c in &diff.changed {
        let _ = writeln!(text, "~ {:<6} {}  {} -> {}", c.kind, c.name, c.from, c.to);
    }
    let (a, r, c) = (diff.added.len(), diff.removed.len(), diff.changed.len());
    let _ = writeln!(text, "{a} added, {r} removed, {c} changed");
    std::io::stdout().lock().write_all(crate::escape::lines(&text).as_bytes())?;
    Ok(Exit::Ok)
}
