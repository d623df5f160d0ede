//! OCI distribution as both sides use it: image references ([`ImageRef`], a value type that
//! depends on nothing but digests), registry connections ([`Registries`], one client per
//! registry for a whole command) and manifest / index documents ([`doc`]). The image source
//! pulls through it on the build host; the site's registry publisher pushes through it.

mod client;
pub mod doc;
mod reference;

pub use client::{
    ClientError, Connection, Credentials, Endpoint, Registries, Transport, connect, http_client, is_not_found, load_ca,
    pull_manifest, retryable,
};
pub use reference::ImageRef;
