//! `airlock lock [SPEC] [--lock FILE] [--cache DIR] [--jobs N]`

use std::io::Write;

use crate::build::lock::{Outcome, Refresh, ensure, lock_path};
use crate::cli::LockArgs;
use crate::commands::terminal::TerminalReporter;
use crate::failure::{Exit, Result};
use crate::fetch::{Fetch, Net};
use crate::sources::Sources;

pub fn run(args: &LockArgs) -> Result<Exit> {
    let spec = super::load_spec(&args.spec)?;
    let path = lock_path(&args.spec, args.lock.as_ref());
    let cache = super::open_cache(&args.cache)?;
    let reporter = TerminalReporter::new(args.json);
    let net = Net::new(args.cache.net.options())?;
    let fetch = Fetch { cache: &cache, jobs: usize::from(args.cache.jobs), http: net.http(), reporter: &reporter };
    let sources = Sources::new(&spec, fetch).with_sigstore_root(super::upstream_root(&args.upstream)?);
    let (lock, outcome) = ensure(&sources, &net, &path, Refresh::Always)?;
    let written = outcome == Outcome::Written;
    if args.json {
        super::print_json(
            &serde_json::json!({ "lock": path, "updated": written, "sha256": lock.sha256, "entries": lock.lock }),
        )?;
    } else {
        let mut out = std::io::stdout().lock();
        let verb = if written { "wrote" } else { "up to date:" };
        let l = &lock.lock;
        let models: usize = l.model.iter().map(|m| m.files.len()).sum();
        writeln!(
            out,
            "{verb} {} ({} image(s), {} wheel(s), {} deb(s), {} rpm(s), {models} model file(s), {} file(s) pinned)",
            path.display(),
            l.image.len(),
            l.wheel.len(),
            l.deb.len(),
            l.rpm.len(),
            l.file.len()
        )?;
        for i in &lock.lock.image {
            let platforms: Vec<&str> = i.platforms.iter().map(|p| p.platform.as_str()).collect();
            let extra = if platforms.is_empty() { String::new() } else { format!("  [{}]", platforms.join(" ")) };
            writeln!(out, "  image {}  sha256:{}{extra}{}", i.reference, i.digest, signed(i.signature.as_ref()))?;
        }
        for w in &lock.lock.wheel {
            let signed = signed(w.signature.as_ref());
            writeln!(out, "  wheel {}  {} bytes  sha256 {}{signed}", w.filename, w.size, w.sha256)?;
        }
        for d in &lock.lock.deb {
            let why =
                if d.required_by.is_empty() { String::new() } else { format!("  (for {})", d.required_by.join(", ")) };
            writeln!(
                out,
                "  deb {}={}  {}  {} bytes  sha256 {}{why}",
                d.package.name,
                d.version(),
                d.filename,
                d.size,
                d.sha256
            )?;
        }
        for r in &lock.lock.rpm {
            let why =
                if r.required_by.is_empty() { String::new() } else { format!("  (for {})", r.required_by.join(", ")) };
            let module = r.module.as_ref().map_or_else(String::new, |m| format!("  [module {m}]"));
            writeln!(
                out,
                "  rpm {}-{}.{}  {}  {} bytes  sha256 {}{module}{why}",
                r.name,
                r.evr(),
                r.architecture,
                r.location,
                r.size,
                r.sha256
            )?;
        }
        for m in &lock.lock.model {
            writeln!(out, "  model {} at {} ({} files)", m.repo, m.commit, m.files.len())?;
        }
        for f in &lock.lock.file {
            let signed = signed(f.signature.as_ref());
            writeln!(out, "  file {}  {} bytes  sha256 {}{signed}", f.name, f.size, f.sha256)?;
        }
    }
    Ok(Exit::Ok)
}

/// `\n    signed by IDENTITY (ISSUER), logged at TIME` for an input whose upstream signature verified.
fn signed(signature: Option<&crate::spec::UpstreamSignature>) -> String {
    signature.map(|s| format!("\n    {}", s.describe())).unwrap_or_default()
}
