//! `airlock completions SHELL`, `airlock version [--json]` and the man pages (`airlock man DIR`,
//! used by `scripts/release.sh`): airlock about itself, from clap's own model of the CLI.

use std::io::Write;

use clap::CommandFactory as _;

use crate::cli::{Cli, CompletionsArgs, ManArgs, SelfUpgradeArgs, VersionArgs};
use crate::failure::{Exit, Result};

pub fn completions(args: &CompletionsArgs) -> Result<Exit> {
    let mut command = Cli::command();
    // Into memory first: clap_complete panics on a failed write (`| head`), a buffer cannot fail.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "airlock", &mut script);
    std::io::stdout().lock().write_all(&script)?;
    Ok(Exit::Ok)
}

#[derive(serde::Serialize)]
struct Built {
    version: &'static str,
    commit: Option<&'static str>,
    date: Option<&'static str>,
    target: &'static str,
}

pub fn version(args: &VersionArgs) -> Result<Exit> {
    let v = Built {
        version: env!("CARGO_PKG_VERSION"),
        commit: option_env!("AIRLOCK_COMMIT").filter(|c| !c.is_empty()),
        date: option_env!("AIRLOCK_COMMIT_DATE").filter(|d| !d.is_empty()),
        target: env!("AIRLOCK_TARGET"),
    };
    if args.json {
        super::print_json(&v)?;
    } else {
        writeln!(std::io::stdout().lock(), "airlock {}", env!("AIRLOCK_VERSION"))?;
    }
    Ok(Exit::Ok)
}

/// `airlock.1` and `airlock-SUBCOMMAND.1` for every visible subcommand.
pub fn man(args: &ManArgs) -> Result<Exit> {
    std::fs::create_dir_all(&args.out_dir)?;
    let command = Cli::command();
    let mut pages = vec![("airlock".to_owned(), command.clone())];
    // One page per verb, and per verb of `trust`, each under the name `man` finds it by
    // (`man airlock-install`, `man airlock-trust-rotate`), its NAME section saying the same.
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("airlock-{}", sub.get_name());
        for nested in sub.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
            let nested_name = format!("{name}-{}", nested.get_name());
            let bin = format!("airlock {} {}", sub.get_name(), nested.get_name());
            pages.push((nested_name.clone(), nested.clone().name(nested_name).bin_name(bin)));
        }
        pages.push((name.clone(), sub.clone().name(name).bin_name(format!("airlock {}", sub.get_name()))));
    }
    let mut out = std::io::stdout().lock();
    for (name, page) in pages {
        let path = args.out_dir.join(format!("{name}.1"));
        let mut bytes = Vec::new();
        clap_mangen::Man::new(page).title(name.to_uppercase()).render(&mut bytes)?;
        super::write_atomic(&path, &bytes)?;
        writeln!(out, "{}", path.display())?;
    }
    Ok(Exit::Ok)
}

/// `self-upgrade`: the carried airlock for this target, verified, run, and put in place.
pub fn self_upgrade(args: &SelfUpgradeArgs) -> Result<Exit> {
    let input = crate::bundle::parts::Input::resolve(&args.bundle)?;
    // The same policy as `install`: the site's trust root decides where it has one (and a
    // site that used one refuses `--trust` once it is gone), else `--trust`.
    let expiry = crate::site::trust::ExpiryRule::from_flags(args.allow_expired, args.reason.as_deref());
    let cosignatures = super::cosignatures_beside(input.bundle());
    let carried = || super::carried_trust(&input);
    let wait = std::time::Duration::ZERO;
    let policy = super::site_policy(&args.root, &args.trust, cosignatures, carried, &expiry, wait, super::Writes::No)?;
    let reason = || args.reason.clone().unwrap_or_default();
    let waivers = crate::upgrade::Waivers {
        expired: args.allow_expired.then(reason),
        downgrade: args.allow_downgrade.then(reason),
    };
    let to = match &args.to {
        Some(p) => p.clone(),
        None => std::env::current_exe()?,
    };
    let reporter = crate::commands::terminal::TerminalReporter::new(args.json);
    let done = crate::upgrade::self_upgrade(&input, &policy, &to, &waivers, &reporter)?;
    if args.json {
        super::print_json(&done)?;
    } else {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{} is now {} (from {})", done.path.display(), done.version, done.member)?;
        if let Some(p) = &done.previous {
            writeln!(out, "the binary it replaced is kept as {}", p.display())?;
        }
    }
    Ok(Exit::Ok)
}
