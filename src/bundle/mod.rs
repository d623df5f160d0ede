//! Bundle format v1 (see `docs/bundle-format.md`): a POSIX tar compressed as zstd whose first
//! member is a canonical JSON manifest, the second its signature, then the content sorted by
//! path. The writer is deterministic; the reader verifies while it streams.

mod feed;
pub mod format;
mod frames;
pub mod header;
pub mod manifest;
pub mod members;
pub mod parts;
pub mod pins;
pub mod provenance;
pub mod reader;
pub mod rejection;
mod spans;
pub mod tar_guard;
pub mod writer;

pub use manifest::Manifest;
