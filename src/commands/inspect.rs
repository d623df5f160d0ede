//! `airlock inspect BUNDLE [--json]`: what a bundle claims, read from its first two members.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufReader, Write};

use anyhow::Context as _;

use super::VerificationFailed;
use crate::bundle::manifest::Artifact;
use crate::bundle::reader::read_head;
use crate::cli::InspectArgs;
use crate::site::bundle_id;

pub fn run(args: &InspectArgs) -> anyhow::Result<u8> {
    let file = File::open(&args.bundle).with_context(|| format!("cannot open bundle `{}`", args.bundle.display()))?;
    let bundle_bytes = file.metadata().map_or(0, |m| m.len());
    let head = read_head(BufReader::new(file))
        .map_err(|p| VerificationFailed(format!("cannot inspect `{}`: {p}", args.bundle.display())))?;
    let m = &head.manifest;
    // The embedded signature carries no key id of its own; the manifest names the build key.
    let mut signatures = vec![
        serde_json::json!({ "member": crate::bundle::manifest::SIGNATURE, "key_id": m.builder.key_id, "verified": false }),
    ];
    // Co-signatures beside the bundle (`airlock sign`), by the key id their names claim.
    let cosignatures = super::cosignatures_beside(&args.bundle);
    for co in &cosignatures {
        signatures.push(serde_json::json!({ "file": co.path, "key_id": co.key_id, "verified": false }));
    }
    // The manifest, its signature and the provenance are not entries of the manifest.
    let members = m.entries.len() + 3;
    if args.json {
        super::print_json(&serde_json::json!({
            "name": m.name,
            "version": m.version.to_string(),
            "description": m.description,
            "created": m.created,
            "builder": m.builder,
            "manifest_sha256": head.manifest_sha256,
            "id": bundle_id(&head.manifest_sha256),
            "signatures": signatures,
            "artifacts": m.artifacts,
            "members": members,
            "entries": m.entries,
            "content_bytes": m.content_bytes(),
            "bundle_bytes": bundle_bytes,
            "verified": false,
        }))?;
        return Ok(super::EXIT_OK);
    }
    // Everything below is what the bundle claims, unverified: escaped for the terminal.
    let mut text = String::new();
    let out = &mut text;
    let _ = writeln!(out, "bundle:      {} (NOT verified; run `airlock verify --trust KEY`)", args.bundle.display());
    let _ = writeln!(out, "name:        {} {}", m.name, m.version);
    if let Some(d) = &m.description {
        let _ = writeln!(out, "description: {}", crate::escape::value(d));
    }
    let _ = writeln!(out, "created:     {}", m.created);
    let _ = writeln!(out, "builder:     {}", crate::escape::value(&m.builder.tool));
    let _ =
        writeln!(out, "manifest:    {} (site id; sha256 {})", bundle_id(&head.manifest_sha256), head.manifest_sha256);
    let _ = writeln!(
        out,
        "signatures:  embedded (key {} as claimed by the manifest), {} co-signature(s) beside the bundle",
        m.builder.key_id.short(),
        cosignatures.len()
    );
    for co in &cosignatures {
        let _ =
            writeln!(out, "  co-signature {} (key {} as claimed by its name)", co.path.display(), co.key_id.short());
    }
    let _ = writeln!(out, "artifacts:   {} (what the spec asked for)", m.artifacts.len());
    for a in &m.artifacts {
        let _ = writeln!(out, "  {}", crate::escape::value(&a.describe()));
        if let Artifact::File(f) = a {
            for (k, v) in &f.notes {
                let _ = writeln!(out, "      {k} = {}", crate::escape::value(v));
            }
        }
    }
    let _ = writeln!(
        out,
        "members:     {members} (the manifest, its signature, the provenance and {} entries; {} content bytes, {bundle_bytes} bytes compressed)",
        m.entries.len(),
        m.content_bytes(),
    );
    let _ = writeln!(out, "entries:     {}", m.entries.len());
    for e in &m.entries {
        let _ = writeln!(out, "  {:>12}  {}  {}", e.size, e.sha256, e.path);
    }
    std::io::stdout().lock().write_all(crate::escape::lines(&text).as_bytes())?;
    Ok(super::EXIT_OK)
}
