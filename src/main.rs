//! The `airlock` binary: parse arguments, set up logging, dispatch, map errors to exit codes.

use std::process::ExitCode;

use airlock::failure::{Class, Exit};
use clap::Parser as _;

fn main() -> ExitCode {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fix_malloc_thresholds();
    airlock::clock::Timestamp::started();
    airlock::interrupt::install();
    let cli = match airlock::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            match airlock::cli::slip_hint(&e) {
                // clap's own tip for these slips sends people the wrong way (`-- --key`, or
                // `--registry-ca` for `--site`, with a usage line that makes it look required).
                Some(hint) => {
                    let rendered = e.render().to_string();
                    let first = rendered.lines().next().unwrap_or("error: usage error");
                    eprintln!("{first}\n\n  hint: {hint}\n\nFor more information, try '--help'.");
                }
                None => {
                    let _ = e.print();
                }
            }
            // A script that asked for `--json` reads one document on stdout, a usage error too.
            if e.use_stderr() && std::env::args_os().any(|a| a == "--json") {
                let rendered = e.render().to_string();
                let first = rendered.lines().next().unwrap_or("usage error").trim_start_matches("error: ");
                let err = airlock::failure::Failure::from(airlock::commands::UsageError(first.to_owned()));
                println!("{:#}", airlock::commands::error_document(&err));
            }
            let exit = if e.use_stderr() { Exit::Failed(Class::Usage) } else { Exit::Ok };
            return ExitCode::from(exit.code());
        }
    };
    init_logging(cli.verbose);
    let json = cli.wants_json();
    match airlock::commands::run(cli) {
        Ok(exit) => ExitCode::from(exit.code()),
        Err(err) if airlock::commands::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            // The chain can hold what a hostile file or server said: escaped for the terminal
            // (a JSON document escapes it its own way).
            let error = airlock::commands::terminal::paint(
                "error:",
                airlock::commands::terminal::Paint::Bad,
                airlock::commands::terminal::Stream::Stderr,
            );
            eprintln!("{error} {}", airlock::escape::lines(&format!("{err:#}")));
            if json {
                println!("{:#}", airlock::commands::error_document(&err));
            }
            ExitCode::from(err.exit().code())
        }
    }
}

fn init_logging(verbose: u8) {
    // `-v`/`-vv` turn up airlock's own logs; its dependencies stay at warn (an OpenPGP
    // library's debug output drowned airlock's three lines in two thousand). RUST_LOG decides
    // everything when it is set.
    let default = match verbose {
        0 => "warn",
        1 => "warn,airlock=info",
        _ => "warn,airlock=debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour only for a person at a terminal, and never when NO_COLOR is set (no-color.org).
    let colour = airlock::commands::terminal::colour_on(airlock::commands::terminal::Stream::Stderr);
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time()
        .init();
}

/// glibc serves a block of 128 KiB or more from a mapping of its own, unmapped when freed; but
/// each such block freed raises that threshold to its size (up to 32 MiB) and the trim
/// threshold to twice that, and from then on buffers come from its arenas, which keep what is
/// freed. The build of a 10 GB bundle, whose 4.6 MB lock's parse frees a 31.9 MiB block, peaked
/// at 66 – 80 MiB where it used 58 (`docs/performance.md`, "what glibc keeps").
///
/// Fixed, the threshold stays where it is put. At 512 KiB, not glibc's 128: hyper's read
/// buffers (412 KiB with glibc's header, up to one a chunk of every download) stay in the
/// arenas as they do today, where at 128 KiB each was a mapping of its own (966 in a mirror of
/// 384 MiB, 0.2 s more system time). Every buffer of 512 KiB or more that airlock itself makes
/// lives as long as its command or its sink, not a file.
///
/// Fixing it also fixes the trim threshold, at 128 KiB: an arena whose free top grew past that
/// gave it back at once, and took it again for the next buffer. A node staging from its mirror
/// frees hyper's read buffers as it hashes and writes them: 150,000 page faults for 8 nodes
/// staging 1 GiB each, 36,000 with the threshold at 4 MiB, which an arena keeps free at its
/// top at most.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)] // The one `unsafe` in airlock; the library forbids it.
fn fix_malloc_thresholds() {
    // SAFETY: `mallopt` sets an allocator parameter and touches no memory of ours. It is the
    // first thing `main` does, before any thread is started. A refusal (0) leaves glibc's
    // default, which is correct, only slower or larger.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 512 << 10);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 4 << 20);
    }
}
