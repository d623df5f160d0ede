//! "A registry repository or an OCI image layout directory": the one reader and writer of
//! both, for image mirroring on the build host (`sources::oci`) and for bundles as artifacts
//! (`push`, `pull`, `copy`, `install oci://…`).
//!
//! Every manifest is checked against the digest it was asked for (or the one its reference
//! pins); every blob is bounded by its declared size and checked against its digest before it
//! becomes visible (in the cache, or in a layout). A layout's files are read and written on
//! the blocking pool, never on the executor; its small documents (`index.json`, manifests)
//! are refused past [`MAX_MANIFEST_BYTES`] instead of being read truncated.

mod layout;

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::{Stream, StreamExt as _, TryStreamExt as _};
use oci_client::RegistryOperation;
use oci_client::client::BlobResponse;
use oci_client::errors::OciDistributionError;
use oci_client::manifest::OCI_IMAGE_INDEX_MEDIA_TYPE;

use super::doc::{Descriptor, REF_NAME};
use super::{ClientError, Connection, ImageRef, Transport, is_not_found, pull_manifest, retryable};
use crate::cache::{Cache, CacheError};
use crate::digest::Sha256;
use crate::failure::{Class, Classify};
use crate::fetch::{self, DownloadError, Failure, NetOptions, Opened, Overrun, Verdict, blocking};
use crate::progress::Reporter;
pub use layout::layout_blob;
use layout::{layout_tagged, open_layout_file, read_layout_index, read_small, update_layout_index, write_layout_blob};

/// The annotation that names a referrer's subject in a layout's `index.json`.
pub const SUBJECT: &str = "dev.airlock.subject";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("`{0}` is not oci://HOST/REPO:TAG, oci://HOST/REPO@sha256:HEX or oci-layout:DIR[:TAG]")]
    Location(String),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("{target}: {detail}")]
    Registry { target: String, detail: String },
    #[error("{what}: expected sha256 {expected}, got sha256 {actual}")]
    Digest { what: String, expected: Sha256, actual: Sha256 },
    #[error("`{}`: {detail}", path.display())]
    Io { path: PathBuf, detail: String },
    /// A layout's `index.json` that is not one (shown, not chained).
    #[error("`{}`: {detail}", path.display())]
    LayoutIndex { path: PathBuf, detail: crate::oci::doc::DocError },
    /// A layout's document or layer that is a FIFO, a device or a directory: planted, not
    /// written by any tool that writes layouts; refused before a byte is read.
    #[error("`{}` is not a regular file (a FIFO, a device or a directory): refused, not read", path.display())]
    NotRegular { path: PathBuf },
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error(transparent)]
    Overrun(#[from] Overrun),
}

impl Classify for StoreError {
    fn class(&self) -> Class {
        match self {
            StoreError::Location(_) => Class::Usage,
            StoreError::Digest { .. } | StoreError::Overrun(_) | StoreError::NotRegular { .. } => Class::Verification,
            StoreError::Cache(e) => e.class(),
            StoreError::Client(_)
            | StoreError::Registry { .. }
            | StoreError::Io { .. }
            | StoreError::LayoutIndex { .. } => Class::Runtime,
        }
    }
}

/// How to reach the registries a command names: `--insecure-registry`, `--registry-ca`, the
/// command's retries and timeouts. Credentials come from the docker config.
#[derive(Debug, Clone)]
pub struct Reach {
    /// Registries talked to over plain HTTP (`*`: every one).
    pub insecure: Vec<String>,
    pub ca: Option<PathBuf>,
    pub options: NetOptions,
}

impl Reach {
    pub fn is_insecure(&self, registry: &str) -> bool {
        self.insecure.iter().any(|h| h == "*" || h == registry)
    }

    pub async fn connect(&self, registry: &str) -> Result<Arc<Connection>, StoreError> {
        let timeouts = (self.options.connect_timeout, self.options.read_timeout);
        let transport = if self.is_insecure(registry) { Transport::InsecureHttp } else { Transport::Https };
        Ok(Arc::new(super::connect(registry, transport, self.ca.as_deref(), timeouts).await?))
    }
}

/// A place OCI content is read from or written to, as a user names it.
#[derive(Debug, Clone)]
pub enum Location {
    Registry(ImageRef),
    Layout { dir: PathBuf, tag: Option<String> },
}

impl Location {
    /// The tag it names (`oci://…:TAG`, `oci-layout:DIR:TAG`), if any.
    pub fn tag(&self) -> Option<&str> {
        match self {
            Location::Registry(image) => image.tag.as_deref(),
            Location::Layout { tag, .. } => tag.as_deref(),
        }
    }

    pub fn parse(text: &str) -> Result<Self, StoreError> {
        let bad = || StoreError::Location(text.to_owned());
        if let Some(rest) = text.strip_prefix("oci://") {
            if let Ok(image) = ImageRef::parse(rest) {
                return Ok(Self::Registry(image));
            }
            // A repository without a tag: a copy's target, which takes the source's tag.
            let untagged = !rest.contains('@') && !rest.rsplit('/').next().is_some_and(|last| last.contains(':'));
            let image = ImageRef::parse(&format!("{rest}:latest")).ok().filter(|_| untagged).ok_or_else(bad)?;
            return Ok(Self::Registry(ImageRef { tag: None, ..image }));
        }
        if let Some(rest) = text.strip_prefix("oci-layout:") {
            let (dir, tag) = match rest.rsplit_once(':') {
                Some((dir, tag)) if !tag.contains('/') && !tag.is_empty() => (dir, Some(tag.to_owned())),
                _ => (rest, None),
            };
            if dir.is_empty() {
                return Err(bad());
            }
            return Ok(Self::Layout { dir: PathBuf::from(dir), tag });
        }
        Err(bad())
    }

    /// Whether this is `oci://…` or `oci-layout:…` at all (else a file path).
    pub fn looks_like(text: &str) -> bool {
        text.starts_with("oci://") || text.starts_with("oci-layout:")
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Registry(r) => write!(f, "oci://{r}"),
            Self::Layout { dir, tag: Some(t) } => write!(f, "oci-layout:{}:{t}", dir.display()),
            Self::Layout { dir, tag: None } => write!(f, "oci-layout:{}", dir.display()),
        }
    }
}

/// The repository `image` is in, for blob requests (which name no tag).
pub fn repository(image: &ImageRef) -> oci_client::Reference {
    if image.tag.is_none() && image.digest.is_none() {
        return image.with_tag("latest".to_owned()).to_client();
    }
    image.to_client()
}

pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, OciDistributionError>> + Send>>;

/// `stream`, ended with an error at the first byte past `limit`: an [`Overrun`], carried
/// through the [`ByteStream`] as the `io::Error` inside `OciDistributionError::IoError` and
/// found there again by `Store::registry_err`.
fn bounded(stream: ByteStream, limit: u64, what: String) -> ByteStream {
    // (bytes seen, ended): after the error, the stream ends.
    Box::pin(stream.scan((0u64, false), move |(seen, ended), chunk| {
        if *ended {
            return std::future::ready(None);
        }
        let item = chunk.and_then(|c| {
            *seen = seen.saturating_add(c.len() as u64);
            if *seen > limit {
                *ended = true;
                let overrun = Overrun { what: what.clone(), limit };
                return Err(OciDistributionError::IoError(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    overrun,
                )));
            }
            Ok(c)
        });
        std::future::ready(Some(item))
    }))
}

/// An opened [`Location`].
#[derive(Clone)]
pub enum Store {
    /// `options`: how requests to it are retried.
    Registry {
        conn: Arc<Connection>,
        image: ImageRef,
        options: NetOptions,
    },
    Layout {
        dir: PathBuf,
        tag: Option<String>,
    },
}

impl Store {
    pub async fn open(location: &Location, reach: &Reach) -> Result<Self, StoreError> {
        Ok(match location {
            Location::Registry(image) => {
                let conn = reach.connect(&image.registry).await?;
                Self::Registry { conn, image: image.clone(), options: reach.options }
            }
            Location::Layout { dir, tag } => Self::Layout { dir: dir.clone(), tag: tag.clone() },
        })
    }

    /// The same store (its connection and auth, not opened again) at the manifest `digest`
    /// its tag resolved to; a layout's store is the same.
    #[must_use]
    pub fn at_digest(&self, digest: Sha256) -> Self {
        match self {
            Self::Registry { conn, image, options } => {
                Self::Registry { conn: conn.clone(), image: image.at_digest(digest), options: *options }
            }
            Self::Layout { .. } => self.clone(),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Self::Registry { image, .. } => format!("oci://{image}"),
            Self::Layout { dir, tag } => {
                format!("oci-layout:{}{}", dir.display(), tag.as_ref().map(|t| format!(":{t}")).unwrap_or_default())
            }
        }
    }

    pub fn err(&self, detail: impl std::fmt::Display) -> StoreError {
        StoreError::Registry { target: self.describe(), detail: detail.to_string() }
    }

    /// A registry's error, with where credentials come from when they were the trouble.
    pub fn registry_err(&self, e: &OciDistributionError) -> StoreError {
        if let OciDistributionError::IoError(io) = e
            && let Some(overrun) = io.get_ref().and_then(|inner| inner.downcast_ref::<Overrun>())
        {
            return StoreError::Overrun(overrun.clone());
        }
        let detail = match e {
            OciDistributionError::AuthenticationFailure(d) => format!("authentication failed: {d}"),
            OciDistributionError::UnauthorizedError { url } => format!("401 unauthorized at {url}"),
            OciDistributionError::ImageManifestNotFoundError(d) => format!("manifest not found: {d}"),
            other => other.to_string(),
        };
        let hint = match (e, self) {
            (
                OciDistributionError::AuthenticationFailure(_) | OciDistributionError::UnauthorizedError { .. },
                Self::Registry { image, .. },
            ) => format!(
                "; credentials for `{}` are read from the docker config ($REGISTRY_AUTH_FILE, \
                 $DOCKER_CONFIG/config.json, ~/.docker/config.json)",
                image.registry
            ),
            _ => String::new(),
        };
        self.err(format!("{detail}{hint}"))
    }

    pub async fn authorize_push(&self) -> Result<(), StoreError> {
        if let Self::Registry { conn, image, .. } = self {
            let reference = repository(image);
            conn.client
                .auth(&reference, &conn.auth, RegistryOperation::Push)
                .await
                .map_err(|e| self.registry_err(&e))?;
        }
        Ok(())
    }

    /// The manifest the location names (its tag or digest), or the one at `digest`; checked
    /// against the digest asked for or pinned. Returns its bytes and digest.
    pub async fn manifest(&self, digest: Option<Sha256>) -> Result<(Vec<u8>, Sha256), StoreError> {
        let bytes = match self {
            Self::Registry { conn, image, options } => {
                if digest.is_none() && image.tag.is_none() && image.digest.is_none() {
                    return Err(self.err("name a tag or a digest"));
                }
                let at = digest.map_or_else(|| image.clone(), |d| image.at_digest(d));
                tracing::debug!("GET manifest {at}");
                let (bytes, _) = pull_manifest(conn, &at, options).await.map_err(|e| self.registry_err(&e))?;
                bytes.to_vec()
            }
            Self::Layout { dir, tag } => {
                let (dir, tag) = (dir.clone(), tag.clone());
                blocking(move || {
                    let digest = match digest {
                        Some(d) => d,
                        None => layout_tagged(&dir, tag.as_deref())?.digest,
                    };
                    read_small(&layout_blob(&dir, digest))
                })
                .await?
            }
        };
        let actual = Sha256::of_bytes(&bytes);
        if let Some(expected) = digest.or(self.pinned())
            && expected != actual
        {
            return Err(StoreError::Digest { what: format!("manifest from {}", self.describe()), expected, actual });
        }
        Ok((bytes, actual))
    }

    /// The descriptor the location's tag names, in a layout's `index.json` (its media type
    /// and size as the layout lists them).
    pub async fn layout_entry(&self) -> Result<Option<Descriptor>, StoreError> {
        match self {
            Self::Registry { .. } => Ok(None),
            Self::Layout { dir, tag } => {
                let (dir, tag) = (dir.clone(), tag.clone());
                Ok(Some(blocking(move || layout_tagged(&dir, tag.as_deref())).await?))
            }
        }
    }

    fn pinned(&self) -> Option<Sha256> {
        match self {
            Self::Registry { image, .. } => image.digest,
            Self::Layout { .. } => None,
        }
    }

    pub async fn has_blob(&self, d: &Descriptor) -> Result<bool, StoreError> {
        match self {
            Self::Registry { conn, image, options } => {
                let (reference, digest) = (repository(image), format!("sha256:{}", d.digest));
                let exists = || conn.client.blob_exists(&reference, &digest);
                crate::fetch::with_retries(options, &format!("blob {digest} on {image}"), exists, super::retryable)
                    .await
                    .map_err(|e| self.registry_err(&e))
            }
            Self::Layout { dir, .. } => {
                let (path, size) = (layout_blob(dir, d.digest), d.size);
                Ok(blocking(move || std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == size)).await)
            }
        }
    }

    /// A blob's bytes, never more than its descriptor declares: the first chunk past the
    /// declared size ends the stream with an error (the digest is the reader's to check).
    pub async fn blob_stream(&self, d: &Descriptor) -> Result<ByteStream, StoreError> {
        let stream = match self {
            Self::Registry { conn, image, .. } => {
                let digest = format!("sha256:{}", d.digest);
                let sized = conn.blob(&repository(image), &digest).await.map_err(|e| self.registry_err(&e))?;
                Box::pin(sized.stream.map_err(OciDistributionError::from)) as ByteStream
            }
            Self::Layout { dir, .. } => {
                // tokio's files do their reads on the blocking pool.
                let path = layout_blob(dir, d.digest);
                let opened = blocking({
                    let path = path.clone();
                    move || open_layout_file(&path)
                })
                .await;
                let file = tokio::fs::File::from_std(opened?);
                let stream = tokio_util::io::ReaderStream::with_capacity(file, 1 << 20);
                Box::pin(stream.map_err(OciDistributionError::IoError)) as ByteStream
            }
        };
        Ok(bounded(stream, d.size, format!("{} blob sha256:{}", self.describe(), d.digest)))
    }

    /// One blob into the cache unless it is there already: a registry's with `Range` resume
    /// and retries, a layout's copied on the blocking pool; checked whole either way.
    pub async fn blob_into_cache(
        &self,
        d: &Descriptor,
        cache: &Cache,
        reporter: &dyn Reporter,
    ) -> Result<PathBuf, StoreError> {
        if cache.contains(&d.digest, Some(d.size)) {
            reporter.advance(d.size);
            return Ok(cache.path(&d.digest));
        }
        let what = format!("{} blob sha256:{}", self.describe(), d.digest);
        match self {
            Self::Layout { dir, .. } => {
                // A layer can be gigabytes: copied and hashed on the blocking pool, so the
                // downloads running beside it are not held up.
                let (path, cache, digest, size) = (layout_blob(dir, d.digest), cache.clone(), d.digest, d.size);
                let stored = blocking(move || {
                    let file = open_layout_file(&path)?;
                    Ok::<_, StoreError>(cache.put(digest, Some(size), &what, std::io::BufReader::new(file))?)
                })
                .await?;
                reporter.advance(d.size);
                Ok(stored)
            }
            Self::Registry { conn, image, options } => {
                let open = |offset| self.open_blob((conn, image), d, offset);
                fetch::download(cache, d.digest, Some(d.size), &what, reporter, options, open)
                    .await
                    .map_err(|e| self.download_err(e))
            }
        }
    }

    /// One blob handed to `out` as it arrives, kept nowhere (`build --no-blob-cache`): a
    /// registry's with `Range` resume and retries, a layout's read from its file. Bounded by
    /// its declared size; the reader checks the digest. A failure here is also the reader's.
    pub async fn blob_into_flow(
        &self,
        d: &Descriptor,
        mut out: crate::overlap::Outflow,
        reporter: &(impl Reporter + ?Sized),
    ) -> Result<(), StoreError> {
        let what = format!("{} blob sha256:{}", self.describe(), d.digest);
        match self {
            Self::Layout { .. } => {
                // `Ok(false)`: the reader is gone (packing stopped, and its error is the one).
                let sent = async {
                    let mut stream = self.blob_stream(d).await?;
                    while let Some(chunk) = stream.next().await {
                        let chunk = chunk.map_err(|e| self.registry_err(&e))?;
                        reporter.advance(chunk.len() as u64);
                        if out.send(chunk).await.is_err() {
                            return Ok(false);
                        }
                    }
                    Ok(true)
                }
                .await;
                out.end(&sent).await;
                sent.map(drop)
            }
            Self::Registry { conn, image, options } => {
                let open = |offset| self.open_blob((conn, image), d, offset);
                fetch::download_into(out, d.digest, d.size, &what, reporter, options, open)
                    .await
                    .map_err(|e| self.download_err(e))
            }
        }
    }

    /// A registry's blob from byte `offset` (`Range`), or whole when the registry ignores the
    /// range; not verified here (`fetch::download` and `download_into` say by whom).
    async fn open_blob(
        &self,
        (conn, image): (&Connection, &ImageRef),
        d: &Descriptor,
        offset: u64,
    ) -> Result<Opened<impl Stream<Item = Result<Bytes, String>> + Unpin + use<>>, Failure<StoreError>> {
        let digest = format!("sha256:{}", d.digest);
        tracing::debug!("GET blob {digest} of {image} (from byte {offset})");
        let response = conn.blob_from(&repository(image), &digest, offset).await.map_err(|e| match retryable(&e) {
            Verdict::Fatal => Failure::Fatal(self.registry_err(&e)),
            Verdict::Retry | Verdict::RetryAfter(_) => Failure::Transient(e.to_string()),
        })?;
        let chunks = |s: oci_client::client::SizedStream| s.stream.map(|c| c.map_err(|e| e.to_string()));
        Ok(match response {
            BlobResponse::Partial(s) => Opened::Partial(chunks(s)),
            BlobResponse::Full(s) => Opened::Full(chunks(s)),
        })
    }

    fn download_err(&self, e: DownloadError<StoreError>) -> StoreError {
        match e {
            DownloadError::GaveUp { what, detail, attempts } => {
                self.err(format!("{what}: {detail} (after {attempts} tries)"))
            }
            DownloadError::Fatal(e) => e,
            DownloadError::Cache(e) => StoreError::Cache(e),
            DownloadError::Overrun(e) => StoreError::Overrun(e),
        }
    }

    /// Store a blob from `stream`, unless it is there already. Returns whether it was written.
    pub async fn put_blob(&self, d: &Descriptor, stream: ByteStream) -> Result<bool, StoreError> {
        if self.has_blob(d).await? {
            return Ok(false);
        }
        match self {
            Self::Registry { conn, image, .. } => {
                let digest = format!("sha256:{}", d.digest);
                tracing::debug!("PUT blob {digest} ({} bytes) to {image}", d.size);
                conn.client
                    .push_blob_stream(&repository(image), stream, &digest, Some(d.size))
                    .await
                    .map_err(|e| self.registry_err(&e))?;
            }
            Self::Layout { dir, .. } => write_layout_blob(dir, d, stream).await?,
        }
        Ok(true)
    }

    pub async fn put_bytes(&self, d: &Descriptor, bytes: Vec<u8>) -> Result<bool, StoreError> {
        let stream = futures_util::stream::once(async move { Ok(Bytes::from(bytes)) });
        self.put_blob(d, Box::pin(stream)).await
    }

    /// Store a manifest under its digest, and under `tag` when given.
    pub async fn put_manifest(&self, bytes: &[u8], media_type: &str, tag: Option<&str>) -> Result<Sha256, StoreError> {
        let digest = Sha256::of_bytes(bytes);
        match self {
            Self::Registry { conn, image, options } => {
                let content_type: reqwest::header::HeaderValue =
                    media_type.parse().map_err(|_| self.err(format!("bad media type {media_type}")))?;
                let at = match tag {
                    Some(t) => image.with_tag(t.to_owned()),
                    None => image.at_digest(digest),
                };
                let reference = at.to_client();
                let put = || conn.client.push_manifest_raw(&reference, bytes.to_vec(), content_type.clone());
                crate::fetch::with_retries(options, &format!("manifest {at}"), put, super::retryable)
                    .await
                    .map_err(|e| self.registry_err(&e))?;
            }
            Self::Layout { dir, .. } => {
                let d = document(media_type, digest, bytes.len() as u64);
                let chunk = Bytes::copy_from_slice(bytes);
                write_layout_blob(dir, &d, Box::pin(futures_util::stream::once(async move { Ok(chunk) }))).await?;
                if let Some(tag) = tag {
                    let mut entry = d;
                    entry.annotations.insert(REF_NAME.to_owned(), tag.to_owned());
                    let (dir, tag) = (dir.clone(), tag.to_owned());
                    blocking(move || {
                        update_layout_index(&dir, vec![entry], |e| e.annotations.get(REF_NAME) == Some(&tag))
                    })
                    .await?;
                }
            }
        }
        Ok(digest)
    }

    /// Referrers of `subject`: the referrers API, else the referrers tag schema (registry), or
    /// `index.json`'s entries naming it (layout).
    pub async fn referrers(&self, subject: Sha256) -> Result<Vec<Descriptor>, StoreError> {
        match self {
            Self::Registry { conn, image, options } => {
                let at = image.at_digest(subject).to_client();
                let list = || conn.referrers(&at);
                let index = fetch::with_retries(options, &format!("referrers of {image}"), list, retryable)
                    .await
                    .map_err(|e| self.registry_err(&e))?;
                let json = serde_json::to_vec(&index).map_err(|e| self.err(e))?;
                let mut found: Vec<Descriptor> = super::doc::parse_layout_index(&json).unwrap_or_default();
                // oci-client asks the tag schema only when the API is missing; a registry that
                // has the API may still hold a tag written by a client that did not ask.
                for d in self.tag_referrers(subject).await? {
                    if !found.iter().any(|f| f.digest == d.digest) {
                        found.push(d);
                    }
                }
                Ok(found)
            }
            Self::Layout { dir, .. } => {
                let dir = dir.clone();
                let entries = blocking(move || read_layout_index(&dir)).await?;
                Ok(entries
                    .into_iter()
                    .filter(|e| e.annotations.get(SUBJECT).is_some_and(|s| *s == subject.to_string()))
                    .collect())
            }
        }
    }

    async fn tag_referrers(&self, subject: Sha256) -> Result<Vec<Descriptor>, StoreError> {
        let Self::Registry { conn, image, options } = self else { return Ok(Vec::new()) };
        match pull_manifest(conn, &image.with_tag(format!("sha256-{subject}")), options).await {
            Ok((bytes, _)) => Ok(super::doc::parse_layout_index(&bytes).unwrap_or_default()),
            Err(e) if is_not_found(&e) => Ok(Vec::new()),
            Err(e) => Err(self.registry_err(&e)),
        }
    }

    /// List `entries` as referrers of `subject`, in one write: in the referrers tag schema's
    /// index (a registry with the referrers API lists them already, from their `subject`), or
    /// in `index.json`. An entry listed already is listed once.
    pub async fn add_referrers(&self, subject: Sha256, entries: Vec<Descriptor>) -> Result<(), StoreError> {
        match self {
            Self::Registry { .. } => {
                let mut listed = self.tag_referrers(subject).await?;
                let before = listed.len();
                let mut seen: std::collections::BTreeSet<Sha256> = listed.iter().map(|d| d.digest).collect();
                listed.extend(entries.into_iter().filter(|e| seen.insert(e.digest)));
                if listed.len() == before {
                    return Ok(());
                }
                let index = serde_json::json!({
                    "schemaVersion": 2, "mediaType": OCI_IMAGE_INDEX_MEDIA_TYPE, "manifests": listed,
                });
                let bytes = serde_json::to_vec(&index).map_err(|e| self.err(e))?;
                self.put_manifest(&bytes, OCI_IMAGE_INDEX_MEDIA_TYPE, Some(&format!("sha256-{subject}"))).await?;
            }
            Self::Layout { dir, .. } => {
                let mut seen = std::collections::BTreeSet::new();
                let entries: Vec<Descriptor> = entries
                    .into_iter()
                    .filter(|e| seen.insert(e.digest))
                    .map(|mut e| {
                        e.annotations.insert(SUBJECT.to_owned(), subject.to_string());
                        e
                    })
                    .collect();
                let dir = dir.clone();
                blocking(move || update_layout_index(&dir, entries, |e| seen.contains(&e.digest))).await?;
            }
        }
        Ok(())
    }

    /// The tag a layout's `index.json` gives the manifest `digest`, if any.
    pub async fn tag_of(&self, digest: Sha256) -> Option<String> {
        let Self::Layout { dir, .. } = self else { return None };
        let dir = dir.clone();
        let entries = blocking(move || read_layout_index(&dir)).await.ok()?;
        entries.into_iter().find(|e| e.digest == digest).and_then(|e| e.annotations.get(REF_NAME).cloned())
    }

    /// The tag to store under: the location's own, else `fallback`.
    pub fn tag<'a>(&'a self, fallback: Option<&'a str>) -> Option<&'a str> {
        match self {
            Self::Registry { image, .. } => {
                image.tag.as_deref().or(if image.digest.is_some() { None } else { fallback })
            }
            Self::Layout { tag, .. } => tag.as_deref().or(fallback).or(Some("latest")),
        }
    }
}

fn document(media_type: &str, digest: Sha256, size: u64) -> Descriptor {
    Descriptor {
        media_type: media_type.to_owned(),
        digest,
        size,
        platform: None,
        annotations: std::collections::BTreeMap::new(),
        artifact_type: None,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::oci::doc::MAX_MANIFEST_BYTES;

    fn run<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime").block_on(f)
    }

    fn layout(dir: &Path, tag: &str) -> Store {
        Store::Layout { dir: dir.to_owned(), tag: Some(tag.to_owned()) }
    }

    #[test]
    fn an_index_larger_than_a_manifest_can_be_is_refused_not_truncated() {
        let t = tempfile::tempdir().expect("a temporary directory");
        let padding = " ".repeat(usize::try_from(MAX_MANIFEST_BYTES).expect("fits") + 1);
        std::fs::write(t.path().join("index.json"), format!("{{\"schemaVersion\":2,\"manifests\":[]}}{padding}"))
            .expect("written");
        let err = run(layout(t.path(), "x").manifest(None)).expect_err("refused");
        let text = err.to_string();
        assert!(text.contains("index.json") && text.contains("larger than"), "{text}");
    }

    #[test]
    fn a_layout_blob_longer_than_declared_ends_its_stream_with_an_error() {
        let t = tempfile::tempdir().expect("a temporary directory");
        let bytes = vec![7u8; 3 << 20];
        let digest = Sha256::of_bytes(&bytes);
        std::fs::create_dir_all(t.path().join("blobs/sha256")).expect("made");
        std::fs::write(layout_blob(t.path(), digest), &bytes).expect("written");
        let declared = document("application/octet-stream", digest, 1 << 20);
        let store = layout(t.path(), "x");
        let (seen, err) = run(async {
            let mut stream = store.blob_stream(&declared).await.expect("opened");
            let mut seen = 0u64;
            while let Some(chunk) = stream.next().await {
                match chunk {
                    Ok(c) => seen += c.len() as u64,
                    Err(e) => return (seen, Some(e.to_string())),
                }
            }
            (seen, None)
        });
        assert!(seen <= 1 << 20, "no more than the declared size was handed on: {seen}");
        assert!(err.is_some_and(|e| e.contains("more than the declared")), "the stream ended with an error");
    }

    #[test]
    fn a_manifest_whose_bytes_are_not_its_digest_is_refused() {
        let t = tempfile::tempdir().expect("a temporary directory");
        let claimed = Sha256::of_bytes(b"{}");
        std::fs::create_dir_all(t.path().join("blobs/sha256")).expect("made");
        std::fs::write(layout_blob(t.path(), claimed), b"{\"other\":1}").expect("written");
        let err = run(layout(t.path(), "x").manifest(Some(claimed))).expect_err("refused");
        assert!(matches!(err, StoreError::Digest { expected, .. } if expected == claimed), "{err}");
        assert_eq!(err.class(), Class::Verification);
    }

    #[test]
    fn a_missing_tag_names_the_tags_the_layout_has() {
        let t = tempfile::tempdir().expect("a temporary directory");
        let mut entry = document(super::super::doc::OCI_MANIFEST, Sha256::of_bytes(b"{}"), 2);
        entry.annotations.insert(REF_NAME.to_owned(), "base:1.0".to_owned());
        update_layout_index(t.path(), vec![entry], |_| false).expect("written");
        let err = run(layout(t.path(), "base:2.0").manifest(None)).expect_err("refused");
        let text = err.to_string();
        assert!(text.contains("no manifest tagged `base:2.0`") && text.contains("base:1.0"), "{text}");
    }
}
