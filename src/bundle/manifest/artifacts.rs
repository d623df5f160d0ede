//! The artifacts a manifest lists (images, wheels, debs, rpms, models, files) and their wire form:
//! a directory's files summed up as they are read, each kind refused as a tagged enum refuses it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Manifest;
use crate::digest::{Prefixed, Sha256};
use crate::member_path::{MemberPath, MemberPathError};
use crate::spec::lock::TreeDigest;
use crate::spec::{FileKind, FileName};

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
pub(super) struct TreeSum {
    digest: TreeDigest,
    count: usize,
    total: u64,
}

impl TreeSum {
    pub(super) fn add(&mut self, path: &str, sha256: Sha256, size: u64) {
        self.digest.add(path, sha256, size);
        self.count += 1;
        self.total = self.total.saturating_add(size);
    }

    pub(super) fn finish(self) -> TreeListing {
        TreeListing { count: self.count, total: self.total, digest: self.digest.finish() }
    }
}

impl FileArtifact {
    /// The target a carried airlock binary runs on (its `target` note); `None` for another
    /// kind of file.
    pub fn airlock_target(&self) -> Option<&str> {
        (self.file_kind == FileKind::Airlock)
            .then(|| self.notes.get(crate::spec::AIRLOCK_TARGET).map(String::as_str))
            .flatten()
    }

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
pub(super) struct Listing<'a> {
    dir: String,
    files: &'a [ModelFile],
}

#[derive(Serialize)]
pub(super) struct Listed<'a> {
    pub(super) path: &'a str,
    pub(super) member: String,
    pub(super) sha256: Sha256,
    pub(super) size: u64,
}

impl Listing<'_> {
    pub(super) fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    pub(super) fn items(&self) -> impl Iterator<Item = Listed<'_>> {
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
pub(super) struct FilesRead {
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
                    let why = Manifest::check_model_names(m).err().map_or_else(
                        || format!("model `{}` file `{first}` is not at `{}/{first}`", m.repo, m.dir()),
                        |e| e.to_string(),
                    );
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
    pub(super) fn without_files(&self) -> Artifact {
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
    pub(super) fn listing(&self) -> Listing<'_> {
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
