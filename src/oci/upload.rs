//! A blob upload to a registry in chunks that survives a dropped chunk: the distribution
//! spec's upload session (`POST …/blobs/uploads/`, `PATCH` with `Content-Range`, `PUT
//! ?digest=`), and after a failed `PATCH`, `GET` on the session to learn how many bytes the
//! registry holds (its `Range` header) and go on from there. `oci_client` uploads in chunks
//! too, but a failed chunk fails its whole upload; this is written by hand for the resume.
//! Chunks are bounded (`--chunk-size`), so a proxy that caps request bodies (nginx in front of
//! Harbor, say) is no obstacle either.

use std::io::SeekFrom;
use std::path::Path;
use std::time::Duration;

use oci_client::RegistryOperation;
use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, LOCATION, RANGE};
use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};

use super::doc::Descriptor;
use super::store::{Reach, StoreError, repository};
use super::{Connection, ImageRef};
use crate::progress::Reporter;

/// Chunk size when none is given.
pub const DEFAULT_CHUNK: u64 = 16 << 20;

pub struct Uploader {
    http: reqwest::Client,
    base: String,
    repository: String,
    authorization: Option<String>,
    chunk: u64,
    options: crate::fetch::NetOptions,
    what: String,
}

/// A request that failed in a way worth another try: a 5xx or 429 (with its `Retry-After`),
/// or no answer at all.
#[derive(Debug)]
enum Transient {
    Status(StatusCode, Option<Duration>),
    Net(String),
}

impl std::fmt::Display for Transient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transient::Status(s, _) => write!(f, "{s}"),
            Transient::Net(e) => f.write_str(e),
        }
    }
}

impl Uploader {
    pub async fn new(conn: &Connection, image: &ImageRef, reach: &Reach, chunk: u64) -> Result<Self, StoreError> {
        let what = format!("oci://{image}");
        let err = |detail: String| StoreError::Registry { target: what.clone(), detail };
        // The token (or basic credentials) oci-client uses for this repository.
        let reference = repository(image);
        let authorise = || conn.client.auth(&reference, &conn.auth, RegistryOperation::Push);
        let token = crate::fetch::with_retries(&reach.options, &what, authorise, super::retryable)
            .await
            .map_err(|e| err(format!("authorising the push: {e}")))?;
        let authorization = conn.authorization_header(token);
        let insecure = reach.is_insecure(&image.registry);
        let scheme = if insecure { "http" } else { "https" };
        // The connection's client: its CA bundle (read once, when it connected) and timeouts.
        Ok(Self {
            http: conn.http().clone(),
            base: format!("{scheme}://{}", image.registry),
            repository: image.repository.clone(),
            authorization,
            chunk: chunk.max(1),
            options: reach.options,
            what,
        })
    }

    fn err(&self, detail: impl std::fmt::Display) -> StoreError {
        StoreError::Registry { target: self.what.clone(), detail: detail.to_string() }
    }

    fn request(&self, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
        let r = self.http.request(method, url);
        match &self.authorization {
            Some(a) => r.header(AUTHORIZATION, a),
            None => r,
        }
    }

    /// A `Location` header, made absolute.
    fn location(&self, response: &reqwest::Response) -> Result<String, StoreError> {
        let value = response
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| self.err("the registry gave no upload location"))?;
        Ok(if value.starts_with("http://") || value.starts_with("https://") {
            value.to_owned()
        } else {
            format!("{}{value}", self.base)
        })
    }

    /// Send a request made by `make` until it is answered with something other than a 5xx or
    /// a 429, following `Retry-After`, as every request airlock makes is (`fetch::with_retries`).
    async fn send(
        &self,
        what: &str,
        make: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, StoreError> {
        let attempt = || async {
            let response = make().send().await.map_err(|e| Transient::Net(crate::fetch::with_causes(&e)))?;
            let status = response.status();
            if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
                return Err(Transient::Status(status, crate::fetch::retry_after(response.headers())));
            }
            Ok(response)
        };
        let verdict = |t: &Transient| match t {
            Transient::Status(_, Some(after)) => crate::fetch::Verdict::RetryAfter(*after),
            Transient::Status(_, None) | Transient::Net(_) => crate::fetch::Verdict::Retry,
        };
        let what = format!("{}: {what}", self.what);
        crate::fetch::with_retries(&self.options, &what, attempt, verdict)
            .await
            .map_err(|e| self.err(format!("{what}: {e} (after {} tries)", self.options.attempts)))
    }

    async fn start(&self) -> Result<String, StoreError> {
        let url = format!("{}/v2/{}/blobs/uploads/", self.base, self.repository);
        let response = self.send("starting an upload", || self.request(reqwest::Method::POST, &url)).await?;
        if response.status() != StatusCode::ACCEPTED {
            return Err(self.err(format!("starting an upload: {}", response.status())));
        }
        self.location(&response)
    }

    /// How many bytes the session holds, and its location; `None` when the session is gone.
    async fn status(&self, location: &str) -> Result<Option<(u64, String)>, StoreError> {
        let response =
            self.send("asking for the upload's progress", || self.request(reqwest::Method::GET, location)).await?;
        if response.status() == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if response.status() != StatusCode::NO_CONTENT {
            return Err(self.err(format!("asking for the upload's progress: {}", response.status())));
        }
        // `Range: 0-LAST`. distribution says `0-0` for an empty session as well as for one
        // byte; chunks are never one byte, so it means none.
        let held = response
            .headers()
            .get(RANGE)
            .and_then(|v| v.to_str().ok())
            .and_then(|r| r.rsplit_once('-'))
            .and_then(|(_, last)| last.parse::<u64>().ok())
            .map_or(0, |last| if last == 0 { 0 } else { last + 1 });
        let location = self.location(&response).unwrap_or_else(|_| location.to_owned());
        Ok(Some((held, location)))
    }

    /// Upload the file at `path` as the blob `d`, chunk by chunk, resuming after failures.
    /// `reporter` advances as chunks are accepted (once per byte, also after a resume).
    pub async fn upload(&self, path: &Path, d: &Descriptor, reporter: &dyn Reporter) -> Result<(), StoreError> {
        let io = |e: std::io::Error| StoreError::Io { path: path.to_owned(), detail: e.to_string() };
        let mut file = tokio::fs::File::open(path).await.map_err(io)?;
        let mut location = self.start().await?;
        let mut offset = 0u64;
        let mut failures = 0u32;
        let mut shown = 0u64;
        while offset < d.size {
            let n = self.chunk.min(d.size - offset);
            // One chunk in memory at a time, handed to the request (read again after a failure).
            let mut buf = vec![0u8; usize::try_from(n).unwrap_or(usize::MAX)];
            file.seek(SeekFrom::Start(offset)).await.map_err(io)?;
            file.read_exact(&mut buf).await.map_err(io)?;
            let sent = self
                .request(reqwest::Method::PATCH, &location)
                .header(CONTENT_TYPE, "application/octet-stream")
                .header(CONTENT_RANGE, format!("{offset}-{}", offset + n - 1))
                .header(CONTENT_LENGTH, n)
                .body(buf)
                .send()
                .await;
            let mut retry_after = None;
            let failure = match sent {
                Ok(r) if r.status() == StatusCode::ACCEPTED => {
                    location = self.location(&r)?;
                    offset += n;
                    reporter.advance(offset.saturating_sub(shown));
                    shown = shown.max(offset);
                    failures = 0;
                    continue;
                }
                Ok(r) if r.status().is_server_error() || r.status() == StatusCode::TOO_MANY_REQUESTS => {
                    retry_after = crate::fetch::retry_after(r.headers());
                    r.status().to_string()
                }
                Ok(r) => return Err(self.err(format!("uploading sha256:{}: {}", d.digest, r.status()))),
                Err(e) => e.to_string(),
            };
            failures += 1;
            if failures >= self.options.attempts {
                return Err(self.err(format!("uploading sha256:{}: {failure} (after {failures} tries)", d.digest)));
            }
            tokio::time::sleep(self.options.wait(failures, retry_after)).await;
            let Some((held, at)) = self.status(&location).await? else {
                tracing::warn!(
                    "{}: the upload of sha256:{} was lost ({failure}); starting it again",
                    self.what,
                    d.digest
                );
                (offset, location) = (0, self.start().await?);
                continue;
            };
            tracing::warn!(
                "{}: a chunk of sha256:{} failed ({failure}); the registry holds {held} bytes: resuming from byte {held}",
                self.what,
                d.digest
            );
            (offset, location) = (held.min(d.size), at);
        }
        let separator = if location.contains('?') { '&' } else { '?' };
        let url = format!("{location}{separator}digest=sha256:{}", d.digest);
        let response = self
            .send("finishing the upload", || self.request(reqwest::Method::PUT, &url).header(CONTENT_LENGTH, 0))
            .await?;
        if response.status() != StatusCode::CREATED {
            return Err(self.err(format!("finishing the upload of sha256:{}: {}", d.digest, response.status())));
        }
        Ok(())
    }
}
