//! `airlock provenance BUNDLE [--trust PUB…]`: the in-toto statement from
//! `airlock/provenance.dsse.json`; with `--trust`, only after its DSSE signature verified with one
//! of the keys and its subjects named this bundle's manifest.

use std::fs::File;
use std::io::BufReader;

use anyhow::{Context as _, bail};
use base64::Engine as _;

use super::VerificationFailed;
use crate::attest::provenance::{self, Envelope};
use crate::bundle::manifest::{MANIFEST, PROVENANCE};
use crate::bundle::reader::leading_members;
use crate::cli::ProvenanceArgs;
use crate::digest::Sha256;

pub fn run(args: &ProvenanceArgs) -> anyhow::Result<u8> {
    let trusted = super::load_trusted(&args.trust)?;
    let file = File::open(&args.bundle).with_context(|| format!("cannot open bundle `{}`", args.bundle.display()))?;
    let mut found = leading_members(BufReader::new(file), &[MANIFEST, PROVENANCE])
        .map_err(|p| VerificationFailed(format!("`{}`: {p}", args.bundle.display())))?;
    let (Some(manifest), Some(envelope)) = (found.remove(MANIFEST), found.remove(PROVENANCE)) else {
        bail!("bundle `{}` has no `{PROVENANCE}` member", args.bundle.display());
    };
    let statement = if trusted.is_empty() {
        tracing::warn!("no --trust key given: the provenance is printed WITHOUT checking its signature");
        let env: Envelope = serde_json::from_slice(&envelope).context("the provenance is not a DSSE envelope")?;
        let payload =
            base64::engine::general_purpose::STANDARD.decode(env.payload).context("DSSE payload is not base64")?;
        serde_json::from_slice(&payload).context("the DSSE payload is not JSON")?
    } else {
        provenance::verify(&envelope, &trusted, Sha256::of_bytes(&manifest))
            .map_err(|e| VerificationFailed(format!("{PROVENANCE} in `{}`: {e}", args.bundle.display())))?
            .statement
    };
    super::print_json(&statement)?;
    Ok(super::EXIT_OK)
}
