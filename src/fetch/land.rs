//! Where a download lands, attempt by attempt, resumed at the byte reached: the cache
//! (`download`), a reader (`download_into`) or a new file (`download_to_file`).

use std::path::PathBuf;

use futures_util::{Stream, StreamExt as _};

use super::client::{Http, HttpError, with_causes};
use super::direct;
use super::options::NetOptions;
use super::retry::{Failure, Opened};
use super::runtime::blocking;
use crate::cache::{Cache, CacheError, Incoming, Overrun};
use crate::digest::Sha256;
use crate::failure::{Class, Classify};
use crate::progress::Reporter;

/// Received bytes are handed to the file in pieces of about this size. Each download in flight
/// holds two (one filling, one being written): with `--jobs 8`, 4 MiB in all.
const WRITE_BATCH: usize = 256 << 10;

/// What sources need to fetch content: where to keep it, how many downloads at once, the
/// command's HTTP client, and whom to tell about progress.
pub struct Fetch<'a> {
    pub cache: &'a Cache,
    pub jobs: usize,
    pub http: &'a Http,
    pub reporter: &'a dyn Reporter,
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
pub(super) trait Landing {
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
pub(super) struct Streaming {
    pub(super) out: crate::overlap::Outflow,
    pub(super) sent: u64,
    /// Bytes of the current response that were handed over by an earlier one.
    pub(super) skip: u64,
    /// The declared size: no byte past it is handed over.
    pub(super) limit: u64,
    pub(super) what: String,
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

/// Download into `landing` with retries: `open(offset)` starts a stream of chunks at
/// `offset`; chunk errors count as transient. `Ok(false)`: the landing wanted no more.
pub(super) async fn attempts<E, S, F, Fut>(
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

/// Plain URLs downloaded into the cache.
impl Http {
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
        download(fetch.cache, digest, size, what, fetch.reporter, self.options(), open).await
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
