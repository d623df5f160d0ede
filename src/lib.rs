//! airlock: carry a GPU software stack across an air gap.
//!
//! The build side follows the data: [`spec`] → [`sources`] → [`bundle`] (signed by [`sign`]).
//! The site side reads it back: [`bundle`] (verify while streaming) → [`site`] (stage, activate).
//! `commands` glues one verb each; `main` only parses and maps errors to exit codes.

pub mod atomic;
pub mod attest;
pub mod bundle;
pub mod cache;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod digest;
pub mod fetch;
pub mod progress;
pub mod sign;
pub mod site;
pub mod sources;
pub mod spec;
