//! SLSA v1 provenance as an in-toto Statement v1 in a DSSE envelope
//! (`airlock/provenance.dsse.json`). Subjects: `airlock/manifest.json` and every artifact by
//! sha256. Signed by the build key over DSSE's pre-authentication encoding (PAE), with the key
//! id in the signature. Deterministic: its times are the bundle's `created`, its invocation id
//! the manifest digest. Hand-written envelope: sigstore keeps its DSSE code private.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::bundle::manifest::{Artifact, Manifest};
use crate::digest::Sha256;
use crate::sign::{KeyId, SigningKey, TrustedKey};

pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
pub const PREDICATE_TYPE: &str = "https://slsa.dev/provenance/v1";
/// What a provenance member may weigh before it is checked.
pub const MAX_BYTES: u64 = 64 << 20;

#[derive(Debug, Serialize, Deserialize)]
pub struct Envelope {
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    pub payload: String,
    pub signatures: Vec<EnvelopeSignature>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct EnvelopeSignature {
    pub keyid: String,
    pub sig: String,
}

/// DSSE v1 pre-authentication encoding.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!("DSSEv1 {} {payload_type} {} ", payload_type.len(), payload.len()).into_bytes();
    out.extend_from_slice(payload);
    out
}

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
            Artifact::Model(m) => {
                for f in &m.files {
                    let uri = format!("{}/{}/resolve/{}/{}", m.hub.trim_end_matches('/'), m.repo, m.commit, f.path);
                    out.push((format!("{}/{}", m.repo, f.path), f.sha256, uri));
                }
            }
            Artifact::File(f) => out.push((f.name.to_string(), f.sha256, f.source.clone())),
        }
    }
    out
}

/// The in-toto statement for a manifest whose canonical bytes hash to `manifest_sha256`.
pub fn statement(manifest: &Manifest, manifest_sha256: Sha256, spec_name: &str) -> serde_json::Value {
    let artifacts = subjects(manifest);
    let mut subject =
        vec![json!({"name": crate::bundle::manifest::MANIFEST, "digest": {"sha256": manifest_sha256.to_string()}})];
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
    let sig = key.sign_blob(&pae(PAYLOAD_TYPE, &payload));
    let env = Envelope {
        payload_type: PAYLOAD_TYPE.to_owned(),
        payload: STANDARD.encode(&payload),
        signatures: vec![EnvelopeSignature { keyid: key.key_id().to_string(), sig }],
    };
    serde_json_canonicalizer::to_vec(&env).expect("an envelope serialises")
}

/// A verified provenance: the statement and the trusted keys that signed it.
#[derive(Debug)]
pub struct Verified {
    pub statement: serde_json::Value,
    pub signers: Vec<KeyId>,
}

/// Check the envelope's signature with the trusted keys and that its manifest subject is the
/// manifest that was verified.
pub fn verify(bytes: &[u8], trusted: &[TrustedKey], manifest_sha256: Sha256) -> Result<Verified, String> {
    let env: Envelope = serde_json::from_slice(bytes).map_err(|e| format!("not a DSSE envelope: {e}"))?;
    if env.payload_type != PAYLOAD_TYPE {
        return Err(format!("payloadType is `{}`, expected `{PAYLOAD_TYPE}`", env.payload_type));
    }
    let payload = STANDARD.decode(&env.payload).map_err(|e| format!("payload is not base64: {e}"))?;
    let signed = pae(PAYLOAD_TYPE, &payload);
    let signers: Vec<KeyId> = trusted
        .iter()
        .filter(|k| env.signatures.iter().any(|s| k.verify_blob(&signed, s.sig.as_bytes()).is_ok()))
        .map(|k| k.key_id().clone())
        .collect();
    if signers.is_empty() {
        return Err("no trusted key signed the provenance".into());
    }
    let statement: serde_json::Value =
        serde_json::from_slice(&payload).map_err(|e| format!("statement is not JSON: {e}"))?;
    if statement["_type"] != STATEMENT_TYPE || statement["predicateType"] != PREDICATE_TYPE {
        return Err("not an in-toto v1 statement with a SLSA v1 predicate".into());
    }
    let want = manifest_sha256.to_string();
    let names_manifest = statement["subject"].as_array().is_some_and(|subjects| {
        subjects
            .iter()
            .any(|s| s["name"] == crate::bundle::manifest::MANIFEST && s["digest"]["sha256"] == want.as_str())
    });
    if !names_manifest {
        return Err(format!("its subjects do not name this manifest (sha256 {want})"));
    }
    Ok(Verified { statement, signers })
}
