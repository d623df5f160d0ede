//! `airlock build [SPEC] --key KEY --out FILE [--locked] [--cache DIR] [--jobs N]`

use std::io::Write;
use std::time::Instant;

use crate::build::base::Base;
use crate::build::lock::{Outcome, Refresh, ensure, lock_path};
use crate::bundle::manifest::Artifact;
use crate::bundle::writer::Layout;
use crate::cli::BuildArgs;
use crate::commands::terminal::TerminalReporter;
use crate::failure::{Context as _, Exit, Result};
use crate::fetch::{Fetch, Net};
use crate::sign::SigningKey;
use crate::sources::Sources;
use crate::sources::oci::BlobRoute;

pub fn run(args: &BuildArgs) -> Result<Exit> {
    let started = Instant::now();
    let spec = super::load_spec(&args.spec)?;
    let path = lock_path(&args.spec, args.lock.as_ref());
    let refresh = if args.locked { Refresh::Never } else { Refresh::IfStale };
    let key = SigningKey::load(&args.key, super::key_password().as_deref())?;
    make_out_dir(&args.out)?;
    let cache = super::open_cache(&args.cache)?;
    let reporter = TerminalReporter::new(args.json);
    let net = Net::new(args.cache.net.options())?;
    let fetch = Fetch { cache: &cache, jobs: usize::from(args.cache.jobs), http: net.http(), reporter: &reporter };
    let sources = Sources::new(&spec, fetch).with_sigstore_root(super::upstream_root(&args.upstream)?);
    let (lock, outcome) = ensure(&sources, &net, &path, refresh)?;
    if outcome == Outcome::Written {
        tracing::warn!("lock `{}` was missing or out of date and has been rewritten", path.display());
    }
    let base = base_of(args, &cache)?;
    if let Some(warning) = args.split_size.and_then(crate::bundle::parts::size_warning) {
        tracing::warn!("{warning}");
    }
    let layout = Layout { compression: args.compression.compression(), split_size: args.split_size };
    let carried_trust = args.trust_root.as_deref().map(super::trust::carried_files).transpose()?.unwrap_or_default();
    let blobs = if args.no_blob_cache { BlobRoute::Stream } else { BlobRoute::Cache };
    let options =
        crate::build::Options { layout, base, sbom_spec: args.sbom_spec, carried_trust, blobs, reproduce: None };
    let built = crate::build::build(&sources, &net, lock, &key, &args.out, &options, &reporter)?;
    let (manifest, packed) = (&built.manifest, &built.packed);
    let seconds = started.elapsed().as_secs_f64();
    if args.json {
        super::print_json(&serde_json::json!({
            "bundle": packed.path,
            "name": manifest.name,
            "version": manifest.version.to_string(),
            "manifest_sha256": packed.manifest_sha256,
            "key_id": key.key_id(),
            "members": packed.members,
            "content_bytes": manifest.content_bytes(),
            "carried_bytes": manifest.carried_bytes(),
            "bundle_bytes": packed.bytes,
            "parts": packed.parts.as_ref().map(|p| &p.parts),
            "base": manifest.base,
            "from_base": manifest.entries.iter().filter(|e| e.from_base).count(),
            "images": manifest.artifacts.iter().filter_map(|a| match a {
                Artifact::Image(i) => Some(serde_json::json!({ "reference": i.reference, "digest": format!("sha256:{}", i.digest) })),
                _ => None,
            }).collect::<Vec<_>>(),
            "seconds": seconds,
        }))?;
    } else {
        print_built(manifest, packed, &key, seconds)?;
    }
    Ok(Exit::Ok)
}

/// The output's directory is made, as `keygen --out-dir` makes its own.
fn make_out_dir(out: &std::path::Path) -> Result<()> {
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create `{}` for --out", dir.display()))?;
    }
    Ok(())
}

/// The release a delta is built against: `--base OLD.airlock` or `--base-lock OLD.lock`.
fn base_of(args: &BuildArgs, cache: &crate::cache::Cache) -> Result<Option<Base>> {
    Ok(match (&args.base, &args.base_lock) {
        (Some(bundle), _) => Some(Base::from_bundle(bundle)?),
        (None, Some(lock)) => Some(Base::from_lock(lock, cache)?),
        (None, None) => None,
    })
}

/// What `build` says on a terminal: the bundle, its sizes, its parts and delta, its artifacts.
fn print_built(
    manifest: &crate::bundle::Manifest,
    packed: &crate::bundle::writer::Packed,
    key: &SigningKey,
    seconds: f64,
) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "built {} ({} {}): {} artifacts in {} members ({} entries, {} of content) -> {}, \
         manifest {}, signed by {} in {seconds:.2} s",
        packed.path.display(),
        manifest.name,
        manifest.version,
        manifest.artifacts.len(),
        packed.members,
        manifest.entries.len(),
        super::size(manifest.content_bytes()),
        super::size(packed.bytes),
        packed.manifest_sha256.short(16),
        key.key_id().short(),
    )?;
    if let Some(parts) = &packed.parts {
        writeln!(out, "  split into {} parts of up to {}:", parts.parts.len(), super::size(parts.part_size))?;
        for p in &parts.parts {
            writeln!(out, "    {} {:>12} bytes sha256 {}", p.file, p.size, p.sha256)?;
        }
    }
    if let Some(base) = &manifest.base {
        let left: Vec<_> = manifest.entries.iter().filter(|e| e.from_base).collect();
        let bytes: u64 = left.iter().map(|e| e.size).sum();
        let entries = if left.len() == 1 { "entry" } else { "entries" };
        writeln!(out, "  delta: {} {entries} ({} of content) left to the base {base}", left.len(), super::size(bytes))?;
    }
    for a in &manifest.artifacts {
        writeln!(out, "  {}", a.describe())?;
    }
    Ok(())
}
