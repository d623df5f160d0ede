//! The provenance member (`airlock/provenance.dsse.json`) as format v1 defines it: a DSSE
//! envelope over an in-toto Statement v1 with a SLSA v1 predicate whose subjects name the
//! manifest. This module checks one; `attest::provenance` builds it from a manifest.

use super::manifest::MANIFEST;
use crate::digest::Sha256;
use crate::sign::dsse;
use crate::sign::{KeyId, TrustedKey};

pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
pub const PREDICATE_TYPE: &str = "https://slsa.dev/provenance/v1";
/// What a provenance member may weigh before it is checked.
pub const MAX_BYTES: u64 = 64 << 20;

/// A verified provenance: the statement and the trusted keys that signed it.
#[derive(Debug)]
pub struct Verified {
    pub statement: serde_json::Value,
    pub signers: Vec<KeyId>,
}

/// Why a provenance member does not hold: a verification failure.
#[derive(Debug, thiserror::Error)]
pub enum ProvenanceError {
    #[error("no trusted key signed the provenance")]
    Untrusted,
    #[error(transparent)]
    Envelope(dsse::DsseError),
    #[error("statement is not JSON: {0}")]
    NotJson(String),
    #[error("not an in-toto v1 statement with a SLSA v1 predicate")]
    NotSlsa,
    #[error("its subjects do not name this manifest (sha256 {want})")]
    OtherManifest { want: String },
}

impl crate::failure::Classify for ProvenanceError {
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Verification
    }
}

/// Check the envelope's signature with the trusted keys and that its statement names the
/// manifest whose canonical bytes hash to `manifest_sha256`.
pub fn verify(bytes: &[u8], trusted: &[TrustedKey], manifest_sha256: Sha256) -> Result<Verified, ProvenanceError> {
    let opened = dsse::open(bytes, PAYLOAD_TYPE, trusted).map_err(|e| match e {
        dsse::DsseError::Untrusted => ProvenanceError::Untrusted,
        other => ProvenanceError::Envelope(other),
    })?;
    let statement: serde_json::Value =
        serde_json::from_slice(&opened.payload).map_err(|e| ProvenanceError::NotJson(e.to_string()))?;
    if statement["_type"] != STATEMENT_TYPE || statement["predicateType"] != PREDICATE_TYPE {
        return Err(ProvenanceError::NotSlsa);
    }
    let want = manifest_sha256.to_string();
    let names_manifest = statement["subject"].as_array().is_some_and(|subjects| {
        subjects.iter().any(|s| s["name"] == MANIFEST && s["digest"]["sha256"] == want.as_str())
    });
    if !names_manifest {
        return Err(ProvenanceError::OtherManifest { want });
    }
    Ok(Verified { statement, signers: opened.signers })
}
