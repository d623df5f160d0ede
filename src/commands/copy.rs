//! `airlock copy oci://A oci://B [--insecure-registry] [--registry-ca FILE] [--json]`; either
//! side may be `oci-layout:DIR[:TAG]` for a one-way transfer through a directory.

use std::io::Write;

use crate::artifact::Location;
use crate::cli::CopyArgs;
use crate::commands::terminal::TerminalReporter;
use crate::failure::{Exit, Result};
use crate::fetch::Net;

pub fn run(args: &CopyArgs) -> Result<Exit> {
    let (from, to) = (Location::parse(&args.from)?, Location::parse(&args.to)?);
    let net = Net::new(args.reach.net.options())?;
    let reporter = TerminalReporter::new(args.json);
    let copied = crate::artifact::copy(&from, &to, &args.reach.reach(), &net, &reporter)?;
    if args.json {
        super::print_json(&copied)?;
        return Ok(Exit::Ok);
    }
    writeln!(
        std::io::stdout().lock(),
        "copied bundle {} ({}) from {} to {}: {} blob(s) copied, {} already there, {} co-signature referrer(s)",
        copied.id,
        copied.digest,
        copied.from,
        copied.to,
        copied.blobs_copied,
        copied.blobs_present,
        copied.referrers
    )?;
    Ok(Exit::Ok)
}
