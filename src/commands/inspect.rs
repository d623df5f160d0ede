//! `airlock inspect BUNDLE [--json]`: what a bundle claims, read from its first two members.

use std::fmt::Write as _;
use std::io::Write;

use crate::bundle::parts::Input;
use crate::failure::{Exit, Result};

use super::VerificationFailed;
use crate::bundle::manifest::Artifact;
use crate::bundle::reader::read_head;
use crate::cli::InspectArgs;
use crate::site::BundleId;

pub fn run(args: &InspectArgs) -> Result<Exit> {
    let input = Input::resolve(&args.bundle)?;
    let bundle_bytes = input.bytes()?;
    let head = read_head(input.open()?)
        .map_err(|p| VerificationFailed(format!("cannot inspect `{}`: {p}", input.display())))?;
    // Co-signatures beside the bundle (`airlock sign`), by the key id their names claim.
    let cosignatures = super::cosignatures_beside(input.bundle());
    if args.json {
        return json(head, &input, bundle_bytes, &cosignatures);
    }
    let m = &head.manifest;
    // Everything below is what the bundle claims, unverified: escaped for the terminal.
    let mut text = String::new();
    let out = &mut text;
    let _ = writeln!(out, "bundle:      {} (NOT verified; run `airlock verify --trust KEY`)", input.display());
    media(out, &input, m);
    let _ = writeln!(out, "name:        {} {}", m.name, m.version);
    if let Some(d) = &m.description {
        let _ = writeln!(out, "description: {}", crate::escape::value(d));
    }
    let _ = writeln!(out, "created:     {}", m.created);
    let _ = writeln!(out, "builder:     {}", crate::escape::value(&m.builder.tool));
    let id = BundleId::of(&head.manifest_sha256);
    let _ = writeln!(out, "manifest:    {id} (site id; sha256 {})", head.manifest_sha256);
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
        "members:     {} (the manifest, its signature, the provenance and {} entries; {} of content, {} compressed)",
        m.entries.len() + 3,
        m.entries.len(),
        super::size(m.content_bytes()),
        super::size(bundle_bytes),
    );
    let _ = writeln!(out, "entries:     {}", m.entries.len());
    for e in &m.entries {
        let from = if e.from_base { "  (from base)" } else { "" };
        let _ = writeln!(out, "  {:>12}  {}  {}{from}", e.size, e.sha256, e.path);
    }
    std::io::stdout().lock().write_all(crate::escape::lines(&text).as_bytes())?;
    Ok(Exit::Ok)
}

/// `inspect --json`: one document, every field unverified.
fn json(
    mut head: crate::bundle::reader::Head,
    input: &Input,
    bundle_bytes: u64,
    cosignatures: &[crate::sign::CoSignature],
) -> Result<Exit> {
    // A directory's files, which reading holds only as entries, listed again.
    head.manifest.list_tree_files();
    let m = &head.manifest;
    // The embedded signature carries no key id of its own; the manifest names the build key.
    let mut signatures = vec![
        serde_json::json!({ "member": crate::bundle::manifest::SIGNATURE, "key_id": m.builder.key_id, "verified": false }),
    ];
    for co in cosignatures {
        signatures.push(serde_json::json!({ "file": co.path, "key_id": co.key_id, "verified": false }));
    }
    let (from_base, from_base_bytes) = from_base(m);
    super::print_json(&serde_json::json!({
        "name": m.name,
        "version": m.version.to_string(),
        "description": m.description,
        "created": m.created,
        "builder": m.builder,
        "manifest_sha256": head.manifest_sha256,
        "id": BundleId::of(&head.manifest_sha256),
        "signatures": signatures,
        "artifacts": m.artifacts,
        // The manifest, its signature and the provenance are not entries of the manifest.
        "members": m.entries.len() + 3,
        "entries": m.entries,
        "content_bytes": m.content_bytes(),
        "bundle_bytes": bundle_bytes,
        "parts": input.split().map(|s| serde_json::json!({ "file": s.parts_file, "parts_file": s.doc })),
        "base": m.base,
        "from_base": { "entries": from_base, "bytes": from_base_bytes },
        "verified": false,
    }))?;
    Ok(Exit::Ok)
}

/// A delta's `from_base` entries: how many, and their bytes.
fn from_base(m: &crate::bundle::Manifest) -> (usize, u64) {
    m.entries.iter().filter(|e| e.from_base).fold((0, 0), |(n, bytes), e| (n + 1, bytes + e.size))
}

/// The parts a split bundle is read from, and a delta's base.
fn media(out: &mut String, input: &Input, m: &crate::bundle::Manifest) {
    let (from_base, from_base_bytes) = from_base(m);
    if let Some(s) = input.split() {
        let _ = writeln!(
            out,
            "parts:       {} of up to {} bytes, {} bytes in all (sha256 {} joined), parts file signed by key {} as it claims",
            s.doc.parts.len(),
            s.doc.part_size,
            s.doc.bytes,
            s.doc.sha256,
            s.doc.key_id.short()
        );
        for p in &s.doc.parts {
            let _ = writeln!(out, "  {:>12}  {}  {}", p.size, p.sha256, p.file);
        }
    }
    if let Some(base) = &m.base {
        let _ =
            writeln!(out, "delta:       {from_base} entries ({from_base_bytes} content bytes) left to the base {base}");
    }
}
