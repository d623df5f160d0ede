//! `airlock provenance BUNDLE [--trust PUB…]`: the in-toto statement from
//! `airlock/provenance.dsse.json`; with `--trust`, only after its DSSE signature verified with one
//! of the keys and its subjects named this bundle's manifest.

use std::fs::File;
use std::io::{BufReader, Read};

use anyhow::{Context as _, bail};
use base64::Engine as _;

use super::VerificationFailed;
use crate::attest::provenance::{self, Envelope};
use crate::bundle::manifest::{MANIFEST, MAX_MANIFEST_BYTES, PROVENANCE};
use crate::cli::ProvenanceArgs;
use crate::digest::Sha256;

pub fn run(args: &ProvenanceArgs) -> anyhow::Result<u8> {
    let trusted = super::load_trusted(&args.trust)?;
    let not_bundle = || format!("`{}` is not an airlock bundle", args.bundle.display());
    let file = File::open(&args.bundle).with_context(|| format!("cannot open bundle `{}`", args.bundle.display()))?;
    let mut archive = tar::Archive::new(zstd::stream::read::Decoder::new(BufReader::new(file))?);
    let (mut manifest, mut envelope) = (None, None);
    // The manifest is member 1 and the provenance member 4: stop after the leading members.
    for entry in archive.entries().with_context(not_bundle)?.take(5) {
        let mut entry = entry.with_context(not_bundle)?;
        let name = entry.path_bytes().into_owned();
        let slot = match name.as_slice() {
            n if n == MANIFEST.as_bytes() => &mut manifest,
            n if n == PROVENANCE.as_bytes() => &mut envelope,
            _ => continue,
        };
        let mut bytes = Vec::new();
        (&mut entry).take(MAX_MANIFEST_BYTES.max(provenance::MAX_BYTES)).read_to_end(&mut bytes)?;
        *slot = Some(bytes);
    }
    let (Some(manifest), Some(envelope)) = (manifest, envelope) else {
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
