//! The one download path for every source: a blob is streamed into the cache (`Incoming`),
//! hashed as it arrives, retried with backoff on transient failures (5xx answers, dropped
//! connections), resumed with a byte offset from what was already received, and made visible
//! only when its sha256 and size verify. Transports (registries through `oci_client`, plain
//! URLs through `reqwest`) only say how to open a stream from an offset.
//!
//! A command builds one [`Net`] (one async runtime, one HTTP client) and passes it down.
//! File work never runs on the async executor: chunks are gathered and written (and hashed)
//! through [`blocking`], so one large local file never stalls the other downloads.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use futures_util::{Stream, StreamExt as _};

pub use crate::cache::Overrun;
use crate::cache::{Cache, CacheError, Incoming};
use crate::digest::Sha256;
use crate::failure::{Class, Classify};
use crate::progress::Reporter;

pub(crate) mod direct;

/// Tries per request by default (`--retries 4`).
pub const ATTEMPTS: u32 = 5;
/// The longest `Retry-After` honoured; a server asking for more gets this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(120);

/// How requests are timed out and tried again: `--retries`, `--timeout`, `--connect-timeout`.
/// Every request to every source goes through it — registry manifests, tags and referrers,
/// index pages, `InRelease`, hub API calls, blobs — on 5xx, 429 and dropped connections.
#[derive(Debug, Clone, Copy)]
pub struct NetOptions {
    /// Tries in all (1 + retries).
    pub attempts: u32,
    /// The first wait; each next one doubles (with jitter) up to `max_wait`.
    pub base_wait: Duration,
    pub max_wait: Duration,
    pub connect_timeout: Duration,
    /// Longest silence while reading a response.
    pub read_timeout: Duration,
    /// The slowest a transfer may go, in bytes per second averaged from its start, once
    /// `rate_window` has passed (0: no floor). A mirror that sends a byte a second is given up
    /// instead of holding a node's lock for days.
    pub min_rate: u64,
    pub rate_window: Duration,
}

/// A transfer's rate floor (`--min-rate`): `check` fails once the transfer has run for the
/// window and its average rate since it started is below the floor.
#[derive(Debug, Clone, Copy)]
pub struct RateFloor {
    started: std::time::Instant,
    floor: u64,
    window: Duration,
}

impl RateFloor {
    pub fn start(options: &NetOptions) -> Self {
        Self { started: std::time::Instant::now(), floor: options.min_rate, window: options.rate_window }
    }

    /// `Err` with why, when `bytes` so far is below the floor after the window.
    pub fn check(&self, bytes: u64) -> Result<(), String> {
        let elapsed = self.started.elapsed();
        if self.floor == 0 || elapsed < self.window {
            return Ok(());
        }
        #[allow(clippy::cast_precision_loss, reason = "a rate in words")]
        let rate = bytes as f64 / elapsed.as_secs_f64();
        #[allow(clippy::cast_precision_loss, reason = "a rate in words")]
        if rate < self.floor as f64 {
            return Err(format!(
                "{bytes} bytes in {:.1} s ({rate:.0} B/s) is below the floor of {} B/s (--min-rate): given up",
                elapsed.as_secs_f64(),
                self.floor
            ));
        }
        Ok(())
    }
}

impl Default for NetOptions {
    fn default() -> Self {
        Self {
            attempts: ATTEMPTS,
            base_wait: Duration::from_millis(250),
            max_wait: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(30),
            read_timeout: Duration::from_secs(300),
            min_rate: 0,
            rate_window: Duration::from_secs(30),
        }
    }
}

impl NetOptions {
    /// How long to wait before try `attempt + 1`: what the server asked (`Retry-After`, at most
    /// two minutes), else exponential backoff with jitter in its upper half, so that many
    /// clients failing together do not come back together.
    pub fn wait(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(after) = retry_after {
            return after.min(MAX_RETRY_AFTER);
        }
        let exp = self.base_wait.saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1))).min(self.max_wait);
        exp.mul_f64(rand::Rng::gen_range(&mut rand::thread_rng(), 0.5..=1.0))
    }
}

/// Whether a failed request is worth another try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Fatal,
    Retry,
    /// Retry when the server said (`Retry-After`).
    RetryAfter(Duration),
}

/// Run `op` until it succeeds, fails for good, or `options.attempts` are spent.
pub async fn with_retries<T, E: std::fmt::Display, Fut: Future<Output = Result<T, E>>>(
    options: &NetOptions,
    what: &str,
    mut op: impl FnMut() -> Fut,
    retryable: impl Fn(&E) -> Verdict,
) -> Result<T, E> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match op().await {
            Ok(value) => return Ok(value),
            Err(e) => match retryable(&e) {
                verdict @ (Verdict::Retry | Verdict::RetryAfter(_)) if attempt < options.attempts => {
                    let after = match verdict {
                        Verdict::RetryAfter(after) => Some(after),
                        _ => None,
                    };
                    let wait = options.wait(attempt, after);
                    let detail = without_urls_of(&e.to_string(), what);
                    tracing::warn!(
                        "{what}: try {attempt} of {} failed ({detail}); retrying in {wait:?}",
                        options.attempts
                    );
                    tokio::time::sleep(wait).await;
                }
                _ => return Err(e),
            },
        }
    }
}

/// An error's text without the URLs `what` already names (reqwest says "error sending request
/// for url (URL)": the URL twice on one line).
fn without_urls_of(detail: &str, what: &str) -> String {
    let mut out = detail.strip_prefix(&format!("{what}: ")).unwrap_or(detail).to_owned();
    for url in what.split_whitespace().filter(|w| w.contains("://")) {
        let url = url.trim_matches(|c| matches!(c, '`' | '\'' | '"' | '(' | ')' | ','));
        out = out.replace(&format!(" for url ({url})"), "").replace(&format!(" ({url})"), "");
    }
    out
}

/// A `Retry-After` header: delay-seconds or an HTTP-date.
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at =
        time::OffsetDateTime::parse(&value.replace(" GMT", " +0000"), &time::format_description::well_known::Rfc2822)
            .ok()?;
    let secs = (at - time::OffsetDateTime::now_utc()).whole_seconds();
    Some(Duration::from_secs(u64::try_from(secs).unwrap_or(0)))
}
/// Received bytes are handed to the file in pieces of about this size. Each download in flight
/// holds two (one filling, one being written): with `--jobs 8`, 4 MiB in all.
const WRITE_BATCH: usize = 256 << 10;

/// What one command shares for the network: one async runtime and one HTTP
/// client for plain URLs. Registry connections are per registry (`oci::Registries`).
pub struct Net {
    runtime: tokio::runtime::Runtime,
    http: Http,
}

#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
}

impl Net {
    pub fn new(options: NetOptions) -> Result<Self, NetError> {
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(NetError::Runtime)?;
        Ok(Self { runtime, http: Http::with_redirects(options, Redirects::Anywhere) })
    }

    /// A node's, for its site mirror: redirects only as `redirects` allows, and the async
    /// work on the calling thread. A node fetches one member at a time, and hyper hands each
    /// chunk of a body to whoever reads it: with a pool of workers every chunk crossed threads
    /// (8 nodes staging 1 GiB each switched context 130,000 times, a tenth of their CPU), here
    /// the connection is read and its chunks hashed on one thread, and the files are written
    /// on the blocking pool.
    pub fn for_mirror(options: NetOptions, redirects: Redirects) -> Result<Self, NetError> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(NetError::Runtime)?;
        Ok(Self { runtime, http: Http::with_redirects(options, redirects) })
    }

    pub fn http(&self) -> &Http {
        &self.http
    }

    /// Run `future` to completion on this command's runtime: the library is synchronous at its
    /// edges.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }
}

/// What sources need to fetch content: where to keep it, how many downloads at once, the
/// command's HTTP client, and whom to tell about progress.
pub struct Fetch<'a> {
    pub cache: &'a Cache,
    pub jobs: usize,
    pub http: &'a Http,
    pub reporter: &'a dyn Reporter,
}

/// Run blocking work (file I/O, hashing) on tokio's blocking pool, off the async executor.
/// A panic there is a panic here.
pub async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
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
    /// Transient, and the server said when to come back (`Retry-After` on a 429 or 503).
    RetryAfter(String, Duration),
    Fatal(E),
}

#[derive(Debug, thiserror::Error)]
pub enum DownloadError<E: std::error::Error + 'static> {
    #[error("{what}: {detail} (after {attempts} tries)")]
    GaveUp { what: String, detail: String, attempts: u32 },
    #[error(transparent)]
    Fatal(E),
    /// Never an overrun: that is `Overrun`, wherever it was found.
    #[error(transparent)]
    Cache(CacheError),
    #[error(transparent)]
    Overrun(#[from] Overrun),
}

impl<E: std::error::Error + 'static> From<CacheError> for DownloadError<E> {
    fn from(e: CacheError) -> Self {
        match e {
            CacheError::Overrun(e) => DownloadError::Overrun(e),
            e => DownloadError::Cache(e),
        }
    }
}

impl<E: std::error::Error + Classify + 'static> Classify for DownloadError<E> {
    fn class(&self) -> Class {
        match self {
            DownloadError::GaveUp { .. } => Class::Runtime,
            DownloadError::Fatal(e) => e.class(),
            DownloadError::Cache(e) => e.class(),
            DownloadError::Overrun(_) => Class::Verification,
        }
    }
}

/// An `Incoming` driven from async code: bytes are gathered into batches and each batch is
/// written and hashed on the blocking pool.
struct Receiving {
    incoming: Option<Incoming>,
    pending: Vec<u8>,
}

impl Receiving {
    async fn open(cache: &Cache, digest: Sha256, size: Option<u64>, what: &str) -> Result<Self, CacheError> {
        let (cache, what) = (cache.clone(), what.to_owned());
        // Opening re-hashes what an earlier attempt left: file work.
        let incoming = blocking(move || cache.incoming(digest, size, &what)).await?;
        Ok(Self { incoming: Some(incoming), pending: Vec::with_capacity(WRITE_BATCH) })
    }

    fn incoming(&mut self) -> &mut Incoming {
        self.incoming.as_mut().expect("an incoming blob is present between blocking calls")
    }

    fn offset(&mut self) -> u64 {
        self.incoming().offset() + self.pending.len() as u64
    }

    async fn run<R: Send + 'static>(&mut self, work: impl FnOnce(&mut Incoming) -> R + Send + 'static) -> R {
        let mut incoming = self.incoming.take().expect("an incoming blob is present between blocking calls");
        let (incoming, result) = blocking(move || {
            let result = work(&mut incoming);
            (incoming, result)
        })
        .await;
        self.incoming = Some(incoming);
        result
    }

    async fn restart(&mut self) -> Result<(), CacheError> {
        self.pending.clear();
        self.run(Incoming::restart).await
    }

    async fn write(&mut self, mut bytes: &[u8]) -> Result<(), CacheError> {
        while !bytes.is_empty() {
            let (now, rest) = bytes.split_at(bytes.len().min(WRITE_BATCH - self.pending.len()));
            self.pending.extend_from_slice(now);
            bytes = rest;
            if self.pending.len() == WRITE_BATCH {
                self.flush().await?;
            }
        }
        Ok(())
    }

    /// Write the batch gathered so far. Its buffer comes back to gather the next: one buffer
    /// a download, never grown. A new one a batch, grown to 512 KiB when a chunk ran past
    /// the batch size, was 3,600 allocations of 256 KiB and 3,600 copies into 512 KiB in a
    /// cold build of 20 images of 72 MiB (`heaptrack`).
    async fn flush(&mut self) -> Result<(), CacheError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut batch = std::mem::take(&mut self.pending);
        let (batch, written) = self
            .run(move |incoming| {
                let written = incoming.write(&batch);
                batch.clear();
                (batch, written)
            })
            .await;
        self.pending = batch;
        written
    }

    /// Flush, then verify and make the blob visible.
    async fn commit(mut self, size: Option<u64>) -> Result<PathBuf, CacheError> {
        self.flush().await?;
        let incoming = self.incoming.take().expect("an incoming blob is present between blocking calls");
        blocking(move || incoming.commit(size)).await
    }
}

/// How one download attempt failed: on the network side (maybe worth another try), or where
/// its bytes land (never): a partial file in the cache, or the source past its declared size
/// (`CacheError::Overrun`, for a stream as for a partial file).
enum Attempt<E> {
    Net(Failure<E>),
    Land(CacheError),
}

/// Where a download's bytes land while it runs, across its attempts: a partial file in the
/// cache (`Receiving`), or the thread packing a bundle (`Streaming`).
trait Landing {
    /// Bytes landed so far: where the next attempt resumes.
    fn offset(&mut self) -> u64;
    /// The server answered a resumed request from byte 0.
    async fn restart_at_zero(&mut self) -> Result<(), CacheError>;
    /// Land a chunk; `Ok(false)` when nobody wants more (a bundle whose packing stopped).
    async fn land(&mut self, chunk: bytes::Bytes) -> Result<bool, CacheError>;
    /// Between attempts: what was received stays for the next one to resume after.
    async fn pause(&mut self) -> Result<(), CacheError>;
}

impl Landing for Receiving {
    fn offset(&mut self) -> u64 {
        Receiving::offset(self)
    }

    async fn restart_at_zero(&mut self) -> Result<(), CacheError> {
        self.restart().await
    }

    async fn land(&mut self, chunk: bytes::Bytes) -> Result<bool, CacheError> {
        self.write(&chunk).await.map(|()| true)
    }

    async fn pause(&mut self) -> Result<(), CacheError> {
        self.flush().await
    }
}

/// A download handed to the thread that packs a bundle as it arrives, kept nowhere: the
/// packer hashes it and checks its size. A retry resumes at the byte reached; when the server
/// answers it from byte 0, the bytes already handed over are skipped.
struct Streaming {
    out: crate::overlap::Outflow,
    sent: u64,
    /// Bytes of the current response that were handed over by an earlier one.
    skip: u64,
    /// The declared size: no byte past it is handed over.
    limit: u64,
    what: String,
}

impl Landing for Streaming {
    fn offset(&mut self) -> u64 {
        self.sent
    }

    async fn restart_at_zero(&mut self) -> Result<(), CacheError> {
        self.skip = self.sent;
        Ok(())
    }

    async fn land(&mut self, mut chunk: bytes::Bytes) -> Result<bool, CacheError> {
        let skipped = usize::try_from(self.skip).unwrap_or(usize::MAX).min(chunk.len());
        bytes::Buf::advance(&mut chunk, skipped);
        self.skip -= skipped as u64;
        if self.sent + chunk.len() as u64 > self.limit {
            return Err(Overrun { what: self.what.clone(), limit: self.limit }.into());
        }
        self.sent += chunk.len() as u64;
        Ok(self.out.send(chunk).await.is_ok())
    }

    async fn pause(&mut self) -> Result<(), CacheError> {
        Ok(())
    }
}

/// A download into a file of its own (a mirror's member on a node): hashed as it lands,
/// never past the declared size; a resumed attempt appends, one answered from byte 0 starts
/// the file and the hash over. The bytes are copied into a block, written (past the page cache
/// where the filesystem allows: `direct`) on the blocking pool while the next block fills: one
/// write in flight.
struct IntoFile {
    /// The file, shared with the write in flight (which holds the lock while it writes): there
    /// is no state in which bytes were hashed and their file was not there to write them.
    file: std::sync::Arc<std::sync::Mutex<direct::DirectFile>>,
    /// The write in flight, which gives its block back.
    writing: Option<tokio::task::JoinHandle<(direct::Block, std::io::Result<()>)>>,
    filling: direct::Block,
    /// The block the last write gave back, for the next to fill.
    spare: Option<direct::Block>,
    path: PathBuf,
    hash: sha2::Sha256,
    written: u64,
    limit: u64,
    what: String,
}

impl IntoFile {
    fn new(file: direct::DirectFile, path: &std::path::Path, limit: u64, what: &str) -> Self {
        Self {
            file: std::sync::Arc::new(std::sync::Mutex::new(file)),
            writing: None,
            filling: direct::Block::new(),
            spare: None,
            path: path.to_owned(),
            hash: <sha2::Sha256 as sha2::Digest>::new(),
            written: 0,
            limit,
            what: what.to_owned(),
        }
    }

    fn io(&self) -> impl Fn(std::io::Error) -> CacheError + '_ {
        |source| CacheError::Io { path: self.path.clone(), source }
    }

    /// The write in flight finished, its block back here.
    async fn written_back(&mut self) -> Result<(), CacheError> {
        if let Some(writing) = self.writing.take() {
            let (mut block, done) = match writing.await {
                Ok(back) => back,
                Err(e) => std::panic::resume_unwind(e.into_panic()),
            };
            block.clear();
            self.spare = Some(block);
            done.map_err(self.io())?;
        }
        Ok(())
    }

    /// The block filled so far handed to the blocking pool, once the write before it finished.
    async fn write_filled(&mut self) -> Result<(), CacheError> {
        self.written_back().await?;
        if self.filling.is_empty() {
            return Ok(());
        }
        let next = self.spare.take().unwrap_or_else(direct::Block::new);
        let block = std::mem::replace(&mut self.filling, next);
        let file = std::sync::Arc::clone(&self.file);
        self.writing = Some(tokio::task::spawn_blocking(move || {
            let done = locked(&file).and_then(|mut file| file.write(&block));
            (block, done)
        }));
        Ok(())
    }

    /// Everything received is in the file.
    async fn flushed(&mut self) -> Result<(), CacheError> {
        self.write_filled().await?;
        self.written_back().await
    }
}

/// The file, once the write before has let it go. A write that panicked leaves the lock
/// poisoned: an error here, not a second panic.
fn locked(
    file: &std::sync::Mutex<direct::DirectFile>,
) -> std::io::Result<std::sync::MutexGuard<'_, direct::DirectFile>> {
    file.lock().map_err(|_| std::io::Error::other("an earlier write of this file panicked"))
}

impl Landing for IntoFile {
    fn offset(&mut self) -> u64 {
        self.written
    }

    async fn restart_at_zero(&mut self) -> Result<(), CacheError> {
        self.flushed().await?;
        let file = std::sync::Arc::clone(&self.file);
        blocking(move || locked(&file)?.truncate()).await.map_err(self.io())?;
        self.hash = <sha2::Sha256 as sha2::Digest>::new();
        self.written = 0;
        Ok(())
    }

    async fn land(&mut self, chunk: bytes::Bytes) -> Result<bool, CacheError> {
        if self.written + chunk.len() as u64 > self.limit {
            return Err(Overrun { what: self.what.clone(), limit: self.limit }.into());
        }
        sha2::Digest::update(&mut self.hash, &chunk);
        self.written += chunk.len() as u64;
        let mut rest = &chunk[..];
        while !rest.is_empty() {
            rest = &rest[self.filling.fill(rest)..];
            if self.filling.is_full() {
                self.write_filled().await?;
            }
        }
        Ok(true)
    }

    async fn pause(&mut self) -> Result<(), CacheError> {
        self.flushed().await
    }
}

/// Download `size` bytes at most into the new file `path`, with retries resumed at the byte
/// reached (`open(offset)`); returns the sha256 and size of what landed, for the caller to
/// compare with what it expects (nothing here is verified but the size bound). Not synced
/// here: the caller syncs the tree it lands in once, before the tree is renamed into place.
pub async fn download_to_file<E, S, F, Fut>(
    path: &std::path::Path,
    size: u64,
    what: &str,
    reporter: &(impl Reporter + ?Sized),
    options: &NetOptions,
    open: F,
) -> Result<(Sha256, u64), DownloadError<E>>
where
    E: std::error::Error + 'static,
    S: Stream<Item = Result<bytes::Bytes, String>> + Unpin,
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = Result<Opened<S>, Failure<E>>>,
{
    let io = |source| CacheError::Io { path: path.to_owned(), source };
    let create = path.to_owned();
    let file = blocking(move || direct::DirectFile::create(&create)).await.map_err(io)?;
    let mut landing = IntoFile::new(file, path, size, what);
    attempts(&mut landing, (what, what), reporter, options, open).await?;
    landing.flushed().await?;
    Ok((Sha256::from_raw(sha2::Digest::finalize(landing.hash).into()), landing.written))
}

/// Chunks of one attempt, failed (a transient error: the next attempt resumes) once the
/// attempt has run for the rate window below the floor (`--min-rate`).
pub fn floored<S>(stream: S, options: &NetOptions) -> impl Stream<Item = Result<bytes::Bytes, String>> + Unpin
where
    S: Stream<Item = Result<bytes::Bytes, String>> + Unpin,
{
    let floor = RateFloor::start(options);
    let mut bytes = 0u64;
    stream.map(move |chunk| {
        let chunk = chunk?;
        bytes += chunk.len() as u64;
        floor.check(bytes)?;
        Ok(chunk)
    })
}

/// Download into `landing` with retries: `open(offset)` starts a stream of chunks at
/// `offset`; chunk errors count as transient. `Ok(false)`: the landing wanted no more.
async fn attempts<E, S, F, Fut>(
    landing: &mut impl Landing,
    (what, key): (&str, &str),
    reporter: &(impl Reporter + ?Sized),
    options: &NetOptions,
    mut open: F,
) -> Result<bool, DownloadError<E>>
where
    E: std::error::Error + 'static,
    S: Stream<Item = Result<bytes::Bytes, String>> + Unpin,
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = Result<Opened<S>, Failure<E>>>,
{
    let mut attempt = 0;
    // Progress is the bytes landed, each counted once: what a resumed partial file holds
    // already, and not again what a retry answered from byte 0 sends a second time.
    let mut counted = 0;
    let mut report = |landed: u64| {
        if landed > counted {
            reporter.advance(landed - counted);
            reporter.item_advance(key, landed - counted);
            counted = landed;
        }
    };
    report(landing.offset());
    loop {
        attempt += 1;
        // A failure of the network is worth another try; a failure where the bytes land (a
        // full disk, no permission) is not.
        let outcome = async {
            let offset = landing.offset();
            let mut stream = match open(offset).await.map_err(Attempt::Net)? {
                Opened::Partial(s) => s,
                Opened::Full(s) => {
                    landing.restart_at_zero().await.map_err(Attempt::Land)?;
                    s
                }
            };
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| Attempt::Net(Failure::Transient(e)))?;
                if !landing.land(chunk).await.map_err(Attempt::Land)? {
                    return Ok(false);
                }
                report(landing.offset());
            }
            Ok(true)
        }
        .await;
        let (detail, after) = match outcome {
            Ok(complete) => return Ok(complete),
            Err(Attempt::Land(e)) => return Err(e.into()),
            Err(Attempt::Net(Failure::Fatal(e))) => return Err(DownloadError::Fatal(e)),
            Err(Attempt::Net(Failure::Transient(detail))) => (detail, None),
            Err(Attempt::Net(Failure::RetryAfter(detail, after))) => (detail, Some(after)),
        };
        if attempt >= options.attempts {
            return Err(DownloadError::GaveUp { what: what.to_owned(), detail, attempts: attempt });
        }
        let wait = options.wait(attempt, after);
        landing.pause().await?;
        let offset = landing.offset();
        tracing::warn!("{what}: try {attempt} failed ({detail}); retrying in {wait:?} from byte {offset}");
        tokio::time::sleep(wait).await;
    }
}

/// Download one blob into the cache unless it is there already. `open(offset)` starts a
/// stream of chunks at `offset`; chunk errors count as transient.
pub async fn download<E, S, F, Fut>(
    cache: &Cache,
    digest: Sha256,
    size: Option<u64>,
    what: &str,
    reporter: &dyn Reporter,
    options: &NetOptions,
    open: F,
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
    let mut receiving = Receiving::open(cache, digest, size, what).await?;
    // On any failure `receiving` is dropped, and its partial file with it.
    let result = async {
        attempts(&mut receiving, (what, &key), reporter, options, open).await?;
        receiving.commit(size).await.map_err(DownloadError::from)
    }
    .await;
    reporter.item_finish(&key);
    result
}

/// Download one blob of `size` bytes into `out` as it arrives, with retries resumed at the
/// byte reached; nothing is kept. The reader hashes it: nothing here is verified but the size
/// bound. On failure the reader's next read fails with the same words.
pub async fn download_into<E, S, F, Fut>(
    out: crate::overlap::Outflow,
    digest: Sha256,
    size: u64,
    what: &str,
    reporter: &(impl Reporter + ?Sized),
    options: &NetOptions,
    open: F,
) -> Result<(), DownloadError<E>>
where
    E: std::error::Error + 'static,
    S: Stream<Item = Result<bytes::Bytes, String>> + Unpin,
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = Result<Opened<S>, Failure<E>>>,
{
    let key = format!("sha256:{}", digest.short(12));
    reporter.item_start(&key, size);
    let mut streaming = Streaming { out, sent: 0, skip: 0, limit: size, what: what.to_owned() };
    let sent = attempts(&mut streaming, (what, &key), reporter, options, open).await;
    // `Ok(false)`: the reader is gone because packing stopped, and packing's error is the one
    // to report.
    streaming.out.end(&sent.as_ref().map(|complete| *complete).map_err(|e| with_causes(e))).await;
    let result = sent.map(drop);
    reporter.item_finish(&key);
    result
}

/// An error with its causes (`error sending request: connection refused`): reqwest's own
/// message leaves out why.
pub fn with_causes(e: &dyn std::error::Error) -> String {
    crate::failure::chain(e)
}

/// Plain URLs (wheel indexes, apt repositories, model hubs, files): one `reqwest` client with
/// the system roots, an optional bearer token per request, and bounded reads for metadata.
#[derive(Clone)]
pub struct Http {
    /// Built at the first request: building loads the system's CA certificates, and a node
    /// that installs from files or plain-HTTP mirrors may have none (a minbase system has no
    /// `/etc/ssl/certs`).
    client: std::sync::OnceLock<Result<reqwest::Client, String>>,
    options: NetOptions,
    redirects: Redirects,
}

/// Where a redirect may lead: anywhere (a registry sends blobs to its storage), or, for a
/// site mirror, only to the same origin (scheme, host, port) as the request, or to the hosts
/// named with `--allow-redirect-host`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Redirects {
    #[default]
    Anywhere,
    SameOrigin {
        /// `HOST` or `HOST:PORT` also allowed.
        also: Vec<String>,
    },
}

impl Redirects {
    fn policy(&self) -> reqwest::redirect::Policy {
        let Redirects::SameOrigin { also } = self.clone() else { return reqwest::redirect::Policy::limited(10) };
        reqwest::redirect::Policy::custom(move |attempt| {
            let to = attempt.url().clone();
            let from = attempt.previous().first().cloned();
            let host_port = format!("{}:{}", to.host_str().unwrap_or(""), to.port_or_known_default().unwrap_or(0));
            let named = also.iter().any(|h| *h == host_port || Some(h.as_str()) == to.host_str());
            if attempt.previous().len() >= 10 {
                attempt.error("more than 10 redirects")
            } else if from.as_ref().is_some_and(|f| f.origin() == to.origin()) || named {
                attempt.follow()
            } else {
                let from = from.map_or_else(String::new, |f| f.origin().ascii_serialization());
                attempt.error(format!(
                    "the mirror at {from} redirects to another host, {}: refused (--allow-redirect-host {host_port} \
                     to follow it)",
                    to.origin().ascii_serialization()
                ))
            }
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("GET {url}: {detail}")]
    Request { url: String, detail: String },
    #[error("GET {url}: HTTP {status}")]
    Status { url: String, status: u16, retry_after: Option<Duration> },
    #[error("GET {url}: larger than {limit} bytes")]
    TooLarge { url: String, limit: u64 },
    #[error("GET {url}: {detail}")]
    TooSlow { url: String, detail: String },
    #[error("cannot set up the HTTP client: {0}")]
    Client(String),
}

impl Classify for HttpError {
    fn class(&self) -> Class {
        match self {
            HttpError::Request { .. }
            | HttpError::Status { .. }
            | HttpError::TooLarge { .. }
            | HttpError::TooSlow { .. }
            | HttpError::Client(_) => Class::Runtime,
        }
    }
}

impl Classify for NetError {
    fn class(&self) -> Class {
        match self {
            NetError::Runtime(_) => Class::Runtime,
        }
    }
}

/// Whether a plain HTTP failure is worth another try: 5xx, 429 and dropped connections.
pub fn transient_http(e: &HttpError) -> Verdict {
    match e {
        HttpError::Status { status, retry_after, .. } if *status >= 500 || *status == 429 => {
            retry_after.map_or(Verdict::Retry, Verdict::RetryAfter)
        }
        HttpError::Request { .. } => Verdict::Retry,
        _ => Verdict::Fatal,
    }
}

/// The one way airlock builds an HTTP client: its user agent and the connect and read
/// timeouts. `Http` adds its redirect policy, `oci::http_client` a registry's CA bundle.
pub fn client_builder(connect: Duration, read: Duration) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .user_agent(concat!("airlock/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(connect)
        .read_timeout(read)
}

impl Http {
    pub fn new(options: NetOptions) -> Self {
        Self { client: std::sync::OnceLock::new(), options, redirects: Redirects::Anywhere }
    }

    /// The same, following redirects only as `redirects` allows.
    pub fn with_redirects(options: NetOptions, redirects: Redirects) -> Self {
        Self { client: std::sync::OnceLock::new(), options, redirects }
    }

    fn client(&self) -> Result<&reqwest::Client, HttpError> {
        let built = self.client.get_or_init(|| {
            let builder = || {
                client_builder(self.options.connect_timeout, self.options.read_timeout)
                    .redirect(self.redirects.policy())
            };
            builder().build().or_else(|e| {
                // No CA certificates on this system (a minbase node): plain HTTP and files still
                // work; an HTTPS server then fails its certificate check, with its own error.
                tracing::debug!("the system's CA certificates: {}; HTTPS servers cannot be trusted", with_causes(&e));
                builder().tls_certs_only(Vec::new()).build().map_err(|e| with_causes(&e))
            })
        });
        built.as_ref().map_err(|e| HttpError::Client(e.clone()))
    }

    /// How requests are retried and timed out, for the transports that do not go through
    /// this client (registries).
    pub fn options(&self) -> &NetOptions {
        &self.options
    }

    fn get(&self, url: &str, bearer: Option<&str>) -> Result<reqwest::RequestBuilder, HttpError> {
        let req = self.client()?.get(url);
        Ok(match bearer {
            Some(token) => req.bearer_auth(token),
            None => req,
        })
    }

    /// Send `request` for `url`; anything but a 2xx is an error (with `Retry-After` kept).
    async fn send(url: &str, request: reqwest::RequestBuilder) -> Result<reqwest::Response, HttpError> {
        let response =
            request.send().await.map_err(|e| HttpError::Request { url: url.to_owned(), detail: with_causes(&e) })?;
        if !response.status().is_success() {
            let retry_after = retry_after(response.headers());
            return Err(HttpError::Status { url: url.to_owned(), status: response.status().as_u16(), retry_after });
        }
        Ok(response)
    }

    /// The size a URL says it serves now (`HEAD`, `Content-Length`), tried again like every
    /// request; `None` when the server does not say.
    pub async fn length(&self, url: &str) -> Result<Option<u64>, HttpError> {
        let once = || async {
            let response = Self::send(url, self.client()?.head(url)).await?;
            Ok(response
                .headers()
                .get(reqwest::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok()))
        };
        with_retries(&self.options, &format!("HEAD {url}"), once, transient_http).await
    }

    /// The response to a GET of `url` (a 2xx), its body not read yet.
    pub async fn stream(&self, url: &str) -> Result<reqwest::Response, HttpError> {
        Self::send(url, self.get(url, None)?).await
    }

    /// The sha256 and size of what a URL serves now, streamed (nothing kept).
    pub async fn hash(&self, url: &str) -> Result<(Sha256, u64), HttpError> {
        let once = || async {
            let response = Self::send(url, self.get(url, None)?).await?;
            let mut hasher = <sha2::Sha256 as sha2::Digest>::new();
            let mut size = 0u64;
            let mut body = response.bytes_stream();
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(|e| HttpError::Request { url: url.to_owned(), detail: with_causes(&e) })?;
                sha2::Digest::update(&mut hasher, &chunk);
                size += chunk.len() as u64;
            }
            Ok((Sha256::from_raw(sha2::Digest::finalize(hasher).into()), size))
        };
        with_retries(&self.options, &format!("GET {url}"), once, transient_http).await
    }

    /// A small document (an index page, a listing), at most `limit` bytes, with its content
    /// type; tried again on 5xx, 429 and dropped connections.
    pub async fn fetch_small(
        &self,
        url: &str,
        accept: &str,
        bearer: Option<&str>,
        limit: u64,
    ) -> Result<(Vec<u8>, String), HttpError> {
        with_retries(
            &self.options,
            &format!("GET {url}"),
            || self.fetch_small_once(url, accept, bearer, limit),
            transient_http,
        )
        .await
    }

    async fn fetch_small_once(
        &self,
        url: &str,
        accept: &str,
        bearer: Option<&str>,
        limit: u64,
    ) -> Result<(Vec<u8>, String), HttpError> {
        tracing::debug!("GET {url}");
        let req_err = |e: reqwest::Error| HttpError::Request { url: url.to_owned(), detail: with_causes(&e) };
        let resp = Self::send(url, self.get(url, bearer)?.header(reqwest::header::ACCEPT, accept)).await?;
        let content_type = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let mut body = Vec::new();
        let mut stream = resp.bytes_stream();
        let floor = RateFloor::start(&self.options);
        while let Some(chunk) = stream.next().await {
            body.extend_from_slice(&chunk.map_err(req_err)?);
            if body.len() as u64 > limit {
                return Err(HttpError::TooLarge { url: url.to_owned(), limit });
            }
            floor.check(body.len() as u64).map_err(|detail| HttpError::TooSlow { url: url.to_owned(), detail })?;
        }
        Ok((body, content_type))
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
        let open = |offset: u64| self.open_at(url, bearer, offset);
        download(fetch.cache, digest, size, what, fetch.reporter, &self.options, open).await
    }

    /// A GET of `url` from byte `offset` (a `Range` request past 0): the rest of the body when
    /// the server honours the range, the whole body when it answers 200.
    pub async fn open_at(
        &self,
        url: &str,
        bearer: Option<&str>,
        offset: u64,
    ) -> Result<Opened<impl Stream<Item = Result<bytes::Bytes, String>> + Unpin + use<>>, Failure<HttpError>> {
        tracing::debug!("GET {url} (from byte {offset})");
        let mut req = self.get(url, bearer).map_err(Failure::Fatal)?;
        if offset > 0 {
            req = req.header(reqwest::header::RANGE, format!("bytes={offset}-"));
        }
        let resp = req.send().await.map_err(|e| Failure::Transient(with_causes(&e)))?;
        let status = resp.status();
        if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            let detail = format!("HTTP {}", status.as_u16());
            return Err(match retry_after(resp.headers()) {
                Some(after) => Failure::RetryAfter(detail, after),
                None => Failure::Transient(detail),
            });
        }
        if !status.is_success() {
            let status = status.as_u16();
            return Err(Failure::Fatal(HttpError::Status { url: url.to_owned(), status, retry_after: None }));
        }
        // A 206 must start where it was asked to; one that does not is taken as a restart.
        let starts_at = resp
            .headers()
            .get(reqwest::header::CONTENT_RANGE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("bytes "))
            .and_then(|v| v.split('-').next())
            .and_then(|v| v.parse::<u64>().ok());
        let partial = status == reqwest::StatusCode::PARTIAL_CONTENT;
        // Without a Content-Range nothing says where the part starts: never taken on trust.
        if partial && starts_at.is_none() {
            return Err(Failure::Transient(format!("HTTP 206 without a Content-Range (asked from byte {offset})")));
        }
        if partial && starts_at.is_some_and(|at| at != offset) {
            return Err(Failure::Transient(format!("HTTP 206 not starting at byte {offset}")));
        }
        let stream = resp.bytes_stream().map(|c| c.map_err(|e| with_causes(&e)));
        Ok(if partial { Opened::Partial(stream) } else { Opened::Full(stream) })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_line_names_the_url_once() {
        let what = "GET https://mirror.site/current/airlock/manifest.json";
        let detail = "GET https://mirror.site/current/airlock/manifest.json: error sending request for url \
                      (https://mirror.site/current/airlock/manifest.json): dns error";
        assert_eq!(without_urls_of(detail, what), "error sending request: dns error");
    }
    use crate::progress::Counted;

    /// Lands bytes as a partial file does: from `offset`, or again from 0 after a full answer.
    struct Tally(u64);

    impl Landing for Tally {
        fn offset(&mut self) -> u64 {
            self.0
        }

        async fn restart_at_zero(&mut self) -> Result<(), CacheError> {
            self.0 = 0;
            Ok(())
        }

        async fn land(&mut self, chunk: bytes::Bytes) -> Result<bool, CacheError> {
            self.0 += chunk.len() as u64;
            Ok(true)
        }

        async fn pause(&mut self) -> Result<(), CacheError> {
            Ok(())
        }
    }

    type Chunks = futures_util::stream::Iter<std::vec::IntoIter<Result<bytes::Bytes, String>>>;

    fn chunks(parts: &[Result<&'static str, &str>]) -> Chunks {
        let items: Vec<_> =
            parts.iter().map(|p| p.map(|s| bytes::Bytes::from_static(s.as_bytes())).map_err(str::to_owned)).collect();
        futures_util::stream::iter(items)
    }

    /// The bytes `attempts` reports for a download of "0123456789" landing in `landing`, whose
    /// answers come from `answers` in turn.
    fn reported(mut landing: Tally, answers: Vec<Opened<Chunks>>) -> u64 {
        let counted = Counted::default();
        let done = run(&mut landing, answers, &counted);
        assert!(matches!(done, Ok(true)), "the download completes");
        assert_eq!(landing.0, 10, "every byte landed");
        assert_eq!(counted.item.get(), counted.bytes.get(), "the item and the phase count alike");
        counted.bytes.get()
    }

    /// `attempts` for `landing`, whose answers come from `answers` in turn.
    fn run(
        landing: &mut impl Landing,
        answers: Vec<Opened<Chunks>>,
        counted: &Counted,
    ) -> Result<bool, DownloadError<HttpError>> {
        let options = NetOptions { base_wait: Duration::from_millis(1), ..NetOptions::default() };
        let mut answers = answers.into_iter();
        let open = |_offset: u64| {
            let next = answers.next();
            async move { next.ok_or(Failure::<HttpError>::Transient("no more answers".into())) }
        };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        runtime.block_on(attempts(landing, ("blob", "key"), counted, &options, open))
    }

    #[test]
    fn a_stream_past_its_declared_size_is_refused_as_an_overrun_and_not_handed_over() {
        let (out, _reader) = crate::overlap::flow();
        let mut streaming = Streaming { out, sent: 0, skip: 0, limit: 8, what: "layer sha256:ab".into() };
        let answers = vec![Opened::Full(chunks(&[Ok("01234"), Ok("56789")]))];
        let done = run(&mut streaming, answers, &Counted::default());
        let Err(DownloadError::Overrun(overrun)) = &done else { panic!("an overrun, not {done:?}") };
        assert_eq!((overrun.what.as_str(), overrun.limit), ("layer sha256:ab", 8));
        assert_eq!(done.as_ref().map_err(Classify::class).err(), Some(Class::Verification));
        assert_eq!(streaming.sent, 5, "the chunk that would pass the size is not handed over");
    }

    #[test]
    fn bytes_sent_again_from_zero_are_reported_once() {
        // The connection drops after 5 bytes; the retry's range is ignored: 0123456789 again.
        let answers =
            vec![Opened::Full(chunks(&[Ok("01234"), Err("dropped")])), Opened::Full(chunks(&[Ok("0123456789")]))];
        assert_eq!(reported(Tally(0), answers), 10);
    }

    /// `data` from `from` on, in chunks of 64 KiB; cut (a transient error) once `cut` bytes of
    /// the whole have been sent, if it is past `from`.
    fn sent(data: &[u8], from: usize, cut: Option<usize>) -> Chunks {
        let end = cut.filter(|&c| c > from).unwrap_or(data.len());
        let mut items: Vec<_> =
            data[from..end].chunks(64 << 10).map(|c| Ok(bytes::Bytes::copy_from_slice(c))).collect();
        if end < data.len() {
            items.push(Err("connection reset".to_owned()));
        }
        futures_util::stream::iter(items)
    }

    /// `download_to_file` of `data` into a new file, the answers to each attempt made by
    /// `answer(attempt, offset)`: the file's bytes and what it returned.
    fn downloaded(data: &[u8], answer: impl Fn(usize, u64) -> Opened<Chunks>) -> (Vec<u8>, Sha256, u64) {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("member.deb");
        let options = NetOptions { base_wait: Duration::from_millis(1), ..NetOptions::default() };
        let tries = std::cell::Cell::new(0);
        let open = |offset: u64| {
            tries.set(tries.get() + 1);
            let opened = answer(tries.get(), offset);
            async move { Ok::<_, Failure<HttpError>>(opened) }
        };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        let size = data.len() as u64;
        let done = runtime.block_on(download_to_file(&path, size, "member.deb", &Counted::default(), &options, open));
        let (sha, landed) = done.expect("the download completes");
        (std::fs::read(&path).expect("the file"), sha, landed)
    }

    /// 3.5 MiB and a tail that is no whole block, bytes that differ at every offset, so a byte
    /// out of place shows.
    fn member() -> Vec<u8> {
        (0..(7u32 << 19) + 1000).map(|i| i.wrapping_mul(2_654_435_761).to_le_bytes()[2]).collect()
    }

    #[test]
    fn a_member_cut_after_several_writes_resumes_where_it_stopped_and_lands_whole() {
        let data = member();
        let (file, sha, landed) = downloaded(&data, |attempt, offset| match attempt {
            1 => Opened::Full(sent(&data, 0, Some(2_500_000))),
            _ => Opened::Partial(sent(&data, usize::try_from(offset).expect("an offset"), None)),
        });
        assert!(file == data, "the file holds the member's bytes in order");
        assert_eq!((sha, landed), (Sha256::of_bytes(&data), data.len() as u64));
    }

    #[test]
    fn a_resumed_member_answered_from_byte_zero_is_written_and_hashed_over_from_the_start() {
        let data = member();
        let (file, sha, landed) = downloaded(&data, |attempt, _| match attempt {
            1 => Opened::Full(sent(&data, 0, Some(3_000_000))),
            _ => Opened::Full(sent(&data, 0, None)),
        });
        assert!(file == data, "the file holds the member once, not its first part twice");
        assert_eq!((sha, landed), (Sha256::of_bytes(&data), data.len() as u64));
    }

    #[test]
    fn bytes_a_partial_file_holds_already_are_reported() {
        let answers = vec![Opened::Partial(chunks(&[Ok("456"), Ok("789")]))];
        assert_eq!(reported(Tally(4), answers), 10);
    }
}
