//! TUF metadata (specification 1.0, §4): the signed envelope, the root and targets documents,
//! keys and their ids, canonical JSON, and counting a role's signatures.
//!
//! Written on serde here rather than with `tough`: tough's client loads a whole repository
//! (timestamp, snapshot, targets) through its transport, and its editor signs with ring's
//! randomized ECDSA from its own key sources. A site keeps only root and targets, offline,
//! signed with airlock's cosign-format keys. Canonical JSON is tough's own `olpc-cjson`, and the
//! tests check everything written here with python-tuf (`Metadata.verify_delegate`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::sign::{KeyError, KeyId, SigningKey, TrustedKey};

/// The TUF specification version written.
pub const SPEC_VERSION: &str = "1.0.31";
/// The key type and scheme of every key airlock writes (securesystemslib's names).
pub const KEYTYPE: &str = "ecdsa";
pub const SCHEME: &str = "ecdsa-sha2-nistp256";
/// The roles a root must name (TUF requires all four, though a site uses root and targets).
pub const TOP_LEVEL_ROLES: [&str; 4] = ["root", "snapshot", "targets", "timestamp"];

/// A public key as TUF metadata holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Key {
    pub keytype: String,
    pub scheme: String,
    pub keyval: KeyVal,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyVal {
    /// SPKI PEM.
    pub public: String,
}

impl Key {
    /// The metadata form of a P-256 key (its PEM as `TrustedKey` re-encodes it, uncompressed).
    pub fn of(key: &TrustedKey) -> Self {
        Self { keytype: KEYTYPE.to_owned(), scheme: SCHEME.to_owned(), keyval: KeyVal { public: key.spki_pem() } }
    }

    /// TUF's key id: the sha256 of the key object's canonical JSON (securesystemslib's
    /// `compute_default_keyid`). Not airlock's `KeyId` (the digest of the SPKI DER), which is
    /// what thresholds count: two encodings of one point have two TUF ids but one `KeyId`.
    pub fn tuf_id(&self) -> String {
        crate::digest::Sha256::of_bytes(&canonical(self).expect("a key has no floats")).to_string()
    }

    /// The key to verify with: P-256 ECDSA only.
    pub fn trusted(&self, origin: &str) -> Result<TrustedKey, KeyError> {
        let path = Path::new(origin);
        if !matches!(self.keytype.as_str(), KEYTYPE | SCHEME) || self.scheme != SCHEME {
            return Err(KeyError::Format {
                path: path.to_owned(),
                expected: "an ecdsa-sha2-nistp256 key",
                detail: format!("keytype `{}`, scheme `{}`", self.keytype, self.scheme),
            });
        }
        TrustedKey::from_pem(self.keyval.public.as_bytes(), path)
    }
}

/// The key ids of one role and how many of them must sign.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleKeys {
    pub keyids: Vec<String>,
    pub threshold: u64,
}

/// Root metadata (§4.3).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Root {
    #[serde(rename = "_type")]
    pub kind: String,
    pub spec_version: String,
    #[serde(default)]
    pub consistent_snapshot: bool,
    pub version: u64,
    pub expires: String,
    pub keys: BTreeMap<String, Key>,
    pub roles: BTreeMap<String, RoleKeys>,
}

/// Targets metadata (§4.5): no targets of its own; its delegations are airlock's signing roles.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Targets {
    #[serde(rename = "_type")]
    pub kind: String,
    pub spec_version: String,
    pub version: u64,
    pub expires: String,
    #[serde(default)]
    pub targets: BTreeMap<String, TargetFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegations: Option<Delegations>,
}

/// A target file's entry (§4.5): its length, its hashes by algorithm, and the `custom` fields
/// of whoever wrote it, kept as they are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetFile {
    pub length: u64,
    pub hashes: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<serde_json::Value>,
}

impl TargetFile {
    /// The entry of a file with these bytes (its sha256).
    pub fn of(bytes: &[u8]) -> Self {
        let sha256 = crate::digest::Sha256::of_bytes(bytes).to_string();
        Self { length: bytes.len() as u64, hashes: BTreeMap::from([("sha256".to_owned(), sha256)]), custom: None }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Delegations {
    pub keys: BTreeMap<String, Key>,
    pub roles: Vec<DelegatedRole>,
}

/// A signing role: who signs a bundle of this site.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DelegatedRole {
    pub name: String,
    pub keyids: Vec<String>,
    pub threshold: u64,
    #[serde(default)]
    pub terminating: bool,
    /// Target paths the role is trusted for: every bundle (`*`).
    #[serde(default)]
    pub paths: Vec<String>,
}

/// One signature in the envelope: the TUF key id and the hex DER ECDSA signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signature {
    pub keyid: String,
    pub sig: String,
}

/// A signed document: its signatures, the canonical bytes they sign, and what it says.
#[derive(Debug, Clone)]
pub struct Signed<T> {
    pub signatures: Vec<Signature>,
    pub canonical: Vec<u8>,
    pub signed: T,
}

/// OLPC canonical JSON (what TUF signs): keys sorted, no insignificant white space, no floats.
pub fn canonical(value: &impl Serialize) -> Result<Vec<u8>, EnvelopeError> {
    let mut bytes = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut bytes, olpc_cjson::CanonicalFormatter::new());
    value.serialize(&mut ser).map_err(|e| EnvelopeError::NotCanonical(e.to_string()))?;
    Ok(bytes)
}

/// A signed document (TUF metadata, a promotion) that cannot be read, before any signature is
/// looked at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    /// Not `{ "signatures": [...], "signed": {...} }`.
    #[error("{0}")]
    NotAnEnvelope(String),
    /// `signed` has no canonical form (a float, which canonical JSON does not write).
    #[error("not canonical JSON: {0}")]
    NotCanonical(String),
    /// `signed` is not the document it should be.
    #[error("{0}")]
    Signed(String),
}

impl crate::failure::Classify for EnvelopeError {
    /// A signed document that does not hold.
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Verification
    }
}

impl<T: Serialize + DeserializeOwned> Signed<T> {
    /// Read an envelope. The signatures are over the canonical form of `signed` exactly as
    /// received (fields airlock does not know included), not of what airlock parsed from it.
    pub fn parse(bytes: &[u8]) -> Result<Self, EnvelopeError> {
        #[derive(Deserialize)]
        struct Raw {
            signatures: Vec<Signature>,
            signed: serde_json::Value,
        }
        let raw: Raw = serde_json::from_slice(bytes).map_err(|e| EnvelopeError::NotAnEnvelope(e.to_string()))?;
        let canonical = canonical(&raw.signed)?;
        let signed = serde_json::from_value(raw.signed).map_err(|e| EnvelopeError::Signed(e.to_string()))?;
        Ok(Self { signatures: raw.signatures, canonical, signed })
    }

    /// A new, unsigned document.
    pub fn new(signed: T) -> Self {
        let canonical = canonical(&signed).expect("metadata airlock writes has no floats");
        Self { signatures: Vec::new(), canonical, signed }
    }

    /// Add (or replace) the signature of `key`, whose TUF key id is `keyid`.
    pub fn sign(&mut self, key: &SigningKey, keyid: String) {
        self.signatures.retain(|s| s.keyid != keyid);
        self.signatures.push(Signature { keyid, sig: hex::encode(key.sign_der(&self.canonical)) });
        self.signatures.sort_by(|a, b| a.keyid.cmp(&b.keyid));
    }

    /// The file's bytes: the envelope, indented, ending in a newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        #[derive(Serialize)]
        struct Out<'a, T> {
            signatures: &'a [Signature],
            signed: &'a T,
        }
        let mut bytes = serde_json::to_vec_pretty(&Out { signatures: &self.signatures, signed: &self.signed })
            .expect("metadata serialises");
        bytes.push(b'\n');
        bytes
    }

    /// The distinct keys (airlock key ids, so one key in two encodings is one) among `role`'s
    /// whose signature verifies. A signature by a key outside the role, or one that does not
    /// verify, does not count.
    pub fn signers(&self, keys: &BTreeMap<String, Key>, role: &RoleKeys, origin: &str) -> BTreeSet<KeyId> {
        let mut signers = BTreeSet::new();
        for s in &self.signatures {
            if !role.keyids.contains(&s.keyid) {
                continue;
            }
            let Some(key) = keys.get(&s.keyid).and_then(|k| k.trusted(origin).ok()) else { continue };
            let Ok(der) = hex::decode(&s.sig) else { continue };
            if key.verify_der(&self.canonical, &der).is_ok() {
                signers.insert(key.key_id().clone());
            }
        }
        signers
    }
}

/// The distinct keys (by airlock key id) a role names that `keys` holds and parse.
pub fn distinct_keys(
    keys: &BTreeMap<String, Key>,
    keyids: &[String],
    origin: &str,
) -> Result<Vec<TrustedKey>, KeyError> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for id in keyids {
        if let Some(key) = keys.get(id) {
            let key = key.trusted(&format!("{origin} key {id}"))?;
            if seen.insert(key.key_id().clone()) {
                out.push(key);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_sorts_keys_escapes_only_quote_and_backslash_and_refuses_floats() {
        let v = serde_json::json!({"b": 1, "a": "x\"y\\z\n", "c": [true, null]});
        assert_eq!(canonical(&v).unwrap(), b"{\"a\":\"x\\\"y\\\\z\n\",\"b\":1,\"c\":[true,null]}");
        assert!(canonical(&serde_json::json!({"f": 1.5})).is_err());
    }

    #[test]
    fn signatures_count_per_distinct_key_of_the_role_and_only_when_they_verify() {
        let dir = tempfile::tempdir().unwrap();
        let keygen = |n| crate::sign::generate(dir.path(), n, None).unwrap();
        let (a, b) = (keygen("a"), keygen("b"));
        let key = |g: &crate::sign::GeneratedKey| Key::of(&TrustedKey::load(&g.public_path).unwrap());
        let signing = |g: &crate::sign::GeneratedKey| SigningKey::load(&g.private_path, None).unwrap();
        let (ka, kb) = (key(&a), key(&b));
        let keys = BTreeMap::from([(ka.tuf_id(), ka.clone()), (kb.tuf_id(), kb.clone())]);
        let role = RoleKeys { keyids: vec![ka.tuf_id()], threshold: 1 };
        let mut doc = Signed::new(serde_json::json!({"_type": "x", "version": 1}));
        doc.sign(&signing(&a), ka.tuf_id());
        doc.sign(&signing(&b), kb.tuf_id());
        assert_eq!(doc.signers(&keys, &role, "t").len(), 1, "b is not in the role");
        let read: Signed<serde_json::Value> = Signed::parse(&doc.to_bytes()).unwrap();
        assert_eq!(read.signers(&keys, &role, "t").len(), 1);
        let tampered = String::from_utf8(doc.to_bytes()).unwrap().replace("\"version\": 1", "\"version\": 2");
        let read: Signed<serde_json::Value> = Signed::parse(tampered.as_bytes()).unwrap();
        assert!(read.signers(&keys, &role, "t").is_empty());
    }
}
