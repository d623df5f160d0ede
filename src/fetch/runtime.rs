//! What one command shares for the network: its async runtime and HTTP client, and the
//! blocking pool file work runs on.

use std::future::Future;

use super::client::{Http, Redirects};
use super::options::NetOptions;
use crate::failure::{Class, Classify};

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

/// Run blocking work (file I/O, hashing) on tokio's blocking pool, off the async executor.
/// A panic there is a panic here.
pub async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

impl Classify for NetError {
    fn class(&self) -> Class {
        match self {
            NetError::Runtime(_) => Class::Runtime,
        }
    }
}
