//! Generating and loading private keys; signing.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use p256::ecdsa::signature::Signer as _;
use p256::pkcs8::DecodePrivateKey as _;
use sigstore::crypto::SigningScheme;
use sigstore::crypto::signing_key::{
    COSIGN_PRIVATE_KEY_PEM_LABEL, PRIVATE_KEY_PEM_LABEL, SIGSTORE_PRIVATE_KEY_PEM_LABEL, SigStoreKeyPair,
};

use super::{KeyError, KeyId};

/// A P-256 private key ready to sign, with the id of its public key.
#[derive(Clone)]
pub struct SigningKey {
    key: p256::ecdsa::SigningKey,
    key_id: KeyId,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey").field("key_id", &self.key_id).finish_non_exhaustive()
    }
}

/// What `generate` wrote.
#[derive(Debug)]
pub struct GeneratedKey {
    pub private_path: PathBuf,
    pub public_path: PathBuf,
    pub key_id: KeyId,
    pub encrypted: bool,
}

/// Generate an ECDSA P-256 key pair as `DIR/NAME.key` and `DIR/NAME.pub`. With a passphrase the
/// private key is cosign-encrypted; without one it is unencrypted PKCS#8 (the caller warns).
/// Existing files are never overwritten.
pub fn generate(out_dir: &Path, name: &str, password: Option<&[u8]>) -> Result<GeneratedKey, KeyError> {
    let generate_err = |e: sigstore::errors::SigstoreError| KeyError::Generate(e.to_string());
    let signer = SigningScheme::ECDSA_P256_SHA256_ASN1.create_signer().map_err(generate_err)?;
    let pair = signer.to_sigstore_keypair().map_err(generate_err)?;
    let private_pem = match password {
        Some(pw) => pair.private_key_to_encrypted_pem(pw).map_err(generate_err)?,
        None => pair.private_key_to_pem().map_err(generate_err)?,
    };
    let public_pem = pair.public_key_to_pem().map_err(generate_err)?;
    let key_id = KeyId::of_spki_der(&pair.public_key_to_der().map_err(generate_err)?);

    std::fs::create_dir_all(out_dir).map_err(|source| KeyError::Write { path: out_dir.to_owned(), source })?;
    let (private_path, public_path) = refuse_existing(out_dir, name)?;
    write_new(&private_path, private_pem.as_bytes(), 0o600)?;
    write_new(&public_path, public_pem.as_bytes(), 0o644)?;
    Ok(GeneratedKey { private_path, public_path, key_id, encrypted: password.is_some() })
}

/// `DIR/NAME.key` and `DIR/NAME.pub`, or the error for the first that already exists: a key is
/// never overwritten (callers check first, before saying anything else about the key).
pub fn refuse_existing(out_dir: &Path, name: &str) -> Result<(PathBuf, PathBuf), KeyError> {
    let private_path = out_dir.join(format!("{name}.key"));
    let public_path = out_dir.join(format!("{name}.pub"));
    for path in [&private_path, &public_path] {
        if path.exists() {
            return Err(KeyError::Exists { path: path.clone() });
        }
    }
    Ok((private_path, public_path))
}

fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), KeyError> {
    let wrap = |source| KeyError::Write { path: path.to_owned(), source };
    let mut f = OpenOptions::new().write(true).create_new(true).mode(mode).open(path).map_err(wrap)?;
    f.write_all(bytes).map_err(wrap)?;
    f.sync_all().map_err(wrap)
}

/// A private key file that group or others can read is a key others may have copied: say so
/// (ssh refuses such keys; a build host migrating keys would rather be told than stopped).
fn warn_if_shared(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(
            "private key `{}` is readable by others (mode {:o}): `chmod 600 {}`",
            path.display(),
            meta.permissions().mode() & 0o777,
            path.display()
        );
    }
}

impl SigningKey {
    /// Load a private key file; `password` is needed for (and only for) encrypted keys.
    pub fn load(path: &Path, password: Option<&[u8]>) -> Result<Self, KeyError> {
        let text = std::fs::read(path).map_err(|source| KeyError::Read { path: path.to_owned(), source })?;
        let format_err =
            |detail: String| KeyError::Format { path: path.to_owned(), expected: "private key PEM", detail };
        // A public key where the private one belongs: said first, with no advice on the
        // permissions of a file that is meant to be public.
        if pem::parse(&text).is_ok_and(|b| b.tag() == "PUBLIC KEY") {
            return Err(format_err(
                "it is a public key (`-----BEGIN PUBLIC KEY-----`): sign with its private half (`NAME.key`)".into(),
            ));
        }
        warn_if_shared(path);
        let block = pem::parse(&text).map_err(|e| format_err(e.to_string()))?;
        let pair = match block.tag() {
            SIGSTORE_PRIVATE_KEY_PEM_LABEL | COSIGN_PRIVATE_KEY_PEM_LABEL => {
                let pw = password.ok_or_else(|| KeyError::PasswordMissing { path: path.to_owned() })?;
                SigStoreKeyPair::from_encrypted_pem(&text, pw)
                    .map_err(|_| KeyError::WrongPassword { path: path.to_owned() })?
            }
            PRIVATE_KEY_PEM_LABEL => SigStoreKeyPair::from_pem(&text).map_err(|e| format_err(e.to_string()))?,
            other => return Err(format_err(format!("unexpected PEM label `{other}`"))),
        };
        let pkcs8 = pair.private_key_to_der().map_err(|e| format_err(e.to_string()))?;
        let key = p256::ecdsa::SigningKey::from_pkcs8_der(&pkcs8)
            .map_err(|e| format_err(format!("not an ECDSA P-256 key ({e})")))?;
        let spki = pair.public_key_to_der().map_err(|e| format_err(e.to_string()))?;
        Ok(Self { key, key_id: KeyId::of_spki_der(&spki) })
    }

    pub fn key_id(&self) -> &KeyId {
        &self.key_id
    }

    /// A cosign `sign-blob` signature: base64 of the DER ECDSA signature over SHA-256(msg),
    /// deterministic (RFC 6979).
    pub fn sign_blob(&self, msg: &[u8]) -> String {
        STANDARD.encode(self.sign_der(msg))
    }

    /// The same signature for the message whose SHA-256 is `digest` (a manifest hashed as it
    /// was written, never held whole): RFC 6979 over the same digest gives the same bytes.
    pub fn sign_blob_digest(&self, digest: &crate::digest::Sha256) -> String {
        use p256::ecdsa::signature::hazmat::PrehashSigner as _;
        let sig: p256::ecdsa::Signature =
            self.key.sign_prehash(digest.as_bytes()).expect("a SHA-256 digest is a valid P-256 prehash");
        STANDARD.encode(sig.to_der().as_bytes())
    }

    /// The DER ECDSA signature over SHA-256(msg) itself (TUF metadata carries it hex-encoded).
    pub fn sign_der(&self, msg: &[u8]) -> Vec<u8> {
        let sig: p256::ecdsa::Signature = self.key.sign(msg);
        sig.to_der().as_bytes().to_vec()
    }
}
