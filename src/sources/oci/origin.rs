//! Where an image's bytes come from: a registry (through `oci_client`) or a local OCI image
//! layout. Every manifest is checked against the digest it was asked for; every blob is
//! streamed into the cache and verified there before it becomes visible.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::StreamExt as _;
use oci_client::client::BlobResponse;
use oci_client::errors::OciDistributionError;

use super::ImageError;
use crate::cache::Cache;
use crate::digest::Sha256;
use crate::fetch::{self, DownloadError, Failure, NetOptions, Opened, Verdict, blocking};
use crate::oci::doc::{Descriptor, MAX_MANIFEST_BYTES};
use crate::oci::{Connection, ImageRef};
pub use crate::oci::{is_not_found, pull_manifest, retryable};
use crate::progress::Reporter;

#[derive(Clone)]
pub enum Origin {
    /// `options`: how requests to it are retried.
    Registry {
        conn: Arc<Connection>,
        image: ImageRef,
        options: NetOptions,
    },
    Layout {
        dir: PathBuf,
    },
}

impl Origin {
    pub fn describe(&self) -> String {
        match self {
            Origin::Registry { image, .. } => image.to_string(),
            Origin::Layout { dir } => format!("oci layout `{}`", dir.display()),
        }
    }

    /// The manifest or index with this digest, checked.
    pub async fn manifest(&self, digest: Sha256) -> Result<Vec<u8>, ImageError> {
        let bytes = match self {
            Origin::Registry { conn, image, options } => {
                let at = image.at_digest(digest);
                tracing::debug!("GET manifest {at}");
                let (bytes, _) = pull_manifest(conn, &at, options).await.map_err(|e| registry_error(image, &e))?;
                bytes.to_vec()
            }
            Origin::Layout { dir } => {
                let dir = dir.clone();
                blocking(move || read_layout_blob(&dir, digest)).await?
            }
        };
        check_digest(&self.describe(), digest, &bytes)?;
        Ok(bytes)
    }

    /// Stream one blob into the cache unless it is there already.
    pub async fn blob(&self, desc: &Descriptor, cache: &Cache, reporter: &dyn Reporter) -> Result<PathBuf, ImageError> {
        if cache.contains(&desc.digest, Some(desc.size)) {
            reporter.advance(desc.size);
            return Ok(cache.path(&desc.digest));
        }
        let what = format!("{} blob sha256:{}", self.describe(), desc.digest);
        match self {
            Origin::Layout { dir } => {
                // A local layer can be gigabytes: copied and hashed on the blocking pool, so the
                // registry downloads running beside it are not held up.
                let path = layout_blob_path(dir, desc.digest);
                let (cache, digest, size) = (cache.clone(), desc.digest, desc.size);
                let stored = blocking(move || {
                    let file = std::fs::File::open(&path)
                        .map_err(|e| ImageError::Layout { path: path.clone(), detail: e.to_string() })?;
                    Ok::<_, ImageError>(cache.put(digest, Some(size), &what, std::io::BufReader::new(file))?)
                })
                .await?;
                reporter.advance(desc.size);
                Ok(stored)
            }
            Origin::Registry { conn, image, options } => {
                fetch_blob(conn, image, desc, cache, &what, reporter, options).await
            }
        }
    }
}

async fn fetch_blob(
    conn: &Connection,
    image: &ImageRef,
    desc: &Descriptor,
    cache: &Cache,
    what: &str,
    reporter: &dyn Reporter,
    options: &NetOptions,
) -> Result<PathBuf, ImageError> {
    let reference = image.to_client();
    let digest = format!("sha256:{}", desc.digest);
    let (reference, digest) = (&reference, digest.as_str());
    let open = |offset: u64| async move {
        tracing::debug!("GET blob {digest} of {image} (from byte {offset})");
        // `pull_blob_stream_partial` does not verify; `fetch::download` does, over the whole blob.
        let response = conn
            .client
            .pull_blob_stream_partial(reference, digest, offset, None)
            .await
            .map_err(|e| classify(image, &e))?;
        let chunks = |s: oci_client::client::SizedStream| s.stream.map(|c| c.map_err(|e| e.to_string()));
        Ok(match response {
            BlobResponse::Partial(s) => Opened::Partial(chunks(s)),
            BlobResponse::Full(s) => Opened::Full(chunks(s)),
        })
    };
    fetch::download(cache, desc.digest, Some(desc.size), what, reporter, options, open).await.map_err(|e| match e {
        DownloadError::GaveUp { what, detail, attempts } => ImageError::Registry {
            reference: image.to_string(),
            detail: format!("{what}: {detail} (after {attempts} tries)"),
        },
        DownloadError::Fatal(e) => e,
        DownloadError::Cache(e) => ImageError::Cache(e),
    })
}

/// Whether a failure is worth another attempt.
fn classify(image: &ImageRef, e: &OciDistributionError) -> Failure<ImageError> {
    match retryable(e) {
        Verdict::Retry | Verdict::RetryAfter(_) => Failure::Transient(e.to_string()),
        Verdict::Fatal => Failure::Fatal(registry_error(image, e)),
    }
}

pub fn registry_error(image: &ImageRef, e: &OciDistributionError) -> ImageError {
    let hint = || {
        format!(
            "; credentials for `{}` are read from the docker config ($REGISTRY_AUTH_FILE, $DOCKER_CONFIG/config.json, ~/.docker/config.json)",
            image.registry
        )
    };
    let detail = match e {
        OciDistributionError::AuthenticationFailure(d) => format!("authentication failed: {d}{}", hint()),
        OciDistributionError::UnauthorizedError { url } => format!("401 unauthorized at {url}{}", hint()),
        OciDistributionError::ImageManifestNotFoundError(d) => format!("manifest not found: {d}"),
        other => other.to_string(),
    };
    ImageError::Registry { reference: image.to_string(), detail }
}

pub fn check_digest(what: &str, expected: Sha256, bytes: &[u8]) -> Result<(), ImageError> {
    let actual = Sha256::of_bytes(bytes);
    if actual == expected {
        Ok(())
    } else {
        Err(ImageError::DigestMismatch { reference: what.to_owned(), expected, actual })
    }
}

pub fn layout_blob_path(dir: &Path, digest: Sha256) -> PathBuf {
    dir.join("blobs/sha256").join(digest.to_string())
}

/// A small blob (manifest, index) from a layout, bounded in size.
pub fn read_layout_blob(dir: &Path, digest: Sha256) -> Result<Vec<u8>, ImageError> {
    use std::io::Read as _;
    let path = layout_blob_path(dir, digest);
    let file =
        std::fs::File::open(&path).map_err(|e| ImageError::Layout { path: path.clone(), detail: e.to_string() })?;
    let mut bytes = Vec::new();
    file.take(MAX_MANIFEST_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ImageError::Layout { path: path.clone(), detail: e.to_string() })?;
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(ImageError::Layout { path, detail: format!("larger than {MAX_MANIFEST_BYTES} bytes") });
    }
    Ok(bytes)
}
