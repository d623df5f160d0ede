//! Carrying locked images into the bundle's `images/` layout, in named steps: the image's
//! manifest or index (filtered to the locked platforms), its platform manifests, its upstream
//! attachments, then every blob once, then the layout's own `index.json` and `oci-layout`.

use std::collections::{BTreeMap, BTreeSet};

use futures_util::{StreamExt as _, TryStreamExt as _};

use super::ImageError;
use crate::bundle::manifest::{Attachment, AttachmentKind, ImageArtifact, ImagePlatform};
use crate::bundle::writer::{Arrivals, Member};
use crate::cache::Cache;
use crate::digest::{Prefixed, Sha256};
use crate::fetch::{Fetch, blocking};
use crate::member_path::MemberPath;
use crate::oci::Store;
use crate::oci::doc::{self, Descriptor, REF_NAME, REFERRER_OF};
use crate::progress::Silent;
use crate::spec::lock::{LockedAttachment, LockedImage};

/// What the images of one bundle gather while they are carried.
pub struct Carrier<'a> {
    cache: &'a Cache,
    /// digest -> (origin, descriptor): every blob once, from the first image that names it.
    blobs: BTreeMap<Sha256, (Store, Descriptor)>,
    /// Every manifest stored, by digest and size.
    manifests: BTreeSet<(Sha256, u64)>,
    layout_entries: Vec<Descriptor>,
}

impl<'a> Carrier<'a> {
    pub fn new(cache: &'a Cache) -> Self {
        Self { cache, blobs: BTreeMap::new(), manifests: BTreeSet::new(), layout_entries: Vec::new() }
    }

    /// Carry one image's manifests (its blobs are queued, fetched later by `fetch_blobs`).
    pub async fn carry_image(&mut self, origin: &Store, locked: &LockedImage) -> Result<ImageArtifact, ImageError> {
        let manifest_err = |detail: doc::DocError| ImageError::Document { reference: locked.reference.clone(), detail };
        let top = self.manifest(origin, locked.digest).await?;
        let document = doc::parse(&top).map_err(manifest_err)?;
        let (carried_bytes, platforms) = if document.is_index() {
            self.carry_platforms(origin, locked, &top, document.children.len()).await?
        } else {
            self.queue(origin, &document.blobs);
            (top, Vec::new())
        };
        let size = carried_bytes.len() as u64;
        let carried = self.store(&locked.reference, carried_bytes).await?;
        self.layout_entries.push(Descriptor {
            media_type: document.media_type.clone(),
            digest: carried,
            size,
            platform: None,
            annotations: BTreeMap::from([(REF_NAME.to_owned(), locked.reference.clone())]),
            artifact_type: None,
        });
        let mut attached = Vec::new();
        for a in &locked.attached {
            attached.extend(self.carry_attachment(origin, locked, a).await?);
        }
        Ok(ImageArtifact {
            reference: locked.reference.clone(),
            source: locked.source.clone(),
            digest: carried,
            upstream_digest: (carried != locked.digest).then_some(Prefixed(locked.digest)),
            media_type: document.media_type,
            size,
            platforms,
            attached,
            signature: locked.signature.clone(),
        })
    }

    /// An index's locked platform manifests, and the index as carried: byte for byte when
    /// every platform is, else filtered to the locked ones.
    async fn carry_platforms(
        &mut self,
        origin: &Store,
        locked: &LockedImage,
        top: &[u8],
        upstream_platforms: usize,
    ) -> Result<(Vec<u8>, Vec<ImagePlatform>), ImageError> {
        let manifest_err = |detail: doc::DocError| ImageError::Document { reference: locked.reference.clone(), detail };
        let mut platforms = Vec::new();
        for p in &locked.platforms {
            let child = self.manifest(origin, p.digest).await?;
            self.queue(origin, &doc::parse(&child).map_err(manifest_err)?.blobs);
            self.store(&locked.reference, child).await?;
            platforms.push(ImagePlatform { platform: p.platform.clone(), digest: p.digest });
        }
        let carried = if upstream_platforms == locked.platforms.len() {
            top.to_vec()
        } else {
            let keep: Vec<Sha256> = locked.platforms.iter().map(|p| p.digest).collect();
            let filtered = doc::filter_index(top, &keep).map_err(manifest_err)?;
            // What the filtered index lists must be what the upstream one (the digest signatures
            // are over) lists: carried too, so the site checks it again.
            doc::listed_in(top, &filtered, &keep)
                .map_err(|detail| ImageError::NotListed { reference: locked.reference.clone(), detail })?;
            self.store(&locked.reference, top.to_vec()).await?;
            filtered
        };
        Ok((carried, platforms))
    }

    /// One upstream attachment: its manifest (a referrers index brings its referrer manifests
    /// along, each listed on its own), its blobs queued, and its entry in the layout's index.
    async fn carry_attachment(
        &mut self,
        origin: &Store,
        locked: &LockedImage,
        a: &LockedAttachment,
    ) -> Result<Vec<Attachment>, ImageError> {
        let manifest_err = |detail: doc::DocError| ImageError::Document { reference: locked.reference.clone(), detail };
        let bytes = self.manifest(origin, a.digest).await?;
        let document = doc::parse(&bytes).map_err(manifest_err)?;
        self.queue(origin, &document.blobs);
        self.store(&locked.reference, bytes).await?;
        let attachment = |digest, artifact_type: Option<String>| Attachment {
            digest,
            kind: AttachmentKind::classify(a.tag.as_deref(), artifact_type.as_deref()),
            artifact_type,
            tag: a.tag.clone(),
        };
        let mut out = Vec::new();
        if document.children.is_empty() {
            out.push(attachment(a.digest, document.artifact_type.clone()));
        }
        // A busy image lists thousands of referrers: their manifests are asked for and kept in
        // the cache `REFERRER_FETCHES` at a time (a cache write waits for its bytes to reach
        // the disk; one at a time, 5,000 of them took most of a build), and carried in the
        // index's order.
        let children: Vec<(Vec<u8>, Sha256)> = futures_util::stream::iter(&document.children)
            .map(|child| async {
                let bytes = self.manifest(origin, child.digest).await?;
                keep(self.cache, &locked.reference, bytes).await
            })
            .buffered(crate::oci::REFERRER_FETCHES)
            .try_collect()
            .await?;
        for (child, (child_bytes, digest)) in document.children.iter().zip(children) {
            let referrer = doc::parse(&child_bytes).map_err(manifest_err)?;
            self.queue(origin, &referrer.blobs);
            self.manifests.insert((digest, child_bytes.len() as u64));
            out.push(attachment(child.digest, child.artifact_type.clone().or(referrer.artifact_type)));
        }
        // Tagged attachments keep their tag; a referrer has none and is named by its subject.
        let annotation = match (&a.tag, origin) {
            (Some(tag), Store::Registry { image, .. }) => {
                (REF_NAME.to_owned(), image.with_tag(tag.clone()).to_string())
            }
            (Some(tag), Store::Layout { .. }) => (REF_NAME.to_owned(), tag.clone()),
            (None, _) => (REFERRER_OF.to_owned(), locked.reference.clone()),
        };
        self.layout_entries.push(Descriptor {
            media_type: a.media_type.clone(),
            digest: a.digest,
            size: a.size,
            platform: None,
            annotations: BTreeMap::from([annotation]),
            artifact_type: None,
        });
        Ok(out)
    }

    /// A manifest by digest: from the cache when it was carried before (checked against its
    /// digest there), else from the origin. A rebuild asks the registry for blobs it lacks only.
    async fn manifest(&self, origin: &Store, digest: Sha256) -> Result<Vec<u8>, ImageError> {
        let cache = self.cache.clone();
        if let Some(bytes) = blocking(move || cache.get_small(&digest, doc::MAX_MANIFEST_BYTES)).await {
            return Ok(bytes);
        }
        Ok(origin.manifest(Some(digest)).await?.0)
    }

    fn queue(&mut self, origin: &Store, blobs: &[Descriptor]) {
        for b in blobs {
            self.blobs.entry(b.digest).or_insert_with(|| (origin.clone(), b.clone()));
        }
    }

    /// Keep manifest bytes in the cache (by their own digest) and list them as a member.
    async fn store(&mut self, what: &str, bytes: Vec<u8>) -> Result<Sha256, ImageError> {
        let size = bytes.len() as u64;
        let (_, digest) = keep(self.cache, what, bytes).await?;
        self.manifests.insert((digest, size));
        Ok(digest)
    }

    /// The `images/` members: every blob and manifest once, `index.json` and `oci-layout`;
    /// and the blobs not in the cache yet, which are fetched later (`fetch_blobs`).
    pub async fn into_members(self) -> Result<(Vec<Member>, Vec<PendingBlob>), ImageError> {
        let cache = self.cache;
        let member = |path: &str, sha256: Sha256, size: u64| Member {
            path: MemberPath::new(path).expect("image member paths are valid"),
            size,
            sha256,
            origin: cache.path(&sha256).into(),
            what: format!("image content {path}").into(),
        };
        let mut members: Vec<Member> = self
            .blobs
            .iter()
            .map(|(digest, (_, desc))| (*digest, desc.size))
            .chain(self.manifests.iter().copied().filter(|(digest, _)| !self.blobs.contains_key(digest)))
            .map(|(digest, size)| member(blob_member(digest).as_str(), digest, size))
            .collect();
        let index = doc::layout_index(self.layout_entries);
        for (path, bytes) in [("images/index.json", index), ("images/oci-layout", doc::OCI_LAYOUT.to_vec())] {
            let (digest, size) = (Sha256::of_bytes(&bytes), bytes.len() as u64);
            let cache = cache.clone();
            blocking(move || cache.put(digest, Some(size), path, bytes.as_slice())).await?;
            members.push(member(path, digest, size));
        }
        let pending = self
            .blobs
            .into_values()
            .filter(|(_, descriptor)| !cache.contains(&descriptor.digest, Some(descriptor.size)))
            .map(|(origin, descriptor)| PendingBlob { origin, descriptor })
            .collect();
        Ok((members, pending))
    }
}

/// Keep manifest bytes in the cache by their own digest (`sources::keep`).
pub(super) async fn keep(cache: &Cache, what: &str, bytes: Vec<u8>) -> Result<(Vec<u8>, Sha256), ImageError> {
    Ok(crate::sources::keep(cache, what, bytes).await?)
}

/// Where a blob is in the bundle's `images/` layout.
fn blob_member(digest: Sha256) -> MemberPath {
    MemberPath::new(format!("images/blobs/sha256/{digest}")).expect("image member paths are valid")
}

/// A blob an image names that is not in the cache yet.
pub struct PendingBlob {
    origin: Store,
    descriptor: Descriptor,
}

impl PendingBlob {
    pub fn digest(&self) -> Sha256 {
        self.descriptor.digest
    }

    /// Its member in the bundle.
    pub fn member(&self) -> MemberPath {
        blob_member(self.descriptor.digest)
    }

    /// Where it comes from, for messages (`REGISTRY/REPO blob sha256:HEX`).
    pub fn describe(&self) -> String {
        format!("{} blob sha256:{}", self.origin.describe(), self.descriptor.digest)
    }
}

/// Where the image blobs a build downloads go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BlobRoute {
    /// Into the cache, verified there, then packed from it: the next build finds them.
    #[default]
    Cache,
    /// Into the bundle as they arrive, kept nowhere (`build --no-blob-cache`): each layer is
    /// written once; packing hashes it.
    Stream,
}

impl std::fmt::Debug for PendingBlob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// Every blob, `--jobs` at a time, in bundle order (by digest); stopped early when `arrivals`
/// is abandoned (packing failed). Into the cache, each verified as it lands and then announced
/// to `arrivals`; or (`BlobRoute::Stream`) handed to packing as it arrives, the downloads ahead
/// of packing waiting with a few batches each (`overlap::flow`).
pub async fn fetch_blobs(
    blobs: &[PendingBlob],
    fetch: &Fetch<'_>,
    route: BlobRoute,
    arrivals: &Arrivals,
) -> Result<(), ImageError> {
    fetch.reporter.start("fetching", blobs.iter().map(|b| b.descriptor.size).sum());
    futures_util::stream::iter(blobs)
        .map(|blob| async move {
            if arrivals.abandoned() {
                return Ok(());
            }
            match route {
                BlobRoute::Cache => {
                    blob.origin.blob_into_cache(&blob.descriptor, fetch.cache, fetch.reporter).await?;
                    arrivals.arrived(&blob.member());
                }
                BlobRoute::Stream => {
                    let (out, inflow) = crate::overlap::flow();
                    if arrivals.flowing(&blob.member(), inflow) {
                        // A task of its own, as the connection's is: the runtime's thread that
                        // received a chunk passes it on, instead of waking the thread that
                        // polls this stream for each one (`docs/performance.md`). Packing,
                        // which reads the blob in bundle order, reports its progress.
                        let (origin, descriptor) = (blob.origin.clone(), blob.descriptor.clone());
                        let task = tokio::spawn(async move { origin.blob_into_flow(&descriptor, out, &Silent).await });
                        match task.await {
                            Ok(sent) => sent?,
                            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                            Err(e) => {
                                return Err(ImageError::Cancelled { blob: blob.describe(), detail: e.to_string() });
                            }
                        }
                    }
                }
            }
            Ok::<_, ImageError>(())
        })
        .buffer_unordered(fetch.jobs.max(1))
        .try_collect::<Vec<_>>()
        .await?;
    fetch.reporter.finish();
    Ok(())
}
