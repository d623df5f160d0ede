//! `airlock outdated [SPEC] [--lock FILE] [--deep] [--json]`: what moved upstream since the
//! lock. Exit 0 when nothing did, 10 when something did, 1 when upstream could not be asked.

use std::fmt::Write as _;
use std::io::Write;

use crate::build::lock::lock_path;
use crate::build::outdated::{Finding, Outdated, outdated};
use crate::cli::OutdatedArgs;
use crate::commands::terminal::TerminalReporter;
use crate::failure::{Class, Exit, Failure, Result};
use crate::fetch::{Fetch, Net};
use crate::sources::Sources;
use crate::spec::lock::LockFile;

pub fn run(args: &OutdatedArgs) -> Result<Exit> {
    let site = args.root.as_deref().map(site_findings).transpose()?.unwrap_or_default();
    if args.root.is_some() && !args.spec.exists() {
        let path = args.spec.with_extension("lock");
        if args.json {
            let security = serde_json::json!({ "checked": false, "not_checked": ["no spec: the site only"] });
            super::print_json(
                &serde_json::json!({ "checked_at": crate::clock::Timestamp::now(), "findings": site, "security": security }),
            )?;
        } else {
            print_table(&site, &[], &path)?;
        }
        return Ok(if site.is_empty() { Exit::Ok } else { Exit::Differ });
    }
    let spec = super::load_spec(&args.spec)?;
    let path = lock_path(&args.spec, args.lock.as_ref());
    let lock = LockFile::load(&path)?.ok_or_else(|| {
        Failure::new(Class::Runtime, format!("no lock at `{}`: run `airlock lock` first", path.display()))
    })?;
    let cache = super::open_cache(&args.cache)?;
    let reporter = TerminalReporter::new(true);
    let net = Net::new(args.cache.net.options())?;
    let fetch = Fetch { cache: &cache, jobs: usize::from(args.cache.jobs), http: net.http(), reporter: &reporter };
    let sources = Sources::new(&spec, fetch);
    let checked_at = crate::clock::Timestamp::now();
    let Outdated { mut findings, security_unchecked } = outdated(&sources, &net, &lock, args.deep)?;
    findings.extend(site);
    if args.json {
        let security =
            serde_json::json!({ "checked": security_unchecked.is_empty(), "not_checked": security_unchecked });
        super::print_json(
            &serde_json::json!({ "checked_at": checked_at, "lock": path, "findings": findings, "security": security }),
        )?;
    } else {
        print_table(&findings, &security_unchecked, &path)?;
    }
    Ok(if findings.is_empty() { Exit::Ok } else { Exit::Differ })
}

fn print_table(findings: &[Finding], unchecked: &[String], lock: &std::path::Path) -> Result<()> {
    let mut text = String::new();
    if findings.is_empty() {
        let _ = writeln!(text, "nothing moved upstream since `{}`", lock.display());
    }
    let mut layer = None;
    for f in findings {
        if layer != Some(f.layer) {
            layer = Some(f.layer);
            let _ = writeln!(text, "{}: requalify", f.layer.title());
        }
        let flag = if f.security { "!" } else { " " };
        let _ = writeln!(text, " {flag} {:<16} {:<40} {} -> {}  {}", f.kind, f.name, f.locked, f.upstream, f.detail);
    }
    if !findings.is_empty() {
        let count = findings.iter().filter(|f| f.security).count();
        let security =
            if unchecked.is_empty() { format!("{count} security (!)") } else { "security: not checked".into() };
        let _ = writeln!(
            text,
            "{} finding(s), {security}; the lock `{}` was not changed: `airlock lock` takes them",
            findings.len(),
            lock.display()
        );
    }
    for source in unchecked {
        let _ = writeln!(
            text,
            "security: not checked for {source}: no security suite is configured or served beside it \
             (add its security archive as another [[deb]]; docs/build-host.md)"
        );
    }
    // Names and details come from upstream: escaped for the terminal.
    std::io::stdout().lock().write_all(crate::escape::lines(&text).as_bytes())?;
    Ok(())
}

/// The site's own findings: the amber acceptance its current bundle runs under, once expired.
fn site_findings(root: &std::path::Path) -> Result<Vec<Finding>> {
    let status = crate::site::status::status(root)?;
    let (Some(current), Some(a)) = (status.current, status.amber) else { return Ok(Vec::new()) };
    if !a.expired {
        return Ok(Vec::new());
    }
    Ok(vec![Finding {
        kind: "amber",
        name: format!("{} {}", current.name, current.version),
        locked: "amber accepted".to_owned(),
        upstream: a.acceptance.expires.map_or_else(|| "expired".to_owned(), |e| format!("expired {e}")),
        layer: crate::build::outdated::Layer::Other,
        security: false,
        detail: format!("at {}: {}", root.display(), a.describe()),
    }])
}
