//! airlock: carry a GPU software stack across an air gap.
//!
//! Layers flow one way (`docs/architecture.md` has the map):
//!
//! - `cli` → `commands` (one verb each, glue only);
//! - [`build`], [`site`], [`sources`]: the two sides' phases;
//! - [`bundle`], [`attest`], [`sign`], [`oci`], [`fetch`], [`cache`]: formats and transports;
//! - [`spec`], [`digest`], [`clock`], [`member_path`], [`wheel`], [`failure`], [`progress`],
//!   [`atomic`], [`escape`], [`overlap`]: value types and small utilities that everything may use.

#![forbid(unsafe_code)]

pub mod artifact;
pub mod atomic;
pub mod attest;
pub mod build;
pub mod bundle;
pub mod cache;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod digest;
pub mod escape;
pub mod failure;
pub mod fetch;
pub mod member_path;
pub mod oci;
pub mod overlap;
pub mod progress;
pub mod report;
pub mod rpmmd;
pub mod sign;
pub mod site;
pub mod sources;
pub mod spec;
pub mod tee;
pub mod trust;
pub mod upgrade;
pub mod validate;
pub mod wheel;
