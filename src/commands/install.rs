//! `airlock install BUNDLE --trust PUB --root DIR`

use std::io::Write;

use crate::cli::{InstallArgs, TerminalReporter};
use crate::site::install;

pub fn run(args: &InstallArgs) -> anyhow::Result<u8> {
    let trusted = super::load_trusted(&args.trust)?;
    let reporter = TerminalReporter::new(args.json);
    let done = install(&args.bundle, &trusted, &args.root, &reporter)?;
    if args.json {
        super::print_json(&done)?;
    } else {
        let mut out = std::io::stdout().lock();
        let how = if done.already_present { "re-activated" } else { "installed" };
        writeln!(out, "{how} {} {} as {} at {}", done.name, done.version, done.id, done.path.display())?;
        writeln!(
            out,
            "current -> bundles/{}{}",
            done.id,
            done.previous.map(|p| format!(" (was {p})")).unwrap_or_default()
        )?;
    }
    Ok(super::EXIT_OK)
}
