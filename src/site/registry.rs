//! Publishing images: every image of a staged bundle's `images/` layout is pushed to the site
//! registry under its original repository path and tag, blobs first (skipping those the
//! registry has), then platform manifests by digest, then the tagged manifest or index. The
//! bytes are the bundle's, so digests are unchanged; each is read back to prove it.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::digest::{Prefixed, Sha256};
use crate::fetch::Net;
use crate::fetch::with_retries;
use crate::oci::doc::{self, Descriptor, REF_NAME, REFERRER_OF};
use crate::oci::{ClientError, Connection, ImageRef, Transport, connect, retryable};

/// Where to publish images: `--registry HOST[:PORT]` and `--insecure-registry`.
#[derive(Debug, Clone)]
pub struct SiteRegistry {
    pub host: String,
    pub transport: Transport,
}

impl SiteRegistry {
    pub fn is_insecure(&self) -> bool {
        self.transport == Transport::InsecureHttp
    }
}

impl From<&super::state::RegistryMemo> for SiteRegistry {
    fn from(memo: &super::state::RegistryMemo) -> Self {
        let transport = if memo.insecure { Transport::InsecureHttp } else { Transport::Https };
        Self { host: memo.host.clone(), transport }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("pushing `{target}`: {detail}")]
    Push { target: String, detail: String },
    #[error("staged image layout `{}`: {detail}", path.display())]
    Layout { path: PathBuf, detail: String },
}

impl crate::failure::Classify for PublishError {
    fn class(&self) -> crate::failure::Class {
        match self {
            PublishError::Client(e) => e.class(),
            _ => crate::failure::Class::Runtime,
        }
    }
}

/// One image as published.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Pushed {
    pub reference: String,
    pub target: String,
    pub digest: Prefixed,
    pub blobs_pushed: usize,
    pub blobs_present: usize,
}

/// Push the retained bundle's images to the site registry, or say how many were not published.
pub(super) fn publish_images(
    retained: &super::retain::Retained,
    site: Option<&SiteRegistry>,
    net: &Net,
) -> Result<(Vec<Pushed>, usize), super::SiteError> {
    let publish_err = |source| super::SiteError::Publish { id: retained.id.clone(), source };
    if let Some(site) = site {
        return Ok((publish(&retained.path, site, net).map_err(publish_err)?, 0));
    }
    let carried = staged_images(&retained.path).map_err(publish_err)?.len();
    if carried > 0 {
        tracing::warn!("the bundle carries {carried} image manifest(s); pass --registry HOST[:PORT] to publish them");
    }
    Ok((Vec::new(), carried))
}

/// The images a staged tree carries: its layout's index entries, or none.
pub fn staged_images(staged: &Path) -> Result<Vec<Descriptor>, PublishError> {
    let path = staged.join("images/index.json");
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(PublishError::Layout { path, detail: e.to_string() }),
    };
    doc::parse_layout_index(&bytes).map_err(|detail| PublishError::Layout { path, detail })
}

/// Push every image of the staged tree to `site`, on the command's runtime.
pub fn publish(staged: &Path, site: &SiteRegistry, net: &Net) -> Result<Vec<Pushed>, PublishError> {
    let images = staged_images(staged)?;
    if images.is_empty() {
        return Ok(Vec::new());
    }
    net.block_on(publish_all(staged, site, &images, *net.http().options()))
}

async fn publish_all(
    staged: &Path,
    site: &SiteRegistry,
    images: &[Descriptor],
    options: crate::fetch::NetOptions,
) -> Result<Vec<Pushed>, PublishError> {
    let conn = connect(&site.host, site.transport, None, (options.connect_timeout, options.read_timeout)).await?;
    let insecure = if site.is_insecure() { vec![site.host.clone()] } else { Vec::new() };
    let reach = crate::oci::Reach { insecure, ca: None, options };
    let layout = staged.join("images");
    let mut out = Vec::new();
    for entry in images {
        let bad = |detail| PublishError::Layout { path: layout.clone(), detail };
        // A tagged entry goes to its tag; an untagged referrer by digest to its subject's repository.
        let (name, target) = match (entry.annotations.get(REF_NAME), entry.annotations.get(REFERRER_OF)) {
            (Some(name), _) => (name.clone(), ImageRef::parse(name).map_err(bad)?.on_registry(&site.host)),
            (None, Some(subject)) => {
                let target = ImageRef::parse(subject).map_err(bad)?.on_registry(&site.host).at_digest(entry.digest);
                (format!("referrer of {subject}"), target)
            }
            (None, None) => return Err(bad(format!("entry sha256:{} has no name", entry.digest))),
        };
        out.push(push_image(&conn, &reach, &layout, entry, &name, &target).await?);
    }
    Ok(out)
}

/// Push one image: blobs through the chunked upload that retries and resumes, manifests
/// with retries; every request follows the command's retry policy (`fetch::with_retries`).
async fn push_image(
    conn: &Connection,
    reach: &crate::oci::Reach,
    layout: &Path,
    entry: &Descriptor,
    name: &str,
    target: &ImageRef,
) -> Result<Pushed, PublishError> {
    let push_err = |e: &dyn std::fmt::Display| PublishError::Push { target: target.to_string(), detail: e.to_string() };
    let reference = target.to_client();
    let options = &reach.options;
    let uploader = crate::oci::upload::Uploader::new(conn, target, reach, crate::oci::upload::DEFAULT_CHUNK)
        .await
        .map_err(|e| push_err(&e))?;
    let top = read(layout, entry.digest).await?;
    let document = doc::parse(&top).map_err(|e| push_err(&e))?;
    // (digest, media type, bytes) of manifests to push before the top one.
    let mut children = Vec::new();
    let mut blobs = document.blobs.clone();
    for child in &document.children {
        let bytes = read(layout, child.digest).await?;
        blobs.extend(doc::parse(&bytes).map_err(|e| push_err(&e))?.blobs);
        children.push((child.digest, child.media_type.clone(), bytes));
    }
    let (mut pushed, mut present) = (0, 0);
    for blob in &blobs {
        let digest = format!("sha256:{}", blob.digest);
        let exists = || conn.client.blob_exists(&reference, &digest);
        if with_retries(options, &format!("blob {digest} on {target}"), exists, retryable)
            .await
            .map_err(|e| push_err(&e))?
        {
            present += 1;
            continue;
        }
        tracing::debug!("uploading blob {digest} to {target}");
        let path = layout.join("blobs/sha256").join(blob.digest.to_string());
        uploader.upload(&path, blob, &crate::progress::Silent).await.map_err(|e| push_err(&e))?;
        pushed += 1;
    }
    for (digest, media_type, bytes) in children {
        push_manifest(conn, options, &target.at_digest(digest), &media_type, bytes, digest).await?;
    }
    push_manifest(conn, options, target, &document.media_type, top, entry.digest).await?;
    Ok(Pushed {
        reference: name.to_owned(),
        target: target.to_string(),
        digest: Prefixed(entry.digest),
        blobs_pushed: pushed,
        blobs_present: present,
    })
}

/// Push manifest bytes as they are (never re-serialised) and read the digest back.
async fn push_manifest(
    conn: &Connection,
    options: &crate::fetch::NetOptions,
    target: &ImageRef,
    media_type: &str,
    bytes: Vec<u8>,
    digest: Sha256,
) -> Result<(), PublishError> {
    let push_err = |detail: String| PublishError::Push { target: target.to_string(), detail };
    let content_type: reqwest::header::HeaderValue =
        media_type.parse().map_err(|_| push_err(format!("invalid media type `{media_type}`")))?;
    let reference = target.to_client();
    let what = format!("manifest {target}");
    let put = || conn.client.push_manifest_raw(&reference, bytes.clone(), content_type.clone());
    with_retries(options, &what, put, retryable).await.map_err(|e| push_err(e.to_string()))?;
    let head = || conn.client.fetch_manifest_digest(&reference, &conn.auth);
    let served = with_retries(options, &what, head, retryable).await.map_err(|e| push_err(e.to_string()))?;
    if served != format!("sha256:{digest}") {
        return Err(push_err(format!("the registry serves {served}, expected sha256:{digest}")));
    }
    Ok(())
}

async fn read(layout: &Path, digest: Sha256) -> Result<Vec<u8>, PublishError> {
    let path = layout.join("blobs/sha256").join(digest.to_string());
    tokio::fs::read(&path).await.map_err(|e| PublishError::Layout { path, detail: e.to_string() })
}
