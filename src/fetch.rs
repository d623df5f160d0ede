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
