//! `airlock freeze NODE.json --spec SPEC --out BASE.toml`

use std::io::Write as _;

use crate::build::freeze::freeze;
use crate::cli::FreezeArgs;
use crate::commands::terminal::TerminalReporter;
use crate::failure::{Class, Context as _, Exit, Failure, Result};
use crate::fetch::{Fetch, Net};
use crate::sources::Sources;
use crate::validate::probe::Probe;

/// The most of a node's probe record read.
const MAX_NODE: u64 = 64 << 20;

pub fn run(args: &FreezeArgs) -> Result<Exit> {
    let text = crate::site::root::read_bounded(&args.node, MAX_NODE)
        .with_context(|| format!("cannot read `{}`", args.node.display()))?
        .ok_or_else(|| Failure::new(Class::Runtime, format!("`{}` does not exist", args.node.display())))?;
    let record: Probe = serde_json::from_slice(&text)
        .with_context(|| format!("`{}` is not a probe record (`airlock probe --json`)", args.node.display()))?;
    let spec = super::load_spec(&args.spec)?;
    let deb_arches: Vec<&str> = spec.spec.deb.iter().map(|d| d.get_ref().arch.as_str()).collect();
    let rpm_arches: Vec<&str> = spec.spec.rpm.iter().map(|r| r.get_ref().arch.as_str()).collect();
    let installed = std::collections::BTreeMap::from([
        ("dpkg".to_owned(), record.inventory.by_arch("dpkg", &deb_arches)),
        ("rpm".to_owned(), record.inventory.by_arch("rpm", &rpm_arches)),
    ]);
    let cache = super::open_cache(&args.cache)?;
    let reporter = TerminalReporter::new(args.json);
    let net = Net::new(args.cache.net.options())?;
    let fetch = Fetch { cache: &cache, jobs: usize::from(args.cache.jobs), http: net.http(), reporter: &reporter };
    let sources = Sources::new(&spec, fetch);
    let baseline = freeze(&sources, &net, &args.node, &installed, &args.out, Some(&args.version))?;
    if args.json {
        return super::print_json(&baseline).map(|()| Exit::Ok);
    }
    let mut out = std::io::stdout().lock();
    let count: usize = baseline.pinned.values().map(Vec::len).sum();
    writeln!(
        out,
        "wrote {} and {} ({} {}): {count} package(s) at {}'s versions",
        baseline.spec.display(),
        baseline.lock.display(),
        spec.spec.bundle.name,
        baseline.version,
        args.node.display()
    )?;
    for (archive, pins) in &baseline.pinned {
        writeln!(out, "  {archive}: {}", pins.join(", "))?;
    }
    if !baseline.dependencies.is_empty() {
        writeln!(
            out,
            "of these, the stack's dependencies (the distribution may patch them; adopt accepts a newer one the stack \
             still accepts): {}",
            baseline.dependencies.join(", ")
        )?;
    }
    if !baseline.left_to_os.is_empty() {
        writeln!(
            out,
            "left to the operating system (its base covers them; its security updates are its own): {}",
            baseline.left_to_os.join(", ")
        )?;
    }
    if !baseline.absent.is_empty() {
        writeln!(
            out,
            "named by the spec, not installed on the node (not in the baseline): {}",
            baseline.absent.join(", ")
        )?;
    }
    writeln!(
        out,
        "next: airlock build {} --locked --key KEY; on each node: airlock apply BASE.airlock --adopt",
        baseline.spec.display()
    )?;
    Ok(Exit::Ok)
}
