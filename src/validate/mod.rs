//! GPU validation on the site: probe the host's stack (`probe`), and compare it with the
//! bundle's support matrix (`matrix`) field by field, with versions compared as numbers
//! (`version`).

pub mod matrix;
pub mod probe;
pub mod version;
