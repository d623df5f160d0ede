//! Plain URLs (wheel indexes, apt repositories, model hubs, files, mirrors) through one
//! `reqwest` client: redirects as allowed, bounded reads, errors with their causes.

use std::time::Duration;

use futures_util::{Stream, StreamExt as _};

use super::options::{NetOptions, RateFloor};
use super::retry::{Failure, Opened, Verdict, retry_after, with_retries};
use crate::digest::Sha256;
use crate::failure::{Class, Classify};

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
    TooSlow { url: String, detail: super::BelowFloor },
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
