//! How requests are timed out, tried again and held to a rate: `--retries`, `--timeout`,
//! `--connect-timeout`, `--min-rate`.

use std::time::Duration;

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

/// A transfer slower than `--min-rate` once the rate window has passed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{bytes} bytes in {seconds:.1} s ({rate:.0} B/s) is below the floor of {floor} B/s (--min-rate): given up")]
pub struct BelowFloor {
    pub bytes: u64,
    pub seconds: f64,
    pub rate: f64,
    pub floor: u64,
}

impl crate::failure::Classify for BelowFloor {
    /// The network's failure, retried as transient until the attempts run out.
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Runtime
    }
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

    /// `Err` with the rate, when `bytes` so far is below the floor after the window.
    pub fn check(&self, bytes: u64) -> Result<(), BelowFloor> {
        let elapsed = self.started.elapsed();
        if self.floor == 0 || elapsed < self.window {
            return Ok(());
        }
        #[allow(clippy::cast_precision_loss, reason = "a rate in words")]
        let rate = bytes as f64 / elapsed.as_secs_f64();
        #[allow(clippy::cast_precision_loss, reason = "a rate in words")]
        if rate < self.floor as f64 {
            return Err(BelowFloor { bytes, seconds: elapsed.as_secs_f64(), rate, floor: self.floor });
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
