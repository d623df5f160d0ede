//! An `OpenPGP` keyring a spec entry names (`keyring = "…"`, relative to the spec): the keys a
//! repository signs with, read with the `pgp` crate. apt's `InRelease`/`Release.gpg` and
//! rpm-md's `repomd.xml.asc` and package header signatures are checked against it.

use std::path::{Path, PathBuf};

use pgp::composed::{Deserializable, DetachedSignature, SignedPublicKey, SignedPublicSubKey};

use crate::failure::{Class, Classify};

/// Why a keyring cannot be read, or what was handed to it as signatures is none.
#[derive(Debug, thiserror::Error)]
pub enum KeyringError {
    #[error("{0}")]
    Read(std::io::Error),
    /// The file is not `OpenPGP` keys (the `pgp` crate's reason).
    #[error("{0}")]
    NotKeys(pgp::errors::Error),
    #[error("holds no OpenPGP public key")]
    NoKeys,
    /// What was to be a detached signature is not `OpenPGP` (the `pgp` crate's reason).
    #[error("{0}")]
    NotSignatures(pgp::errors::Error),
    #[error("holds no OpenPGP signature")]
    NoSignature,
}

impl Classify for KeyringError {
    fn class(&self) -> Class {
        match self {
            // The spec's keyring file: the host's to read, the operator's to get right.
            KeyringError::Read(_) | KeyringError::NotKeys(_) | KeyringError::NoKeys => Class::Runtime,
            // A signature a repository served that is not one.
            KeyringError::NotSignatures(_) | KeyringError::NoSignature => Class::Verification,
        }
    }
}

pub struct Keyring {
    pub path: PathBuf,
    keys: Vec<SignedPublicKey>,
}

impl Keyring {
    /// Every public key of the file (binary or armored); a file with none is refused.
    pub async fn load(path: &Path) -> Result<Self, KeyringError> {
        let bytes = tokio::fs::read(path).await.map_err(KeyringError::Read)?;
        let (keys, _) = SignedPublicKey::from_reader_many(bytes.as_slice()).map_err(KeyringError::NotKeys)?;
        let keys: Vec<SignedPublicKey> = keys.collect::<Result<_, _>>().map_err(KeyringError::NotKeys)?;
        if keys.is_empty() {
            return Err(KeyringError::NoKeys);
        }
        Ok(Self { path: path.to_owned(), keys })
    }

    /// Whether any key of the keyring, primary or subkey, made the signature: repositories
    /// often sign with a subkey. (Two closures: the two key types share no object-safe trait.)
    pub fn verifies(
        &self,
        primary: impl Fn(&SignedPublicKey) -> bool,
        sub: impl Fn(&SignedPublicSubKey) -> bool,
    ) -> bool {
        self.keys.iter().any(|k| primary(k) || k.public_subkeys.iter().any(&sub))
    }

    /// Whether one of the detached signatures in `signature` (armored or binary; archives sign
    /// with several keys at once) is a keyring key's over `data`. `Err`: not signatures at all.
    pub fn verifies_detached(&self, data: &[u8], signature: &[u8]) -> Result<bool, KeyringError> {
        let (sigs, _) = DetachedSignature::from_reader_many(signature).map_err(KeyringError::NotSignatures)?;
        let sigs: Vec<DetachedSignature> = sigs.filter_map(Result::ok).collect();
        if sigs.is_empty() {
            return Err(KeyringError::NoSignature);
        }
        let any = |verify: &dyn Fn(&DetachedSignature) -> bool| sigs.iter().any(verify);
        Ok(self.verifies(
            |p| any(&|sig: &DetachedSignature| sig.verify(p, data).is_ok()),
            |sk| any(&|sig: &DetachedSignature| sig.verify(sk, data).is_ok()),
        ))
    }
}
