//! Building SLSA v1 provenance: an in-toto Statement v1 in a DSSE envelope
//! (`airlock/provenance.dsse.json`). Subjects: `airlock/manifest.json` and every artifact by
//! sha256. Sealed by the build key (`sign::dsse`). Deterministic: its times are the bundle's
//! `created`, its invocation id the manifest digest. `bundle::provenance` checks it.

use serde_json::json;

use crate::bundle::manifest::{Artifact, MANIFEST, Manifest};
use crate::bundle::provenance::{PAYLOAD_TYPE, PREDICATE_TYPE, STATEMENT_TYPE};
use crate::bundle::writer::Compression;
use crate::digest::Sha256;
use crate::sign::{SigningKey, dsse};

/// Every artifact as `(name, sha256)`, model files one by one.
fn subjects(manifest: &Manifest) -> Vec<(String, Sha256, String)> {
    let mut out = Vec::new();
    for a in &manifest.artifacts {
        match a {
            Artifact::Image(i) => out.push((i.reference.clone(), i.digest, format!("oci://{}", i.source))),
            Artifact::Wheel(w) => out.push((w.filename.clone(), w.sha256, w.url.clone())),
            Artifact::Deb(d) => out.push((
                format!("{}={}:{}", d.name, d.version, d.architecture),
                d.sha256,
                format!("{}#{}", d.repo, d.name),
            )),
            Artifact::Rpm(r) => out.push((
                format!("{}-{}.{}", r.name, r.evr(), r.architecture),
                r.sha256,
                format!("{}/{}", r.repo, r.path.as_str().trim_start_matches("rpms/")),
            )),
            Artifact::Model(m) => {
                for f in &m.files {
                    let uri = format!("{}/{}/resolve/{}/{}", m.hub.trim_end_matches('/'), m.repo, m.commit, f.path);
                    out.push((format!("{}/{}", m.repo, f.path), f.sha256, uri));
                }
            }
            // A directory is one subject, by its tree digest (the sha256 of its listing, which
            // the manifest holds): the statement stays small whatever the file count.
            Artifact::File(f) if f.is_tree() => out.push((format!("{}/", f.name), f.sha256, f.source.clone())),
            Artifact::File(f) => out.push((f.name.to_string(), f.sha256, f.source.clone())),
        }
    }
    out
}

/// The in-toto statement for a manifest whose canonical bytes hash to `manifest_sha256`,
/// packed with `compression` (a parameter of the build: the bundle's bytes depend on it).
pub fn statement(
    manifest: &Manifest,
    manifest_sha256: Sha256,
    spec_name: &str,
    compression: Compression,
) -> serde_json::Value {
    let artifacts = subjects(manifest);
    let mut subject = vec![json!({"name": MANIFEST, "digest": {"sha256": manifest_sha256.to_string()}})];
    subject.extend(artifacts.iter().map(|(name, d, _)| json!({"name": name, "digest": {"sha256": d.to_string()}})));
    let resolved: Vec<_> = artifacts
        .iter()
        .map(|(name, d, uri)| json!({"uri": uri, "name": name, "digest": {"sha256": d.to_string()}}))
        .collect();
    let created = manifest.created.to_string();
    json!({
        "_type": STATEMENT_TYPE,
        "subject": subject,
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": "tag:airlock,2026:bundle/v1",
                "externalParameters": {
                    "spec": {"name": spec_name, "sha256": manifest.spec_sha256.to_string()},
                    "lock": {"sha256": manifest.lock_sha256.to_string()},
                    "bundle": {"name": manifest.name, "version": manifest.version.to_string()},
                    "compression": {"zstd_level": compression.level, "long_window_log": compression.long_window_log},
                    "base": manifest.base,
                },
                "internalParameters": {"tool": manifest.builder.tool, "created": created},
                "resolvedDependencies": resolved,
            },
            "runDetails": {
                "builder": {"id": format!("tag:airlock,2026:builder/{}", manifest.builder.key_id), "version": {"airlock": env!("CARGO_PKG_VERSION")}},
                "metadata": {"invocationId": format!("sha256:{manifest_sha256}"), "startedOn": created, "finishedOn": created},
            },
        },
    })
}

/// The signed envelope's bytes (canonical JSON).
pub fn envelope(statement: &serde_json::Value, key: &SigningKey) -> Vec<u8> {
    let payload = serde_json_canonicalizer::to_vec(statement).expect("a statement serialises");
    dsse::seal(PAYLOAD_TYPE, &payload, key)
}
