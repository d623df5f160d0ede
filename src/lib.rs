//! airlock: carry a GPU software stack across an air gap.
//!
//! Layers flow one way, each importing only from its own layer's value types and the layers
//! below it (`docs/architecture.md` has the map):
//!
//! - edge: `main`, [`cli`] (argument structs), [`commands`] (one verb each, glue only); nothing
//!   imports them;
//! - phases: [`build`], [`site`], [`validate`], [`artifact`], [`report`], [`sources`], [`fleet`],
//!   [`approval`];
//! - formats and transports: [`bundle`], [`rpmmd`], [`attest`], [`sign`], [`trust`], [`oci`],
//!   [`fetch`], [`cache`], [`upgrade`];
//! - values: [`spec`], [`image_ref`], [`digest`], [`member_path`], [`wheel`], [`clock`], [`failure`],
//!   [`progress`], [`atomic`], [`interrupt`], [`tee`], [`overlap`], [`escape`], [`regular`]: value types and small utilities
//!   that everything may use.

#![forbid(unsafe_code)]

pub mod approval;
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
pub mod fleet;
pub mod image_ref;
pub mod interrupt;
pub mod member_path;
pub mod oci;
pub mod overlap;
pub mod progress;
pub mod regular;
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
