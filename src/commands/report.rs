//! `airlock report (BUNDLE [--base OLD] [--trust PUB…] | --root DIR) [--out FILE.html] [--json]`

use std::io::Write;

use crate::bundle::parts::Input;
use crate::cli::ReportArgs;
use crate::commands::terminal::TerminalReporter;
use crate::failure::{Exit, Result};

pub fn run(args: &ReportArgs) -> Result<Exit> {
    // A page of HTML is not for a terminal: said before anything is verified.
    if args.out.is_none() && !args.json && std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return Err(super::UsageError(
            "the report is an HTML page: write it with --out FILE.html (or redirect stdout), or ask for --json".into(),
        )
        .into());
    }
    if let Some(dir) = &args.fleet {
        return fleet(args, dir);
    }
    let reporter = TerminalReporter::new(true);
    let report = match (&args.bundle, &args.root) {
        (_, Some(root)) => crate::report::site(root, &reporter)?,
        (Some(bundle), None) => {
            let input = Input::resolve(bundle)?;
            let policy = if args.trust.trust.is_empty() {
                tracing::warn!("no --trust key given: the report shows what the bundle claims, NOT verified");
                None
            } else {
                Some(super::load_policy(&args.trust, input.bundle())?)
            };
            let base = args.base.as_deref().map(Input::resolve).transpose()?;
            // The release running today is checked with the same keys; one trusted signature
            // is enough for what is only compared against.
            let base_policy = match (&base, args.trust.trust.is_empty()) {
                (Some(b), false) => {
                    let keys = super::load_trusted(&args.trust.trust)?;
                    let cosignatures = super::cosignatures_beside(b.bundle());
                    Some(crate::sign::Policy::new(keys, 1, cosignatures)?)
                }
                _ => None,
            };
            let base = base.as_ref().map(|b| (b, base_policy.as_ref()));
            crate::report::bundle(&input, policy.as_ref(), base, &reporter)?
        }
        (None, None) => unreachable!("clap requires BUNDLE or --root"),
    };
    output(args, &crate::report::html::render(&report), &report)?;
    // A site whose active bundle no longer verifies, or whose tree is not what verified, and a
    // bundle that does not verify under the keys given, get their page (the evidence, led by
    // NOT VERIFIED) and exit 3. Without `--trust` nothing was checked: the page says so.
    let checked = report.site.is_some() || !args.trust.trust.is_empty();
    if checked && let Some(reason) = crate::report::html::not_verified(&report) {
        if let Some(site) = &report.site {
            tracing::error!(
                "the active bundle of `{}` is not as it was verified ({reason}): run `airlock check --root {}`",
                site.root.display(),
                site.root.display()
            );
        } else {
            tracing::error!("`{}` did not verify: {reason}", report.bundle.source);
        }
        return Ok(Exit::Failed(crate::failure::Class::Verification));
    }
    Ok(Exit::Ok)
}

/// `report --fleet DIR`: one page for a fleet's rollout (exit 0 even when it shows red: the
/// page is the evidence of what happened).
fn fleet(args: &ReportArgs, dir: &std::path::Path) -> Result<Exit> {
    let fleet = crate::report::fleet::fleet(dir, args.run.as_ref())?;
    let page_dir = args
        .out
        .as_deref()
        .map(|p| p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or_else(|| std::path::Path::new(".")));
    output(args, &crate::report::fleet::render(&fleet, page_dir), &fleet)?;
    Ok(Exit::Ok)
}

/// The page to `--out` (or stdout without `--json`), and the data as JSON with `--json`.
fn output(args: &ReportArgs, page: &str, data: &impl serde::Serialize) -> Result<()> {
    match &args.out {
        Some(path) => {
            super::write_atomic(path, page.as_bytes())?;
            if !args.json {
                writeln!(std::io::stdout().lock(), "wrote {} ({})", path.display(), super::size(page.len() as u64))?;
            }
        }
        None if !args.json => std::io::stdout().lock().write_all(page.as_bytes())?,
        None => {}
    }
    if args.json {
        super::print_json(data)?;
    }
    Ok(())
}
