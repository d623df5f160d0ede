//! Bundles as OCI artifacts: `push`, `pull`, `copy`, and the stream `install oci://…` reads,
//! through the registries sites already run (distribution, Harbor, Quay, Zot), so that their
//! replication and garbage collection carry bundles like any image, and `oras` or `skopeo` can
//! copy one without knowing airlock.
//!
//! The artifact is an OCI image manifest (image spec 1.1 artifact usage):
//!
//! ```text
//! artifactType  application/vnd.airlock.bundle.v1
//! config        the empty descriptor (application/vnd.oci.empty.v1+json, `{}`)
//! layers[0]     airlock/manifest.json, the signed manifest (small: read first)
//! layers[1..]   the bundle file, or its parts in order (`build --split-size`)
//! annotations   name, version, created, bundle id and manifest sha256
//! ```
//!
//! Its bytes depend only on the bundle, so a bundle has one artifact digest on every registry.
//! Co-signatures (`BUNDLE.KEYID.sig`) are referrers: one artifact each whose `subject` is the
//! bundle's manifest, listed through the referrers API where the registry has it and through
//! the referrers tag schema (`sha256-HEX`, an index) always, since registries without the API
//! (distribution 2.x) need it and those with it ignore it.

mod stream;
mod verbs;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::bundle::Manifest;
use crate::digest::{Prefixed, Sha256};
use crate::failure::{Class, Classify};
use crate::oci::StoreError;
use crate::oci::doc::{Descriptor, OCI_MANIFEST};
pub use crate::oci::upload::DEFAULT_CHUNK;
pub use crate::oci::{Location, Reach};
use crate::sign::KeyId;
pub use stream::open_stream;
pub use verbs::{Copied, Found, Pulled, Pushed, copy, fetch_cosignatures, pull, push, resolve};

pub const ARTIFACT_TYPE: &str = "application/vnd.airlock.bundle.v1";
/// Layer 0: the signed `airlock/manifest.json`.
pub const MANIFEST_LAYER: &str = "application/vnd.airlock.manifest.v1+json";
/// The bundle file as one layer.
pub const BUNDLE_LAYER: &str = "application/vnd.airlock.bundle.v1.tar+zstd";
/// One part of a split bundle (the layers in order are the bundle's bytes).
pub const PART_LAYER: &str = "application/vnd.airlock.bundle.part.v1";
pub const COSIGNATURE_TYPE: &str = "application/vnd.airlock.cosignature.v1";
/// A co-signature file's bytes (cosign `sign-blob` base64).
pub const COSIGNATURE_LAYER: &str = "application/vnd.airlock.cosignature.v1+base64";
/// The empty config of an artifact (OCI image spec 1.1): the two bytes `{}`.
pub const EMPTY_CONFIG: &str = "application/vnd.oci.empty.v1+json";
pub const EMPTY_BYTES: &[u8] = b"{}";
pub const TITLE: &str = "org.opencontainers.image.title";
pub const KEY_ID: &str = "dev.airlock.key_id";
pub const BUNDLE_ID: &str = "dev.airlock.bundle.id";
pub const BUNDLE_MANIFEST: &str = "dev.airlock.bundle.manifest_sha256";

#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{target}: {detail}")]
    Registry { target: String, detail: String },
    #[error("{target} is not an airlock bundle: {detail}")]
    NotABundle { target: String, detail: String },
    #[error("bundle pulled from {target} failed verification; nothing was written: {detail}")]
    Rejected { target: String, detail: String },
    #[error(transparent)]
    Parts(#[from] crate::bundle::parts::PartsError),
    #[error(transparent)]
    Cache(#[from] crate::cache::CacheError),
    #[error("`{}`: {detail}", path.display())]
    Io { path: PathBuf, detail: String },
    #[error(
        "{target} declares a bundle of {declared} bytes; `{}` has {available} bytes free for the {needed} bytes \
         a pull writes (cache and output); nothing was downloaded",
        path.display()
    )]
    NoSpace { target: String, declared: u64, needed: u64, path: PathBuf, available: u64 },
    #[error(transparent)]
    TagMismatch(#[from] crate::bundle::manifest::TagMismatch),
    #[error(transparent)]
    Policy(#[from] crate::sign::policy::PolicyError),
}

impl Classify for ArtifactError {
    fn class(&self) -> Class {
        match self {
            ArtifactError::Store(e) => e.class(),
            ArtifactError::NotABundle { .. } | ArtifactError::Rejected { .. } => Class::Verification,
            ArtifactError::Parts(e) => e.class(),
            ArtifactError::Cache(e) => e.class(),
            ArtifactError::Registry { .. } | ArtifactError::Io { .. } | ArtifactError::NoSpace { .. } => Class::Runtime,
            ArtifactError::TagMismatch(e) => e.class(),
            ArtifactError::Policy(e) => e.class(),
        }
    }
}

/// An OCI image manifest as artifacts use it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArtifactManifest {
    #[serde(rename = "schemaVersion")]
    pub schema_version: u32,
    #[serde(rename = "mediaType")]
    pub media_type: String,
    #[serde(rename = "artifactType", default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Descriptor>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl ArtifactManifest {
    fn new(artifact_type: &str, layers: Vec<Descriptor>, annotations: BTreeMap<String, String>) -> Self {
        Self {
            schema_version: 2,
            media_type: OCI_MANIFEST.to_owned(),
            artifact_type: Some(artifact_type.to_owned()),
            config: descriptor(EMPTY_CONFIG, Sha256::of_bytes(EMPTY_BYTES), EMPTY_BYTES.len() as u64, None),
            layers,
            subject: None,
            annotations,
        }
    }

    pub fn bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a manifest serialises")
    }

    /// Parse an airlock bundle artifact, or say why it is not one.
    pub fn parse_bundle(bytes: &[u8], target: &str) -> Result<Self, ArtifactError> {
        let not = |detail: String| ArtifactError::NotABundle { target: target.to_owned(), detail };
        let m: Self = serde_json::from_slice(bytes).map_err(|e| not(format!("not an OCI image manifest: {e}")))?;
        if m.artifact_type.as_deref() != Some(ARTIFACT_TYPE) {
            return Err(not(format!("its artifactType is {:?}, expected `{ARTIFACT_TYPE}`", m.artifact_type)));
        }
        if m.layers.first().is_none_or(|l| l.media_type != MANIFEST_LAYER) || m.data_layers().is_empty() {
            return Err(not("it does not hold a manifest layer followed by the bundle's layers".into()));
        }
        Ok(m)
    }

    /// The layers that are the bundle's bytes, in order.
    pub fn data_layers(&self) -> Vec<Descriptor> {
        self.layers.iter().filter(|l| l.media_type == BUNDLE_LAYER || l.media_type == PART_LAYER).cloned().collect()
    }

    /// The bundle's size in bytes.
    pub fn bundle_bytes(&self) -> u64 {
        self.data_layers().iter().map(|l| l.size).sum()
    }
}

pub(crate) fn descriptor(media_type: &str, digest: Sha256, size: u64, title: Option<String>) -> Descriptor {
    Descriptor {
        media_type: media_type.to_owned(),
        digest,
        size,
        platform: None,
        annotations: title.map(|t| BTreeMap::from([(TITLE.to_owned(), t)])).unwrap_or_default(),
        artifact_type: None,
    }
}

/// The annotations of a bundle artifact: what `oras`, `skopeo inspect` and registry UIs show.
fn bundle_annotations(m: &Manifest, manifest_sha256: Sha256) -> BTreeMap<String, String> {
    BTreeMap::from([
        (TITLE.to_owned(), file_name(m)),
        ("org.opencontainers.image.version".to_owned(), m.version.to_string()),
        ("org.opencontainers.image.created".to_owned(), m.created.to_string()),
        ("dev.airlock.bundle.name".to_owned(), m.name.to_string()),
        ("dev.airlock.bundle.version".to_owned(), m.version.to_string()),
        (BUNDLE_ID.to_owned(), manifest_sha256.short(16)),
        (BUNDLE_MANIFEST.to_owned(), manifest_sha256.to_string()),
    ])
}

/// `NAME-VERSION.airlock`: the bundle's name in an artifact, whatever the local file is called.
fn file_name(m: &Manifest) -> String {
    format!("{}-{}.airlock", m.name, m.version)
}

/// The co-signature artifact for `signature` by `key_id`, referring to `subject`.
fn cosignature_manifest(subject: &Descriptor, bundle_name: &str, key_id: &KeyId, signature: &[u8]) -> ArtifactManifest {
    let mut layer = descriptor(
        COSIGNATURE_LAYER,
        Sha256::of_bytes(signature),
        signature.len() as u64,
        Some(format!("{bundle_name}.{key_id}.sig")),
    );
    layer.annotations.insert(KEY_ID.to_owned(), key_id.to_string());
    let mut m =
        ArtifactManifest::new(COSIGNATURE_TYPE, vec![layer], BTreeMap::from([(KEY_ID.to_owned(), key_id.to_string())]));
    m.subject = Some(subject.clone());
    m
}

/// What a reference names, with its tag resolved once.
#[derive(Debug, Clone, Serialize)]
pub struct Resolved {
    /// As given (`HOST/REPO:TAG` or `@sha256:…`).
    pub reference: String,
    pub digest: Prefixed,
    pub id: String,
    pub name: String,
    pub version: String,
    pub bytes: u64,
}

/// Read files one after another as one stream.
fn chained(paths: &[PathBuf]) -> Result<Box<dyn std::io::Read + Send>, ArtifactError> {
    let mut reader: Box<dyn std::io::Read + Send> = Box::new(std::io::empty());
    for path in paths {
        let file =
            std::fs::File::open(path).map_err(|e| ArtifactError::Io { path: path.clone(), detail: e.to_string() })?;
        reader = Box::new(std::io::Read::chain(reader, file));
    }
    Ok(Box::new(std::io::BufReader::with_capacity(1 << 20, reader)))
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> ArtifactError + '_ {
    move |e| ArtifactError::Io { path: path.to_owned(), detail: e.to_string() }
}
