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
    chunks: Chunks,
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

impl LayerReader {
    /// A stream of `layer` from byte `offset` on (the bytes before it skipped if the registry
    /// sends the whole blob).
    fn request(&self, layer: &Descriptor, offset: u64) -> io::Result<Chunks> {
        let digest = format!("sha256:{}", layer.digest);
        let what = format!("{} layer {digest}", self.what);
        let options = self.options;
        let get = || self.conn.blob_from(&self.reference, &digest, offset);
        let response = self
            .net
            .block_on(crate::fetch::with_retries(&options, &what, get, crate::oci::retryable))
            .map_err(|e| io::Error::other(format!("{what}: {e}")))?;
        let (stream, skip) = match response {
            BlobResponse::Partial(s) => (s.stream, 0),
            BlobResponse::Full(s) => (s.stream, offset),
        };
        let mut skip = skip;
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

    /// The next bytes of the current layer, resuming after a dropped connection.
    fn next_chunk(&mut self) -> io::Result<Option<bytes::Bytes>> {
        let layer = self.layers[self.next].clone();
        let mut failures = 0;
        loop {
            let reading = self.open.as_mut().expect("a layer is open");
            match self.net.block_on(reading.chunks.next()) {
                None => return Ok(None),
                Some(Ok(bytes)) => return Ok(Some(bytes)),
                Some(Err(e)) => {
                    failures += 1;
                    if failures >= self.options.attempts.max(1) {
                        return Err(io::Error::other(format!(
                            "{}: layer sha256:{}: {e} (after {failures} tries)",
                            self.what, layer.digest
                        )));
                    }
                    let offset = reading.offset;
                    tracing::warn!(
                        "{}: layer sha256:{} dropped at byte {offset} ({e}); resuming",
                        self.what,
                        layer.digest
                    );
                    // A blocking reader (zstd reads it): the policy's wait, on this thread.
                    std::thread::sleep(self.options.wait(failures, None));
                    let chunks = self.request(&layer, offset)?;
                    self.open.as_mut().expect("a layer is open").chunks = chunks;
                }
            }
        }
    }
}

impl Read for LayerReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(layer) = self.layers.get(self.next).cloned() else { return Ok(0) };
            if self.open.is_none() {
                let chunks = self.request(&layer, 0)?;
                self.open =
                    Some(Reading { chunks, hash: sha2::Sha256::new(), offset: 0, pending: bytes::Bytes::new() });
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
