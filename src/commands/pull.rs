//! `airlock pull oci://HOST/REPO:TAG|@DIGEST --out FILE --trust PUB… [--threshold N]
//! [--insecure-registry] [--registry-ca FILE] [--cache DIR] [--json]`

use std::io::Write;

use crate::artifact::Location;
use crate::cli::PullArgs;
use crate::commands::terminal::TerminalReporter;
use crate::failure::{Exit, Result};
use crate::fetch::Net;

pub fn run(args: &PullArgs) -> Result<Exit> {
    let source = Location::parse(&args.source)?;
    let keys = super::load_trusted(&args.trust.trust)?;
    let cache = crate::cache::Cache::open(&args.cache.clone().unwrap_or_else(crate::cache::Cache::default_dir))?;
    let net = Net::new(args.reach.net.options())?;
    let reporter = TerminalReporter::new(args.json);
    let threshold = usize::try_from(args.trust.threshold).unwrap_or(usize::MAX);
    let pulled =
        crate::artifact::pull(&source, &args.out, keys, threshold, &args.reach.reach(), &net, &cache, &reporter)?;
    cache.sync()?;
    if args.json {
        super::print_json(&pulled)?;
        return Ok(Exit::Ok);
    }
    let mut out = std::io::stdout().lock();
    let r = &pulled.resolved;
    writeln!(out, "{} is {}", r.reference, r.digest)?;
    let signers: Vec<_> = pulled.signers.iter().map(crate::sign::KeyId::short).collect();
    writeln!(
        out,
        "pulled {} {} (bundle {}, {}) to {}, verified: signed by {}",
        r.name,
        r.version,
        r.id,
        super::size(r.bytes),
        pulled.out.display(),
        signers.join(", ")
    )?;
    for co in &pulled.cosignatures {
        writeln!(out, "  co-signature {}", co.display())?;
    }
    Ok(Exit::Ok)
}
