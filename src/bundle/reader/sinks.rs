//! Where a verified member goes (`MemberSink`: captured, discarded, spooled) and what a read
//! reports: the problems found, the upstream signatures checked.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read};

use super::MemberSink;
use crate::bundle::manifest::{Manifest, VerifiedManifest};
use crate::bundle::rejection::Problem;
use crate::digest::Sha256;
use crate::member_path::MemberPath;
use crate::sign::KeyId;
use crate::sign::policy::SignatureCheck;

/// Whether to stop at the first problem (install) or collect them all (verify).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnProblem {
    Stop,
    Continue,
}

/// The sink a reader hands members to once the manifest is read: the caller's, with the bytes
/// of the members upstream signatures are checked from kept aside (small documents: a Sigstore
/// bundle, a `.sig` manifest and its payload), by the digest the manifest lists for them.
pub(super) struct Capture<'a> {
    inner: &'a mut dyn MemberSink,
    wanted: BTreeMap<MemberPath, Sha256>,
    pub(super) got: BTreeMap<Sha256, Vec<u8>>,
}

impl<'a> Capture<'a> {
    pub(super) fn new(inner: &'a mut dyn MemberSink, manifest: &Manifest) -> Self {
        use crate::bundle::manifest::Artifact;
        let wanted = manifest
            .artifacts
            .iter()
            .filter_map(|a| match a {
                Artifact::Image(i) => i.signature.as_ref(),
                Artifact::File(f) => f.signature.as_ref(),
                Artifact::Wheel(w) => w.signature.as_ref(),
                _ => None,
            })
            .flat_map(crate::spec::UpstreamSignature::members)
            .chain(manifest.artifacts.iter().flat_map(|a| match a {
                Artifact::Image(i) => i.filtered_indexes(),
                _ => Vec::new(),
            }))
            .collect();
        Self { inner, wanted, got: BTreeMap::new() }
    }

    pub(super) fn wants(&self, path: &MemberPath) -> bool {
        self.wanted.contains_key(path)
    }
}

impl MemberSink for Capture<'_> {
    fn member(&mut self, path: &MemberPath, data: &mut dyn Read) -> io::Result<()> {
        let Some(digest) = self.wanted.get(path).copied() else { return self.inner.member(path, data) };
        let mut bytes = Vec::new();
        data.take(crate::sign::sigstore::MAX_DOCUMENT_BYTES + 1).read_to_end(&mut bytes)?;
        self.inner.member(path, &mut bytes.as_slice().chain(data))?;
        if bytes.len() as u64 <= crate::sign::sigstore::MAX_DOCUMENT_BYTES {
            self.got.insert(digest, bytes);
        }
        Ok(())
    }

    fn spool(&mut self) -> io::Result<File> {
        self.inner.spool()
    }
}

/// A signed image carried filtered to some platforms: its carried index and platform
/// manifests must be listed in the upstream index the signature is over (carried beside it).
pub(super) fn filtered_platforms(
    image: &crate::bundle::manifest::ImageArtifact,
    bytes: &dyn Fn(Sha256) -> Option<Vec<u8>>,
) -> Result<(), String> {
    let Some(upstream) = image.upstream_digest else { return Ok(()) };
    let read = |d: Sha256, what: &str| bytes(d).ok_or_else(|| format!("its {what} (sha256:{d}) is not carried"));
    let upstream = read(upstream.0, "upstream index")?;
    let carried = read(image.digest, "carried index")?;
    let platforms: Vec<Sha256> = image.platforms.iter().map(|p| p.digest).collect();
    crate::oci::doc::listed_in(&upstream, &carried, &platforms).map_err(|e| e.to_string())
}

/// A sink that keeps nothing (verify).
pub struct Discard;

impl MemberSink for Discard {
    fn member(&mut self, _: &MemberPath, data: &mut dyn Read) -> io::Result<()> {
        io::copy(data, &mut io::sink()).map(drop)
    }
}

/// The outcome of reading a bundle.
#[derive(Debug, Default)]
pub struct Report {
    /// Set once the signature verified and the manifest parsed and passed its check.
    pub manifest: Option<VerifiedManifest>,
    pub manifest_sha256: Option<Sha256>,
    /// Distinct trusted keys whose signature over the manifest verified.
    pub signers: Vec<KeyId>,
    /// Every signature considered (embedded and co-signatures), with its outcome.
    pub signatures: Vec<SignatureCheck>,
    pub entries_verified: usize,
    /// The trusted keys that signed the DSSE provenance, when the bundle has one (empty when
    /// it did not verify).
    pub provenance: Option<Vec<KeyId>>,
    /// The upstream Sigstore signatures the manifest records, each checked again here over
    /// the carried bytes (only when every member verified).
    pub upstream: Vec<UpstreamCheck>,
    pub problems: Vec<Problem>,
}

/// One artifact's upstream signature, verified again by this reader.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UpstreamCheck {
    /// The image's reference or the file's name.
    pub artifact: String,
    pub identity: String,
    pub issuer: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logged_at: Option<String>,
    /// The trusted root it verified under.
    pub root: String,
}

impl Report {
    pub fn verified(&self) -> bool {
        self.manifest.is_some() && self.problems.is_empty()
    }
}

/// Failures that are not the bundle's fault: the sink could not store a member.
#[derive(Debug, thiserror::Error)]
#[error("cannot store member `{path}`")]
pub struct SinkError {
    pub path: MemberPath,
    #[source]
    pub source: io::Error,
}

impl crate::failure::Classify for SinkError {
    fn class(&self) -> crate::failure::Class {
        // Writing a verified member where it goes failed: the host's disk, not the bundle.
        crate::failure::Class::Runtime
    }
}
