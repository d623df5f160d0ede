//! `airlock/manifest.json`, bundle format v1: what the bundle is, what the user asked for, and
//! the size and sha256 of every content member. Signed as RFC 8785 canonical JSON.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::clock::Timestamp;
use crate::digest::{Prefixed, Sha256};
use crate::member_path::{MemberPath, MemberPathError};
use crate::sign::KeyId;
use crate::spec::lock::TreeDigest;
use crate::spec::{BundleName, FileKind, FileName};

pub const SCHEMA_V1: &str = "airlock.bundle/v1";
/// Member 1: the manifest.
pub const MANIFEST: &str = "airlock/manifest.json";
/// Member 2: the cosign `sign-blob` signature over the manifest's bytes.
pub const SIGNATURE: &str = "airlock/manifest.json.sig";
/// Reserved names under `airlock/` that later members may use.
pub const SBOM: &str = "airlock/sbom.cdx.json";
pub const PROVENANCE: &str = "airlock/provenance.dsse.json";
/// Where a bundle carries its site trust root's metadata (`build --trust-root`).
pub const TRUST_PREFIX: &str = "airlock/trust/";

/// `airlock/trust/N.root.json`, `airlock/trust/targets.json`, or the Sigstore trusted root
/// the targets list (`airlock/trust/trusted_root.json`).
pub fn is_carried_trust(path: &str) -> bool {
    path.strip_prefix(TRUST_PREFIX).is_some_and(|name| {
        name == "targets.json"
            || name == "trusted_root.json"
            || name.strip_suffix(".root.json").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}
/// Top-level areas a content member may live in.
pub const AREAS: [&str; 8] = ["airlock", "images", "wheels", "debs", "rpms", "models", "files", "sigstore"];
/// The largest manifest a reader accepts before it has checked the signature.
pub const MAX_MANIFEST_BYTES: u64 = 64 << 20;
/// The largest signature member a reader accepts.
pub const MAX_SIGNATURE_BYTES: u64 = crate::sign::MAX_SIGNATURE_BYTES;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub schema: String,
    pub name: BundleName,
    pub version: semver::Version,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub created: Timestamp,
    pub builder: Builder,
    pub spec_sha256: Sha256,
    pub lock_sha256: Sha256,
    pub artifacts: Vec<Artifact>,
    pub entries: Vec<Entry>,
    /// A delta bundle's base: the entries marked `from_base` are not in this bundle but in
    /// that one, which the site must have retained (`build --base`, `--base-lock`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<BaseRef>,
    /// The spec's `[validation]` section and `[[impact]]` register.
    #[serde(default, deserialize_with = "validation_section")]
    pub validation: Validation,
    /// The spec's `[bundle] expires`: a site refuses the bundle after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<Timestamp>,
}

/// The manifest's `validation`: the spec's `[validation]` section (where the stack's version
/// is read, the support matrix's rows, the acceptance checks) and its `[[impact]]` register.
/// Typed: a field this airlock does not know (a newer airlock's) refuses the manifest when it is
/// read, naming the field, instead of reaching code that would judge a stack without it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Validation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rocm_from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_from: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target: Vec<crate::spec::Target>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub check: Vec<crate::spec::Check>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub impact: Vec<crate::spec::Impact>,
}

impl Validation {
    /// What a bundle built from `spec` carries.
    pub fn of_spec(spec: &crate::spec::Spec) -> Self {
        let v = &spec.validation;
        Validation {
            rocm_from: v.rocm_from.clone(),
            cuda_from: v.cuda_from.clone(),
            target: v.target.clone(),
            check: v.check.iter().map(|c| c.get_ref().clone()).collect(),
            impact: spec.impact.iter().map(|i| i.get_ref().clone()).collect(),
        }
    }
}

/// `validation` as written (`null` reads as none), with what a field this airlock does not know
/// means said in the error.
fn validation_section<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Validation, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    if value.is_null() {
        return Ok(Validation::default());
    }
    serde_json::from_value(value).map_err(|e| {
        serde::de::Error::custom(format!(
            "the bundle's `validation` section cannot be read by airlock {}: {e} (a newer airlock's field?)",
            env!("CARGO_PKG_VERSION")
        ))
    })
}

/// Who built the bundle: the tool and the key id of the build key (a claim; only the
/// signature check proves which key signed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Builder {
    pub tool: String,
    pub key_id: KeyId,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub path: MemberPath,
    pub size: u64,
    pub sha256: Sha256,
    /// Not carried: the base bundle holds these bytes (a delta bundle's entry).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_base: bool,
}

/// The bundle a delta was built against. `build --base OLD.airlock` records which bundle
/// (its manifest's sha256, name and version); `build --base-lock OLD.lock` knows only the
/// lock, and any bundle built from that lock serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaseRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_sha256: Option<Sha256>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<BundleName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<semver::Version>,
    pub lock_sha256: Sha256,
}

impl std::fmt::Display for BaseRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.name, &self.version) {
            (Some(n), Some(v)) => write!(f, "{n} {v}")?,
            (Some(n), None) => write!(f, "{n}")?,
            _ => f.write_str("the bundle")?,
        }
        match &self.manifest_sha256 {
            Some(m) => write!(f, " (id {}, manifest sha256 {m})", m.short(16)),
            None => write!(f, " built from lock sha256 {}", self.lock_sha256),
        }
    }
}

/// What the user asked for, with the digest it resolved to. Read by hand (`ArtifactVisitor`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Artifact {
    Image(ImageArtifact),
    Wheel(WheelArtifact),
    Deb(DebArtifact),
    Rpm(RpmArtifact),
    Model(ModelArtifact),
    File(FileArtifact),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DebArtifact {
    pub name: String,
    pub version: String,
    pub architecture: String,
    pub repo: String,
    pub suite: String,
    pub sha256: Sha256,
    pub size: u64,
    pub path: MemberPath,
    /// The repository's `Release` `Origin` and `Codename`, when it names them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codename: Option<String>,
    /// In a dependency closure: the packages whose dependencies it satisfies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_by: Vec<String>,
}

/// An rpm, by NEVRA, at `rpms/` and its repository `location`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpmArtifact {
    pub name: String,
    pub epoch: u32,
    pub version: String,
    pub release: String,
    pub architecture: String,
    /// The repository's base URL (expanded).
    pub repo: String,
    pub sha256: Sha256,
    pub size: u64,
    pub path: MemberPath,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// The purl namespace and `distro` the spec gave (`rhel`, `el9`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distro: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_by: Vec<String>,
}

impl RpmArtifact {
    /// `[EPOCH:]VERSION-RELEASE`, as rpm prints it (no `0:`).
    pub fn evr(&self) -> String {
        if self.epoch == 0 {
            format!("{}-{}", self.version, self.release)
        } else {
            format!("{}:{}-{}", self.epoch, self.version, self.release)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelArtifact {
    pub hub: String,
    /// `ORG/NAME`; like every field that becomes a site path, checked when it is read: a
    /// manifest signed by a trusted key still cannot name a path outside the site root.
    pub repo: MemberPath,
    /// A branch, tag or commit: `refs/REVISION` in the cache view.
    pub revision: MemberPath,
    /// The commit sha (hex; `Manifest::check`).
    pub commit: MemberPath,
    /// Each at `models/ORG/NAME/COMMIT/PATH` (`ModelArtifact::member`). Read by
    /// `ArtifactVisitor` (`FilesRead`), written by `Listing`.
    #[serde(skip_deserializing)]
    pub files: Vec<ModelFile>,
}

impl ModelArtifact {
    /// The directory that holds the model's files in the bundle: `models/ORG/NAME/COMMIT`.
    pub fn dir(&self) -> String {
        format!("models/{}/{}", self.repo, self.commit)
    }

    /// Where `file` is in the bundle: `models/ORG/NAME/COMMIT/PATH`.
    pub fn member(&self, file: &ModelFile) -> Result<MemberPath, MemberPathError> {
        MemberPath::new(format!("{}/{}", self.dir(), file.path))
    }
}

/// A file of a model or of a `[[file]]` directory: its path in the tree, sha256 and size.
/// Its member path is not held: it is always the artifact's directory and this path
/// (`ModelArtifact::member`, `FileArtifact::member`), so the manifest's `member` is written
/// from those two and, when read, checked against them and dropped. At 200,000 files the
/// held copies were 13 MB of `install`'s memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFile {
    /// The path in the repository (`snapshots/COMMIT/PATH` in the cache view), or in the
    /// directory.
    pub path: MemberPath,
    pub sha256: Sha256,
    pub size: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WheelArtifact {
    /// PEP 503-normalised project name.
    pub name: String,
    pub version: String,
    pub filename: String,
    pub url: String,
    pub sha256: Sha256,
    pub size: u64,
    pub path: MemberPath,
    /// What its Python lock file says it depends on (normalised names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<String>,
    /// Its PEP 740 attestation that verified at lock time (`[[wheel]] verify`); the provenance
    /// object is the member `sigstore/HEX.provenance.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<crate::spec::UpstreamSignature>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageArtifact {
    /// The reference as written in the spec (`org.opencontainers.image.ref.name` in `images/`).
    pub reference: String,
    /// The spec's `ref` or `oci_layout`.
    pub source: String,
    /// The manifest or index carried, at `images/blobs/sha256/HEX`.
    #[serde(with = "crate::digest::prefixed")]
    pub digest: Sha256,
    /// What the source served when it differs from what is carried (an index filtered to platforms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_digest: Option<Prefixed>,
    pub media_type: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub platforms: Vec<ImagePlatform>,
    /// Upstream signatures, attestations and SBOMs carried with the image (a referrers index
    /// is listed by the referrers it holds). The SBOM references them; it never merges them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attached: Vec<Attachment>,
    /// The upstream Sigstore signature that verified at lock time (`[[image]] verify`), over
    /// `upstream_digest` (else `digest`); its bundle (or `.sig` manifest and payload) is among
    /// the carried blobs, and the site checks it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<crate::spec::UpstreamSignature>,
}

impl ImageArtifact {
    /// For a signed image carried filtered to some platforms: the upstream index the signature
    /// is over and the index as carried, at `images/blobs/sha256/HEX`, each with its sha256 —
    /// what the site checks the carried platforms against.
    pub fn filtered_indexes(&self) -> Vec<(MemberPath, Sha256)> {
        let (Some(upstream), Some(_)) = (self.upstream_digest, &self.signature) else { return Vec::new() };
        let blob = |d: Sha256| {
            (MemberPath::new(format!("images/blobs/sha256/{d}")).expect("a digest makes a valid member path"), d)
        };
        vec![blob(upstream.0), blob(self.digest)]
    }
}

/// One upstream manifest carried with an image, at `images/blobs/sha256/HEX`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attachment {
    #[serde(with = "crate::digest::prefixed")]
    pub digest: Sha256,
    pub kind: AttachmentKind,
    /// The OCI `artifactType` (or, lacking one, the config media type) when it says more than
    /// an image config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    /// The tag it was found under: cosign's `sha256-HEX.sig` / `.att` / `.sbom`, or the
    /// referrers tag `sha256-HEX`; none for a referrer from the referrers API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttachmentKind {
    Signature,
    Attestation,
    Sbom,
    Other,
}

impl AttachmentKind {
    /// What an attachment is, from cosign's tag suffix, else from its artifact type.
    pub fn classify(tag: Option<&str>, artifact_type: Option<&str>) -> Self {
        match tag.and_then(|t| t.rsplit_once('.')).map(|(_, suffix)| suffix) {
            Some("sig") => return Self::Signature,
            Some("att") => return Self::Attestation,
            Some("sbom") => return Self::Sbom,
            _ => {}
        }
        let t = artifact_type.unwrap_or_default().to_ascii_lowercase();
        let has = |words: &[&str]| words.iter().any(|w| t.contains(w));
        if has(&["spdx", "cyclonedx", "sbom", "syft"]) {
            Self::Sbom
        } else if has(&["in-toto", "intoto", "attestation", "dsse", "slsa", "vex"]) {
            Self::Attestation
        } else if has(&["signature", "cosign", "sigstore", "notary"]) {
            Self::Signature
        } else {
            Self::Other
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImagePlatform {
    pub platform: String,
    #[serde(with = "crate::digest::prefixed")]
    pub digest: Sha256,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileArtifact {
    pub name: FileName,
    /// As written in the spec (a URL or a path relative to it), never a host-specific path.
    pub source: String,
    pub sha256: Sha256,
    pub size: u64,
    pub path: MemberPath,
    pub file_kind: FileKind,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub notes: BTreeMap<String, String>,
    /// A directory's files (then `path` is the directory, `sha256` the tree's digest and
    /// `size` the total): each at `path/PATH` (`FileArtifact::member`). Written by `Listing`.
    /// Empty in a manifest that was read: see `tree`.
    #[serde(skip_deserializing)]
    pub files: Vec<ModelFile>,
    /// A directory whose files are held once, as the entries under `path/` (a manifest that
    /// was read, and `build` once the SBOM is written): what `Manifest::check` needs to prove
    /// that they are. `files` is empty then; the canonical bytes are written from the
    /// entries, but serde's output leaves `files` out (`Manifest::list_tree_files` first).
    #[serde(skip)]
    pub tree: Option<TreeListing>,
    /// The upstream Sigstore signature that verified at lock time (`sigstore_bundle` under
    /// `verify`), over `sha256`; its bundle is the member `sigstore/HEX.sigstore.json`.
    #[serde(default)]
    pub signature: Option<crate::spec::UpstreamSignature>,
}

/// A directory's `files` as they were read, summed up: how many, their total size, and the
/// digest of their listing (`tree_digest`). At 200,000 files, holding them beside their
/// entries was 17 MB of `install`'s memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeListing {
    pub count: usize,
    pub total: u64,
    pub digest: Sha256,
}

/// A [`TreeListing`] made a file at a time, in listing order. The total saturates: `check`
/// refuses entries whose sizes add up past `MAX_TOTAL_BYTES` before it compares listings.
#[derive(Default)]
struct TreeSum {
    digest: TreeDigest,
    count: usize,
    total: u64,
}

impl TreeSum {
    fn add(&mut self, path: &str, sha256: Sha256, size: u64) {
        self.digest.add(path, sha256, size);
        self.count += 1;
        self.total = self.total.saturating_add(size);
    }

    fn finish(self) -> TreeListing {
        TreeListing { count: self.count, total: self.total, digest: self.digest.finish() }
    }
}

impl FileArtifact {
    /// A directory rather than one file.
    pub fn is_tree(&self) -> bool {
        !self.files.is_empty() || self.tree.is_some()
    }

    /// How many files a directory holds (0 for one file).
    pub fn file_count(&self) -> usize {
        self.tree.map_or(self.files.len(), |t| t.count)
    }

    /// Where a directory's `file` is in the bundle: `files/NAME/PATH`.
    pub fn member(&self, file: &ModelFile) -> Result<MemberPath, MemberPathError> {
        MemberPath::new(format!("{}/{}", self.path, file.path))
    }
}

impl Serialize for FileArtifact {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct FileArtifact<'a> {
            name: &'a FileName,
            source: &'a str,
            sha256: Sha256,
            size: u64,
            path: &'a MemberPath,
            file_kind: FileKind,
            #[serde(skip_serializing_if = "Option::is_none")]
            notes: Option<&'a BTreeMap<String, String>>,
            #[serde(skip_serializing_if = "Listing::is_empty")]
            files: Listing<'a>,
            #[serde(skip_serializing_if = "Option::is_none")]
            signature: Option<&'a crate::spec::UpstreamSignature>,
        }
        FileArtifact {
            name: &self.name,
            source: &self.source,
            sha256: self.sha256,
            size: self.size,
            path: &self.path,
            file_kind: self.file_kind,
            notes: (!self.notes.is_empty()).then_some(&self.notes),
            files: Listing { dir: self.path.as_str().to_owned(), files: &self.files },
            signature: self.signature.as_ref(),
        }
        .serialize(s)
    }
}

impl Serialize for ModelArtifact {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct ModelArtifact<'a> {
            hub: &'a str,
            repo: &'a MemberPath,
            revision: &'a MemberPath,
            commit: &'a MemberPath,
            files: Listing<'a>,
        }
        ModelArtifact {
            hub: &self.hub,
            repo: &self.repo,
            revision: &self.revision,
            commit: &self.commit,
            files: Listing { dir: self.dir(), files: &self.files },
        }
        .serialize(s)
    }
}

/// A model's or a directory's `files` as the manifest carries them: each with its `member`,
/// the directory and its path.
struct Listing<'a> {
    dir: String,
    files: &'a [ModelFile],
}

#[derive(Serialize)]
struct Listed<'a> {
    path: &'a str,
    member: String,
    sha256: Sha256,
    size: u64,
}

impl Listing<'_> {
    fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    fn items(&self) -> impl Iterator<Item = Listed<'_>> {
        self.files.iter().map(|f| Listed {
            path: f.path.as_str(),
            member: format!("{}/{}", self.dir, f.path),
            sha256: f.sha256,
            size: f.size,
        })
    }
}

impl Serialize for Listing<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.items())
    }
}

/// `files` as read: every element's `member` must be its `path` under one directory, the
/// same for all. That directory is kept once, to be compared with the one the artifact's
/// other fields give (`ArtifactVisitor`); the member paths are not kept. A directory's files
/// (members under `files/`) are not kept either, only summed up (`TreeListing`): the entries
/// hold them.
struct FilesRead {
    files: Vec<ModelFile>,
    dir: Option<String>,
    first: Option<MemberPath>,
    tree: Option<TreeListing>,
}

impl<'de> Deserialize<'de> for FilesRead {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Read {
            path: MemberPath,
            member: MemberPath,
            sha256: Sha256,
            size: u64,
        }
        struct Files;
        impl<'de> serde::de::Visitor<'de> for Files {
            type Value = FilesRead;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of files")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<FilesRead, A::Error> {
                use serde::de::Error;
                let mut read = FilesRead { files: Vec::new(), dir: None, first: None, tree: None };
                // A directory's listing, summed up as it is read.
                let mut tree: Option<TreeSum> = None;
                while let Some(Read { path, member, sha256, size }) = seq.next_element()? {
                    let dir = member.as_str().strip_suffix(path.as_str()).and_then(|d| d.strip_suffix('/'));
                    match (dir, &read.dir) {
                        (None, _) => {
                            return Err(A::Error::custom(format_args!(
                                "file `{path}` is not at `{member}`: a file's member is its directory, then `/{path}`"
                            )));
                        }
                        (Some(dir), Some(first)) if dir != first => {
                            return Err(A::Error::custom(format_args!(
                                "file `{path}` is at `{member}`, not under `{first}/` with the files before it"
                            )));
                        }
                        (Some(_), Some(_)) => {}
                        (Some(dir), None) => {
                            if dir.starts_with("files/") {
                                tree = Some(TreeSum::default());
                            }
                            read.dir = Some(dir.to_owned());
                            read.first = Some(path.clone());
                        }
                    }
                    match &mut tree {
                        Some(sum) => sum.add(path.as_str(), sha256, size),
                        None => read.files.push(ModelFile { path, sha256, size }),
                    }
                }
                read.tree = tree.map(TreeSum::finish);
                Ok(read)
            }
        }
        d.deserialize_seq(Files)
    }
}

/// An artifact's object, read as serde's `tag = "kind"` would read it but without buffering
/// it whole first: serde's tagged enums hold every value of the object as an untyped tree until
/// they find `kind`, and a canonical manifest sorts `files` before `kind`. For a directory of
/// 100,000 files that tree was most of `install`'s memory. Here `files`, the one field that
/// grows, goes straight into its type; the rest is small and is read as JSON, then as the
/// variant `kind` names, with the same unknown-field and missing-field errors.
struct ArtifactVisitor;

const ARTIFACT_KINDS: &[&str] = &["image", "wheel", "deb", "rpm", "model", "file"];

impl<'de> serde::de::Visitor<'de> for ArtifactVisitor {
    type Value = Artifact;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an artifact object with a `kind`")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Artifact, A::Error> {
        use serde::de::Error;
        let mut rest = serde_json::Map::new();
        let mut files: Option<FilesRead> = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "files" {
                if files.is_some() {
                    return Err(A::Error::duplicate_field("files"));
                }
                files = Some(map.next_value()?);
            } else {
                let value: serde_json::Value = map.next_value()?;
                if rest.contains_key(&key) {
                    return Err(A::Error::custom(format_args!("duplicate field `{key}`")));
                }
                rest.insert(key, value);
            }
        }
        let kind = match rest.remove("kind") {
            Some(serde_json::Value::String(kind)) => kind,
            Some(other) => return Err(A::Error::custom(format_args!("`kind` is not a string: {other}"))),
            None => return Err(A::Error::missing_field("kind")),
        };
        // Present for the other variants to refuse as unknown; file and model take them below.
        if files.is_some() && kind != "file" && kind != "model" {
            rest.insert("files".into(), serde_json::Value::Array(Vec::new()));
        }
        let object = serde_json::Value::Object(rest);
        let typed = |e: serde_json::Error| A::Error::custom(format_args!("{kind} artifact: {e}"));
        let mut artifact = match kind.as_str() {
            "image" => Artifact::Image(serde_json::from_value(object).map_err(typed)?),
            "wheel" => Artifact::Wheel(serde_json::from_value(object).map_err(typed)?),
            "deb" => Artifact::Deb(serde_json::from_value(object).map_err(typed)?),
            "rpm" => Artifact::Rpm(serde_json::from_value(object).map_err(typed)?),
            "model" => Artifact::Model(serde_json::from_value(object).map_err(typed)?),
            "file" => Artifact::File(serde_json::from_value(object).map_err(typed)?),
            other => return Err(A::Error::unknown_variant(other, ARTIFACT_KINDS)),
        };
        // The one directory the members were under must be the artifact's.
        match (&mut artifact, files) {
            (Artifact::Model(m), Some(read)) => {
                if let (Some(dir), Some(first)) = (&read.dir, &read.first)
                    && *dir != m.dir()
                {
                    // A repository or commit that is not one says so first.
                    let why = Manifest::check_model_names(m).err().unwrap_or_else(|| {
                        format!("model `{}` file `{first}` is not at `{}/{first}`", m.repo, m.dir())
                    });
                    return Err(A::Error::custom(why));
                }
                m.files = read.files;
            }
            (Artifact::File(f), Some(read)) => {
                if let (Some(dir), Some(first)) = (&read.dir, &read.first)
                    && dir != f.path.as_str()
                {
                    return Err(A::Error::custom(format_args!(
                        "file `{}` tree file `{first}` is not at `{}/{first}`",
                        f.name, f.path
                    )));
                }
                f.files = read.files;
                f.tree = read.tree;
            }
            _ => {}
        }
        Ok(artifact)
    }
}

impl<'de> Deserialize<'de> for Artifact {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ArtifactVisitor)
    }
}

impl Artifact {
    /// A copy without a directory's or a model's `files` (`Manifest::skeleton`).
    fn without_files(&self) -> Artifact {
        match self {
            Artifact::File(f) => Artifact::File(FileArtifact {
                name: f.name.clone(),
                source: f.source.clone(),
                sha256: f.sha256,
                size: f.size,
                path: f.path.clone(),
                file_kind: f.file_kind,
                notes: f.notes.clone(),
                files: Vec::new(),
                tree: None,
                signature: f.signature.clone(),
            }),
            Artifact::Model(m) => Artifact::Model(ModelArtifact {
                hub: m.hub.clone(),
                repo: m.repo.clone(),
                revision: m.revision.clone(),
                commit: m.commit.clone(),
                files: Vec::new(),
            }),
            other => other.clone(),
        }
    }

    /// A directory's or a model's files as the manifest lists them; empty for the others.
    fn listing(&self) -> Listing<'_> {
        match self {
            Artifact::File(f) => Listing { dir: f.path.as_str().to_owned(), files: &f.files },
            Artifact::Model(m) => Listing { dir: m.dir(), files: &m.files },
            _ => Listing { dir: String::new(), files: &[] },
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Artifact::File(f) => format!("file {} ({}, {} bytes, sha256 {})", f.name, f.file_kind, f.size, f.sha256),
            Artifact::Deb(d) => format!("deb {}={} ({}, sha256 {})", d.name, d.version, d.architecture, d.sha256),
            Artifact::Rpm(r) => format!("rpm {}-{}.{} (sha256 {})", r.name, r.evr(), r.architecture, r.sha256),
            Artifact::Model(m) => format!("model {} at {} ({}, {} files)", m.repo, m.revision, m.commit, m.files.len()),
            Artifact::Wheel(w) => format!("wheel {}=={} ({}, sha256 {})", w.name, w.version, w.filename, w.sha256),
            Artifact::Image(i) => {
                let platforms: Vec<&str> = i.platforms.iter().map(|p| p.platform.as_str()).collect();
                let extra = if platforms.is_empty() { String::new() } else { format!(", {}", platforms.join(" ")) };
                let attached =
                    if i.attached.is_empty() { String::new() } else { format!(", {} attached", i.attached.len()) };
                format!("image {} (sha256:{}{extra}{attached})", i.reference, i.digest)
            }
        }
    }
}

/// The build key a manifest's bytes name, read without trusting them (for saying who a bundle
/// claims signed it when no trusted key did): `None` unless it is a well-formed key id.
pub fn claimed_builder(bytes: impl std::io::Read) -> Option<KeyId> {
    #[derive(Deserialize)]
    struct Claim {
        builder: ClaimedBuilder,
    }
    #[derive(Deserialize)]
    struct ClaimedBuilder {
        key_id: String,
    }
    let claim: Claim = serde_json::from_reader(bytes).ok()?;
    KeyId::parse(&claim.builder.key_id)
}

/// What a site needs to know before it unpacks a bundle (the space it takes, the base a delta
/// needs), read from the manifest as it streams past: the entries are summed, not kept. Not
/// verified; `None` sizes when they are absurd (`check` would refuse them).
#[derive(Debug, Deserialize)]
pub struct Outline {
    #[serde(default)]
    pub base: Option<BaseRef>,
    #[serde(rename = "entries", deserialize_with = "sum_sizes")]
    pub content_bytes: Option<u64>,
}

fn sum_sizes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    struct Sizes;
    #[derive(Deserialize)]
    struct Sized {
        size: u64,
    }
    impl<'de> serde::de::Visitor<'de> for Sizes {
        type Value = Option<u64>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of entries")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Option<u64>, A::Error> {
            let mut total = Some(0u64);
            while let Some(Sized { size }) = seq.next_element()? {
                total = total.filter(|_| size <= MAX_ENTRY_BYTES).and_then(|t| t.checked_add(size));
            }
            Ok(total.filter(|t| *t <= MAX_TOTAL_BYTES))
        }
    }
    d.deserialize_seq(Sizes)
}

/// The largest entry a manifest may list (1 PiB) and the largest total (4 PiB): far past any
/// medium, far below where `u64` arithmetic on sizes, padding and budgets could overflow.
pub const MAX_ENTRY_BYTES: u64 = 1 << 50;
pub const MAX_TOTAL_BYTES: u64 = 1 << 52;

/// A version tag (`oci://…:2.0.0`, `v2.0.0`) that names another version than the bundle it
/// points at.
#[derive(Debug, thiserror::Error)]
#[error(
    "the tag `{tag}` names version {tag_version} but the bundle it points at is {name} {version}; \
     the tag was moved or mislabelled; nothing was written or changed",
    tag_version = tag.strip_prefix('v').unwrap_or(tag)
)]
pub struct TagMismatch {
    pub tag: String,
    pub name: String,
    pub version: semver::Version,
}

impl crate::failure::Classify for TagMismatch {
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Verification
    }
}

impl Manifest {
    /// A tag that is a version (`2.0.0`, `v2.0.0`) must name this manifest's version; a tag
    /// that is not one (`latest`, `canary`) names none.
    pub fn check_tag(&self, tag: &str) -> Result<(), TagMismatch> {
        let Ok(tagged) = semver::Version::parse(tag.strip_prefix('v').unwrap_or(tag)) else { return Ok(()) };
        if tagged == self.version {
            return Ok(());
        }
        Err(TagMismatch { tag: tag.to_owned(), name: self.name.to_string(), version: self.version.clone() })
    }

    /// The exact bytes that are signed: RFC 8785 (JCS) canonical JSON.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        self.write_canonical(&mut bytes).expect("writing to memory does not fail");
        bytes
    }

    /// The canonical bytes' SHA-256 and length, without holding them.
    pub fn canonical_digest(&self) -> (Sha256, u64) {
        let mut hashing = crate::digest::HashingWriter::new(std::io::sink());
        self.write_canonical(&mut hashing).expect("writing to a sink does not fail");
        let (sha256, size, _) = hashing.finish();
        (sha256, size)
    }

    /// The canonical bytes, written as they are made. `serde_json_canonicalizer` sorts an
    /// object's members by holding every value of it first: a manifest of 100,000 entries
    /// held 90 MB to write 26 MB. Here the two lists that grow with the member count,
    /// `entries` and an artifact's `files`, are written one element at a time (each element
    /// canonicalised by the crate); everything else is the crate's output for a copy of the
    /// manifest without them. The unit test compares the two on every field.
    pub fn write_canonical(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        let to_io = |e: serde_json::Error| std::io::Error::other(e.to_string());
        let serde_json::Value::Object(top) = serde_json::to_value(self.skeleton()).map_err(to_io)? else {
            unreachable!("a manifest serialises as an object")
        };
        write_object(out, &top, |key, out| match key {
            "entries" => Some(write_list(out, &self.entries)),
            "artifacts" => Some(write_artifacts(out, &top, &self.artifacts, &self.entries)),
            _ => None,
        })
    }

    /// Every field but the lists that grow with the member count. Written out field by field,
    /// without `..`: a new field is a compile error here until it is added.
    fn skeleton(&self) -> Manifest {
        Manifest {
            schema: self.schema.clone(),
            name: self.name.clone(),
            version: self.version.clone(),
            description: self.description.clone(),
            created: self.created,
            builder: self.builder.clone(),
            spec_sha256: self.spec_sha256,
            lock_sha256: self.lock_sha256,
            artifacts: self.artifacts.iter().map(Artifact::without_files).collect(),
            entries: Vec::new(),
            base: self.base.clone(),
            validation: self.validation.clone(),
            expires: self.expires,
        }
    }

    /// The sum of the entries' sizes (saturating: `check` refuses a manifest whose sum does
    /// not fit, but callers that show an unverified manifest must not panic either).
    pub fn content_bytes(&self) -> u64 {
        self.entries.iter().fold(0u64, |sum, e| sum.saturating_add(e.size))
    }

    /// The entries this bundle carries (all but a delta's `from_base` ones).
    pub fn carried(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| !e.from_base)
    }

    /// The bytes of the entries this bundle carries.
    pub fn carried_bytes(&self) -> u64 {
        self.carried().fold(0u64, |sum, e| sum.saturating_add(e.size))
    }

    /// The entry an artifact of one file points at: its name, path, sha256 and size (a model
    /// and a directory are checked file by file, before this).
    /// An artifact's upstream signature names members that are entries, with their digests.
    fn check_signature(a: &Artifact, by_path: &ByPath<'_>) -> Result<(), String> {
        let (name, signature) = match a {
            Artifact::Image(i) => (i.reference.as_str(), &i.signature),
            Artifact::File(f) => (f.name.as_str(), &f.signature),
            Artifact::Wheel(w) => (w.filename.as_str(), &w.signature),
            _ => return Ok(()),
        };
        for (path, sha256) in signature.iter().flat_map(crate::spec::UpstreamSignature::members) {
            if by_path.get(path.as_str()).is_none_or(|e| e.sha256 != sha256) {
                return Err(format!("`{name}`'s upstream signature is at `{path}` (sha256 {sha256}), not an entry"));
            }
        }
        if let Artifact::Image(i) = a {
            for (path, sha256) in i.filtered_indexes() {
                if by_path.get(path.as_str()).is_none_or(|e| e.sha256 != sha256) {
                    return Err(format!(
                        "`{name}` is carried filtered to some platforms, but the upstream index its signature is over \
                         (sha256 {sha256}) is not an entry: its platforms cannot be checked against it"
                    ));
                }
            }
        }
        Ok(())
    }

    fn artifact_entry(a: &Artifact) -> Result<(&str, String, Sha256, u64), String> {
        Ok(match a {
            Artifact::File(f) => (f.name.as_str(), f.path.as_str().to_owned(), f.sha256, f.size),
            Artifact::Wheel(w) => {
                if w.path.as_str() != format!("wheels/{}", w.filename) {
                    return Err(format!("wheel `{}` is not at `wheels/{}`", w.filename, w.filename));
                }
                (w.filename.as_str(), w.path.as_str().to_owned(), w.sha256, w.size)
            }
            Artifact::Deb(d) => {
                if d.path.area() != "debs" {
                    return Err(format!("deb `{}` is not under `debs/`", d.name));
                }
                (d.name.as_str(), d.path.as_str().to_owned(), d.sha256, d.size)
            }
            Artifact::Rpm(r) => {
                if r.path.area() != "rpms" || r.path.as_str().starts_with("rpms/repodata/") {
                    return Err(format!("rpm `{}` is not under `rpms/` (outside `rpms/repodata/`)", r.name));
                }
                (r.name.as_str(), r.path.as_str().to_owned(), r.sha256, r.size)
            }
            Artifact::Model(m) => {
                return Err(format!("model `{}` has no one entry: its files are checked one by one", m.repo));
            }
            Artifact::Image(i) => (i.reference.as_str(), format!("images/blobs/sha256/{}", i.digest), i.digest, i.size),
        })
    }

    /// A `[[file]]` directory: each file an entry at `path/PATH`, the digest the tree's.
    fn check_tree(f: &FileArtifact, by_path: &ByPath<'_>) -> Result<(), String> {
        if let Some(listed) = &f.tree {
            // Held as entries: those under `path/`, in path order, must be the listing (its
            // digest, count and total), and the listing the tree the artifact claims.
            let dir = format!("{}/", f.path);
            let mut sum = TreeSum::default();
            for e in by_path.under(&dir) {
                sum.add(&e.path.as_str()[dir.len()..], e.sha256, e.size);
            }
            let entries = sum.finish();
            if entries != *listed {
                return Err(format!(
                    "file `{}`: its {} files do not match the {} entries under `{dir}`",
                    f.name, listed.count, entries.count
                ));
            }
            if listed.digest != f.sha256 || listed.total != f.size {
                return Err(format!("file `{}`: its files do not give the tree digest and size it claims", f.name));
            }
            return Ok(());
        }
        // Each file's member is `path/PATH` by construction (`FilesRead`).
        for file in &f.files {
            let member = format!("{}/{}", f.path, file.path);
            let listed = by_path.get(&member);
            if !listed.is_some_and(|e| e.sha256 == file.sha256 && e.size == file.size) {
                return Err(format!(
                    "file `{}` tree file `{}` does not match an entry at `{member}`",
                    f.name, file.path
                ));
            }
        }
        let digest = crate::spec::lock::tree_digest(f.files.iter().map(|t| (t.path.as_str(), t.sha256, t.size)));
        let total: u64 = f.files.iter().map(|t| t.size).sum();
        if digest != f.sha256 || total != f.size {
            return Err(format!("file `{}`: its files do not give the tree digest and size it claims", f.name));
        }
        Ok(())
    }

    /// A model artifact's names, which become cache-view paths, and its files' entries.
    fn check_model(m: &ModelArtifact, by_path: &ByPath<'_>) -> Result<(), String> {
        Self::check_model_names(m)?;
        // Each file's member is `models/ORG/NAME/COMMIT/PATH` by construction (`FilesRead`):
        // the cache view's file path is exactly its tail.
        let dir = m.dir();
        for f in &m.files {
            let member = format!("{dir}/{}", f.path);
            let listed = by_path.get(&member);
            if !listed.is_some_and(|e| e.sha256 == f.sha256 && e.size == f.size) {
                return Err(format!("model `{}` file `{}` does not match an entry at `{member}`", m.repo, f.path));
            }
        }
        Ok(())
    }

    /// A model's repository is `ORG/NAME` and its commit a hex sha.
    fn check_model_names(m: &ModelArtifact) -> Result<(), String> {
        if m.repo.as_str().split('/').count() != 2 {
            return Err(format!("model repository `{}` is not `ORG/NAME`", m.repo));
        }
        let commit = m.commit.as_str();
        if !(commit.len() == 40 || commit.len() == 64) || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("model `{}` commit `{commit}` is not a hex commit sha", m.repo));
        }
        Ok(())
    }

    /// A manifest that was read holds a directory's files once, as its entries
    /// (`FileArtifact::tree`): list them in the directory's `files` again, for output that
    /// shows them (`inspect --json`) or writes the manifest.
    pub fn list_tree_files(&mut self) {
        for a in &mut self.artifacts {
            let Artifact::File(f) = a else { continue };
            if f.tree.take().is_some() {
                f.files = tree_files(&self.entries, &f.path);
            }
        }
    }

    /// Hold each directory's files once, as its entries (`FileArtifact::tree`), as a manifest
    /// that was read does: `build` does so once the SBOM, the last reader of the list, is
    /// written. At 200,000 files the list was 18 MB of `build`'s memory.
    pub fn hold_trees_as_entries(&mut self) {
        for a in &mut self.artifacts {
            if let Artifact::File(f) = a
                && !f.files.is_empty()
            {
                let mut sum = TreeSum::default();
                for t in std::mem::take(&mut f.files) {
                    sum.add(t.path.as_str(), t.sha256, t.size);
                }
                f.tree = Some(sum.finish());
            }
        }
    }

    /// Give back what parsing over-allocated: JSON arrays arrive without a length, so a list
    /// of 100,000 entries grew by doubling, up to twice its size.
    pub fn shrink_to_fit(&mut self) {
        self.entries.shrink_to_fit();
        for a in &mut self.artifacts {
            match a {
                Artifact::File(f) => f.files.shrink_to_fit(),
                Artifact::Model(m) => m.files.shrink_to_fit(),
                _ => {}
            }
        }
    }

    /// Rules a signed manifest must still satisfy before its entries are trusted as a plan for
    /// reading: known schema, unique entries in known areas, no reserved names, no entry that
    /// is also another entry's directory, and artifacts that point at entries.
    pub fn check(&self) -> Result<(), ManifestError> {
        if self.schema != SCHEMA_V1 {
            return Err(ManifestError::Schema { actual: self.schema.clone() });
        }
        let mut total: u64 = 0;
        for e in &self.entries {
            let p = e.path.as_str();
            let path = || p.to_owned();
            // Sizes become tar padding, byte budgets and disk-space checks: an absurd one is
            // refused here, so that no arithmetic on it can overflow later.
            if e.size > MAX_ENTRY_BYTES {
                return Err(ManifestError::EntryTooLarge { path: path(), size: e.size });
            }
            total = total.checked_add(e.size).filter(|t| *t <= MAX_TOTAL_BYTES).ok_or(ManifestError::TooLarge)?;
            if !AREAS.contains(&e.path.area()) {
                return Err(ManifestError::OutsideAreas { path: path() });
            }
            if e.path.area() == "airlock" && p != SBOM && !is_carried_trust(p) {
                return Err(ManifestError::Reserved { path: path() });
            }
            if e.from_base && (self.base.is_none() || e.path.area() == "airlock") {
                let why = match self.base {
                    None => "the manifest names no base",
                    Some(_) => "`airlock/` members are always carried",
                };
                return Err(ManifestError::FromBase { path: path(), why });
            }
        }
        // By path: a lookup per artifact, not a scan (450 000 entries made that quadratic).
        let by_path = ByPath::new(&self.entries).map_err(|p| ManifestError::ListedTwice { path: p.to_owned() })?;
        if by_path.get(SBOM).is_none() {
            return Err(ManifestError::NoSbom);
        }
        for e in &self.entries {
            if let Some(dir) = e.path.ancestors().find(|a| by_path.get(a).is_some()) {
                return Err(ManifestError::DirectoryOfEntry { dir: dir.to_string(), entry: e.path.to_string() });
            }
        }
        for a in &self.artifacts {
            Self::check_signature(a, &by_path).map_err(ManifestError::Artifact)?;
            if let Artifact::Model(m) = a {
                Self::check_model(m, &by_path).map_err(ManifestError::Artifact)?;
                continue;
            }
            if let Artifact::File(f) = a
                && f.is_tree()
            {
                Self::check_tree(f, &by_path).map_err(ManifestError::Artifact)?;
                continue;
            }
            let (name, path, sha256, size) = Self::artifact_entry(a).map_err(ManifestError::Artifact)?;
            let listed = by_path.get(path.as_str());
            if !listed.is_some_and(|e| e.sha256 == sha256 && e.size == size) {
                return Err(ManifestError::ArtifactEntry { name: name.to_owned(), path });
            }
        }
        Ok(())
    }
}

/// A manifest whose signatures met a trust policy over its exact bytes and whose
/// [`Manifest::check`] passed: the form every piece of code that acts on a bundle takes
/// (stage, validate, views, packages, publish, apply). tough's way: an unchecked manifest
/// cannot reach that code, because the only way to make one is `VerifiedManifest::establish`,
/// which is handed the policy and the signers found over those bytes and runs the check itself.
/// A manifest read without verifying (`inspect`, `status`, a report of an unverified file)
/// stays a [`Manifest`].
#[derive(Debug, Clone, PartialEq)]
pub struct VerifiedManifest {
    manifest: Manifest,
    sha256: Sha256,
}

impl VerifiedManifest {
    /// `manifest`, parsed from bytes whose sha256 is `sha256`, over which `signers` are the
    /// trusted keys whose signatures verified under `policy`: verified when they meet the
    /// policy and the manifest passes its check.
    pub(crate) fn establish(
        manifest: Manifest,
        sha256: Sha256,
        policy: &crate::sign::Policy,
        signers: &[KeyId],
    ) -> Result<Self, ManifestError> {
        if let Some(short) = policy.shortfall(signers) {
            return Err(ManifestError::Unsigned { role: short.role, need: short.need, have: short.have.len() });
        }
        manifest.check()?;
        Ok(VerifiedManifest { manifest, sha256 })
    }

    /// The manifest, no longer vouched for (to show it).
    pub fn into_manifest(self) -> Manifest {
        self.manifest
    }

    /// The sha256 of the manifest's bytes: what its signatures are over, and the bundle's id.
    pub fn sha256(&self) -> Sha256 {
        self.sha256
    }

    /// The same verified manifest listing only the entries and artifacts `entry` and
    /// `artifact` keep (what a node keeps, `site::mirror::kept`): it can only lose what it lists.
    #[must_use]
    pub fn narrowed(&self, entry: impl Fn(&Entry) -> bool, artifact: impl Fn(&Artifact) -> bool) -> Self {
        let mut manifest = self.manifest.clone();
        manifest.entries.retain(entry);
        manifest.artifacts.retain(artifact);
        VerifiedManifest { manifest, sha256: self.sha256 }
    }
}

impl std::ops::Deref for VerifiedManifest {
    type Target = Manifest;

    fn deref(&self) -> &Manifest {
        &self.manifest
    }
}

/// Why a signed manifest cannot be trusted as a plan for reading (`Manifest::check`): a
/// verification failure, whoever signed it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    #[error("signed by {have} of the {need} key(s) of `{role}` its policy needs")]
    Unsigned { role: String, need: usize, have: usize },
    #[error("schema is `{actual}`, expected `{v1}`", v1 = SCHEMA_V1)]
    Schema { actual: String },
    #[error("entry `{path}` claims {size} bytes (at most {max})", max = MAX_ENTRY_BYTES)]
    EntryTooLarge { path: String, size: u64 },
    #[error("the entries' sizes add up to more than {max} bytes", max = MAX_TOTAL_BYTES)]
    TooLarge,
    #[error("entry `{path}` is outside the areas {areas:?}", areas = AREAS)]
    OutsideAreas { path: String },
    #[error("entry `{path}` uses a reserved `airlock/` name")]
    Reserved { path: String },
    #[error("entry `{path}` is marked `from_base`, but {why}")]
    FromBase { path: String, why: &'static str },
    #[error("entry `{path}` is listed twice")]
    ListedTwice { path: String },
    #[error("no entry for `{sbom}`: every v1 bundle lists its SBOM", sbom = SBOM)]
    NoSbom,
    #[error("entry `{dir}` is also the directory of entry `{entry}`")]
    DirectoryOfEntry { dir: String, entry: String },
    #[error("artifact `{name}` does not match an entry at `{path}`")]
    ArtifactEntry { name: String, path: String },
    /// An artifact's own rules (a deb outside `debs/`, a tree whose files do not give its
    /// digest, a model's names), in its kind's words.
    #[error("{0}")]
    Artifact(String),
}

impl crate::failure::Classify for ManifestError {
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Verification
    }
}

/// A manifest's entries by path. Every bundle airlock writes lists them sorted by path (they
/// are its members, which are sorted), and then a lookup is a binary search over the entries
/// themselves: nothing more is held, however many there are (an index of 200,000 paths took
/// 5 to 7 MB, and `check` built two). Entries in another order, which a manifest may have,
/// get an index built once.
pub struct ByPath<'a> {
    entries: &'a [Entry],
    /// Only when the entries are not sorted.
    index: Option<BTreeMap<&'a str, usize>>,
}

impl<'a> ByPath<'a> {
    /// The lookup over `entries`; `Err` with a path that is listed twice.
    pub fn new(entries: &'a [Entry]) -> Result<Self, &'a str> {
        if entries.windows(2).all(|w| w[0].path.as_str() < w[1].path.as_str()) {
            return Ok(Self { entries, index: None });
        }
        let mut index = BTreeMap::new();
        for (i, e) in entries.iter().enumerate() {
            if index.insert(e.path.as_str(), i).is_some() {
                return Err(e.path.as_str());
            }
        }
        Ok(Self { entries, index: Some(index) })
    }

    /// Where the entry at `path` is in the list.
    pub fn position(&self, path: &str) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(path).copied(),
            None => self.entries.binary_search_by(|e| e.path.as_str().cmp(path)).ok(),
        }
    }

    pub fn get(&self, path: &str) -> Option<&'a Entry> {
        self.position(path).map(|i| &self.entries[i])
    }

    /// The entries whose path starts with `prefix`, in path order.
    pub fn under(&self, prefix: &'a str) -> Box<dyn Iterator<Item = &'a Entry> + '_> {
        let within = move |p: &str| p.starts_with(prefix);
        if let Some(index) = &self.index {
            Box::new(index.range(prefix..).take_while(move |(p, _)| within(p)).map(|(_, i)| &self.entries[*i]))
        } else {
            let start = self.entries.partition_point(|e| e.path.as_str() < prefix);
            Box::new(self.entries[start..].iter().take_while(move |e| within(e.path.as_str())))
        }
    }
}

/// A JCS object: its members sorted by their names' UTF-16 code units (RFC 8785 3.2.3), each
/// value from `special` when it writes that member, else the crate's canonical form of it.
fn write_object(
    out: &mut dyn std::io::Write,
    object: &serde_json::Map<String, serde_json::Value>,
    mut special: impl FnMut(&str, &mut dyn std::io::Write) -> Option<std::io::Result<()>>,
) -> std::io::Result<()> {
    let mut keys: Vec<&String> = object.keys().collect();
    keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
    out.write_all(b"{")?;
    for (i, key) in keys.into_iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write_jcs(out, key)?;
        out.write_all(b":")?;
        match special(key, out) {
            Some(written) => written?,
            None => write_jcs(out, &object[key])?,
        }
    }
    out.write_all(b"}")
}

/// The entries under `dir/` as a directory's files, in path order.
fn tree_files(entries: &[Entry], dir: &MemberPath) -> Vec<ModelFile> {
    let dir = format!("{dir}/");
    let mut files: Vec<ModelFile> = entries
        .iter()
        .filter_map(|e| {
            // The tail of a member path after a `/` is a member path itself.
            let path = MemberPath::new(e.path.as_str().strip_prefix(&dir)?).ok()?;
            Some(ModelFile { path, sha256: e.sha256, size: e.size })
        })
        .collect();
    files.sort_by(|a, b| a.path.as_str().cmp(b.path.as_str()));
    files
}

/// A JCS array of `items`, each canonicalised on its own.
fn write_list<T: Serialize>(out: &mut dyn std::io::Write, items: impl IntoIterator<Item = T>) -> std::io::Result<()> {
    out.write_all(b"[")?;
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write_jcs(out, &item)?;
    }
    out.write_all(b"]")
}

/// The `artifacts` array: each artifact's object from the skeleton's, its `files` (which the
/// skeleton left out, or empty) written from the artifact itself.
fn write_artifacts(
    out: &mut dyn std::io::Write,
    top: &serde_json::Map<String, serde_json::Value>,
    artifacts: &[Artifact],
    entries: &[Entry],
) -> std::io::Result<()> {
    let skeletons = top.get("artifacts").and_then(serde_json::Value::as_array).map_or(&[][..], Vec::as_slice);
    out.write_all(b"[")?;
    for (i, (artifact, skeleton)) in artifacts.iter().zip(skeletons).enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        let Some(object) = skeleton.as_object() else { unreachable!("an artifact serialises as an object") };
        let held = artifact.listing();
        // A directory that holds its files as entries (`FileArtifact::tree`): written from them.
        let tree = match artifact {
            Artifact::File(f) if f.tree.is_some() => Some(format!("{}/", f.path)),
            _ => None,
        };
        let mut object = std::borrow::Cow::Borrowed(object);
        if (!held.is_empty() || tree.is_some()) && !object.contains_key("files") {
            // A directory's `files` are skipped when empty: the skeleton has no such member.
            object.to_mut().insert("files".into(), serde_json::Value::Array(Vec::new()));
        }
        write_object(out, &object, |key, out| {
            (key == "files").then(|| match &tree {
                Some(dir) => {
                    let by_path = ByPath::new(entries)
                        .map_err(|p| std::io::Error::other(format!("entry `{p}` is listed twice")))?;
                    write_list(
                        out,
                        by_path.under(dir).map(|e| Listed {
                            path: &e.path.as_str()[dir.len()..],
                            member: e.path.to_string(),
                            sha256: e.sha256,
                            size: e.size,
                        }),
                    )
                }
                None => write_list(out, held.items()),
            })
        })?;
    }
    out.write_all(b"]")
}

fn write_jcs<T: Serialize>(mut out: &mut dyn std::io::Write, value: &T) -> std::io::Result<()> {
    serde_json_canonicalizer::to_writer(value, &mut out).map_err(|e| std::io::Error::other(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachments_are_classified_by_cosign_tag_then_artifact_type() {
        use AttachmentKind as K;
        let c = AttachmentKind::classify;
        assert_eq!(c(Some("sha256-ab.sig"), None), K::Signature);
        assert_eq!(c(Some("sha256-ab.att"), Some("application/vnd.cyclonedx+json")), K::Attestation);
        assert_eq!(c(Some("sha256-ab.sbom"), None), K::Sbom);
        assert_eq!(c(Some("sha256-ab"), Some("application/spdx+json")), K::Sbom);
        assert_eq!(c(None, Some("application/vnd.in-toto+json")), K::Attestation);
        assert_eq!(c(None, Some("application/vnd.dev.sigstore.bundle.v0.3+json")), K::Signature);
        assert_eq!(c(None, Some("application/vnd.example.thing")), K::Other);
        assert_eq!(c(None, None), K::Other);
    }

    #[test]
    fn artifacts_are_read_with_their_files_and_refused_as_a_tagged_enum_refuses_them() {
        use serde_json::json;
        let sha = "0".repeat(64);
        let file = json!({"file_kind": "generic", "files": [{"member": "files/t/a", "path": "a", "sha256": sha, "size": 1}],
            "kind": "file", "name": "t", "path": "files/t", "sha256": sha, "size": 1, "source": "t"});
        let read: Artifact = serde_json::from_reader(file.to_string().as_bytes()).unwrap();
        let Artifact::File(f) = &read else { panic!("{read:?}") };
        // A directory's files are summed up, not held: its entries are those.
        let zero: Sha256 = sha.parse().unwrap();
        let digest = crate::spec::lock::tree_digest([("a", zero, 1)]);
        assert_eq!((f.files.len(), f.tree), (0, Some(TreeListing { count: 1, total: 1, digest })));
        let mut m = manifest(&["files/t/a"]);
        (m.entries[0].sha256, m.entries[0].size) = (zero, 1);
        m.artifacts = vec![read.clone()];
        let written = m.canonical_bytes();
        m.list_tree_files();
        assert_eq!(m.canonical_bytes(), written, "written from the entries, or listed again first, alike");
        let Artifact::File(f) = &m.artifacts[0] else { unreachable!() };
        assert_eq!((f.files.len(), f.member(&f.files[0]).unwrap().as_str()), (1, "files/t/a"));
        assert_eq!(serde_json::to_value(&m.artifacts[0]).unwrap(), file);
        let model = json!({"commit": "c0ffee", "files": [{"member": "models/o/m/c0ffee/w", "path": "w", "sha256": sha, "size": 2}],
            "hub": "https://huggingface.co", "kind": "model", "repo": "o/m", "revision": "main"});
        assert_eq!(serde_json::to_value(serde_json::from_value::<Artifact>(model.clone()).unwrap()).unwrap(), model);
        let deb = json!({"architecture": "amd64", "kind": "deb", "name": "jq", "path": "debs/jq.deb", "repo": "http://r",
            "sha256": sha, "size": 1, "suite": "s", "version": "1"});
        assert_eq!(serde_json::to_value(serde_json::from_value::<Artifact>(deb.clone()).unwrap()).unwrap(), deb);

        let refused = |text: String| serde_json::from_str::<Artifact>(&text).unwrap_err().to_string();
        let with = |key: &str, value: serde_json::Value| {
            let mut v = deb.clone();
            if value.is_null() {
                v.as_object_mut().unwrap().remove(key);
            } else {
                v[key] = value;
            }
            v.to_string()
        };
        assert!(refused(with("files", json!([]))).contains("unknown field `files`"));
        assert!(refused(with("kind", serde_json::Value::Null)).contains("missing field `kind`"));
        assert!(refused(with("suite", serde_json::Value::Null)).contains("deb artifact: missing field `suite`"));
        assert!(refused(with("kind", json!("tarball"))).contains("unknown variant `tarball`"));
        assert!(refused(with("kind", json!(7))).contains("`kind` is not a string"));
        assert!(refused(r#"{"kind": "deb", "kind": "deb"}"#.into()).contains("duplicate field `kind`"));
        assert!(refused(r#"{"kind": "file", "files": [], "files": []}"#.into()).contains("duplicate field `files`"));

        // A file's member is not held: it must be what the artifact gives, or the read fails.
        let two = |a: &str, b: &str| {
            let mut v = file.clone();
            v["files"] = json!([{"member": a, "path": "a", "sha256": sha, "size": 1},
                                {"member": b, "path": "b", "sha256": sha, "size": 0}]);
            v.to_string()
        };
        assert!(serde_json::from_str::<Artifact>(&two("files/t/a", "files/t/b")).is_ok());
        let refusal = refused(two("files/t/a", "files/u/b"));
        assert!(
            refusal.contains("file `b` is at `files/u/b`, not under `files/t/` with the files before it"),
            "{refusal}"
        );
        let refusal = refused(two("files/t/x", "files/t/b"));
        assert!(
            refusal.contains("file `a` is not at `files/t/x`: a file's member is its directory, then `/a`"),
            "{refusal}"
        );
        let refusal = refused(two("files/t/ba", "files/t/b"));
        assert!(refusal.contains("file `a` is not at `files/t/ba`"), "{refusal}");
        let refusal = refused(two("files/u/a", "files/u/b"));
        assert!(refusal.contains("file `t` tree file `a` is not at `files/t/a`"), "{refusal}");
        let commit = "c0ffee".repeat(10)[..40].to_owned();
        let mut moved = model.clone();
        moved["commit"] = json!(commit);
        moved["files"][0]["member"] = json!(format!("models/o/other/{commit}/w"));
        let refusal = refused(moved.to_string());
        assert!(refusal.contains(&format!("model `o/m` file `w` is not at `models/o/m/{commit}/w`")), "{refusal}");
        // A commit that is not one is named as such before the file it moved.
        moved["commit"] = json!("c0ffee");
        assert!(refused(moved.to_string()).contains("commit `c0ffee` is not a hex commit sha"));
    }

    fn manifest(entries: &[&str]) -> Manifest {
        let d = Sha256::of_bytes(b"");
        Manifest {
            schema: SCHEMA_V1.into(),
            name: BundleName::new("demo").unwrap(),
            version: semver::Version::new(1, 0, 0),
            description: None,
            created: Timestamp::from_unix(0),
            builder: Builder { tool: "airlock/test".into(), key_id: crate::sign::KeyId::of_spki_der(b"k") },
            spec_sha256: d,
            lock_sha256: d,
            artifacts: vec![],
            entries: entries
                .iter()
                .map(|p| Entry { path: MemberPath::new(*p).unwrap(), size: 0, sha256: d, from_base: false })
                .collect(),
            base: None,
            validation: Validation::default(),
            expires: None,
        }
    }

    #[test]
    fn canonical_bytes_are_rfc8785() {
        let bytes = manifest(&["files/a"]).canonical_bytes();
        let text = String::from_utf8(bytes).unwrap();
        // Keys sorted by UTF-16 code units, no insignificant whitespace.
        assert!(text.starts_with(r#"{"artifacts":[],"builder":{"key_id":""#), "{text}");
        assert!(text.contains(r#""entries":[{"path":"files/a","sha256":"e3b0"#), "{text}");
        assert!(!text.contains(": ") && !text.contains('\n'));
        // Same value, same bytes; parsing and re-canonicalising is the identity.
        let back: Manifest = serde_json::from_str(&text).unwrap();
        assert_eq!(back.canonical_bytes(), text.as_bytes());
    }

    #[test]
    fn a_validation_section_this_airlock_cannot_read_refuses_the_manifest() {
        let text = String::from_utf8(manifest(&["files/a"]).canonical_bytes()).unwrap();
        assert!(text.contains(r#""validation":{}"#), "{text}");
        let with = |section: &str| text.replace(r#""validation":{}"#, &format!(r#""validation":{section}"#));
        // A newer airlock's field in a row: never read as "no targets", never skipped.
        let err = serde_json::from_str::<Manifest>(&with(r#"{"target":[{"gpu":"MI300X","pcie_gen":"5"}]}"#))
            .unwrap_err()
            .to_string();
        assert!(err.contains("`validation`") && err.contains("pcie_gen") && err.contains("newer airlock"), "{err}");
        let err = serde_json::from_str::<Manifest>(&with(r#"{"check":[{"name":"rvs"}]}"#)).unwrap_err().to_string();
        assert!(err.contains("`validation`") && err.contains("run"), "{err}");
        // None at all, or null: nothing to decide.
        let none = serde_json::from_str::<Manifest>(&with("null")).unwrap();
        assert_eq!(none.validation, Validation::default());
    }

    #[test]
    fn the_streamed_canonical_bytes_are_the_crates_for_every_field() {
        use serde_json::json;
        let sha = "ab".repeat(32);
        let file = |path: &str| json!({"member": format!("files/t/{path}"), "path": path, "sha256": sha, "size": 3});
        let mut m = manifest(&["files/t/a", "files/t/b", "models/o/m/c0ffee/w"]);
        m.entries[1].from_base = true;
        m.description = Some("Ünïcode \"quoted\" \u{1}".into());
        m.expires = Some(Timestamp::from_unix(1_900_000_000));
        m.base = Some(BaseRef {
            manifest_sha256: Some(m.spec_sha256),
            name: Some(m.name.clone()),
            version: None,
            lock_sha256: m.lock_sha256,
        });
        m.validation = serde_json::from_value(json!({"rocm_from": "libamdhip64-5", "target": [
            {"gpu": "MI300X", "os": ["ubuntu 24.04", "rhel 9.4"], "firmware": {"é": ">=1", "PLDM_BUNDLE": ">=01.25.05.00"},
             "source": "Ünïcode \"quoted\" \u{1}"}], "check": [{"name": "rvs", "run": ["rvs", "-c", "x"], "timeout_s": 60,
             "metric": [{"name": "bw", "from": "json:/a", "better": "higher", "threshold": ">= 0.95 * current"}]}],
            "impact": [{"component": "hip", "old": "a", "new": "b", "test": "rvs", "owner": "o", "decision": "accept"}]}))
        .unwrap();
        m.artifacts = serde_json::from_value(json!([
            {"kind": "file", "name": "t", "source": "t/", "sha256": sha, "size": 6, "path": "files/t", "file_kind": "generic",
             "notes": {"why": "a tree", "a": "b"}, "files": [file("a"), file("b")]},
            {"kind": "file", "name": "one", "source": "https://x/one", "sha256": sha, "size": 1, "path": "files/one", "file_kind": "generic"},
            {"kind": "model", "hub": "https://huggingface.co", "repo": "o/m", "revision": "main", "commit": "c0ffee",
             "files": [{"member": "models/o/m/c0ffee/w", "path": "w", "sha256": sha, "size": 2}]},
            {"kind": "model", "hub": "https://huggingface.co", "repo": "o/e", "revision": "main", "commit": "c0ffee", "files": []},
            {"kind": "deb", "name": "jq", "version": "1.6-2", "architecture": "amd64", "repo": "http://r", "suite": "s",
             "sha256": sha, "size": 1, "path": "debs/jq.deb", "required_by": ["x"]},
            {"kind": "rpm", "name": "rocm-core", "epoch": 1, "version": "6.4.1", "release": "1.el9", "architecture": "x86_64",
             "repo": "http://r", "sha256": sha, "size": 1, "path": "rpms/r.rpm"},
            {"kind": "wheel", "name": "numpy", "version": "2.0.0", "filename": "numpy.whl", "url": "http://p/numpy.whl",
             "sha256": sha, "size": 1, "path": "wheels/numpy.whl", "dependencies": ["a"]},
            {"kind": "image", "reference": "r/i:1", "source": "r/i:1", "digest": format!("sha256:{sha}"),
             "media_type": "application/vnd.oci.image.index.v1+json", "size": 9},
        ]))
        .unwrap();
        m.list_tree_files();
        let expected = serde_json_canonicalizer::to_vec(&m).unwrap();
        assert_eq!(String::from_utf8(m.canonical_bytes()).unwrap(), String::from_utf8(expected.clone()).unwrap());
        assert_eq!(m.canonical_digest(), (Sha256::of_bytes(&expected), expected.len() as u64));
        // And with nothing in the lists.
        let empty = manifest(&[]);
        assert_eq!(empty.canonical_bytes(), serde_json_canonicalizer::to_vec(&empty).unwrap());
    }

    #[test]
    fn canonical_json_follows_jcs_for_numbers_and_strings() {
        let v = serde_json::json!({"b": 1.0, "a": "\u{20ac}\n", "c": [1e21, 0.000_001]});
        let s = String::from_utf8(serde_json_canonicalizer::to_vec(&v).unwrap()).unwrap();
        assert_eq!(s, "{\"a\":\"\u{20ac}\\n\",\"b\":1,\"c\":[1e+21,0.000001]}");
    }

    /// A directory read from a manifest holds no files: the entries under it must be its
    /// listing, file for file, or `check` refuses the manifest.
    #[test]
    fn a_directory_that_was_read_is_proved_by_the_entries_under_it() {
        use serde_json::json;
        let (x, y) = (Sha256::of_bytes(b"x"), Sha256::of_bytes(b"yy"));
        let tree = |listing: &[(&str, Sha256, u64)], claimed: Option<Sha256>| {
            let files: Vec<_> = listing
                .iter()
                .map(|(p, sha, size)| json!({"member": format!("files/t/{p}"), "path": p, "sha256": sha.to_string(), "size": size}))
                .collect();
            let digest = claimed.unwrap_or_else(|| crate::spec::lock::tree_digest(listing.iter().copied()));
            let size: u64 = listing.iter().map(|f| f.2).sum();
            json!({"kind": "file", "name": "t", "source": "t/", "sha256": digest.to_string(), "size": size,
                   "path": "files/t", "file_kind": "generic", "files": files})
        };
        let checked = |entries: &[(&str, Sha256, u64)], artifact: serde_json::Value| {
            let mut m = manifest(&[SBOM]);
            for (p, sha256, size) in entries {
                m.entries.push(Entry {
                    path: MemberPath::new(*p).unwrap(),
                    size: *size,
                    sha256: *sha256,
                    from_base: false,
                });
            }
            m.artifacts = vec![serde_json::from_value(artifact).unwrap()];
            m.check()
        };
        let listing = [("a", x, 1), ("b", y, 2)];
        let entries = [("files/t/a", x, 1), ("files/t/b", y, 2), ("files/tt/c", x, 1)];
        assert_eq!(checked(&entries, tree(&listing, None)), Ok(()));
        let reversed: Vec<_> = entries.iter().rev().copied().collect();
        assert_eq!(checked(&reversed, tree(&listing, None)), Ok(()), "entries in another order are looked up");

        let refused = |entries: &[(&str, Sha256, u64)], artifact| checked(entries, artifact).unwrap_err().to_string();
        let unlike = "file `t`: its 2 files do not match the";
        let other = refused(&[("files/t/a", x, 1), ("files/t/b", x, 2)], tree(&listing, None));
        assert!(other.contains(unlike), "{other}");
        let more = refused(&[("files/t/a", x, 1), ("files/t/b", y, 2), ("files/t/c", x, 1)], tree(&listing, None));
        assert!(more.contains(&format!("{unlike} 3 entries under `files/t/`")), "{more}");
        let fewer = refused(&[("files/t/a", x, 1)], tree(&listing, None));
        assert!(fewer.contains(&format!("{unlike} 1 entries")), "{fewer}");
        let backwards = refused(&entries, tree(&[("b", y, 2), ("a", x, 1)], None));
        assert!(backwards.contains(unlike), "a listing out of path order: {backwards}");
        let claimed = refused(&entries, tree(&listing, Some(x)));
        assert!(claimed.contains("do not give the tree digest and size it claims"), "{claimed}");
    }

    /// `build` holds a directory's files as entries once the SBOM is written: the manifest it
    /// writes is the same, and reads back the same way.
    #[test]
    fn a_directory_held_as_entries_writes_the_same_manifest() {
        let (x, y) = (Sha256::of_bytes(b"x"), Sha256::of_bytes(b"yy"));
        let mut m = manifest(&[SBOM, "files/t/a", "files/t/b/c"]);
        (m.entries[1].sha256, m.entries[1].size, m.entries[2].sha256, m.entries[2].size) = (x, 1, y, 2);
        let files = vec![
            ModelFile { path: MemberPath::new("a").unwrap(), sha256: x, size: 1 },
            ModelFile { path: MemberPath::new("b/c").unwrap(), sha256: y, size: 2 },
        ];
        let digest = crate::spec::lock::tree_digest([("a", x, 1), ("b/c", y, 2)]);
        m.artifacts = vec![Artifact::File(FileArtifact {
            name: FileName::new("t").unwrap(),
            source: "t/".into(),
            sha256: digest,
            size: 3,
            path: MemberPath::new("files/t").unwrap(),
            file_kind: FileKind::Generic,
            notes: BTreeMap::new(),
            files,
            tree: None,
            signature: None,
        })];
        let written = m.canonical_bytes();
        m.hold_trees_as_entries();
        let Artifact::File(f) = &m.artifacts[0] else { unreachable!() };
        assert_eq!((f.files.len(), f.tree), (0, Some(TreeListing { count: 2, total: 3, digest })));
        assert_eq!(String::from_utf8(m.canonical_bytes()).unwrap(), String::from_utf8(written.clone()).unwrap());
        assert_eq!(m.check(), Ok(()));
        let read: Manifest = serde_json::from_slice(&written).unwrap();
        assert_eq!(read.artifacts, m.artifacts);
    }

    #[test]
    fn check_refuses_unsafe_manifests() {
        assert!(manifest(&[SBOM, "files/a", "wheels/b.whl"]).check().is_ok());
        assert!(manifest(&[SBOM, "files/a", "files/a"]).check().unwrap_err().to_string().contains("listed twice"));
        assert!(manifest(&[SBOM, "etc/passwd"]).check().unwrap_err().to_string().contains("outside the areas"));
        assert!(manifest(&[SBOM, MANIFEST]).check().unwrap_err().to_string().contains("reserved"));
        assert!(manifest(&[SBOM]).check().is_ok());
        assert!(manifest(&["files/a"]).check().unwrap_err().to_string().contains("lists its SBOM"));
        assert!(
            manifest(&[SBOM, "files/a", "files/a/b"]).check().unwrap_err().to_string().contains("also the directory")
        );
        let mut m = manifest(&[SBOM, "files/a"]);
        m.entries[1].from_base = true;
        assert!(m.check().unwrap_err().to_string().contains("names no base"));
        m.base = Some(BaseRef { manifest_sha256: None, name: None, version: None, lock_sha256: Sha256::of_bytes(b"") });
        assert!(m.check().is_ok());
        m.entries[0].from_base = true;
        assert!(m.check().unwrap_err().to_string().contains("always carried"));
        let mut m = manifest(&[]);
        m.schema = "airlock.bundle/v2".into();
        assert!(m.check().unwrap_err().to_string().contains("expected `airlock.bundle/v1`"));
    }

    #[test]
    fn entries_are_found_by_path_sorted_or_not_and_a_path_listed_twice_is_named() {
        let paths = ["airlock/sbom.cdx.json", "files/a", "files/a.txt", "files/a/b", "images/x", "wheels/w.whl"];
        let sorted = manifest(&paths);
        let mut reversed = paths;
        reversed.reverse();
        let reversed = manifest(&reversed);
        for (m, is_sorted) in [(&sorted, true), (&reversed, false)] {
            let by_path = ByPath::new(&m.entries).unwrap();
            assert_eq!(by_path.index.is_none(), is_sorted, "an index only for unsorted entries");
            for p in paths {
                assert_eq!(by_path.get(p).map(|e| e.path.as_str()), Some(p));
            }
            for absent in ["", "files", "files/a/", "files/b", "zzz"] {
                assert!(by_path.get(absent).is_none(), "{absent}");
            }
            // `files/a` is also the directory of `files/a/b`, in either order.
            assert!(
                m.check()
                    .unwrap_err()
                    .to_string()
                    .contains("entry `files/a` is also the directory of entry `files/a/b`")
            );
        }
        for twice in
            [&["airlock/sbom.cdx.json", "files/a", "files/a"][..], &["files/a", "airlock/sbom.cdx.json", "files/a"]]
        {
            assert_eq!(ByPath::new(&manifest(twice).entries).err(), Some("files/a"));
            assert_eq!(manifest(twice).check().unwrap_err(), ManifestError::ListedTwice { path: "files/a".into() });
        }
        assert!(manifest(&["files/z", "airlock/sbom.cdx.json"]).check().is_ok());
    }
}
