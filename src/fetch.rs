//! The one download path for every source: a blob is streamed into the cache (`Incoming`),
//! hashed as it arrives, retried with backoff on transient failures (5xx answers, dropped
//! connections), resumed with a byte offset from what was already received, and made visible
//! only when its sha256 and size verify. Transports (registries through `oci_client`, plain
//! URLs through `reqwest`) only say how to open a stream from an offset.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use futures_util::{Stream, StreamExt as _};

use crate::cache::{Cache, CacheError};
use crate::digest::Sha256;
use crate::progress::Reporter;

/// Attempts per blob.
pub const ATTEMPTS: u32 = 5;

/// What sources need to fetch content: where to keep it, how many downloads at once, and
/// whom to tell about progress.
pub struct Fetch<'a> {
    pub cache: &'a Cache,
    pub jobs: usize,
    pub reporter: &'a dyn Reporter,
}

/// A multi-threaded runtime for one command: the library is synchronous at its edges.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()
}

/// What opening a stream at an offset gave.
pub enum Opened<S> {
    /// Bytes from the requested offset on.
    Partial(S),
    /// The whole blob from byte 0 (the server ignored or refused the range).
    Full(S),
}

/// Why an attempt failed, and whether another is worth it.
pub enum Failure<E> {
    Transient(String),
    Fatal(E),
}

#[derive(Debug, thiserror::Error)]
pub enum DownloadError<E: std::error::Error + 'static> {
    #[error("{what}: {detail} (after {ATTEMPTS} attempts)")]
    GaveUp { what: String, detail: String },
    #[error(transparent)]
    Fatal(E),
    #[error(transparent)]
    Cache(#[from] CacheError),
}

/// Download one blob into the cache unless it is there already. `open(offset)` starts a
/// stream of chunks at `offset`; chunk errors count as transient.
pub async fn download<E, S, F, Fut>(
    cache: &Cache,
    digest: Sha256,
    size: Option<u64>,
    what: &str,
    reporter: &dyn Reporter,
    mut open: F,
) -> Result<PathBuf, DownloadError<E>>
where
    E: std::error::Error + 'static,
    S: Stream<Item = Result<bytes::Bytes, String>> + Unpin,
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = Result<Opened<S>, Failure<E>>>,
{
    if cache.contains(&digest, size) {
        reporter.advance(size.unwrap_or(0));
        return Ok(cache.path(&digest));
    }
    let key = format!("sha256:{}", digest.short(12));
    reporter.item_start(&key, size.unwrap_or(0));
    let mut attempt = 0;
    let result = loop {
        attempt += 1;
        let mut incoming = cache.incoming(digest, what)?;
        let outcome = async {
            let mut stream = match open(incoming.offset()).await? {
                Opened::Partial(s) => s,
                Opened::Full(s) => {
                    incoming.restart().map_err(|e| Failure::Transient(e.to_string()))?;
                    s
                }
            };
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(Failure::Transient)?;
                incoming.write(&chunk).map_err(|e| Failure::Transient(e.to_string()))?;
                reporter.advance(chunk.len() as u64);
                reporter.item_advance(&key, chunk.len() as u64);
            }
            Ok(())
        }
        .await;
        match outcome {
            Ok(()) => break incoming.commit(size).map_err(DownloadError::from),
            Err(Failure::Transient(detail)) if attempt < ATTEMPTS => {
                let wait = Duration::from_millis(250 * 2u64.pow(attempt - 1));
                tracing::warn!(
                    "{what}: attempt {attempt} failed ({detail}); retrying in {wait:?} from byte {}",
                    incoming.offset()
                );
                incoming.keep_for_resume();
                tokio::time::sleep(wait).await;
            }
            Err(Failure::Transient(detail)) => break Err(DownloadError::GaveUp { what: what.to_owned(), detail }),
            Err(Failure::Fatal(e)) => break Err(DownloadError::Fatal(e)),
        }
    };
    reporter.item_finish(&key);
    result
}

/// Plain URLs (wheel indexes, apt repositories, model hubs, files): one `reqwest` client with
/// the system roots, an optional bearer token per request, and bounded reads for metadata.
#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
}

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("GET {url}: {detail}")]
    Request { url: String, detail: String },
    #[error("GET {url}: HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("GET {url}: larger than {limit} bytes")]
    TooLarge { url: String, limit: u64 },
    #[error("cannot set up the HTTP client: {0}")]
    Client(String),
}

impl Http {
    pub fn new() -> Result<Self, HttpError> {
        let client = reqwest::Client::builder()
            .user_agent(concat!("airlock/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(30))
            .read_timeout(Duration::from_secs(300))
            .build()
            .map_err(|e| HttpError::Client(e.to_string()))?;
        Ok(Self { client })
    }

    fn get(&self, url: &str, bearer: Option<&str>) -> reqwest::RequestBuilder {
        let req = self.client.get(url);
        match bearer {
            Some(token) => req.bearer_auth(token),
            None => req,
        }
    }

    /// A small document (an index page, a listing), at most `limit` bytes, with its content type.
    pub async fn fetch_small(
        &self,
        url: &str,
        accept: &str,
        bearer: Option<&str>,
        limit: u64,
    ) -> Result<(Vec<u8>, String), HttpError> {
        let req_err = |e: reqwest::Error| HttpError::Request { url: url.to_owned(), detail: e.to_string() };
        let resp = self.get(url, bearer).header(reqwest::header::ACCEPT, accept).send().await.map_err(req_err)?;
        if !resp.status().is_success() {
            return Err(HttpError::Status { url: url.to_owned(), status: resp.status().as_u16() });
        }
        let content_type = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let mut body = Vec::new();
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            body.extend_from_slice(&chunk.map_err(req_err)?);
            if body.len() as u64 > limit {
                return Err(HttpError::TooLarge { url: url.to_owned(), limit });
            }
        }
        Ok((body, content_type))
    }

    /// The size a URL announces (HEAD, `Content-Length`), when it announces one.
    pub async fn content_length(&self, url: &str, bearer: Option<&str>) -> Result<Option<u64>, HttpError> {
        let mut req = self.client.head(url);
        if let Some(token) = bearer {
            req = req.bearer_auth(token);
        }
        let resp = req.send().await.map_err(|e| HttpError::Request { url: url.to_owned(), detail: e.to_string() })?;
        if !resp.status().is_success() {
            return Err(HttpError::Status { url: url.to_owned(), status: resp.status().as_u16() });
        }
        Ok(resp.content_length())
    }

    /// Download `url` into the cache, verified against `digest` (and `size` when known).
    pub async fn download(
        &self,
        url: &str,
        digest: Sha256,
        size: Option<u64>,
        bearer: Option<&str>,
        fetch: &Fetch<'_>,
        what: &str,
    ) -> Result<PathBuf, DownloadError<HttpError>> {
        let open = |offset: u64| async move {
            let mut req = self.get(url, bearer);
            if offset > 0 {
                req = req.header(reqwest::header::RANGE, format!("bytes={offset}-"));
            }
            let resp = req.send().await.map_err(|e| Failure::Transient(e.to_string()))?;
            let status = resp.status();
            if status.is_server_error() {
                return Err(Failure::Transient(format!("HTTP {}", status.as_u16())));
            }
            if !status.is_success() {
                return Err(Failure::Fatal(HttpError::Status { url: url.to_owned(), status: status.as_u16() }));
            }
            let stream = resp.bytes_stream().map(|c| c.map_err(|e| e.to_string()));
            Ok(if status == reqwest::StatusCode::PARTIAL_CONTENT {
                Opened::Partial(stream)
            } else {
                Opened::Full(stream)
            })
        };
        download(fetch.cache, digest, size, what, fetch.reporter, open).await
    }
}

/// One file to download by URL.
pub struct Wanted {
    pub url: String,
    pub sha256: Sha256,
    pub size: Option<u64>,
    pub bearer: Option<String>,
    pub what: String,
}

impl Http {
    /// Download every wanted file, `fetch.jobs` at a time; paths in the order given.
    pub async fn download_all(
        &self,
        wanted: &[Wanted],
        fetch: &Fetch<'_>,
    ) -> Result<Vec<PathBuf>, DownloadError<HttpError>> {
        fetch.reporter.start("fetching", wanted.iter().filter_map(|w| w.size).sum());
        let paths = futures_util::stream::iter(wanted)
            .map(|w| self.download(&w.url, w.sha256, w.size, w.bearer.as_deref(), fetch, &w.what))
            .buffered(fetch.jobs.max(1))
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect();
        fetch.reporter.finish();
        paths
    }
}
