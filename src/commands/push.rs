//! `airlock push BUNDLE oci://HOST/REPO:TAG [--insecure-registry] [--registry-ca FILE] [--json]`

use std::io::Write;

use crate::artifact::Location;
use crate::bundle::parts::Input;
use crate::cli::PushArgs;
use crate::commands::terminal::TerminalReporter;
use crate::failure::{Exit, Result};
use crate::fetch::Net;

pub fn run(args: &PushArgs) -> Result<Exit> {
    let input = Input::resolve(&args.bundle)?;
    let target = Location::parse(&args.target)?;
    let net = Net::new(args.reach.net.options())?;
    let reporter = TerminalReporter::new(args.json);
    let pushed = crate::artifact::push(&input, &target, &args.reach.reach(), args.chunk_size, &net, &reporter)?;
    if args.json {
        super::print_json(&pushed)?;
        return Ok(Exit::Ok);
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "pushed {} {} (bundle {}) to {} as {}: {} layer(s) uploaded, {} already there",
        pushed.name,
        pushed.version,
        pushed.id,
        pushed.target,
        pushed.digest,
        pushed.layers_pushed,
        pushed.layers_present
    )?;
    for key in &pushed.cosignatures {
        writeln!(out, "  co-signature by key {} as a referrer", key.short())?;
    }
    Ok(Exit::Ok)
}
