//! The integration tests, one binary in two tiers.
//!
//! The hermetic tier runs under a plain `cargo test`: the real binary against recorded hosts,
//! temporary directories and the tools of a developer's machine (python3's standard library,
//! openssl, tar), with no root and no server of its own to install. The system tier needs what
//! `scripts/test.sh` installs (root, docker-registry, nginx, pypiserver, a Slurm cluster, a
//! Debian system to apply packages in, chromium, skopeo, dnf, ansible) and runs with
//! `cargo test --features system-tests`, as `scripts/test.sh` and CI do; there, a missing
//! server fails its test, never skips it.

mod common;

// The hermetic tier.
mod cli; // the CLI's contract: lock, diff, completions, man pages, self-upgrade
mod cosign; // thresholds of cosignatures
mod error_classes; // every error type has its exit class
mod fuzz; // mutations of bundles, manifests and specs (the campaigns: scripts/fuzz.sh)
mod hostile; // hostile bundles, names and mirrors
mod layers; // the module map and the layer order
mod lifecycle; // installs, rollbacks, retention, a kill at any moment
mod messages; // what a person reads
mod readme_tour; // README's shell blocks, run as written
mod roundtrip; // build, verify, inspect, install; byte-identical rebuilds
mod site_trust; // a site root that lies
mod trust; // the site's trust root
mod validation; // probes, gates and verdicts on recorded hosts

// The system tier.
#[cfg(feature = "system-tests")]
mod all_kinds; // every input kind from real servers (apt, pypiserver, registry, hub)
#[cfg(feature = "system-tests")]
mod audit_doc; // the security team's audit with skopeo, jq and the CycloneDX validator
#[cfg(feature = "system-tests")]
mod debs; // signed apt repositories and apt-get
#[cfg(feature = "system-tests")]
mod disk_full; // a full file system (mount, unshare)
#[cfg(feature = "system-tests")]
mod faults; // servers that fail mid-transfer
#[cfg(feature = "system-tests")]
mod fleet; // the Ansible rollout, Slurm and nginx
#[cfg(feature = "system-tests")]
mod hostile_registry; // a registry that lies
#[cfg(feature = "system-tests")]
mod images; // docker-registry and skopeo
#[cfg(feature = "system-tests")]
mod media; // removable media and OCI layouts with skopeo
#[cfg(feature = "system-tests")]
mod mirror; // the mirror host behind nginx
#[cfg(feature = "system-tests")]
mod mismatch; // what servers serve against what the lock says
#[cfg(feature = "system-tests")]
mod node; // a real Debian system (debootstrap, unshare, nginx in a namespace)
#[cfg(feature = "system-tests")]
mod oci_bundles; // bundles as OCI artifacts in a registry
#[cfg(feature = "system-tests")]
mod outdated; // what the upstream servers have newer
#[cfg(feature = "system-tests")]
mod pylock; // pylock.toml against pypiserver
#[cfg(feature = "system-tests")]
mod report; // the approval pack in headless chromium
#[cfg(feature = "system-tests")]
mod rpms; // rpm repositories, dnf and zypper
#[cfg(feature = "system-tests")]
mod schemas; // the SBOM against the CycloneDX validator
#[cfg(feature = "system-tests")]
mod sigstore; // Sigstore bundles against the conformance suite and a local instance
#[cfg(feature = "system-tests")]
mod sources; // the sources against real servers
