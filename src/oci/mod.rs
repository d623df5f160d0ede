//! OCI distribution as both sides use it: image references ([`ImageRef`], a value type that
//! depends on nothing but digests), registry connections ([`Registries`], one client per
//! registry for a whole command), manifest / index documents ([`doc`]), the one reader and
//! writer of "a registry or an `oci-layout:` directory" ([`store`]) and the chunked upload
//! that resumes ([`upload`]). The image source pulls through it on the build host; `push`,
//! `pull`, `copy`, `install oci://…` and the site's registry publisher go through it too.

mod client;
pub mod doc;
pub mod store;
pub mod upload;

pub use crate::image_ref::{ImageRef, InvalidImageRef};
pub use client::{
    ClientError, Connection, Credentials, Endpoint, Registries, Transport, connect, http_client, is_not_found, load_ca,
    pull_manifest, retryable,
};
pub use store::{Location, Reach, Store, StoreError};

/// Referrers' manifests (and co-signatures) asked for at once: a busy registry lists thousands
/// of them. Enough to hide a round trip, few enough for any registry's connection limit.
pub const REFERRER_FETCHES: usize = 16;
