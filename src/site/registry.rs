//! Publishing images: every image of a staged bundle's `images/` layout is pushed to the site
//! registry under its original repository path and tag, blobs first (skipping those the
//! registry has), then platform manifests by digest, then the tagged manifest or index. The
//! layout and the registry are both `oci::Store`s, as for `push` and `copy`; the bytes are the
//! bundle's, so digests are unchanged; the top manifest is read back to prove it.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::digest::Prefixed;
use crate::fetch::Net;
use crate::oci::doc::{self, Descriptor, REF_NAME, REFERRER_OF};
use crate::oci::store::{Reach, Store};
use crate::oci::upload::{DEFAULT_CHUNK, Uploader};
use crate::oci::{ClientError, ImageRef, Transport};

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
            // The registry refused, or the staged layout (verified when staged) cannot be read:
            // the site's side.
            PublishError::Push { .. } | PublishError::Layout { .. } => crate::failure::Class::Runtime,
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

/// Push the images of the bundle retained as `id` at `tree` to the site registry, or say how
/// many were not published.
pub(super) fn publish_images(
    id: &super::root::BundleId,
    tree: &Path,
    site: Option<&SiteRegistry>,
    net: &Net,
) -> Result<(Vec<Pushed>, usize), super::SiteError> {
    let publish_err = |source| super::SiteError::Publish { id: id.clone(), source };
    if let Some(site) = site {
        return Ok((publish(tree, site, net).map_err(publish_err)?, 0));
    }
    let carried = staged_images(tree).map_err(publish_err)?.len();
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
    doc::parse_layout_index(&bytes).map_err(|e| PublishError::Layout { path, detail: e.to_string() })
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
    let insecure = if site.is_insecure() { vec![site.host.clone()] } else { Vec::new() };
    let reach = Reach { insecure, ca: None, options };
    // One connection to the site registry for every image; the staged layout as a store.
    let conn = reach
        .connect(&site.host)
        .await
        .map_err(|e| PublishError::Push { target: site.host.clone(), detail: e.to_string() })?;
    let layout = staged.join("images");
    let mut out = Vec::new();
    for entry in images {
        let bad = |detail: String| PublishError::Layout { path: layout.clone(), detail };
        // A tagged entry goes to its tag; an untagged referrer by digest to its subject's repository.
        let (name, target) = match (entry.annotations.get(REF_NAME), entry.annotations.get(REFERRER_OF)) {
            (Some(name), _) => {
                (name.clone(), ImageRef::parse(name).map_err(|e| bad(e.to_string()))?.on_registry(&site.host))
            }
            (None, Some(subject)) => {
                let target = ImageRef::parse(subject)
                    .map_err(|e| bad(e.to_string()))?
                    .on_registry(&site.host)
                    .at_digest(entry.digest);
                (format!("referrer of {subject}"), target)
            }
            (None, None) => return Err(bad(format!("entry sha256:{} has no name", entry.digest))),
        };
        out.push(push_image(&layout, &conn, target, &reach, entry, &name).await?);
    }
    Ok(out)
}

/// Push one image from the staged layout (`oci::Store`: every manifest checked against its
/// digest as it is read): blobs the registry lacks through the chunked upload that retries and
/// resumes, platform manifests by digest, then the tagged manifest or index, which is read back
/// to prove the registry serves that digest. Every request follows the command's retry policy.
async fn push_image(
    layout: &Path,
    conn: &std::sync::Arc<crate::oci::Connection>,
    image: ImageRef,
    reach: &Reach,
    entry: &Descriptor,
    name: &str,
) -> Result<Pushed, PublishError> {
    let source = Store::Layout { dir: layout.to_owned(), tag: None };
    let uploader = Uploader::new(conn, &image, reach, DEFAULT_CHUNK).await;
    let target = Store::Registry { conn: conn.clone(), image: image.clone(), options: reach.options };
    let push_err = |e: &dyn std::fmt::Display| PublishError::Push { target: target.describe(), detail: e.to_string() };
    let uploader = uploader.map_err(|e| push_err(&e))?;
    let (top, _) = source.manifest(Some(entry.digest)).await.map_err(|e| push_err(&e))?;
    let document = doc::parse(&top).map_err(|e| push_err(&e))?;
    // (media type, bytes) of manifests to push before the top one.
    let mut children = Vec::new();
    let mut blobs = document.blobs.clone();
    for child in &document.children {
        let (bytes, _) = source.manifest(Some(child.digest)).await.map_err(|e| push_err(&e))?;
        blobs.extend(doc::parse(&bytes).map_err(|e| push_err(&e))?.blobs);
        children.push((child.media_type.clone(), bytes));
    }
    let (mut pushed, mut present) = (0, 0);
    for blob in &blobs {
        if target.has_blob(blob).await.map_err(|e| push_err(&e))? {
            present += 1;
            continue;
        }
        tracing::debug!("uploading blob sha256:{} to {}", blob.digest, target.describe());
        let path = crate::oci::store::layout_blob(layout, blob.digest);
        uploader.upload(&path, blob, &crate::progress::Silent).await.map_err(|e| push_err(&e))?;
        pushed += 1;
    }
    for (media_type, bytes) in children {
        target.put_manifest(&bytes, &media_type, None).await.map_err(|e| push_err(&e))?;
    }
    target.put_manifest(&top, &document.media_type, image.tag.as_deref()).await.map_err(|e| push_err(&e))?;
    // Read back: the tag (or digest) must give the bundle's bytes.
    let (_, served) = target.manifest(None).await.map_err(|e| push_err(&e))?;
    if served != entry.digest {
        return Err(push_err(&format!("the registry serves sha256:{served}, expected sha256:{}", entry.digest)));
    }
    Ok(Pushed {
        reference: name.to_owned(),
        target: image.to_string(),
        digest: Prefixed(entry.digest),
        blobs_pushed: pushed,
        blobs_present: present,
    })
}
