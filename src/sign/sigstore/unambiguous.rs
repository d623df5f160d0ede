//! What a Sigstore bundle must not leave to its reader's choice. Parsers disagree on these
//! (airlock and sigstore-python, issue 77): which of two equal keys counts, which of two issuer
//! extensions names the issuer, what a bundle without a `mediaType` is, which of several log
//! entries vouches for the signature, and whether a DSSE payload that is not an in-toto
//! Statement is one. airlock refuses each, naming it, before verifying anything, rather than
//! pick a side a victim's tooling may not pick.
//!
//! The duplicate-key walk is written here: `serde_json` keeps the last of two equal keys in a
//! `Value`, and no maintained crate offers a strict mode for arbitrary JSON.

use std::collections::HashSet;
use std::fmt;

use base64::Engine as _;
use serde::de::{Deserialize, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// The in-toto Statement types a DSSE payload may be.
const STATEMENT_TYPES: [&str; 2] = ["https://in-toto.io/Statement/v1", "https://in-toto.io/Statement/v0.1"];
/// Fulcio's OIDC issuer: the legacy raw string (`.1.1`) and the DER `UTF8String` (`.1.8`).
const ISSUER_V1: &str = "1.3.6.1.4.1.57264.1.1";
const ISSUER_V2: &str = "1.3.6.1.4.1.57264.1.8";

/// What makes a Sigstore bundle ambiguous: two verifiers could read it two ways.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Ambiguous {
    /// A key held twice (at any depth), or no JSON at all.
    #[error("ambiguous JSON: {0}")]
    Json(String),
    #[error("{0}")]
    NotJson(String),
    #[error("no `mediaType`: which bundle version it is would be guessed")]
    NoMediaType,
    #[error("mediaType `{0}` is not a Sigstore bundle's")]
    MediaType(String),
    #[error("{0} transparency log entries: which one vouches for the signature is ambiguous")]
    LogEntries(usize),
    #[error("its log entry has no inclusion proof, only a promise (SET): verifiers disagree on whether that is enough")]
    NoInclusionProof,
    /// The DSSE payload that cannot be read: where, and why.
    #[error("{at}: {detail}")]
    Payload { at: &'static str, detail: String },
    #[error("the DSSE payload's `_type` is `{0}`, not an in-toto Statement")]
    NotAStatement(String),
    #[error(
        "the certificate names two OIDC issuers (`{legacy}` in the legacy extension, `{current}` in the current one)"
    )]
    TwoIssuers { legacy: String, current: String },
}

impl crate::failure::Classify for Ambiguous {
    /// A signature document that does not hold one reading.
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Verification
    }
}

/// `Ok` when nothing in the bundle is ambiguous; else the ambiguity.
pub fn check(text: &str) -> Result<(), Ambiguous> {
    let mut de = serde_json::Deserializer::from_str(text);
    Unique::deserialize(&mut de).map_err(|e| Ambiguous::Json(e.to_string()))?;
    let v: Value = serde_json::from_str(text).map_err(|e| Ambiguous::NotJson(e.to_string()))?;
    match v.get("mediaType").and_then(Value::as_str) {
        None => return Err(Ambiguous::NoMediaType),
        Some(m) if !m.starts_with("application/vnd.dev.sigstore.bundle") => {
            return Err(Ambiguous::MediaType(m.to_owned()));
        }
        Some(_) => {}
    }
    let entries = v.pointer("/verificationMaterial/tlogEntries").and_then(Value::as_array);
    let count = entries.map_or(0, Vec::len);
    if count > 1 {
        return Err(Ambiguous::LogEntries(count));
    }
    // A published bundle's log entry carries its inclusion proof (sigstore-python refuses one
    // without: "Field required"); the Rust library takes the promise (SET) alone. Cosign's
    // legacy `.sig` annotations are checked apart (`check_legacy`): a SET is all they hold.
    if entries.and_then(|e| e.first()).is_some_and(|e| e.get("inclusionProof").is_none()) {
        return Err(Ambiguous::NoInclusionProof);
    }
    if let Some(env) = v.get("dsseEnvelope")
        && env.get("payloadType").and_then(Value::as_str) == Some("application/vnd.in-toto+json")
    {
        let payload = env.get("payload").and_then(Value::as_str).unwrap_or_default();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(payload)
            .map_err(|e| Ambiguous::Payload { at: "payload", detail: e.to_string() })?;
        let statement: Value = serde_json::from_slice(&bytes)
            .map_err(|e| Ambiguous::Payload { at: "the DSSE payload", detail: e.to_string() })?;
        let kind = statement.get("_type").and_then(Value::as_str).unwrap_or_default();
        if !STATEMENT_TYPES.contains(&kind) {
            return Err(Ambiguous::NotAStatement(kind.to_owned()));
        }
    }
    issuers(&v)
}

/// A bundle made here from cosign's legacy `.sig` annotations (v0.1, a SET and no inclusion
/// proof, by construction): every rule but the inclusion proof's.
pub fn check_legacy(text: &str) -> Result<(), Ambiguous> {
    let mut v: Value = serde_json::from_str(text).map_err(|e| Ambiguous::NotJson(e.to_string()))?;
    if let Some(entry) = v.pointer_mut("/verificationMaterial/tlogEntries/0").and_then(Value::as_object_mut) {
        entry.entry("inclusionProof").or_insert(Value::Null);
    }
    check(&v.to_string())
}

/// The leaf certificate's two issuer extensions, when both are there, must agree.
fn issuers(v: &Value) -> Result<(), Ambiguous> {
    let leaf = v
        .pointer("/verificationMaterial/certificate/rawBytes")
        .or_else(|| v.pointer("/verificationMaterial/x509CertificateChain/certificates/0/rawBytes"))
        .and_then(Value::as_str);
    let Some(leaf) = leaf else { return Ok(()) };
    let Ok(der) = base64::engine::general_purpose::STANDARD.decode(leaf) else { return Ok(()) };
    // A certificate that does not parse is the verifier's to refuse, with its own words.
    let Ok(cert) = <x509_cert::Certificate as x509_cert::der::Decode>::from_der(&der) else { return Ok(()) };
    let mut v1 = None;
    let mut v2 = None;
    for ext in cert.tbs_certificate.extensions.iter().flatten() {
        let oid = ext.extn_id.to_string();
        let value = ext.extn_value.as_bytes();
        if oid == ISSUER_V1 {
            v1 = Some(String::from_utf8_lossy(value).into_owned());
        } else if oid == ISSUER_V2 {
            let utf8 = <x509_cert::der::asn1::Utf8StringRef<'_> as x509_cert::der::Decode>::from_der(value);
            v2 = utf8.ok().map(|s| s.to_string());
        }
    }
    match (v1, v2) {
        (Some(a), Some(b)) if a != b => Err(Ambiguous::TwoIssuers {
            legacy: crate::escape::value(&a).into_owned(),
            current: crate::escape::value(&b).into_owned(),
        }),
        _ => Ok(()),
    }
}

/// Any JSON, refused when an object holds a key twice (at any depth).
struct Unique;

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UniqueVisitor)
    }
}

struct UniqueVisitor;

impl<'de> Visitor<'de> for UniqueVisitor {
    type Value = Unique;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JSON")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_str<E>(self, _: &str) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_unit<E>(self) -> Result<Unique, E> {
        Ok(Unique)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Unique, A::Error> {
        while seq.next_element::<Unique>()?.is_some() {}
        Ok(Unique)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Unique, A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(A::Error::custom(format!("the key `{}` twice in one object", crate::escape::value(&key))));
            }
            map.next_value::<Unique>()?;
        }
        Ok(Unique)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_at_any_depth_and_a_missing_media_type_are_refused() {
        let entry = r#"{"inclusionProof":{"logIndex":"1"}}"#;
        let ok = format!(
            r#"{{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{{"tlogEntries":[{entry}]}}}}"#
        );
        assert_eq!(check(&ok), Ok(()));
        let twice = ok.replacen(r#"{"inclusionProof""#, r#"{"logIndex":"1","logIndex":"2","inclusionProof""#, 1);
        assert!(check(&twice).unwrap_err().to_string().contains("`logIndex` twice"));
        assert!(check(r#"{"verificationMaterial":{}}"#).unwrap_err().to_string().contains("no `mediaType`"));
        let two = ok.replacen(entry, &format!("{entry},{entry}"), 1);
        assert!(check(&two).unwrap_err().to_string().contains("2 transparency log entries"));
        // The promise alone: refused, except in the bundle made from cosign's legacy annotations.
        let set_only = ok.replacen(entry, r#"{"inclusionPromise":{}}"#, 1);
        assert!(check(&set_only).unwrap_err().to_string().contains("no inclusion proof"));
        assert_eq!(check_legacy(&set_only), Ok(()));
    }
}
