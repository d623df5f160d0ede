//! The verbs over bundle artifacts, wherever they are kept (a registry repository,
//! `oci://HOST/REPO:TAG`, or an OCI image layout directory, `oci-layout:DIR[:TAG]`, for a
//! one-way transfer on media; both through [`crate::oci::Store`]): push a local bundle,
//! resolve, pull to a file, copy between two places.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use futures_util::{StreamExt as _, TryStreamExt as _};
use oci_client::errors::OciDistributionError;
use serde::Serialize;

use super::{
    ARTIFACT_TYPE, ArtifactError, ArtifactManifest, BUNDLE_LAYER, COSIGNATURE_TYPE, EMPTY_BYTES, KEY_ID,
    MANIFEST_LAYER, PART_LAYER, Resolved, bundle_annotations, chained, cosignature_manifest, descriptor, file_name,
    io_err,
};
use crate::bundle::parts::Input;
use crate::bundle::reader::{Discard, OnProblem, read_bundle, read_head};
use crate::cache::Cache;
use crate::digest::{Prefixed, Sha256};
use crate::fetch::Net;
use crate::oci::doc::{Descriptor, OCI_MANIFEST};
use crate::oci::store::SUBJECT;
use crate::oci::upload::Uploader;
use crate::oci::{Location, REFERRER_FETCHES, Reach, Store};
use crate::progress::Reporter;
use crate::sign::policy::CoSignature;
use crate::sign::{KeyId, Policy, TrustedKey};
use crate::tee::{Tee, TeeError};

// ---------------------------------------------------------------------------------------------
// push

/// What `push` did.
#[derive(Debug, Serialize)]
pub struct Pushed {
    pub target: String,
    pub digest: Prefixed,
    pub id: String,
    pub name: String,
    pub version: String,
    pub layers_pushed: usize,
    pub layers_present: usize,
    /// Co-signatures beside the bundle, pushed as referrers.
    pub cosignatures: Vec<KeyId>,
}

/// Push a local bundle (file or parts) and the co-signatures beside it; the bundle's layers go
/// up in chunks of `chunk` bytes, resumed after a failed chunk.
pub fn push(
    input: &Input,
    target: &Location,
    reach: &Reach,
    chunk: u64,
    net: &Net,
    reporter: &dyn Reporter,
) -> Result<Pushed, ArtifactError> {
    let head = read_head(input.open()?)
        .map_err(|p| ArtifactError::NotABundle { target: input.display().to_string(), detail: p.to_string() })?;
    // The layers: the manifest, then the bundle's bytes (hashed here: the artifact names them).
    let mut files: Vec<(Descriptor, PathBuf)> = Vec::new();
    match input.split() {
        None => {
            let path = input.bundle().to_owned();
            let file = std::fs::File::open(&path).map_err(io_err(&path))?;
            let (sha256, size) =
                crate::digest::hash_reader(std::io::BufReader::with_capacity(1 << 20, file)).map_err(io_err(&path))?;
            files.push((descriptor(BUNDLE_LAYER, sha256, size, Some(file_name(&head.manifest))), path));
        }
        Some(split) => {
            for (i, part) in split.doc.parts.iter().enumerate() {
                let title = format!("{}.{:03}", file_name(&head.manifest), i + 1);
                let path = split.parts_file.with_file_name(&part.file);
                files.push((descriptor(PART_LAYER, part.sha256, part.size, Some(title)), path));
            }
        }
    }
    let manifest_layer = descriptor(
        MANIFEST_LAYER,
        head.manifest_sha256,
        head.manifest_bytes.len() as u64,
        Some("manifest.json".to_owned()),
    );
    let layers: Vec<Descriptor> =
        std::iter::once(manifest_layer.clone()).chain(files.iter().map(|f| f.0.clone())).collect();
    let artifact =
        ArtifactManifest::new(ARTIFACT_TYPE, layers, bundle_annotations(&head.manifest, head.manifest_sha256));
    let cosignatures = crate::sign::policy::cosignatures_beside(input.bundle()).map_err(io_err(input.bundle()))?;
    net.block_on(async {
        let store = Store::open(target, reach).await?;
        store.authorize_push().await?;
        let (mut pushed, mut present) = (0, 0);
        let mut count = |written: bool| if written { pushed += 1 } else { present += 1 };
        count(store.put_bytes(&artifact.config, EMPTY_BYTES.to_vec()).await?);
        count(store.put_bytes(&manifest_layer, head.manifest_bytes.clone()).await?);
        let uploader = match &store {
            Store::Registry { conn, image, .. } => Some(Uploader::new(conn, image, reach, chunk).await?),
            Store::Layout { .. } => None,
        };
        reporter.start("pushing", files.iter().map(|(d, _)| d.size).sum());
        for (d, path) in &files {
            if store.has_blob(d).await? {
                reporter.advance(d.size);
                count(false);
                continue;
            }
            if let Some(uploader) = &uploader {
                uploader.upload(path, d, reporter).await?;
            } else {
                let file = tokio::fs::File::open(path).await.map_err(io_err(path))?;
                let stream =
                    tokio_util::io::ReaderStream::with_capacity(file, 1 << 20).map_err(OciDistributionError::IoError);
                store.put_blob(d, Box::pin(stream)).await?;
                reporter.advance(d.size);
            }
            count(true);
        }
        reporter.finish();
        let bytes = artifact.bytes();
        let tag = store.tag(None).map(str::to_owned);
        let digest = store.put_manifest(&bytes, OCI_MANIFEST, tag.as_deref()).await?;
        let subject = descriptor(OCI_MANIFEST, digest, bytes.len() as u64, None);
        let mut keys = Vec::new();
        for co in &cosignatures {
            push_cosignature(&store, &subject, &file_name(&head.manifest), &co.key_id, &co.signature).await?;
            keys.push(co.key_id.clone());
        }
        Ok(Pushed {
            target: store.describe(),
            digest: Prefixed(digest),
            id: head.manifest_sha256.short(16),
            name: head.manifest.name.to_string(),
            version: head.manifest.version.to_string(),
            layers_pushed: pushed,
            layers_present: present,
            cosignatures: keys,
        })
    })
}

async fn push_cosignature(
    store: &Store,
    subject: &Descriptor,
    bundle_name: &str,
    key_id: &KeyId,
    signature: &[u8],
) -> Result<(), ArtifactError> {
    let m = cosignature_manifest(subject, bundle_name, key_id, signature);
    store.put_bytes(&m.config, EMPTY_BYTES.to_vec()).await?;
    store.put_bytes(&m.layers[0], signature.to_vec()).await?;
    let bytes = m.bytes();
    let digest = store.put_manifest(&bytes, OCI_MANIFEST, None).await?;
    let mut entry = descriptor(OCI_MANIFEST, digest, bytes.len() as u64, None);
    entry.artifact_type = Some(COSIGNATURE_TYPE.to_owned());
    entry.annotations.insert(KEY_ID.to_owned(), key_id.to_string());
    Ok(store.add_referrers(subject.digest, vec![entry]).await?)
}

// ---------------------------------------------------------------------------------------------
// resolve, pull

/// A bundle artifact found at a location: its manifest (the tag resolved once) and the
/// co-signatures referring to it.
#[derive(Clone)]
pub struct Found {
    pub resolved: Resolved,
    pub artifact: ArtifactManifest,
    /// The artifact manifest's exact bytes (what `copy` stores again).
    pub bytes: Vec<u8>,
    /// The co-signature referrers the registry lists (each once), in its order.
    pub listed: Vec<Descriptor>,
    /// Those fetched: every one (`copy`), those under a wanted key (`pull`), or none yet
    /// (`resolve`: an install's keys are known only once the bundle's carried trust is read).
    pub cosignatures: Vec<CoSignature>,
    /// Where it is, pinned to its digest.
    pub pinned: Location,
    /// The store it was found in, at `pinned`: what its layers and co-signatures are read
    /// from without connecting again.
    pub store: Store,
}

/// Resolve `location` to a bundle artifact and list its co-signatures, fetching none of them
/// ([`fetch_cosignatures`] does, for the keys that count).
pub fn resolve(location: &Location, reach: &Reach, net: &Net) -> Result<Found, ArtifactError> {
    net.block_on(async {
        let store = Store::open(location, reach).await?;
        locate(&store, location).await
    })
}

/// The co-signatures among `listed` (a [`Found`]'s) under a key in `wanted`, fetched from
/// `store` (the `Found`'s) and checked against their digests; the others are not asked for.
/// One that cannot be fetched is skipped with a warning.
pub fn fetch_cosignatures(
    store: &Store,
    listed: &[Descriptor],
    wanted: &BTreeSet<KeyId>,
    net: &Net,
) -> Vec<CoSignature> {
    net.block_on(cosignatures(store, listed, Some(wanted)))
}

/// `locate`, then the co-signatures of the keys in `wanted` (all of them when `None`).
async fn find(store: &Store, location: &Location, wanted: Option<&BTreeSet<KeyId>>) -> Result<Found, ArtifactError> {
    let mut found = locate(store, location).await?;
    found.cosignatures = cosignatures(store, &found.listed, wanted).await;
    Ok(found)
}

/// The bundle artifact at `location` and the co-signature referrers listed for it.
async fn locate(store: &Store, location: &Location) -> Result<Found, ArtifactError> {
    let (bytes, digest) = store.manifest(None).await?;
    let artifact = ArtifactManifest::parse_bundle(&bytes, &store.describe())?;
    let annotation = |k: &str| artifact.annotations.get(k).cloned().unwrap_or_default();
    let resolved = Resolved {
        reference: location.to_string(),
        digest: Prefixed(digest),
        id: annotation(super::BUNDLE_ID),
        name: annotation("dev.airlock.bundle.name"),
        version: annotation("dev.airlock.bundle.version"),
        bytes: artifact.bundle_bytes(),
    };
    tracing::info!("{} is sha256:{digest} ({} {})", location, resolved.name, resolved.version);
    let mut listed = store.referrers(digest).await?;
    listed.retain(|r| r.artifact_type.as_deref() == Some(COSIGNATURE_TYPE));
    let mut seen = BTreeSet::new();
    listed.retain(|r| seen.insert(r.digest));
    let pinned = match location {
        Location::Registry(image) => Location::Registry(image.at_digest(digest)),
        Location::Layout { .. } => location.clone(),
    };
    let store = store.at_digest(digest);
    Ok(Found { resolved, artifact, bytes, listed, cosignatures: Vec::new(), pinned, store })
}

/// The co-signatures among `listed` whose key is in `wanted` (all when `None`). A busy
/// registry lists thousands of referrers: their manifests and signatures are asked for
/// `REFERRER_FETCHES` at a time, kept in the registry's order.
async fn cosignatures(store: &Store, listed: &[Descriptor], wanted: Option<&BTreeSet<KeyId>>) -> Vec<CoSignature> {
    // The listing's key id is the registry's claim: it only spares fetching what cannot count.
    let asked = listed.iter().filter(|r| match (wanted, r.annotations.get(KEY_ID).and_then(|k| KeyId::parse(k))) {
        (Some(wanted), Some(key_id)) => wanted.contains(&key_id),
        _ => true,
    });
    futures_util::stream::iter(asked)
        .map(|r| async move { (r, cosignature(store, r, wanted).await) })
        .buffered(REFERRER_FETCHES)
        .filter_map(|(r, co)| async move {
            co.inspect_err(|e| tracing::warn!("skipping co-signature referrer sha256:{}: {e}", r.digest)).ok().flatten()
        })
        .collect::<Vec<_>>()
        .await
}

/// A co-signature referrer's signature; none when its key is not `wanted`.
async fn cosignature(
    store: &Store,
    r: &Descriptor,
    wanted: Option<&BTreeSet<KeyId>>,
) -> Result<Option<CoSignature>, ArtifactError> {
    let (bytes, digest) = store.manifest(Some(r.digest)).await?;
    let m: ArtifactManifest = serde_json::from_slice(&bytes).map_err(|e| store.err(e))?;
    let layer = m.layers.first().ok_or_else(|| store.err("a co-signature referrer without a layer"))?;
    let key_id = layer.annotations.get(KEY_ID).and_then(|k| KeyId::parse(k)).ok_or_else(|| store.err("no key id"))?;
    if wanted.is_some_and(|wanted| !wanted.contains(&key_id)) {
        return Ok(None);
    }
    if layer.size > crate::sign::MAX_SIGNATURE_BYTES {
        return Err(store.err("a co-signature larger than a signature can be").into());
    }
    let mut signature = Vec::new();
    let mut stream = store.blob_stream(layer).await?;
    while let Some(chunk) = stream.next().await {
        signature.extend_from_slice(&chunk.map_err(|e| store.registry_err(&e))?);
    }
    if Sha256::of_bytes(&signature) != layer.digest {
        return Err(store.err("a co-signature whose bytes differ from its digest").into());
    }
    Ok(Some(CoSignature { path: PathBuf::from(format!("{}@sha256:{digest}", store.describe())), key_id, signature }))
}

/// What `pull` did.
#[derive(Debug, Serialize)]
pub struct Pulled {
    #[serde(flatten)]
    pub resolved: Resolved,
    pub out: PathBuf,
    pub signers: Vec<KeyId>,
    /// Co-signature files written beside `out`: those that verified under a trusted key.
    pub cosignatures: Vec<PathBuf>,
}

/// Pull a bundle to `out`: its layers into the cache (resumable, each checked against its
/// digest), then the bundle verified whole under `keys` and `threshold` with the co-signatures
/// the registry holds, and only then written to `out`, with those co-signatures beside it.
#[allow(clippy::too_many_arguments, reason = "one call, from `commands::pull`, with every part named")]
pub fn pull(
    location: &Location,
    out: &Path,
    keys: Vec<TrustedKey>,
    threshold: usize,
    reach: &Reach,
    net: &Net,
    cache: &Cache,
    reporter: &dyn Reporter,
) -> Result<Pulled, ArtifactError> {
    // An impossible policy is a usage error before anything is asked of the registry.
    Policy::reachable(&keys, threshold)?;
    let (found, files) = net.block_on(async {
        let store = Store::open(location, reach).await?;
        let wanted: BTreeSet<KeyId> = keys.iter().map(|k| k.key_id().clone()).collect();
        let found = find(&store, location, Some(&wanted)).await?;
        check_space(&found.resolved, cache.root(), out)?;
        let layers = found.artifact.data_layers();
        reporter.start("pulling", found.resolved.bytes);
        for layer in &layers {
            store.blob_into_cache(layer, cache, reporter).await?;
        }
        reporter.finish();
        let files = layers.iter().map(|l| cache.path(&l.digest)).collect::<Vec<_>>();
        Ok::<_, ArtifactError>((found, files))
    })?;
    let target = found.resolved.reference.clone();
    let policy = Policy::new(keys, threshold, found.cosignatures.clone())
        .map_err(|e| ArtifactError::Rejected { target: target.clone(), detail: e.to_string() })?;
    // Verified while it is written beside `out`; it appears there only once it verified whole.
    let tmp = crate::atomic::temp_beside(out).map_err(io_err(out))?;
    let mut tee = Tee::new(chained(&files)?, tmp.as_file().try_clone().map_err(io_err(out))?);
    let report = read_bundle(&mut tee, &policy, &mut Discard, OnProblem::Stop, reporter)
        .map_err(|e| ArtifactError::Io { path: e.path.as_str().into(), detail: e.source.to_string() })?;
    if !report.verified() {
        let detail = report.problems.first().map_or_else(|| "no manifest".to_owned(), ToString::to_string);
        return Err(ArtifactError::Rejected { target, detail });
    }
    if let (Some(tag), Some(m)) = (location.tag(), &report.manifest) {
        m.check_tag(tag)?;
    }
    if report.manifest_sha256.map(|d| d.short(16)) != Some(found.resolved.id.clone()) {
        let detail =
            format!("its annotations name bundle {}, the bundle is {:?}", found.resolved.id, report.manifest_sha256);
        return Err(ArtifactError::Rejected { target, detail });
    }
    tee.finish().map_err(|e| match e {
        TeeError::Read(e) | TeeError::Write(e) => io_err(out)(e),
    })?;
    tmp.as_file().sync_all().map_err(io_err(out))?;
    tmp.persist(out).map_err(|e| io_err(out)(e.error))?;
    // Only the co-signatures that verified under a trusted key are written: a registry's
    // other referrers (thousands, on a busy one) are its claims, not evidence.
    let valid: Vec<&Path> = report
        .signatures
        .iter()
        .filter(|s| s.outcome == crate::sign::policy::Outcome::Valid)
        .filter_map(|s| match &s.source {
            crate::sign::policy::Source::CoSignature(path) => Some(path.as_path()),
            crate::sign::policy::Source::Embedded => None,
        })
        .collect();
    let mut written = Vec::new();
    let mut keys = BTreeSet::new();
    for co in found.cosignatures.iter().filter(|co| valid.contains(&co.path.as_path())) {
        if !keys.insert(&co.key_id) {
            continue;
        }
        let path = crate::sign::policy::cosignature_path(out, &co.key_id);
        crate::atomic::write(&path, &co.signature).map_err(io_err(&path))?;
        written.push(path);
    }
    Ok(Pulled { resolved: found.resolved, out: out.to_owned(), signers: report.signers, cosignatures: written })
}

/// Refuse, before a byte is downloaded, a bundle whose declared size does not fit where a
/// pull writes it: the cache, then the output file (twice over when both are on one file
/// system). A registry that declares a terabyte gets an answer, not a full disk.
fn check_space(resolved: &Resolved, cache: &Path, out: &Path) -> Result<(), ArtifactError> {
    let out_dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let declared = resolved.bytes;
    let stat = |p: &Path| {
        let dev = std::fs::metadata(p).map(|m| std::os::unix::fs::MetadataExt::dev(&m)).map_err(io_err(p))?;
        Ok::<_, ArtifactError>((dev, free_bytes(p)?))
    };
    let (cache_dev, cache_free) = stat(cache)?;
    let (out_dev, out_free) = stat(out_dir)?;
    let places = if cache_dev == out_dev {
        vec![(cache, declared.saturating_mul(2), cache_free)]
    } else {
        vec![(cache, declared, cache_free), (out_dir, declared, out_free)]
    };
    for (path, needed, available) in places {
        if needed > available {
            return Err(ArtifactError::NoSpace {
                target: resolved.reference.clone(),
                declared,
                needed,
                path: path.to_owned(),
                available,
            });
        }
    }
    Ok(())
}

/// Bytes free for an unprivileged writer on the file system of `path`.
fn free_bytes(path: &Path) -> Result<u64, ArtifactError> {
    let fs = rustix::fs::statvfs(path).map_err(|e| io_err(path)(e.into()))?;
    Ok(fs.f_bavail.saturating_mul(fs.f_frsize))
}

// ---------------------------------------------------------------------------------------------
// copy

/// What `copy` did.
#[derive(Debug, Serialize)]
pub struct Copied {
    pub from: String,
    pub to: String,
    pub digest: Prefixed,
    pub id: String,
    pub blobs_copied: usize,
    pub blobs_present: usize,
    pub referrers: usize,
}

/// Copy a bundle artifact and its co-signature referrers from one store to another, digests
/// unchanged: registry to registry, or through a layout directory for a one-way transfer.
pub fn copy(
    from: &Location,
    to: &Location,
    reach: &Reach,
    net: &Net,
    reporter: &dyn Reporter,
) -> Result<Copied, ArtifactError> {
    net.block_on(async {
        let source = Store::open(from, reach).await?;
        let target = Store::open(to, reach).await?;
        target.authorize_push().await?;
        let found = find(&source, from, None).await?;
        if let Location::Layout { dir, .. } = to {
            // Blobs are written to the layout's file system: the declared sizes must fit.
            std::fs::create_dir_all(dir).map_err(io_err(dir))?;
            let declared = found.resolved.bytes;
            let available = free_bytes(dir)?;
            if declared > available {
                let (target, path) = (found.resolved.reference.clone(), dir.clone());
                return Err(ArtifactError::NoSpace { target, declared, needed: declared, path, available });
            }
        }
        let digest = found.resolved.digest.0;
        let (mut copied, mut present) = (0, 0);
        let blobs: Vec<&Descriptor> = std::iter::once(&found.artifact.config).chain(&found.artifact.layers).collect();
        reporter.start("copying", blobs.iter().map(|d| d.size).sum());
        for d in blobs {
            if copy_blob(&source, &target, d).await? {
                copied += 1;
            } else {
                present += 1;
            }
            reporter.advance(d.size);
        }
        reporter.finish();
        let source_tag = match from {
            Location::Registry(image) => image.tag.clone(),
            Location::Layout { tag: Some(tag), .. } => Some(tag.clone()),
            // The tag the layout's index.json gives the bundle.
            Location::Layout { tag: None, .. } => source.tag_of(digest).await,
        };
        let tag = target.tag(source_tag.as_deref()).map(str::to_owned);
        target.put_manifest(&found.bytes, OCI_MANIFEST, tag.as_deref()).await?;
        let referrers = copy_referrers(&source, &target, digest).await?;
        Ok(Copied {
            from: source.describe(),
            to: target.describe(),
            digest: Prefixed(digest),
            id: found.resolved.id,
            blobs_copied: copied,
            blobs_present: present,
            referrers,
        })
    })
}

/// The referrers of `subject`, `REFERRER_FETCHES` at a time in three steps: their manifests
/// read, their blobs copied (each once: referrers share their config and often their layers,
/// and two uploads of one blob at once can break a registry's upload), their manifests stored;
/// then all listed at the target in one write. Returns how many were copied.
async fn copy_referrers(source: &Store, target: &Store, subject: Sha256) -> Result<usize, ArtifactError> {
    let listed = source.referrers(subject).await?;
    let read: Vec<(&Descriptor, Vec<u8>, ArtifactManifest)> = futures_util::stream::iter(&listed)
        .map(|r| async move {
            let (bytes, _) = source.manifest(Some(r.digest)).await?;
            let m: ArtifactManifest = serde_json::from_slice(&bytes).map_err(|e| source.err(e))?;
            Ok::<_, ArtifactError>((r, bytes, m))
        })
        .buffered(REFERRER_FETCHES)
        .try_collect()
        .await?;
    let blobs: std::collections::BTreeMap<Sha256, &Descriptor> =
        read.iter().flat_map(|(_, _, m)| std::iter::once(&m.config).chain(&m.layers)).map(|d| (d.digest, d)).collect();
    futures_util::stream::iter(blobs.into_values())
        .map(|d| copy_blob(source, target, d))
        .buffer_unordered(REFERRER_FETCHES)
        .try_collect::<Vec<bool>>()
        .await?;
    let entries: Vec<Descriptor> = futures_util::stream::iter(&read)
        .map(|(r, bytes, _)| async move {
            target.put_manifest(bytes, &r.media_type, None).await?;
            let mut entry = (*r).clone();
            entry.annotations.remove(SUBJECT);
            Ok::<_, ArtifactError>(entry)
        })
        .buffered(REFERRER_FETCHES)
        .try_collect()
        .await?;
    let copied = entries.len();
    target.add_referrers(subject, entries).await?;
    Ok(copied)
}

async fn copy_blob(source: &Store, target: &Store, d: &Descriptor) -> Result<bool, ArtifactError> {
    if target.has_blob(d).await? {
        return Ok(false);
    }
    let stream = source.blob_stream(d).await?;
    Ok(target.put_blob(d, stream).await?)
}
