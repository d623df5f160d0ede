//! `airlock sbom BUNDLE [--out FILE [--json]]`: the `airlock/sbom.cdx.json` member, byte for
//! byte.

use crate::failure::Exit;
use std::io::Write;

use anyhow::bail;

use super::VerificationFailed;
use crate::bundle::manifest::SBOM;
use crate::bundle::reader::leading_members;
use crate::cli::SbomArgs;

pub fn run(args: &SbomArgs) -> anyhow::Result<Exit> {
    let input = crate::bundle::parts::Input::resolve(&args.bundle)?;
    let mut found = leading_members(input.open()?, &[SBOM])
        .map_err(|p| VerificationFailed(format!("`{}`: {p}", args.bundle.display())))?;
    let Some(bytes) = found.remove(SBOM) else {
        bail!("bundle `{}` has no `{SBOM}` member (built before airlock wrote SBOMs?)", args.bundle.display());
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
