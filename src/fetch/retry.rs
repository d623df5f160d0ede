//! The retry policy: which failures are worth another try, how long to wait (backoff,
//! `Retry-After`), and the rate floor that ends a stalled attempt.

use std::time::Duration;

use futures_util::{Stream, StreamExt as _};

use super::options::{NetOptions, RateFloor};

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
pub(super) fn without_urls_of(detail: &str, what: &str) -> String {
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

/// Why an attempt failed, and whether another is worth it.
pub enum Failure<E> {
    Transient(String),
    /// Transient, and the server said when to come back (`Retry-After` on a 429 or 503).
    RetryAfter(String, Duration),
    Fatal(E),
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
        floor.check(bytes).map_err(|e| e.to_string())?;
        Ok(chunk)
    })
}

/// What opening a stream at an offset gave.
pub enum Opened<S> {
    /// Bytes from the requested offset on.
    Partial(S),
    /// The whole blob from byte 0 (the server ignored or refused the range).
    Full(S),
}
