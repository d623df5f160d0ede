//! Attestations built from a bundle's manifest: the `CycloneDX` SBOM (`airlock/sbom.cdx.json`,
//! a listed member) and SLSA provenance in a DSSE envelope (`airlock/provenance.dsse.json`).
//! Building only; the reader checks the provenance (`bundle::provenance`).

pub mod provenance;
pub mod sbom;
