//! Upstream signatures of what a bundle carries, in the two places cosign keeps them for an
//! image — a Sigstore bundle attached as an OCI referrer (cosign's bundle format) and the
//! legacy `sha256-HEX.sig` tag, whose layer annotations hold the signature, the certificate and
//! Rekor's old "bundle" (the entry and its SET) — and a file's detached bundle. Checked the same
//! way at lock time (over what the registry serves) and at the site (over the members the
//! bundle carries), against the site's trusted root.
//!
//! Written here, not taken from a crate: no crate turns cosign's legacy annotations into a
//! protobuf-specs bundle (the `sigstore` crate reads them but verifies neither inclusion proofs
//! nor SETs; see `docs/security-audit.md`).

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;

use super::{Root, Signer, SigstoreError, Subject, Verified, verify};
use crate::digest::Sha256;
use crate::spec::UpstreamSigner;

/// The media types of a Sigstore bundle (an OCI referrer's `artifactType` and layer).
pub fn is_bundle_media_type(media_type: &str) -> bool {
    media_type.starts_with("application/vnd.dev.sigstore.bundle")
}

pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
pub const CERTIFICATE_ANNOTATION: &str = "dev.sigstore.cosign/certificate";
pub const CHAIN_ANNOTATION: &str = "dev.sigstore.cosign/chain";
pub const BUNDLE_ANNOTATION: &str = "dev.sigstore.cosign/bundle";

impl Signer {
    /// The spec's `verify = { identity | identity_regex, issuer }`, compiled when it was read.
    pub fn upstream(policy: &UpstreamSigner) -> Self {
        Signer::Keyless { identity: policy.identity.clone(), issuer: policy.issuer.clone() }
    }
}

/// What the lock and the manifest record of a signature that verified under `policy`: its
/// `form` and the digest of what it was read from (a caller adds `payload` or `url`).
pub fn record(
    form: crate::spec::SignatureForm,
    bundle: Sha256,
    policy: &UpstreamSigner,
    verified: Verified,
) -> crate::spec::UpstreamSignature {
    crate::spec::UpstreamSignature {
        form,
        bundle,
        payload: None,
        url: None,
        verify: policy.clone(),
        identity: verified.identity.unwrap_or_default(),
        issuer: verified.issuer.unwrap_or_default(),
        logged_at: verified.logged_at,
    }
}

/// A Sigstore bundle over an image (a referrer's layer): its message signature is over the
/// image manifest's digest, or its DSSE statement names that digest as a subject.
pub fn verify_over_digest(
    from: &str,
    bundle_json: &[u8],
    digest: Sha256,
    signer: &Signer,
    root: &Root,
) -> Result<Verified, SigstoreError> {
    verify(from, bundle_json, Subject::Digest(digest), signer, root)
}

/// A legacy cosign signature: one layer of the `.sig` manifest (its annotations) and that
/// layer's bytes, the simple-signing payload, which must name `image` as the signed digest.
pub fn verify_cosign_sig(
    from: &str,
    annotations: &BTreeMap<String, String>,
    payload: &[u8],
    image: Sha256,
    signer: &Signer,
    root: &Root,
) -> Result<Verified, SigstoreError> {
    let bundle = legacy_bundle(annotations, payload)
        .map_err(|detail| SigstoreError::Bundle { from: from.to_owned(), detail })?;
    let verified = super::verify_legacy(from, bundle.as_bytes(), Subject::Reader(&mut &payload[..]), signer, root)?;
    let named = payload_digest(payload).map_err(|detail| SigstoreError::Bundle { from: from.to_owned(), detail })?;
    if named != format!("sha256:{image}") {
        return Err(SigstoreError::Failed {
            from: from.to_owned(),
            against: String::new(),
            detail: format!("its payload signs `{named}`, not this image (sha256:{image})"),
        });
    }
    Ok(verified)
}

/// `critical.image.docker-manifest-digest` of a simple-signing payload.
fn payload_digest(payload: &[u8]) -> Result<String, String> {
    let doc: serde_json::Value =
        serde_json::from_slice(payload).map_err(|e| format!("the signed payload is not JSON: {e}"))?;
    doc.pointer("/critical/image/docker-manifest-digest")
        .and_then(|d| d.as_str())
        .map(str::to_owned)
        .ok_or_else(|| "the signed payload names no `critical.image.docker-manifest-digest`".to_owned())
}

/// The protobuf-specs bundle (v0.1: a SET, no inclusion proof) that cosign's annotations
/// amount to, as cosign's own `bundle create` would write it.
fn legacy_bundle(annotations: &BTreeMap<String, String>, payload: &[u8]) -> Result<String, String> {
    let get = |key: &str| annotations.get(key).ok_or_else(|| format!("the layer has no `{key}` annotation"));
    let signature = get(SIGNATURE_ANNOTATION)?;
    let mut certificates = Vec::new();
    for key in [CERTIFICATE_ANNOTATION, CHAIN_ANNOTATION] {
        let Some(text) = annotations.get(key) else { continue };
        for block in pem::parse_many(text).map_err(|e| format!("`{key}`: not PEM: {e}"))? {
            certificates.push(serde_json::json!({ "rawBytes": B64.encode(block.contents()) }));
        }
    }
    if certificates.is_empty() {
        return Err(format!("the layer has no `{CERTIFICATE_ANNOTATION}`: not a keyless signature"));
    }
    let rekor: serde_json::Value =
        serde_json::from_str(get(BUNDLE_ANNOTATION)?).map_err(|e| format!("`{BUNDLE_ANNOTATION}`: not JSON: {e}"))?;
    let field =
        |pointer: &str| rekor.pointer(pointer).ok_or_else(|| format!("`{BUNDLE_ANNOTATION}` has no `{pointer}`"));
    let body_b64 = field("/Payload/body")?.as_str().ok_or("`Payload.body` is not a string")?;
    let body: serde_json::Value = B64
        .decode(body_b64)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or("`Payload.body` is not base64 of a JSON entry")?;
    let log_id = hex::decode(field("/Payload/logID")?.as_str().unwrap_or_default())
        .map_err(|e| format!("`Payload.logID` is not hex: {e}"))?;
    let number = |pointer: &str| -> Result<String, String> {
        field(pointer)?.as_i64().map(|n| n.to_string()).ok_or_else(|| format!("`{pointer}` is not a number"))
    };
    let entry = serde_json::json!({
        "logIndex": number("/Payload/logIndex")?,
        "logId": { "keyId": B64.encode(log_id) },
        "kindVersion": {
            "kind": body.get("kind").and_then(|k| k.as_str()).unwrap_or_default(),
            "version": body.get("apiVersion").and_then(|k| k.as_str()).unwrap_or_default(),
        },
        "integratedTime": number("/Payload/integratedTime")?,
        "inclusionPromise": { "signedEntryTimestamp": field("/SignedEntryTimestamp")? },
        "canonicalizedBody": body_b64,
    });
    let bundle = serde_json::json!({
        "mediaType": "application/vnd.dev.sigstore.bundle+json;version=0.1",
        "verificationMaterial": { "x509CertificateChain": { "certificates": certificates }, "tlogEntries": [entry] },
        "messageSignature": {
            "messageDigest": { "algorithm": "SHA2_256", "digest": B64.encode(Sha256::of_bytes(payload).as_bytes()) },
            "signature": signature,
        },
    });
    Ok(bundle.to_string())
}

/// A wheel's PEP 740 provenance object (the index's `provenance` URL): the first of its
/// attestations that verifies over `digest` as `signer` allows, its in-toto statement naming
/// `filename`. Each attestation is the protobuf-specs bundle it amounts to (v0.3: the
/// certificate, the log entries, a DSSE envelope of the statement and its signature), as
/// `PyPI`'s own `pypi-attestations` converts it.
pub fn verify_pep740(
    from: &str,
    provenance: &[u8],
    filename: &str,
    digest: Sha256,
    signer: &Signer,
    root: &Root,
) -> Result<Verified, SigstoreError> {
    let malformed = |detail: String| SigstoreError::Bundle { from: from.to_owned(), detail };
    let doc: Provenance =
        serde_json::from_slice(provenance).map_err(|e| malformed(format!("not a PEP 740 provenance object: {e}")))?;
    if doc.version != 1 {
        return Err(malformed(format!("provenance version {}, this airlock reads 1", doc.version)));
    }
    let mut failures = Vec::new();
    for (b, group) in doc.attestation_bundles.iter().enumerate() {
        for (a, attestation) in group.attestations.iter().enumerate() {
            let at = format!("{from} attestation {b}.{a}");
            let outcome = attestation_bundle(attestation, filename)
                .map_err(|detail| SigstoreError::Bundle { from: at.clone(), detail })
                .and_then(|json| verify(&at, json.as_bytes(), Subject::Digest(digest), signer, root));
            match outcome {
                Ok(v) => return Ok(v),
                Err(e) => failures.push(e.to_string()),
            }
        }
    }
    Err(SigstoreError::Failed {
        from: from.to_owned(),
        against: String::new(),
        detail: if failures.is_empty() { "it holds no attestation".into() } else { failures.join("; ") },
    })
}

#[derive(serde::Deserialize)]
struct Provenance {
    version: u32,
    attestation_bundles: Vec<AttestationBundle>,
}

#[derive(serde::Deserialize)]
struct AttestationBundle {
    attestations: Vec<Attestation>,
}

#[derive(serde::Deserialize)]
struct Attestation {
    version: u32,
    verification_material: Material,
    envelope: Envelope,
}

#[derive(serde::Deserialize)]
struct Material {
    certificate: String,
    transparency_entries: Vec<serde_json::Value>,
}

#[derive(serde::Deserialize)]
struct Envelope {
    statement: String,
    signature: String,
}

/// The predicate type of `PyPI`'s publish attestation (PEP 740): the only one that counts.
pub const PYPI_PUBLISH: &str = "https://docs.pypi.org/attestations/publish/v1";

/// One attestation as a v0.3 bundle, once its statement names `filename` and is `PyPI`'s publish
/// attestation.
fn attestation_bundle(a: &Attestation, filename: &str) -> Result<String, String> {
    if a.version != 1 {
        return Err(format!("attestation version {}, this airlock reads 1", a.version));
    }
    let statement = B64.decode(&a.envelope.statement).map_err(|e| format!("the statement is not base64: {e}"))?;
    let doc: serde_json::Value =
        serde_json::from_slice(&statement).map_err(|e| format!("the statement is not JSON: {e}"))?;
    let names: Vec<&str> = doc
        .get("subject")
        .and_then(|s| s.as_array())
        .map(|s| s.iter().filter_map(|x| x.get("name").and_then(|n| n.as_str())).collect())
        .unwrap_or_default();
    let same = |n: &str| {
        n == filename
            || crate::wheel::WheelName::parse(n)
                .zip(crate::wheel::WheelName::parse(filename))
                .is_some_and(|(x, y)| x == y)
    };
    if !names.iter().any(|n| same(n)) {
        return Err(format!("its statement names {names:?}, not `{filename}`"));
    }
    // Only PyPI's publish attestation says who published the file; another predicate signed by
    // the same identity (a build's provenance, anything) is not that statement.
    let predicate = doc.get("predicateType").and_then(|p| p.as_str()).unwrap_or("");
    if predicate != PYPI_PUBLISH {
        return Err(format!("its predicateType is `{predicate}`, not PyPI's publish attestation `{PYPI_PUBLISH}`"));
    }
    let bundle = serde_json::json!({
        "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "verificationMaterial": {
            "certificate": { "rawBytes": a.verification_material.certificate },
            "tlogEntries": a.verification_material.transparency_entries,
        },
        "dsseEnvelope": {
            "payload": a.envelope.statement,
            "payloadType": "application/vnd.in-toto+json",
            "signatures": [{ "sig": a.envelope.signature }],
        },
    });
    Ok(bundle.to_string())
}

/// Re-check a recorded upstream signature over `subject` (the image's digest, the file's or
/// wheel's sha256; `name`, a wheel's filename, which its attestation must name) with the bytes
/// it names, looked up by digest (`bytes`: the carried members), under `root`: what a site
/// does, offline, years after the build host first checked it.
pub fn recheck(
    signature: &crate::spec::UpstreamSignature,
    subject: Sha256,
    name: &str,
    bytes: &dyn Fn(Sha256) -> Option<Vec<u8>>,
    root: &Root,
) -> Result<Verified, SigstoreError> {
    use crate::spec::SignatureForm;
    let signer = Signer::upstream(&signature.verify);
    let missing = |what: &str, digest: Sha256| SigstoreError::Bundle {
        from: format!("sha256:{}", signature.bundle),
        detail: format!("its {what} (sha256:{digest}) is not carried"),
    };
    let from = format!("sha256:{}", signature.bundle);
    let verified = match signature.form {
        SignatureForm::Referrer | SignatureForm::File => {
            let json = bytes(signature.bundle).ok_or_else(|| missing("bundle", signature.bundle))?;
            verify_over_digest(&from, &json, subject, &signer, root)?
        }
        SignatureForm::Pep740 => {
            let json = bytes(signature.bundle).ok_or_else(|| missing("provenance", signature.bundle))?;
            verify_pep740(&from, &json, name, subject, &signer, root)?
        }
        SignatureForm::CosignSig => {
            let manifest = bytes(signature.bundle).ok_or_else(|| missing("signature manifest", signature.bundle))?;
            let layer = signature.payload.ok_or_else(|| SigstoreError::Bundle {
                from: from.clone(),
                detail: "a `cosign-sig` record names no payload layer".into(),
            })?;
            let annotations = layer_annotations(&manifest, layer.0)
                .map_err(|detail| SigstoreError::Bundle { from: from.clone(), detail })?;
            let payload = bytes(layer.0).ok_or_else(|| missing("payload", layer.0))?;
            verify_cosign_sig(&from, &annotations, &payload, subject, &signer, root)?
        }
    };
    if verified.identity.as_deref() != Some(signature.identity.as_str()) {
        return Err(SigstoreError::Failed {
            from,
            against: String::new(),
            detail: format!(
                "it is signed by `{}`, but the bundle's manifest records `{}`",
                verified.identity.as_deref().unwrap_or("no identity"),
                signature.identity
            ),
        });
    }
    Ok(verified)
}

/// The annotations of the layer `digest` of a `.sig` manifest.
fn layer_annotations(manifest: &[u8], digest: Sha256) -> Result<BTreeMap<String, String>, String> {
    #[derive(serde::Deserialize)]
    struct Layer {
        digest: String,
        #[serde(default)]
        annotations: BTreeMap<String, String>,
    }
    #[derive(serde::Deserialize)]
    struct SigManifest {
        #[serde(default)]
        layers: Vec<Layer>,
    }
    let m: SigManifest =
        serde_json::from_slice(manifest).map_err(|e| format!("the signature manifest is not an OCI manifest: {e}"))?;
    let want = format!("sha256:{digest}");
    m.layers
        .into_iter()
        .find(|l| l.digest == want)
        .map(|l| l.annotations)
        .ok_or_else(|| format!("the signature manifest has no layer {want}"))
}
