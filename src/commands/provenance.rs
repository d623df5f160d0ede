//! `airlock provenance BUNDLE [--trust PUB…] [--json]`: the in-toto statement from
//! `airlock/provenance.dsse.json`; with `--trust`, only after its DSSE signature verified with one
//! of the keys and its subjects named this bundle's manifest.

use super::VerificationFailed;
use crate::bundle::manifest::{MANIFEST, PROVENANCE};
use crate::bundle::provenance;
use crate::bundle::reader::leading_members;
use crate::cli::ProvenanceArgs;
use crate::digest::Sha256;
use crate::failure::{Class, Context as _, Exit, Failure, Result};
use crate::sign::dsse;

pub fn run(args: &ProvenanceArgs) -> Result<Exit> {
    let trusted = super::load_trusted(&args.trust)?;
    let input = crate::bundle::parts::Input::resolve(&args.bundle)?;
    let mut found = leading_members(input.open()?, &[MANIFEST, PROVENANCE])
        .map_err(|p| VerificationFailed(format!("`{}`: {p}", args.bundle.display())))?;
    let (Some(manifest), Some(envelope)) = (found.remove(MANIFEST), found.remove(PROVENANCE)) else {
        return Err(Failure::new(
            Class::Runtime,
            format!("bundle `{}` has no `{PROVENANCE}` member", args.bundle.display()),
        ));
    };
    let (statement, signers): (serde_json::Value, _) = if trusted.is_empty() {
        tracing::warn!("no --trust key given: the provenance is printed WITHOUT checking its signature");
        let payload = dsse::payload_unverified(&envelope).context("the provenance is not a DSSE envelope")?;
        (serde_json::from_slice(&payload).context("the DSSE payload is not JSON")?, None)
    } else {
        let verified = provenance::verify(&envelope, &trusted, Sha256::of_bytes(&manifest))
            .map_err(|e| VerificationFailed(format!("{PROVENANCE} in `{}`: {e}", args.bundle.display())))?;
        (verified.statement, Some(verified.signers))
    };
    if args.json {
        super::print_json(&serde_json::json!({
            "verified": signers.is_some(),
            "signers": signers.unwrap_or_default(),
            "statement": statement,
        }))?;
    } else {
        super::print_json(&statement)?;
    }
    Ok(Exit::Ok)
}
