//! Upstream Sigstore signatures as a spec asks for them (`verify = { identity, issuer }`) and
//! as the lock and the bundle's manifest record what verified: the same record in both, so the
//! site re-checks exactly what the build host checked.

use serde::{Deserialize, Serialize};

use crate::digest::{Prefixed, Sha256};

/// A signer's identity as a policy requires it: the certificate's SAN exactly, or a regular
/// expression that must match all of it. Compiled once, where the policy is read (a spec, a
/// lock, a manifest, `verify-blob`'s flags), so a pattern that is not whole is refused there and
/// nowhere later.
#[derive(Debug, Clone)]
pub enum Identity {
    Exact(String),
    Pattern(IdentityPattern),
}

/// A whole regular expression (`source`) and the same anchored to the whole SAN.
#[derive(Debug, Clone)]
pub struct IdentityPattern {
    source: String,
    anchored: regex::Regex,
}

/// An `identity_regex` that is not a whole pattern: the pattern and the parser's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{pattern}` is not a whole pattern on its own (it must parse before it is anchored): {detail}")]
pub struct PatternError {
    pub pattern: String,
    pub detail: String,
}

impl crate::failure::Classify for PatternError {
    /// Given by a spec, a lock's author or `verify-blob`'s flags.
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Usage
    }
}

impl Identity {
    /// `pattern` anchored: it must match the whole SAN. It must be a whole pattern on its own
    /// first: one that is not (`org/x)|(.*`) would close the anchoring group and match anyone.
    pub fn pattern(pattern: &str) -> Result<Self, PatternError> {
        let bad = |e: regex::Error| PatternError { pattern: pattern.to_owned(), detail: e.to_string() };
        regex::Regex::new(pattern).map_err(bad)?;
        let anchored = regex::Regex::new(&format!("^(?:{pattern})$")).map_err(bad)?;
        Ok(Identity::Pattern(IdentityPattern { source: pattern.to_owned(), anchored }))
    }

    /// Whether the certificate's `san` is this identity.
    pub fn matches(&self, san: &str) -> bool {
        match self {
            Identity::Exact(id) => id == san,
            Identity::Pattern(p) => p.anchored.is_match(san),
        }
    }

    /// `` `SAN` `` or ``matching `PATTERN` ``.
    pub fn describe(&self) -> String {
        match self {
            Identity::Exact(s) => format!("`{s}`"),
            Identity::Pattern(p) => format!("matching `{}`", p.source),
        }
    }
}

impl PartialEq for Identity {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Identity::Exact(a), Identity::Exact(b)) => a == b,
            (Identity::Pattern(a), Identity::Pattern(b)) => a.source == b.source,
            _ => false,
        }
    }
}

impl Eq for Identity {}

/// Who must have signed an input upstream, keylessly: the certificate's identity (its SAN,
/// exactly, or `identity_regex` matching all of it) and the OIDC issuer that vouched for it.
/// Written as `{ identity | identity_regex, issuer }`; read only when exactly one identity is
/// given and a pattern is whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "SignerFields", into = "SignerFields")]
pub struct UpstreamSigner {
    pub identity: Identity,
    pub issuer: String,
}

/// `UpstreamSigner` as it is written.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SignerFields {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    identity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    identity_regex: Option<String>,
    issuer: String,
}

impl TryFrom<SignerFields> for UpstreamSigner {
    type Error = String;

    fn try_from(f: SignerFields) -> Result<Self, String> {
        let identity = match (f.identity, f.identity_regex) {
            (Some(id), None) => Identity::Exact(id),
            (None, Some(pattern)) => Identity::pattern(&pattern).map_err(|e| format!("`identity_regex` {e}"))?,
            (Some(_), Some(_)) => return Err("`verify` takes `identity` or `identity_regex`, not both".into()),
            (None, None) => return Err("`verify` needs `identity` (or `identity_regex`) and `issuer`".into()),
        };
        Ok(Self { identity, issuer: f.issuer })
    }
}

impl From<UpstreamSigner> for SignerFields {
    fn from(s: UpstreamSigner) -> Self {
        let (identity, identity_regex) = match s.identity {
            Identity::Exact(id) => (Some(id), None),
            Identity::Pattern(p) => (None, Some(p.source)),
        };
        Self { identity, identity_regex, issuer: s.issuer }
    }
}

impl std::fmt::Display for UpstreamSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.identity {
            Identity::Exact(id) => write!(f, "`{id}`")?,
            Identity::Pattern(p) => write!(f, "an identity matching `{}`", p.source)?,
        }
        write!(f, " from issuer `{}`", self.issuer)
    }
}

/// Where an upstream Sigstore bundle was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SignatureForm {
    /// Cosign's bundle format: an OCI referrer of the image whose one layer is the bundle.
    Referrer,
    /// Cosign's legacy `sha256-HEX.sig` tag: a layer (the simple-signing payload naming the
    /// image's digest) whose annotations carry the signature, certificate and Rekor bundle.
    CosignSig,
    /// A `[[file]]`'s `sigstore_bundle`.
    File,
    /// A wheel's PEP 740 provenance object, from its index's `provenance` URL: attestations
    /// (DSSE envelopes over in-toto statements naming the wheel) with their log entries.
    Pep740,
}

/// An upstream signature that verified: where its bundle is, the policy it verified under,
/// and what it proves. In the lock and in the bundle's manifest alike.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamSignature {
    pub form: SignatureForm,
    /// The Sigstore bundle's sha256 (a referrer's layer, a file's bundle); for `cosign-sig`,
    /// the signature manifest's.
    #[serde(with = "crate::digest::prefixed")]
    pub bundle: Sha256,
    /// `cosign-sig`: the signed layer (the simple-signing payload) of that manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Prefixed>,
    /// `file`, `pep740`: where the bundle or provenance was downloaded from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The spec's policy it verified under (and is re-checked under at the site).
    pub verify: UpstreamSigner,
    /// The certificate's identity and issuer.
    pub identity: String,
    pub issuer: String,
    /// When the transparency log (or a timestamp authority) saw it, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logged_at: Option<String>,
}

impl UpstreamSignature {
    /// "signed by IDENTITY (ISSUER), logged at TIME".
    pub fn describe(&self) -> String {
        let logged = self.logged_at.as_deref().map(|t| format!(", logged at {t}")).unwrap_or_default();
        format!("signed by {} ({}){logged}", self.identity, self.issuer)
    }

    /// The bundle members this signature is checked from, each with the sha256 it must have:
    /// a file's bundle under `sigstore/`, an image's among its carried blobs.
    pub fn members(&self) -> Vec<(crate::member_path::MemberPath, Sha256)> {
        let blob = |d: Sha256| {
            let path = crate::member_path::MemberPath::new(format!("images/blobs/sha256/{d}"));
            (path.expect("a digest makes a valid member path"), d)
        };
        match self.form {
            SignatureForm::File => vec![(bundle_member(self.bundle), self.bundle)],
            SignatureForm::Pep740 => vec![(provenance_member(self.bundle), self.bundle)],
            SignatureForm::Referrer => vec![blob(self.bundle)],
            SignatureForm::CosignSig => {
                std::iter::once(blob(self.bundle)).chain(self.payload.map(|p| blob(p.0))).collect()
            }
        }
    }
}

/// Where a wheel's PEP 740 provenance object is carried: `sigstore/HEX.provenance.json`.
pub fn provenance_member(digest: Sha256) -> crate::member_path::MemberPath {
    crate::member_path::MemberPath::new(format!("sigstore/{digest}.provenance.json"))
        .expect("a digest makes a valid member path")
}

/// Where a file's Sigstore bundle is carried: `sigstore/HEX.sigstore.json`, by its own digest.
pub fn bundle_member(digest: Sha256) -> crate::member_path::MemberPath {
    crate::member_path::MemberPath::new(format!("sigstore/{digest}.sigstore.json"))
        .expect("a digest makes a valid member path")
}
