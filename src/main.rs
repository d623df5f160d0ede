//! The `airlock` binary: parse arguments, set up logging, dispatch, map errors to exit codes.

use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    airlock::clock::Timestamp::started();
    let cli = match airlock::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { airlock::commands::EXIT_USAGE } else { 0 });
        }
    };
    init_logging(cli.verbose);
    let json = cli.wants_json();
    match airlock::commands::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(err) if airlock::commands::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            // The chain can hold what a hostile file or server said: escaped for the terminal
            // (a JSON document escapes it its own way).
            let error = airlock::cli::paint("error:", airlock::cli::Paint::Bad, airlock::cli::Stream::Stderr);
            eprintln!("{error} {}", airlock::escape::lines(&format!("{err:#}")));
            if json {
                println!("{:#}", airlock::commands::error_document(&err));
            }
            ExitCode::from(airlock::commands::exit_code(&err))
        }
    }
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour only for a person at a terminal, and never when NO_COLOR is set (no-color.org).
    let colour = airlock::cli::colour_on(airlock::cli::Stream::Stderr);
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time()
        .init();
}
