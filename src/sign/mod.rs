//! Keys, cosign-compatible blob signatures, DSSE envelopes (`dsse`) and the signature policy a
//! bundle is verified under (`policy`). Nothing here knows the bundle format.
//!
//! Key files are the formats cosign reads: the private key as `ENCRYPTED SIGSTORE PRIVATE KEY`
//! (scrypt + `NaCl` secretbox, through the `sigstore` crate's `SigStoreKeyPair`) or, without a
//! passphrase, an unencrypted PKCS#8 PEM; the public key as SPKI PEM. A key id is the hex
//! sha256 of the SPKI DER.
//!
//! Signatures are cosign `sign-blob` format: base64 of an ASN.1 DER ECDSA P-256 signature over
//! SHA-256 of the message. Signing and verifying live in separate modules and use separate
//! implementations: `sigstore` 0.15 signs through aws-lc with a random nonce, which would make
//! every bundle differ, so signing uses `RustCrypto`'s `p256`, whose ECDSA is RFC 6979
//! deterministic; verification uses `sigstore`'s `CosignVerificationKey`.

pub mod dsse;
mod keys;
pub mod policy;
pub mod sigstore;
mod verify;

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use keys::{GeneratedKey, SigningKey, generate, refuse_existing};
pub use policy::{CoSignature, Policy};
pub use verify::TrustedKey;

/// The environment variable holding the private key passphrase (never a flag).
pub const PASSWORD_ENV: &str = "AIRLOCK_KEY_PASSWORD";
/// The largest signature file or member read: a base64 DER ECDSA P-256 signature is about
/// 100 bytes, so anything near this is not one.
pub const MAX_SIGNATURE_BYTES: u64 = 16 << 10;

/// Hex sha256 of a public key's SPKI DER.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct KeyId(String);

impl KeyId {
    pub fn of_spki_der(der: &[u8]) -> Self {
        Self(crate::digest::Sha256::of_bytes(der).to_string())
    }

    /// A key id as written in a file name: 64 lower-case hex digits.
    pub fn parse(s: &str) -> Option<Self> {
        (s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))).then(|| Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 16 hex digits, for human output (`--json` carries the whole id).
    pub fn short(&self) -> &str {
        self.0.get(..16).unwrap_or(&self.0)
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyId({})", self.0)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read key `{}`", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write key `{}`", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("refusing to overwrite existing key file `{}`", path.display())]
    Exists { path: PathBuf },
    #[error("`{}` is not a {expected}: {detail}", path.display())]
    Format { path: PathBuf, expected: &'static str, detail: String },
    #[error("`{}` is an encrypted private key; set {PASSWORD_ENV} to its passphrase", path.display())]
    PasswordMissing { path: PathBuf },
    #[error("cannot decrypt `{}`: wrong passphrase in {PASSWORD_ENV}, or a damaged key", path.display())]
    WrongPassword { path: PathBuf },
    #[error("key generation failed: {0}")]
    Generate(String),
}

impl crate::failure::Classify for KeyError {
    fn class(&self) -> crate::failure::Class {
        match self {
            KeyError::Read { .. }
            | KeyError::Write { .. }
            | KeyError::Exists { .. }
            | KeyError::Format { .. }
            | KeyError::PasswordMissing { .. }
            | KeyError::WrongPassword { .. }
            | KeyError::Generate(_) => crate::failure::Class::Runtime,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SignatureError {
    #[error("signature is not base64: {0}")]
    Encoding(String),
    #[error("signature does not verify with key {0}")]
    Mismatch(KeyId),
}

impl crate::failure::Classify for SignatureError {
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Verification
    }
}
