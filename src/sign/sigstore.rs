//! Sigstore bundles (the protobuf-specs JSON format, v0.1, v0.2 and v0.3 under both media
//! types; message signatures and DSSE envelopes) verified offline against a trusted root.
//!
//! The checks are sigstore-rust's verifier (`sigstore-verify`), built without TUF or an HTTP
//! client: the Fulcio chain at the signing time, the SCTs against the root's CT logs, the Rekor
//! entry's body against the bundle, its inclusion proof and signed checkpoint (Rekor v1 and
//! v2), the SET where the bundle carries one, RFC 3161 timestamps against the root's TSAs, and
//! every trusted key's validity window (end inclusive). What it leaves to its caller is written
//! here: which root (the public-good one airlock ships, pinned by its sha256, or a site's), the
//! identity policy's regular expression, and what a failure means (exit 3).

mod unambiguous;
pub mod upstream;

pub use unambiguous::Ambiguous;

use std::io::Read;
use std::path::{Path, PathBuf};

use sigstore_verify::trust_root::TrustedRoot;
use sigstore_verify::types::{Artifact, ArtifactDigest, Bundle, DerPublicKey, Sha256Hash};
use sigstore_verify::{PublicKeyVerificationPolicy, VerificationPolicy, VerificationResult, Verifier};

use crate::digest::Sha256;
use crate::failure::{Class, Classify};

/// Sigstore's public-good instance's `trusted_root.json` (its TUF repository's target), as
/// `sigstore-trust-root` 0.15.1 carries it (released 2026-10-23), taken into airlock on
/// 2026-12-05. A site with a private instance names its own (`--trusted-root`, or its trust
/// root's `sigstore/trusted_root.json` target); nothing is ever fetched.
const PUBLIC_GOOD: &[u8] = include_bytes!("sigstore/public-good.trusted_root.json");

/// The sha256 of [`PUBLIC_GOOD`]: a changed file is a refusal, not a new root.
pub const PUBLIC_GOOD_SHA256: &str = "6494e21ea73fa7ee769f85f57d5a3e6a08725eae1e38c755fc3517c9e6bc0b66";

/// The largest bundle or trusted root read (the public-good root is 8 KiB; a bundle a few).
pub const MAX_DOCUMENT_BYTES: u64 = 4 << 20;

#[derive(Debug, thiserror::Error)]
pub enum SigstoreError {
    #[error("`{}`: {detail}", path.display())]
    Read { path: PathBuf, detail: String },
    /// A document refused unread: not a regular file, or larger than any Sigstore document is.
    #[error("`{}`: {detail}", path.display())]
    Refused { path: PathBuf, detail: String },
    #[error("trusted root {from}: {detail}")]
    Root { from: String, detail: String },
    #[error("the shipped public-good trusted root has sha256 {actual}, not the pinned {PUBLIC_GOOD_SHA256}")]
    RootPin { actual: Sha256 },
    #[error("Sigstore bundle {from}: not a bundle this verifier reads: {detail}")]
    Bundle { from: String, detail: String },
    /// What parsers could read two ways, refused by name first (shown, not chained).
    #[error("Sigstore bundle {from}: not a bundle this verifier reads: {detail}")]
    Ambiguous { from: String, detail: unambiguous::Ambiguous },
    #[error("`{}`: not a PEM public key: {detail}", path.display())]
    Key { path: PathBuf, detail: String },
    #[error("Sigstore bundle {from} does not verify{against}: {detail}")]
    Failed { from: String, against: String, detail: String },
}

impl SigstoreError {
    /// This error as one of the signatures a refusal lists, whose head already names the policy
    /// and the root: a failed verification without them.
    pub fn as_found(&self) -> String {
        match self {
            SigstoreError::Failed { from, detail, .. } => format!("Sigstore bundle {from} does not verify: {detail}"),
            e => e.to_string(),
        }
    }
}

impl Classify for SigstoreError {
    fn class(&self) -> Class {
        match self {
            SigstoreError::Read { .. } => Class::Runtime,
            SigstoreError::Key { .. } => Class::Usage,
            SigstoreError::Refused { .. }
            | SigstoreError::Root { .. }
            | SigstoreError::RootPin { .. }
            | SigstoreError::Bundle { .. }
            | SigstoreError::Ambiguous { .. }
            | SigstoreError::Failed { .. } => Class::Verification,
        }
    }
}

/// Which trusted root verifies: the public-good one airlock ships, or one given as bytes (a
/// file named on the command line, a site trust root's target).
#[derive(Clone)]
pub enum Root {
    PublicGood,
    Given { from: String, json: Vec<u8> },
}

impl std::fmt::Debug for Root {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl Root {
    /// A trusted root file (`--trusted-root`).
    pub fn file(path: &Path) -> Result<Self, SigstoreError> {
        Ok(Root::Given { from: format!("`{}`", path.display()), json: read_bounded(path)? })
    }

    /// A trusted root file (`--trusted-root`), checked to be one before anything relies on it.
    pub fn checked_file(path: &Path) -> Result<Self, SigstoreError> {
        let root = Self::file(path)?;
        root.check()?;
        Ok(root)
    }

    /// Whether it is a trusted root this airlock reads (and, shipped, the pinned one).
    pub fn check(&self) -> Result<(), SigstoreError> {
        let trusted = self.load()?;
        Verifier::new(&trusted)
            .map(drop)
            .map_err(|e| SigstoreError::Root { from: self.describe(), detail: e.to_string() })
    }

    pub fn describe(&self) -> String {
        match self {
            Root::PublicGood => "the public-good instance's (shipped)".to_owned(),
            Root::Given { from, .. } => from.clone(),
        }
    }

    fn load(&self) -> Result<TrustedRoot, SigstoreError> {
        let (from, json) = match self {
            Root::PublicGood => {
                let actual = Sha256::of_bytes(PUBLIC_GOOD);
                if actual.to_string() != PUBLIC_GOOD_SHA256 {
                    return Err(SigstoreError::RootPin { actual });
                }
                (self.describe(), PUBLIC_GOOD)
            }
            Root::Given { from, json } => (from.clone(), json.as_slice()),
        };
        let text = std::str::from_utf8(json)
            .map_err(|e| SigstoreError::Root { from: from.clone(), detail: format!("not UTF-8: {e}") })?;
        TrustedRoot::from_json(text).map_err(|e| SigstoreError::Root { from, detail: e.to_string() })
    }
}

/// Whose signature is accepted: a keyless signer's identity (the certificate's SAN, exactly or
/// by a regular expression matching all of it) and OIDC issuer, or a key.
pub enum Signer {
    Keyless { identity: Identity, issuer: String },
    Key { path: PathBuf, pem: String },
}

pub use crate::spec::upstream::Identity;

impl Signer {
    /// A key from its PEM file (`--key`).
    pub fn key(path: &Path) -> Result<Self, SigstoreError> {
        let bytes = read_bounded(path)?;
        let pem = String::from_utf8(bytes)
            .map_err(|e| SigstoreError::Key { path: path.to_owned(), detail: e.to_string() })?;
        Ok(Signer::Key { path: path.to_owned(), pem })
    }

    fn describe(&self) -> String {
        match self {
            Signer::Keyless { identity, issuer } => format!(" as {} from issuer `{issuer}`", identity.describe()),
            Signer::Key { path, .. } => format!(" with the key `{}`", path.display()),
        }
    }
}

/// What was signed: the bytes of a file (read once, in constant memory), or their sha256.
pub enum Subject<'a> {
    Reader(&'a mut dyn Read),
    Digest(Sha256),
}

/// What a verified bundle proves.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Verified {
    /// The keyless signer's identity (the certificate's SAN) and OIDC issuer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// When the transparency log or a timestamp authority saw it (RFC 3339), the earliest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logged_at: Option<String>,
}

/// Verify the bundle `bundle_json` (named `from` in messages) over `subject`, signed as
/// `signer` allows, under `root`. Nothing is fetched.
pub fn verify(
    from: &str,
    bundle_json: &[u8],
    subject: Subject<'_>,
    signer: &Signer,
    root: &Root,
) -> Result<Verified, SigstoreError> {
    verify_checked(from, bundle_json, subject, signer, root, unambiguous::check)
}

/// As `verify`, for the bundle made here from cosign's legacy `.sig` annotations (a SET, no
/// inclusion proof: all that form holds).
fn verify_legacy(
    from: &str,
    bundle_json: &[u8],
    subject: Subject<'_>,
    signer: &Signer,
    root: &Root,
) -> Result<Verified, SigstoreError> {
    verify_checked(from, bundle_json, subject, signer, root, unambiguous::check_legacy)
}

fn verify_checked(
    from: &str,
    bundle_json: &[u8],
    subject: Subject<'_>,
    signer: &Signer,
    root: &Root,
    unambiguous: fn(&str) -> Result<(), unambiguous::Ambiguous>,
) -> Result<Verified, SigstoreError> {
    let bundle_err = |detail: String| SigstoreError::Bundle { from: from.to_owned(), detail };
    let text = std::str::from_utf8(bundle_json).map_err(|e| bundle_err(format!("not UTF-8: {e}")))?;
    unambiguous(text).map_err(|detail| SigstoreError::Ambiguous { from: from.to_owned(), detail })?;
    let bundle = Bundle::from_json(text).map_err(|e| bundle_err(e.to_string()))?;
    let trusted = root.load()?;
    let against = format!("{} under {}", signer.describe(), root.describe());
    let failed = |detail: String| SigstoreError::Failed { from: from.to_owned(), against: against.clone(), detail };
    let verifier =
        Verifier::new(&trusted).map_err(|e| SigstoreError::Root { from: root.describe(), detail: e.to_string() })?;
    let result = match signer {
        Signer::Keyless { identity, issuer } => {
            let mut policy = VerificationPolicy::any_identity().require_issuer(issuer.as_str());
            if let Identity::Exact(id) = identity {
                policy = policy.require_identity(id.as_str());
            }
            let result = run(&verifier, subject, &bundle, &policy).map_err(failed)?;
            // The regular expression the library leaves to its caller: over the SAN it verified.
            if let Identity::Pattern(_) = identity {
                let san = result.identity().map(|s| s.as_str().to_owned()).unwrap_or_default();
                if !identity.matches(&san) {
                    return Err(failed(format!("the certificate's identity `{san}` does not match")));
                }
            }
            result
        }
        Signer::Key { path, pem } => {
            let key = DerPublicKey::from_pem(pem)
                .map_err(|e| SigstoreError::Key { path: path.clone(), detail: e.to_string() })?;
            run(&verifier, subject, &bundle, &PublicKeyVerificationPolicy::new(key)).map_err(failed)?
        }
    };
    let logged_at = result
        .integrated_time()
        .into_iter()
        .chain(result.verified_timestamps().iter().copied())
        .min()
        .map(|t| t.to_string());
    Ok(Verified {
        identity: result.identity().map(|s| s.as_str().to_owned()),
        issuer: result.issuer().map(str::to_owned),
        logged_at,
    })
}

fn run(
    verifier: &Verifier,
    subject: Subject<'_>,
    bundle: &Bundle,
    policy: &(impl sigstore_verify::Policy + ?Sized),
) -> Result<VerificationResult, String> {
    match subject {
        Subject::Reader(r) => verifier.verify_reader(r, bundle, policy),
        Subject::Digest(d) => {
            let digest = ArtifactDigest::sha256(Sha256Hash::new(*d.as_bytes()));
            verifier.verify(Artifact::from_digest(digest), bundle, policy)
        }
    }
    .map_err(|e| e.to_string())
}

/// A bundle, a key or a trusted root: small documents, refused past [`MAX_DOCUMENT_BYTES`].
pub fn read_bounded(path: &Path) -> Result<Vec<u8>, SigstoreError> {
    use crate::regular::{Refused, read as read_regular};
    let err = |detail: String| SigstoreError::Read { path: path.to_owned(), detail };
    // What is there but cannot be a Sigstore document is a verification failure (exit 3), as a
    // document that does not parse is; a file that cannot be read at all is not.
    let refused = |detail: String| SigstoreError::Refused { path: path.to_owned(), detail };
    match read_regular(path, MAX_DOCUMENT_BYTES) {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err(err("no such file".into())),
        Err(Refused::NotRegular) => {
            Err(refused("not a regular file (a FIFO, a device or a directory): refused, not read".into()))
        }
        Err(Refused::TooLarge) => Err(refused(format!("larger than {MAX_DOCUMENT_BYTES} bytes: refused"))),
        Err(Refused::Io(e)) => Err(err(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_shipped_root_is_the_pinned_one_and_reads() {
        super::Root::PublicGood.load().unwrap();
    }

    #[test]
    fn an_identity_pattern_must_match_the_whole_san() {
        let identity = super::Identity::pattern("https://github.com/org/.*").unwrap();
        assert!(identity.matches("https://github.com/org/repo/.github/workflows/release.yml@refs/tags/v1"));
        assert!(!identity.matches("evil https://github.com/org/x"));
        // Not a whole pattern: it would close the anchoring group and match anyone.
        let open = super::Identity::pattern("https://github.com/org/x)|(.*").unwrap_err();
        assert!(open.to_string().contains("not a whole pattern"), "{open}");
    }
}
