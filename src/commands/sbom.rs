//! `airlock sbom BUNDLE [--out FILE [--json]]`: the `airlock/sbom.cdx.json` member, byte for
//! byte.

use std::io::Write;

use super::VerificationFailed;
use crate::bundle::manifest::SBOM;
use crate::bundle::reader::leading_members;
use crate::cli::SbomArgs;
use crate::failure::{Class, Exit, Failure, Result};

pub fn run(args: &SbomArgs) -> Result<Exit> {
    let input = crate::bundle::parts::Input::resolve(&args.bundle)?;
    let mut found = leading_members(input.open()?, &[SBOM])
        .map_err(|p| VerificationFailed(format!("`{}`: {p}", args.bundle.display())))?;
    let Some(bytes) = found.remove(SBOM) else {
        let why =
            format!("bundle `{}` has no `{SBOM}` member (built before airlock wrote SBOMs?)", args.bundle.display());
        return Err(Failure::new(Class::Runtime, why));
    };
    match &args.out {
        Some(path) => {
            super::write_atomic(path, &bytes)?;
            let sha256 = crate::digest::Sha256::of_bytes(&bytes);
            if args.json {
                super::print_json(&serde_json::json!({ "sbom": path, "sha256": sha256, "bytes": bytes.len() }))?;
            } else {
                writeln!(
                    std::io::stdout().lock(),
                    "wrote {} ({} bytes, sha256 {sha256})",
                    path.display(),
                    bytes.len()
                )?;
            }
        }
        // The SBOM is itself the one JSON document on stdout.
        None => std::io::stdout().lock().write_all(&bytes)?,
    }
    Ok(Exit::Ok)
}
