//! Loading trusted public keys and verifying blob signatures with them.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use sigstore::crypto::verification_key::CosignVerificationKey;
use sigstore::crypto::{Signature, SigningScheme};

use super::{KeyError, KeyId, SignatureError};
use crate::digest::Sha256;

/// A public key the operator trusts (`--trust`).
#[derive(Clone)]
pub struct TrustedKey {
    key: CosignVerificationKey,
    key_id: KeyId,
    spki_der: Vec<u8>,
    pub path: PathBuf,
}

impl std::fmt::Debug for TrustedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustedKey").field("key_id", &self.key_id).field("path", &self.path).finish_non_exhaustive()
    }
}

impl TrustedKey {
    /// Load an SPKI PEM (`-----BEGIN PUBLIC KEY-----`) holding an ECDSA P-256 key.
    pub fn load(path: &Path) -> Result<Self, KeyError> {
        let text = std::fs::read(path).map_err(|source| KeyError::Read { path: path.to_owned(), source })?;
        Self::from_pem(&text, path)
    }

    /// The same from PEM text already read; `path` names where it came from in errors (for a
    /// key inside trust metadata: the file and the key id).
    pub fn from_pem(text: &[u8], path: &Path) -> Result<Self, KeyError> {
        let format_err =
            |detail: String| KeyError::Format { path: path.to_owned(), expected: "P-256 public key PEM", detail };
        let block = pem::parse(text).map_err(|e| format_err(e.to_string()))?;
        if block.tag() != "PUBLIC KEY" {
            return Err(format_err(format!("unexpected PEM label `{}`", block.tag())));
        }
        // The curve and the point are checked before the key is used: a P-384 key, or a point
        // that is not on P-256 (an invalid-curve attack), is refused here with what it is.
        let point = <p256::PublicKey as p256::pkcs8::DecodePublicKey>::from_public_key_der(block.contents())
            .map_err(|e| format_err(format!("not a valid ECDSA P-256 public key ({e})")))?;
        // A key's identity is the key, not its encoding: the same point given compressed
        // (`openssl ec -conv_form compressed`) must not count as a second signer toward a
        // threshold. Every key is re-encoded as SPKI DER around the uncompressed SEC1 point
        // (what keygen and cosign write) before its id is taken.
        let spki_der = p256::pkcs8::EncodePublicKey::to_public_key_der(&point)
            .map_err(|e| format_err(format!("cannot re-encode the key ({e})")))?
            .into_vec();
        let key = CosignVerificationKey::from_der(&spki_der, &SigningScheme::ECDSA_P256_SHA256_ASN1)
            .map_err(|e| format_err(e.to_string()))?;
        Ok(Self { key, key_id: KeyId::of_spki_der(&spki_der), spki_der, path: path.to_owned() })
    }

    /// The key as an SPKI PEM, as `load` reads it (for keeping a copy).
    pub fn spki_pem(&self) -> String {
        let config = pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF);
        pem::encode_config(&pem::Pem::new("PUBLIC KEY", self.spki_der.clone()), config)
    }

    pub fn key_id(&self) -> &KeyId {
        &self.key_id
    }

    /// Check a raw ASN.1 DER ECDSA signature over SHA-256 of `msg` (TUF metadata's `sig`, hex-decoded).
    pub fn verify_der(&self, msg: &[u8], der: &[u8]) -> Result<(), SignatureError> {
        self.key.verify_signature(Signature::Raw(der), msg).map_err(|_| SignatureError::Mismatch(self.key_id.clone()))
    }

    /// Check a cosign `sign-blob` signature (base64 DER, surrounding whitespace allowed).
    pub fn verify_blob(&self, msg: &[u8], signature_b64: &[u8]) -> Result<(), SignatureError> {
        self.verify_blob_digest(&Sha256::of_bytes(msg), signature_b64)
    }

    /// The same check over the message whose SHA-256 is `digest`, for a message that is not
    /// held in memory (a manifest spooled to a file while it was hashed). The ECDSA check over
    /// a digest is aws-lc's, the backend sigstore's own `verify_signature` runs on.
    pub fn verify_blob_digest(&self, digest: &Sha256, signature_b64: &[u8]) -> Result<(), SignatureError> {
        use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1, UnparsedPublicKey};
        let trimmed = signature_b64.trim_ascii();
        let der = STANDARD.decode(trimmed).map_err(|e| SignatureError::Encoding(e.to_string()))?;
        let mismatch = |_| SignatureError::Mismatch(self.key_id.clone());
        let digest = aws_lc_rs::digest::Digest::import_less_safe(digest.as_bytes(), &aws_lc_rs::digest::SHA256)
            .map_err(mismatch)?;
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &self.spki_der).verify_digest(&digest, &der).map_err(mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{SigningKey, generate};
    use super::*;

    #[test]
    fn public_keys_of_another_curve_or_off_the_curve_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let a = generate(dir.path(), "a", None).unwrap();
        let pem_text = std::fs::read_to_string(&a.public_path).unwrap();
        let mut der = pem::parse(&pem_text).unwrap().contents().to_vec();
        // The SPKI ends with the uncompressed point 04 || X || Y: move Y off the curve.
        let last = der.len() - 1;
        der[last] ^= 0x01;
        let off = dir.path().join("off.pub");
        std::fs::write(&off, pem::encode(&pem::Pem::new("PUBLIC KEY", der))).unwrap();
        let err = TrustedKey::load(&off).unwrap_err().to_string();
        assert!(err.contains("not a valid ECDSA P-256 public key"), "{err}");
        // A P-384 key (secp384r1 SPKI, from openssl).
        let p384 = "-----BEGIN PUBLIC KEY-----\nMHYwEAYHKoZIzj0CAQYFK4EEACIDYgAE5cIHALYh/JMK/KqdhJHR19Hj3/8rysTH\ntFOcZ3t7Mr/Ps/v1rhRM8a2ADYL8eEenFuWQA/JreK8kCCF16d8BHNp8wOPY5gZt\nK9pjaKeBo+g94ZnkAW41JWbBq0KeMVb8\n-----END PUBLIC KEY-----\n";
        let p384_path = dir.path().join("p384.pub");
        std::fs::write(&p384_path, p384).unwrap();
        let err = TrustedKey::load(&p384_path).unwrap_err().to_string();
        assert!(err.contains("not a valid ECDSA P-256 public key"), "{err}");
    }

    #[test]
    fn sign_verify_round_trip_is_deterministic_and_key_bound() {
        let dir = tempfile::tempdir().unwrap();
        let a = generate(dir.path(), "a", None).unwrap();
        let b = generate(dir.path(), "b", Some(b"pw")).unwrap();
        let signer = SigningKey::load(&a.private_path, None).unwrap();
        assert_eq!(signer.key_id(), &a.key_id);
        let sig = signer.sign_blob(b"manifest");
        assert_eq!(sig, signer.sign_blob(b"manifest"), "RFC 6979 signatures are deterministic");
        assert_eq!(sig, signer.sign_blob_digest(&Sha256::of_bytes(b"manifest")), "over the digest, the same bytes");

        let trusted_a = TrustedKey::load(&a.public_path).unwrap();
        let trusted_b = TrustedKey::load(&b.public_path).unwrap();
        assert_eq!(trusted_a.key_id(), &a.key_id);
        trusted_a.verify_blob(b"manifest", sig.as_bytes()).unwrap();
        assert!(trusted_a.verify_blob(b"manifest!", sig.as_bytes()).is_err());
        assert!(trusted_b.verify_blob(b"manifest", sig.as_bytes()).is_err());
        assert!(matches!(trusted_a.verify_blob(b"manifest", b"%%%"), Err(SignatureError::Encoding(_))));
        // aws-lc over the digest agrees with sigstore's own check over the message.
        let der = STANDARD.decode(&sig).unwrap();
        trusted_a.verify_der(b"manifest", &der).unwrap();
        assert!(trusted_a.verify_blob_digest(&Sha256::of_bytes(b"manifest!"), sig.as_bytes()).is_err());
    }

    #[test]
    fn encrypted_keys_need_the_right_passphrase() {
        let dir = tempfile::tempdir().unwrap();
        let k = generate(dir.path(), "k", Some(b"right")).unwrap();
        let pem = std::fs::read_to_string(&k.private_path).unwrap();
        assert!(pem.starts_with("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----"));
        assert!(matches!(SigningKey::load(&k.private_path, None), Err(KeyError::PasswordMissing { .. })));
        assert!(matches!(SigningKey::load(&k.private_path, Some(b"wrong")), Err(KeyError::WrongPassword { .. })));
        assert_eq!(SigningKey::load(&k.private_path, Some(b"right")).unwrap().key_id(), &k.key_id);
        assert!(matches!(generate(dir.path(), "k", None), Err(KeyError::Exists { .. })));
    }
}
