//! `airlock build [SPEC] --key KEY --out FILE [--locked]`

use std::io::Write;
use std::time::Instant;

use super::lock::{Refresh, ensure, lock_path};
use crate::bundle::Manifest;
use crate::bundle::manifest::{Builder, SBOM, SCHEMA_V1};
use crate::bundle::writer::pack;
use crate::cli::{BuildArgs, TerminalReporter};
use crate::clock::Timestamp;
use crate::sign::SigningKey;
use crate::sources;
use crate::spec::SpecFile;

pub const TOOL: &str = concat!("airlock/", env!("CARGO_PKG_VERSION"));

pub fn run(args: &BuildArgs) -> anyhow::Result<u8> {
    let started = Instant::now();
    let spec = SpecFile::load(&args.spec)?;
    let path = lock_path(&args.spec, args.lock.as_ref());
    let refresh = if args.locked { Refresh::Never } else { Refresh::IfStale };
    let key = SigningKey::load(&args.key, super::key_password().as_deref())?;
    let cache = crate::cache::Cache::open(&args.cache.clone().unwrap_or_else(crate::cache::Cache::default_dir))?;
    let reporter = TerminalReporter::new(args.json);
    let fetch = crate::fetch::Fetch { cache: &cache, jobs: usize::from(args.jobs), reporter: &reporter };
    let (lock, relocked) = ensure(&spec, &path, refresh, &fetch)?;
    if relocked {
        tracing::warn!("lock `{}` was missing or out of date and has been rewritten", path.display());
    }
    let mut plan = sources::plan(&spec, &lock, &fetch)?;
    let created = Timestamp::source_date_epoch()?.unwrap_or(lock.lock.resolved_at);
    let meta = &spec.spec.bundle;
    // The SBOM is a listed member like any other, so the manifest's signature covers it.
    let subject =
        crate::attest::sbom::Subject { name: &meta.name, version: &meta.version, created, artifacts: &plan.artifacts };
    let sbom = crate::attest::sbom::build(&subject)?;
    let sbom_digest = crate::digest::Sha256::of_bytes(&sbom);
    let origin = cache.put(sbom_digest, Some(sbom.len() as u64), SBOM, sbom.as_slice())?;
    plan.contents.push(sources::Content {
        path: crate::bundle::MemberPath::new(SBOM).expect("a valid member path"),
        size: sbom.len() as u64,
        sha256: sbom_digest,
        origin,
        what: SBOM.to_owned(),
    });
    plan.contents.sort_by(|a, b| a.path.cmp(&b.path));
    let manifest = Manifest {
        schema: SCHEMA_V1.to_owned(),
        name: meta.name.clone(),
        version: meta.version.clone(),
        description: meta.description.clone(),
        created,
        builder: Builder { tool: TOOL.to_owned(), key_id: key.key_id().clone() },
        spec_sha256: spec.sha256,
        lock_sha256: lock.sha256,
        artifacts: plan.artifacts,
        entries: plan
            .contents
            .iter()
            .map(|c| crate::bundle::manifest::Entry { path: c.path.clone(), size: c.size, sha256: c.sha256 })
            .collect(),
        validation: serde_json::to_value(&spec.spec.validation)?,
    };
    let manifest_sha256 = crate::digest::Sha256::of_bytes(&manifest.canonical_bytes());
    let spec_name = args.spec.file_name().map_or_else(|| "airlock.toml".into(), |n| n.to_string_lossy().into_owned());
    let statement = crate::attest::provenance::statement(&manifest, manifest_sha256, &spec_name);
    let provenance = crate::attest::provenance::envelope(&statement, &key);
    let packed = pack(&args.out, &manifest, &key, &plan.contents, Some(&provenance), &reporter)?;
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
            "bundle_bytes": packed.bytes,
            "images": manifest.artifacts.iter().filter_map(|a| match a {
                crate::bundle::manifest::Artifact::Image(i) => Some(serde_json::json!({ "reference": i.reference, "digest": format!("sha256:{}", i.digest) })),
                _ => None,
            }).collect::<Vec<_>>(),
            "seconds": seconds,
        }))?;
    } else {
        writeln!(
            std::io::stdout().lock(),
            "built {} ({} {}): {} members, {} content bytes -> {} bytes, manifest sha256 {}, signed by {} in {seconds:.2}s",
            packed.path.display(),
            manifest.name,
            manifest.version,
            packed.members,
            manifest.content_bytes(),
            packed.bytes,
            packed.manifest_sha256,
            key.key_id(),
        )?;
        for a in &manifest.artifacts {
            writeln!(std::io::stdout().lock(), "  {}", a.describe())?;
        }
    }
    Ok(super::EXIT_OK)
}
