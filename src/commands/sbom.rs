//! `airlock sbom BUNDLE [--out FILE]`: the `airlock/sbom.cdx.json` member, byte for byte.

use std::fs::File;
use std::io::{BufReader, Read, Write};

use anyhow::{Context as _, bail};

use crate::bundle::manifest::{MAX_MANIFEST_BYTES, SBOM};
use crate::cli::SbomArgs;

pub fn run(args: &SbomArgs) -> anyhow::Result<u8> {
    let file = File::open(&args.bundle).with_context(|| format!("cannot open bundle `{}`", args.bundle.display()))?;
    let decoder = zstd::stream::read::Decoder::new(BufReader::new(file))?;
    let mut archive = tar::Archive::new(decoder);
    // The SBOM is the third member; stop at the first content member.
    for entry in
        archive.entries().with_context(|| format!("`{}` is not an airlock bundle", args.bundle.display()))?.take(4)
    {
        let mut entry = entry.with_context(|| format!("`{}` is not an airlock bundle", args.bundle.display()))?;
        if entry.path_bytes().as_ref() != SBOM.as_bytes() {
            continue;
        }
        let mut bytes = Vec::new();
        (&mut entry).take(MAX_MANIFEST_BYTES).read_to_end(&mut bytes)?;
        match &args.out {
            Some(path) => {
                let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
                let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
                tmp.write_all(&bytes)?;
                tmp.persist(path).with_context(|| format!("cannot write `{}`", path.display()))?;
            }
            None => std::io::stdout().lock().write_all(&bytes)?,
        }
        return Ok(super::EXIT_OK);
    }
    bail!("bundle `{}` has no `{SBOM}` member (built before airlock wrote SBOMs?)", args.bundle.display())
}
