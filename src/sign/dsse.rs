//! DSSE v1 envelopes (<https://github.com/secure-systems-lab/dsse/blob/master/envelope.md>):
//! a payload and its type, signed over the pre-authentication encoding (PAE) with the key id in
//! each signature. Written by hand: sigstore keeps its DSSE code private. Sealing and opening
//! use the same key types as blob signatures (deterministic signing, sigstore verification).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use super::{KeyId, SigningKey, TrustedKey};

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

/// Why an envelope was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DsseError {
    #[error("not a DSSE envelope: {0}")]
    Format(String),
    #[error("payloadType is `{actual}`, expected `{expected}`")]
    PayloadType { expected: String, actual: String },
    #[error("no trusted key signed the envelope")]
    Untrusted,
}

impl crate::failure::Classify for DsseError {
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Verification
    }
}

/// DSSE v1 pre-authentication encoding.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!("DSSEv1 {} {payload_type} {} ", payload_type.len(), payload.len()).into_bytes();
    out.extend_from_slice(payload);
    out
}

/// The envelope's bytes (canonical JSON) around `payload`, signed by `key`.
pub fn seal(payload_type: &str, payload: &[u8], key: &SigningKey) -> Vec<u8> {
    let sig = key.sign_blob(&pae(payload_type, payload));
    let envelope = Envelope {
        payload_type: payload_type.to_owned(),
        payload: STANDARD.encode(payload),
        signatures: vec![EnvelopeSignature { keyid: key.key_id().to_string(), sig }],
    };
    serde_json_canonicalizer::to_vec(&envelope).expect("an envelope serialises")
}

/// `bytes` (an envelope airlock wrote, canonical) with `key`'s signature added, or replaced
/// when that key had signed already; signatures ordered by key id, so the same signers give
/// the same bytes in whatever order they signed. Co-signing: each signer signs the same
/// payload, checked to be the envelope's own before anything is added.
pub fn cosign(bytes: &[u8], payload_type: &str, key: &SigningKey) -> Result<Vec<u8>, DsseError> {
    let mut envelope: Envelope = serde_json::from_slice(bytes).map_err(|e| DsseError::Format(e.to_string()))?;
    if envelope.payload_type != payload_type {
        return Err(DsseError::PayloadType { expected: payload_type.to_owned(), actual: envelope.payload_type });
    }
    let payload =
        STANDARD.decode(&envelope.payload).map_err(|e| DsseError::Format(format!("payload is not base64: {e}")))?;
    let keyid = key.key_id().to_string();
    envelope.signatures.retain(|s| s.keyid != keyid);
    envelope.signatures.push(EnvelopeSignature { keyid, sig: key.sign_blob(&pae(payload_type, &payload)) });
    envelope.signatures.sort_by(|a, b| a.keyid.cmp(&b.keyid));
    Ok(serde_json_canonicalizer::to_vec(&envelope).expect("an envelope serialises"))
}

/// The key ids an envelope's signatures name (signed or not: for showing, never for trusting).
pub fn named_keyids(bytes: &[u8]) -> Result<Vec<String>, DsseError> {
    let envelope: Envelope = serde_json::from_slice(bytes).map_err(|e| DsseError::Format(e.to_string()))?;
    Ok(envelope.signatures.into_iter().map(|s| s.keyid).collect())
}

/// The payload of an envelope, unchecked: for showing what it claims, never for trusting it.
pub fn payload_unverified(bytes: &[u8]) -> Result<Vec<u8>, DsseError> {
    let envelope: Envelope = serde_json::from_slice(bytes).map_err(|e| DsseError::Format(e.to_string()))?;
    STANDARD.decode(&envelope.payload).map_err(|e| DsseError::Format(format!("payload is not base64: {e}")))
}

/// An opened envelope: its payload and the trusted keys whose signature over it verified.
#[derive(Debug)]
pub struct Opened {
    pub payload: Vec<u8>,
    pub signers: Vec<KeyId>,
}

/// Check that the envelope carries `payload_type` and that at least one trusted key signed it.
///
/// DSSE signs the payload and its type, not the envelope around them: its `keyid` and its
/// JSON layout are not covered. airlock writes envelopes in canonical JSON with each
/// signature's key id, so it requires exactly that on reading — the canonical form, and a
/// `keyid` that is the id of the key whose signature verified — and an envelope whose unsigned
/// bytes were altered is refused, not carried to the site as different bytes. (Found by
/// `scripts/fuzz.sh`: a changed character in `keyid` verified.)
pub fn open(bytes: &[u8], payload_type: &str, trusted: &[TrustedKey]) -> Result<Opened, DsseError> {
    let envelope: Envelope = serde_json::from_slice(bytes).map_err(|e| DsseError::Format(e.to_string()))?;
    let canonical = serde_json_canonicalizer::to_vec(&envelope).map_err(|e| DsseError::Format(e.to_string()))?;
    if canonical != bytes {
        return Err(DsseError::Format(
            "not in canonical JSON (RFC 8785) as airlock writes it: the envelope was altered".into(),
        ));
    }
    if envelope.payload_type != payload_type {
        return Err(DsseError::PayloadType { expected: payload_type.to_owned(), actual: envelope.payload_type });
    }
    let payload =
        STANDARD.decode(&envelope.payload).map_err(|e| DsseError::Format(format!("payload is not base64: {e}")))?;
    let signed = pae(payload_type, &payload);
    let signers: Vec<KeyId> = trusted
        .iter()
        .filter(|k| {
            let id = k.key_id().to_string();
            envelope.signatures.iter().any(|s| s.keyid == id && k.verify_blob(&signed, s.sig.as_bytes()).is_ok())
        })
        .map(|k| k.key_id().clone())
        .collect();
    if signers.is_empty() {
        return Err(DsseError::Untrusted);
    }
    Ok(Opened { payload, signers })
}

#[cfg(test)]
mod tests {
    use super::super::{SigningKey, TrustedKey, generate};
    use super::*;

    #[test]
    fn sealed_envelopes_open_with_the_key_and_only_for_their_type() {
        let dir = tempfile::tempdir().unwrap();
        let [a, b] = ["a", "b"].map(|n| generate(dir.path(), n, None).unwrap());
        let key = SigningKey::load(&a.private_path, None).unwrap();
        let sealed = seal("application/x-test", b"{\"x\":1}", &key);
        let trusted = [TrustedKey::load(&a.public_path).unwrap()];
        let opened = open(&sealed, "application/x-test", &trusted).unwrap();
        assert_eq!((opened.payload.as_slice(), opened.signers), (&b"{\"x\":1}"[..], vec![a.key_id.clone()]));
        assert!(matches!(open(&sealed, "application/other", &trusted), Err(DsseError::PayloadType { .. })));
        let other = [TrustedKey::load(&b.public_path).unwrap()];
        assert_eq!(open(&sealed, "application/x-test", &other).unwrap_err(), DsseError::Untrusted);
        assert_eq!(payload_unverified(&sealed).unwrap(), b"{\"x\":1}");
        assert!(matches!(open(b"not json", "application/x-test", &trusted), Err(DsseError::Format(_))));
        // The unsigned parts of the envelope are held to what airlock writes.
        let text = String::from_utf8(sealed.clone()).unwrap();
        let altered_id = text.replacen(&a.key_id.to_string()[..8], "00000000", 1);
        assert_eq!(open(altered_id.as_bytes(), "application/x-test", &trusted).unwrap_err(), DsseError::Untrusted);
        let both = cosign(&sealed, "application/x-test", &SigningKey::load(&b.private_path, None).unwrap()).unwrap();
        let keys = [TrustedKey::load(&a.public_path).unwrap(), TrustedKey::load(&b.public_path).unwrap()];
        assert_eq!(open(&both, "application/x-test", &keys).unwrap().signers.len(), 2, "co-signed by both");
        let again = cosign(&both, "application/x-test", &key).unwrap();
        assert_eq!(again, both, "signing twice changes nothing");
        let spaced = text.replacen(':', ": ", 1);
        assert!(matches!(open(spaced.as_bytes(), "application/x-test", &trusted), Err(DsseError::Format(_))));
    }
}
