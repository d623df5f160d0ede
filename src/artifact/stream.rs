//! The bundle's bytes straight from a registry, as one blocking stream, for `install
//! oci://…`: nothing is written but what the site keeps. The layers are read in order; a
//! dropped connection is resumed with a `Range` request from the byte reached (`--retries`
//! times), and each layer's sha256 is checked when its last byte has been read, before that
//! byte is handed on.

use std::io::{self, Read};
use std::sync::Arc;

use futures_util::StreamExt as _;
use oci_client::client::BlobResponse;
use sha2::Digest as _;

use super::{ArtifactError, Found};
use crate::digest::Sha256;
use crate::fetch::Net;
use crate::oci::Connection;
use crate::oci::doc::Descriptor;
use crate::oci::store::{Store, repository};

type Chunks = std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<bytes::Bytes, String>> + Send>>;

/// A reader over the bundle `found` names, through the connection `found` was found on. The
/// network runs on `net`'s runtime (the one it was found with); reads block.
pub fn open_stream(found: &Found, net: Arc<Net>) -> Result<Box<dyn Read + Send>, ArtifactError> {
    let layers = found.artifact.data_layers();
    match &found.store {
        Store::Layout { dir, .. } => {
            let paths: Vec<_> = layers.iter().map(|l| dir.join("blobs/sha256").join(l.digest.to_string())).collect();
            super::chained(&paths)
        }
        Store::Registry { conn, image, options } => {
            let reader = LayerReader {
                net,
                conn: conn.clone(),
                reference: repository(image),
                what: format!("oci://{image}"),
                options: *options,
                layers,
                next: 0,
                open: None,
            };
            Ok(Box::new(io::BufReader::with_capacity(1 << 20, reader)))
        }
    }
}

struct Reading {
    /// `None` until the layer is requested, and after its connection dropped.
    chunks: Option<Chunks>,
    hash: sha2::Sha256,
    offset: u64,
    pending: bytes::Bytes,
}

struct LayerReader {
    net: Arc<Net>,
    conn: Arc<Connection>,
    reference: oci_client::Reference,
    what: String,
    /// The command's retry policy: the same waits as every other request.
    options: crate::fetch::NetOptions,
    layers: Vec<Descriptor>,
    next: usize,
    open: Option<Reading>,
}

/// Why a layer's next bytes did not come: the connection dropped mid-layer, or the request
/// that would resume it failed. Both are retried under the command's one policy.
enum Broken {
    Dropped(String),
    Request(oci_client::errors::OciDistributionError),
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Broken::Dropped(e) => write!(f, "dropped: {e}"),
            Broken::Request(e) => e.fmt(f),
        }
    }
}

impl LayerReader {
    /// A stream of `layer` from byte `offset` on (the bytes before it skipped if the registry
    /// sends the whole blob).
    async fn request(&self, layer: &Descriptor, offset: u64) -> Result<Chunks, Broken> {
        let digest = format!("sha256:{}", layer.digest);
        let response = self.conn.blob_from(&self.reference, &digest, offset).await.map_err(Broken::Request)?;
        let (stream, mut skip) = match response {
            BlobResponse::Partial(s) => (s.stream, 0),
            BlobResponse::Full(s) => (s.stream, offset),
        };
        let chunks = stream.map(|c| c.map_err(|e| e.to_string())).filter_map(move |c| {
            let out = match c {
                Ok(mut bytes) if skip > 0 => {
                    let n = skip.min(bytes.len() as u64);
                    skip -= n;
                    let rest = bytes.split_off(usize::try_from(n).unwrap_or(usize::MAX));
                    if rest.is_empty() { None } else { Some(Ok(rest)) }
                }
                other => Some(other),
            };
            std::future::ready(out)
        });
        Ok(Box::pin(chunks))
    }

    /// The next bytes of the current layer (`None` at its end): the layer requested from the
    /// byte reached when it is not open (first, and after a dropped connection: with `Range`),
    /// every failure tried again under `fetch::with_retries`, as every other request airlock
    /// makes.
    fn next_chunk(&mut self) -> io::Result<Option<bytes::Bytes>> {
        let layer = self.layers[self.next].clone();
        let reading = self.open.as_mut().expect("a layer is open");
        let offset = reading.offset;
        let what = format!("{} layer sha256:{}", self.what, layer.digest);
        // The stream between tries: taken by a try, given back only while it still flows.
        let stream = std::cell::RefCell::new(reading.chunks.take());
        let this = &*self;
        let next = || async {
            let taken = stream.borrow_mut().take();
            let mut chunks = if let Some(chunks) = taken {
                chunks
            } else {
                if offset > 0 {
                    tracing::warn!("{what}: resuming at byte {offset}");
                }
                this.request(&layer, offset).await?
            };
            match chunks.next().await {
                Some(Err(e)) => Err(Broken::Dropped(e)),
                item => {
                    *stream.borrow_mut() = Some(chunks);
                    Ok(item.and_then(Result::ok))
                }
            }
        };
        let retryable = |b: &Broken| match b {
            Broken::Dropped(_) => crate::fetch::Verdict::Retry,
            Broken::Request(e) => crate::oci::retryable(e),
        };
        let item = self.net.block_on(crate::fetch::with_retries(&self.options, &what, next, retryable));
        self.open.as_mut().expect("a layer is open").chunks = stream.into_inner();
        item.map_err(|e| io::Error::other(format!("{what}: {e}")))
    }
}

impl Read for LayerReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(layer) = self.layers.get(self.next).cloned() else { return Ok(0) };
            if self.open.is_none() {
                self.open =
                    Some(Reading { chunks: None, hash: sha2::Sha256::new(), offset: 0, pending: bytes::Bytes::new() });
            }
            let reading = self.open.as_mut().expect("opened above");
            if reading.pending.is_empty() && reading.offset < layer.size {
                let Some(bytes) = self.next_chunk()? else {
                    let reading = self.open.as_ref().expect("open");
                    return Err(io::Error::other(format!(
                        "{}: layer sha256:{} ended after {} of {} bytes",
                        self.what, layer.digest, reading.offset, layer.size
                    )));
                };
                self.open.as_mut().expect("open").pending = bytes;
            }
            let reading = self.open.as_mut().expect("open");
            let left = usize::try_from(layer.size - reading.offset).unwrap_or(usize::MAX);
            let n = buf.len().min(reading.pending.len()).min(left);
            if n > 0 {
                let chunk = reading.pending.split_to(n);
                buf[..n].copy_from_slice(&chunk);
                reading.hash.update(&chunk);
                reading.offset += n as u64;
            }
            if reading.offset == layer.size {
                let actual = Sha256::from_raw(std::mem::take(&mut reading.hash).finalize().into());
                self.open = None;
                if actual != layer.digest {
                    return Err(io::Error::other(format!(
                        "{}: layer sha256:{} arrived with sha256 {actual}",
                        self.what, layer.digest
                    )));
                }
                self.next += 1;
            }
            if n > 0 {
                return Ok(n);
            }
        }
    }
}
