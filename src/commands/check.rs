//! `airlock check --root DIR [--wait SECONDS] [--json]`: every retained bundle verified again
//! and every staged tree compared with it. Exit 0 when all is as verified, 3 on any damage.

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::Duration;

use crate::cli::CheckArgs;
use crate::commands::terminal::TerminalReporter;
use crate::failure::{Class, Exit, Result};

pub fn run(args: &CheckArgs) -> Result<Exit> {
    let reporter = TerminalReporter::new(args.json);
    let checked = crate::site::check::check(&args.root, Duration::from_secs(args.site.wait), &reporter)?;
    if args.json {
        super::print_json(&checked)?;
    } else {
        let mut text = String::new();
        for b in &checked.bundles {
            let links = if b.links.is_empty() { String::new() } else { format!(" ({})", b.links.join(", ")) };
            let what = match (&b.name, &b.version) {
                (Some(n), Some(v)) => format!("{n} {v}"),
                _ => "unverified".to_owned(),
            };
            let verdict = if b.ok() { "ok" } else { "DAMAGED" };
            let _ = writeln!(
                text,
                "bundles/{}{links}: {what}: {verdict}: file {}, {} tree files compared",
                b.id,
                if b.verified { "verified" } else { "NOT verified" },
                b.files_checked
            );
            for d in &b.damage {
                let _ = writeln!(text, "  {}: {}", if d.path.is_empty() { "." } else { &d.path }, d.problem);
            }
        }
        for name in &checked.strays {
            let _ = writeln!(text, "bundles/{name}: not a bundle id: nothing airlock installed");
        }
        // The summary counts what is damaged, not what was looked at.
        let damaged = checked.bundles.iter().filter(|b| !b.ok()).count();
        let (n, root) = (checked.bundles.len(), args.root.display());
        let _ = if checked.ok {
            writeln!(text, "ok: {n} retained bundle(s) checked under {root}, none damaged")
        } else {
            writeln!(
                text,
                "DAMAGED: {damaged} of {n} retained bundle(s) under {root}{}",
                if checked.strays.is_empty() {
                    String::new()
                } else {
                    format!(", {} stray entr(ies)", checked.strays.len())
                }
            )
        };
        // Paths and problems can hold what an attacker named: escaped for the terminal.
        std::io::stdout().lock().write_all(crate::escape::lines(&text).as_bytes())?;
    }
    Ok(if checked.ok { Exit::Ok } else { Exit::Failed(Class::Verification) })
}
