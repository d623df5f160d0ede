//! The one download path for every source: a blob is streamed into the cache (`Incoming`),
//! hashed as it arrives, retried with backoff on transient failures (5xx answers, dropped
//! connections), resumed with a byte offset from what was already received, and made visible
//! only when its sha256 and size verify. Transports (registries through `oci_client`, plain
//! URLs through `reqwest`) only say how to open a stream from an offset.
//!
//! A command builds one [`Net`] (one async runtime, one HTTP client) and passes it down.
//! File work never runs on the async executor: chunks are gathered and written (and hashed)
//! through [`blocking`], so one large local file never stalls the other downloads.

pub use crate::cache::Overrun;

mod client;
pub(crate) mod direct;
mod land;
mod options;
mod retry;
mod runtime;
#[cfg(test)]
mod tests;

pub use client::*;
pub use land::*;
pub use options::*;
pub use retry::*;
pub use runtime::*;
