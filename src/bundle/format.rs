//! The bundle's compression settings, which the writer, its frames and the reader share.

/// How the tar stream is compressed. The default was chosen from measurements on image
/// layers, wheels, model weights and text (`docs/performance.md`): zstd level 3 with its own
/// small window. Long-distance matching with a large window shrinks multi-target wheel sets
/// by a fifth, but the decoder must then hold the whole window (128 MiB at `window_log` 27),
/// so it is an opt-in (`--long`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compression {
    pub level: i32,
    /// Long-distance matching with a window of 2^log bytes.
    pub long_window_log: Option<u32>,
}

impl Default for Compression {
    fn default() -> Self {
        Self { level: 3, long_window_log: None }
    }
}

/// The largest window a bundle may ask its reader for: 128 MiB, the default limit of zstd
/// decoders (`zstd -d` included), so any bundle decompresses without extra flags.
pub const MAX_WINDOW_LOG: u32 = 27;
