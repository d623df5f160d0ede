//! `airlock validate --root DIR [--json]`: this host against the active bundle's support matrix
//! and acceptance checks. Exit 0 green, 0 amber (with a warning), 4 red.

use std::fmt::Write as _;
use std::io::Write as _;

use std::time::Duration;

use crate::cli::ValidateArgs;
use crate::failure::{Class, Exit, Result};
use crate::site::SiteRoot;
use crate::site::records::{Action, Outcome, Record, RecordBundle, Validation as RecordedValidation};
use crate::validate::matrix::Verdict;
use crate::validate::probe::HostRoot;
use crate::validate::{not_green, validate, word};

pub fn run(args: &ValidateArgs) -> Result<Exit> {
    if args.commit {
        return commit(args);
    }
    if args.baseline {
        return baseline(args);
    }
    let reporter = crate::commands::terminal::TerminalReporter::new(args.json || args.nhc);
    if args.nhc {
        return Ok(nhc(args, &reporter));
    }
    let judged = judge(args, &reporter)?;
    let (Some(evidence), Some(record)) = (judged.evidence, judged.record) else {
        if args.json {
            super::print_json(&RecordedValidation::skipped())?;
        } else {
            writeln!(
                std::io::stdout().lock(),
                "skipped: {} {} names no [[validation.target]]",
                judged.manifest.name,
                judged.manifest.version
            )?;
        }
        return Ok(Exit::Ok);
    };
    if args.json {
        // The evidence as the record holds it, and where the record is.
        #[derive(serde::Serialize)]
        struct Validated<'a> {
            #[serde(flatten)]
            evidence: &'a crate::validate::Evidence,
            record: &'a std::path::Path,
        }
        super::print_json(&Validated { evidence: &evidence, record: &record })?;
    } else {
        // Tools' and checks' words are untrusted text: escaped for the terminal.
        let mut text = String::new();
        for line in not_green(&evidence.rows) {
            let _ = writeln!(text, "{line}");
        }
        for c in &evidence.checks {
            let _ = writeln!(text, "  check {:<16} {}: {} ({:.2} s)", c.name, word(c.verdict), c.summary, c.duration_s);
        }
        let _ = writeln!(text, "record {}", record.display());
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "{}",
            crate::commands::terminal::painted_summary(&evidence, crate::commands::terminal::Stream::Stdout)
        )?;
        out.write_all(crate::escape::lines(&text).as_bytes())?;
    }
    match evidence.verdict {
        Verdict::Green => Ok(Exit::Ok),
        Verdict::Amber => {
            tracing::warn!("amber: {}", evidence.summary);
            Ok(Exit::Ok)
        }
        Verdict::Red => Ok(Exit::Failed(Class::ValidationRed)),
    }
}

/// What validating the active bundle gave: its manifest, and (unless it names no matrix) the
/// evidence and the record written.
struct Judged {
    id: crate::site::BundleId,
    manifest: crate::bundle::manifest::VerifiedManifest,
    evidence: Option<crate::validate::Evidence>,
    record: Option<std::path::PathBuf>,
}

fn judge(args: &ValidateArgs, reporter: &dyn crate::progress::Reporter) -> Result<Judged> {
    // Nothing from the active bundle runs before it verified again under the policy it was
    // installed with and its tree matched it; no writer moves it meanwhile.
    let root = SiteRoot::new(&args.root);
    let _lock = root.lock_for_reading("validate", Duration::from_secs(args.site.wait))?;
    let (bundle_id, manifest, _) = crate::site::check::active(&root, reporter)?;
    let evidence = validate(
        &manifest.validation,
        &HostRoot::from_env(),
        crate::site::load_baseline(&args.root).as_ref(),
        &crate::validate::scope_of(&manifest),
    );
    let Some(evidence) = evidence else {
        return Ok(Judged { id: bundle_id, manifest, evidence: None, record: None });
    };
    // As-built evidence: a record of its own beside the installs and rollbacks (written whole,
    // under a name no other writer uses, so no lock is needed).
    let mut record = Record::new(
        Action::Validate,
        Outcome::Validated,
        Some(RecordBundle {
            id: Some(bundle_id.clone()),
            name: Some(manifest.name.to_string()),
            version: Some(manifest.version.to_string()),
            ..RecordBundle::default()
        }),
    );
    record.validation = Some(RecordedValidation::Evidence(Box::new(evidence.clone())));
    record.run_id.clone_from(&args.run.id);
    let record = crate::site::records::write(&root, &record)?;
    Ok(Judged { id: bundle_id, manifest, evidence: Some(evidence), record: Some(record) })
}

/// The longest line `--nhc` prints: Slurm keeps it as the node's reason.
const NHC_LINE: usize = 240;

/// `validate --nhc`: one line on stdout, `airlock: …`, and exit 0 (green, amber, nothing to
/// judge, another airlock command holding the root of a node last judged green or amber) or 1
/// (red, last judged red while the root is held, or the active bundle cannot be judged: it does
/// not verify, its tree is damaged), as Node Health Check's checks and Slurm's
/// `HealthCheckProgram` take it: the line becomes the node's drain reason.
fn nhc(args: &ValidateArgs, reporter: &dyn crate::progress::Reporter) -> Exit {
    let root = SiteRoot::new(&args.root);
    let (line, code) = if root.link(crate::site::root::Link::Current).is_none() {
        (format!("airlock: ok, nothing to judge: no current bundle under {}", args.root.display()), Exit::Ok)
    } else {
        match judge(args, reporter) {
            Ok(j) => {
                let what = format!("{} {} (bundles/{})", j.manifest.name, j.manifest.version, j.id);
                let record = j.record.as_ref().and_then(|r| r.file_name()).map(|n| n.to_string_lossy().into_owned());
                match j.evidence {
                    None => (format!("airlock: ok {what}: no matrix to judge"), Exit::Ok),
                    Some(e) => {
                        // NHC and Slurm read 1 as "drain", whatever the reason.
                        let code = if e.verdict == Verdict::Red { Exit::Failed(Class::Runtime) } else { Exit::Ok };
                        let record = record.map(|r| format!(" record {r}")).unwrap_or_default();
                        // The record first: the summary is what a long line loses.
                        (format!("airlock: {} {what}{record}: {}", word(e.verdict), e.summary), code)
                    }
                }
            }
            // Another command holds the root (an apply, a rollback, a staging from a slow
            // mirror): the last verdict judged on this bundle stands, with its age; a node
            // last judged red is never called healthy.
            Err(e) if e.chain().any(|c| matches!(c.downcast_ref(), Some(crate::site::SiteError::Busy { .. }))) => {
                last_judged(&root, &e)
            }
            Err(e) => (format!("airlock: red, not judged: {e:#}"), Exit::Failed(Class::Runtime)),
        }
    };
    let line = crate::escape::value(&line).replace('\n', " ");
    let line: String = line.chars().take(NHC_LINE).collect();
    let _ = writeln!(std::io::stdout().lock(), "{line}");
    code
}

/// The line and exit of a node whose root another command holds: the newest verdict its
/// records hold for the current bundle (read without the lock: a record is written whole),
/// with its age; none judged yet: busy, exit 0.
fn last_judged(root: &SiteRoot, busy: &crate::failure::Failure) -> (String, Exit) {
    let current = root.link(crate::site::root::Link::Current);
    let records = crate::site::records::read_all(root).unwrap_or_default();
    let last = records.iter().rev().find_map(|(path, r)| {
        let on_current = r.bundle.as_ref().and_then(|b| b.id.as_ref()) == current.as_ref();
        let e = r.validation.as_ref()?.evidence()?;
        on_current.then_some((path, r, e))
    });
    let Some((path, r, e)) = last else {
        return (format!("airlock: busy, not judged yet: {busy}"), Exit::Ok);
    };
    let age = crate::clock::Timestamp::now().unix().saturating_sub(r.at.unix());
    let record = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let what = r.bundle.as_ref().map_or_else(String::new, |b| {
        let (name, version) = (b.name.as_deref().unwrap_or("?"), b.version.as_deref().unwrap_or("?"));
        format!("{name} {version}")
    });
    if e.verdict == Verdict::Red {
        // The record first (a long line loses its end), the lock holder to stderr.
        let line = format!("airlock: red {what} record {record} (last judged {age} s ago; busy now): {}", e.summary);
        eprintln!("{}", crate::escape::lines(&format!("{busy:#}")));
        return (line, Exit::Failed(Class::Runtime));
    }
    let line = format!("airlock: busy, last judged {} {age} s ago: {what} record {record}: {busy}", word(e.verdict));
    (line, Exit::Ok)
}

/// `validate --commit`: a pending apply committed (exit 0) or the host restored (exit 4).
fn commit(args: &ValidateArgs) -> Result<Exit> {
    let reporter = crate::commands::terminal::TerminalReporter::new(args.json);
    let writer = crate::site::Writer { wait: Duration::from_secs(args.site.wait), run: args.run.id.clone() };
    let done = crate::site::commit_pending(&args.root, &writer, &reporter)?;
    if args.json {
        super::print_json(&done)?;
        return Ok(Exit::Ok);
    }
    let mut out = std::io::stdout().lock();
    if let Some(v) = &done.validation {
        writeln!(
            out,
            "validation of the stack now running {}",
            crate::commands::terminal::painted_summary(v, crate::commands::terminal::Stream::Stdout)
        )?;
        for line in not_green(&v.rows) {
            writeln!(out, "{}", crate::escape::value(&line))?;
        }
    }
    let line = super::switched(&done.id, done.previous.as_ref(), done.seconds, &done.record);
    writeln!(out, "committed {} {}: {line}", done.name, done.version)?;
    Ok(Exit::Ok)
}

/// `validate --baseline`: the active bundle's metric checks run on this stack, kept as the
/// root's baseline.
fn baseline(args: &ValidateArgs) -> Result<Exit> {
    let root = SiteRoot::new(&args.root);
    let _lock = root.lock_for_reading("validate", Duration::from_secs(args.site.wait))?;
    let reporter = crate::commands::terminal::TerminalReporter::new(args.json);
    let (bundle_id, manifest, _) = crate::site::check::active(&root, &reporter)?;
    let checks = &manifest.validation.check;
    let under = Some(format!("{} {} (bundles/{bundle_id})", manifest.name, manifest.version));
    let taken = crate::validate::checks::baseline(checks, under);
    crate::site::save_baseline(&args.root, &taken)?;
    if args.json {
        super::print_json(&taken)?;
        return Ok(Exit::Ok);
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "baseline of {} {} kept in {}",
        manifest.name,
        manifest.version,
        args.root.join(crate::site::BASELINE_FILE).display()
    );
    for (check, metrics) in &taken.values {
        for (name, value) in metrics {
            let shown = value.map_or_else(|| "cannot be read".to_owned(), |v| v.to_string());
            let _ = writeln!(out, "  {check} {name}: {shown}");
        }
    }
    if taken.values.is_empty() {
        let _ = writeln!(out, "  (no check of the active bundle declares a metric)");
    }
    write!(std::io::stdout().lock(), "{}", crate::escape::value(&out))?;
    Ok(Exit::Ok)
}
