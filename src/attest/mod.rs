//! Attestations about a bundle: the `CycloneDX` SBOM (`airlock/sbom.cdx.json`).
//! SLSA provenance in DSSE comes next (issue 5).

pub mod provenance;
pub mod sbom;
