//! Why a bundle, or one of its members, was rejected: the reader's verdicts, which the parts
//! reader and every caller name problems with (apart from the reader, so that `parts` needs
//! nothing of the reader to say what is wrong with a part).

use std::fmt;

use serde::Serialize;

use super::manifest::{MANIFEST, SIGNATURE};
use crate::digest::Sha256;
use crate::sign::KeyId;

/// Why a bundle, or one of its members, was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    NotABundle(String),
    ManifestNotFirst {
        found: String,
    },
    SignatureNotSecond {
        found: String,
    },
    TooLargeBeforeTrust {
        limit: u64,
    },
    /// No trusted key signed the manifest. `claimed` is the build key the manifest names (a
    /// claim, read without trusting it).
    Untrusted {
        tried: Vec<KeyId>,
        claimed: Option<KeyId>,
        detail: String,
    },
    Threshold {
        /// The rule not met: `trusted` for `--trust`, else a signing role of the site.
        role: String,
        need: usize,
        signers: Vec<KeyId>,
        cosignatures: usize,
    },
    ManifestInvalid(String),
    /// A signed manifest that breaks a rule (`Manifest::check`) or is not signed as its
    /// policy needs.
    ManifestRefused(super::manifest::ManifestError),
    UnsafePath(&'static str),
    EntryType(&'static str),
    Duplicate,
    Unlisted,
    /// A split bundle's parts are not the ones its parts file lists (`parts`).
    Parts(String),
    /// Listed as held by the base bundle, yet carried.
    FromBase,
    Missing,
    SizeMismatch {
        expected: u64,
        actual: u64,
    },
    DigestMismatch {
        expected: Sha256,
        actual: Sha256,
    },
    Truncated(String),
    /// A tar extension record (or sparse member) refused before it was read (`tar_guard`).
    Extension(crate::bundle::tar_guard::TarRefusal),
    PastDeclaredSize {
        limit: u64,
    },
    TrailingData,
    Provenance(String),
    /// The manifest is trusted through co-signatures, but the provenance is signed by the
    /// build key, which is not trusted, so it cannot be checked.
    ProvenanceBuildKeyUntrusted {
        build_key: KeyId,
        cosigners: Vec<KeyId>,
    },
    /// An artifact's upstream Sigstore signature, recorded when it was locked, does not verify
    /// here (under the site's trusted root) over the bytes carried.
    UpstreamSignature {
        artifact: String,
        detail: String,
    },
}

impl Rejection {
    /// Whether this is what damaged bytes look like (as opposed to a policy or trust refusal).
    pub fn is_damage(&self) -> bool {
        matches!(
            self,
            Self::NotABundle(_)
                | Self::Truncated(_)
                | Self::SizeMismatch { .. }
                | Self::DigestMismatch { .. }
                | Self::Missing
                | Self::PastDeclaredSize { .. }
                | Self::TrailingData
                | Self::Extension(_)
        )
    }
}

/// No trusted key signed the manifest: which were tried, and what the manifest claims.
fn untrusted(f: &mut fmt::Formatter<'_>, tried: &[KeyId], claimed: Option<&KeyId>, detail: &str) -> fmt::Result {
    write!(f, "untrusted or bad signature: it does not verify with any trusted key ({})", short_ids(tried))?;
    match claimed {
        Some(k) if !tried.contains(k) => write!(
            f,
            "; the manifest says key `{}` signed it (a claim, unverified): add `--trust` with that key's .pub if \
             you trust its holder",
            k.short()
        )?,
        Some(k) => {
            write!(f, "; the manifest names trusted key `{}`: the manifest or its signature was altered", k.short())?;
        }
        None => {}
    }
    f.write_str(detail)
}

/// Key ids as human output shows them: short, in backticks.
fn short_ids(ids: &[KeyId]) -> String {
    ids.iter().map(|k| format!("`{}`", k.short())).collect::<Vec<_>>().join(", ")
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotABundle(d) => write!(f, "not an airlock bundle (expected a zstd-compressed tar): {d}"),
            Self::ManifestNotFirst { found } => {
                write!(f, "the first member must be `{MANIFEST}`, found `{found}`")
            }
            Self::SignatureNotSecond { found } => write!(f, "the second member must be `{SIGNATURE}`, found `{found}`"),
            Self::TooLargeBeforeTrust { limit } => {
                write!(f, "larger than the {limit} bytes allowed before the signature is checked")
            }
            Self::Untrusted { tried, claimed, detail } => untrusted(f, tried, claimed.as_ref(), detail),
            Self::Threshold { role, need, signers, cosignatures } => {
                let (what, whose, revoked) = match role.as_str() {
                    crate::sign::policy::GIVEN_ROLE => ("signature threshold".to_owned(), "trusted keys", ""),
                    _ => (format!("signing role `{role}`"), "key(s) of the role", "revoked keys no longer count; "),
                };
                write!(
                    f,
                    "{what} not met: {need} distinct {whose} must sign, {} did ({}); {revoked}{cosignatures} \
                     co-signature file(s) beside the bundle were considered",
                    signers.len(),
                    short_ids(signers)
                )
            }
            Self::ManifestInvalid(d) => write!(f, "invalid manifest: {d}"),
            Self::ManifestRefused(e) => write!(f, "invalid manifest: {e}"),
            Self::UnsafePath(reason) => write!(f, "unsafe path: {reason}"),
            Self::EntryType(kind) => {
                write!(f, "{kind} members are not allowed (regular files only)")
            }
            Self::Duplicate => f.write_str("duplicate member"),
            Self::Unlisted => f.write_str("member is not listed in the manifest"),
            Self::Parts(d) => f.write_str(d),
            Self::FromBase => {
                f.write_str("the manifest lists it as `from_base` (held by the base bundle), yet it is carried")
            }
            Self::Missing => f.write_str("listed in the manifest but missing from the bundle"),
            Self::SizeMismatch { expected, actual } => {
                write!(f, "wrong size: expected {expected} bytes, found {actual}")
            }
            Self::DigestMismatch { expected, actual } => {
                write!(f, "wrong sha256: expected {expected}, actual {actual}")
            }
            Self::Truncated(d) => write!(f, "truncated or corrupt stream: {d}"),
            Self::Extension(d) => write!(f, "refused before reading it: {d}"),
            Self::PastDeclaredSize { limit } => {
                write!(f, "stream continues past the manifest's declared total size ({limit} bytes)")
            }
            Self::TrailingData => f.write_str("non-zero data after the end of the archive"),
            Self::Provenance(d) => write!(f, "provenance does not verify: {d}"),
            Self::UpstreamSignature { artifact, detail } => {
                write!(f, "the upstream signature of `{artifact}` does not verify here: {detail}")
            }
            Self::ProvenanceBuildKeyUntrusted { build_key, cosigners } => write!(
                f,
                "the provenance is signed by the build key `{}`, which is not trusted; the manifest is \
                 trusted only through co-signature(s) by {}: add `--trust` with the build key's .pub to \
                 check the provenance",
                build_key.short(),
                short_ids(cosigners)
            ),
        }
    }
}

/// One rejected thing: a member (by its raw name) or the bundle as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub member: Option<String>,
    pub reason: Rejection,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.member {
            Some(m) => write!(f, "member `{m}`: {}", self.reason),
            None => write!(f, "{}", self.reason),
        }
    }
}

impl Serialize for Problem {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct P<'a> {
            member: Option<&'a str>,
            reason: String,
        }
        P { member: self.member.as_deref(), reason: self.reason.to_string() }.serialize(s)
    }
}
