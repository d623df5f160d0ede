//! `airlock status --root DIR [--json]`

use std::io::Write;

use crate::cli::StatusArgs;
use crate::failure::{Class, Exit, Result};
use crate::site::status::{Entry, status};

pub fn run(args: &StatusArgs) -> Result<Exit> {
    let s = status(&args.root)?;
    if args.json {
        match &args.run {
            Some(run) => {
                let run_records = crate::site::records::of_run(&crate::site::SiteRoot::new(&args.root), run)?;
                super::print_json(&OfRun { status: &s, run_records })?;
            }
            None => super::print_json(&s)?,
        }
        return damaged_state(&s, true);
    }
    let mut out = std::io::stdout().lock();
    let show = |e: &Option<Entry>| {
        e.as_ref().map_or_else(
            || "none".to_owned(),
            |e| {
                let at = e.installed_at.map(|t| format!(", installed {t}")).unwrap_or_default();
                match &e.damaged {
                    Some(_) => format!(
                        "damaged — run `airlock check --root {}` (bundles/{}, recorded as {} {})",
                        args.root.display(),
                        e.id,
                        e.name,
                        e.version
                    ),
                    None => format!("{} {} (bundles/{}{at})", e.name, e.version, e.id),
                }
            },
        )
    };
    writeln!(out, "root:     {}", args.root.display())?;
    writeln!(out, "current:  {}", show(&s.current))?;
    writeln!(out, "previous: {}", show(&s.previous))?;
    writeln!(out, "retained: {}", s.retained.len())?;
    mirror_and_attempt(&mut out, &s, &args.root)?;
    let rollback = match (&s.last_rollback, &s.previous) {
        (Some(r), _) => format!("to {} {} at {} in {:.2} s", r.name, r.version, r.installed_at, r.seconds),
        (None, Some(_)) => format!("none yet (rehearse one: `airlock rollback --root {}`)", args.root.display()),
        (None, None) => "none yet (a rollback needs a previous bundle: install the next release first)".to_owned(),
    };
    writeln!(out, "last rollback: {rollback}")?;
    if let Some(r) = &s.rollbacks {
        writeln!(
            out,
            "rehearsed rollback: median {:.2} s, worst {:.2} s over {} rollback(s)",
            r.median_seconds, r.worst_seconds, r.count
        )?;
    }
    if let Some(a) = &s.amber {
        writeln!(out, "amber accepted: {}", a.describe())?;
    }
    if let Some(p) = &s.pending {
        writeln!(
            out,
            "pending reboot: {} {} (bundles/{}) applied {}: {}; reboot, then `airlock validate --root {} --commit`",
            p.name,
            p.version,
            p.id,
            p.since,
            crate::escape::value(&p.reason),
            args.root.display()
        )?;
    }
    writeln!(out, "history:")?;
    for e in &s.history {
        writeln!(
            out,
            "  {}  {:<8} {} {} (bundles/{}) {:.2} s",
            e.installed_at, e.action, e.name, e.version, e.id, e.seconds
        )?;
    }
    damaged_state(&s, false)
}

/// A mirror's candidates and promotion, and the last change that did not activate.
fn mirror_and_attempt(out: &mut impl Write, s: &crate::site::Status, root: &std::path::Path) -> Result<()> {
    if !s.candidates.is_empty() {
        let c: Vec<String> = s.candidates.iter().map(|e| format!("{} {} ({})", e.name, e.version, e.id)).collect();
        writeln!(out, "candidates: {} (`airlock promote --root {} VERSION|ID`)", c.join(", "), root.display())?;
    }
    if let Some(p) = &s.promotion {
        let on = match (&p.approved_on_run, &p.without_approval) {
            (Some(run), _) => format!("approved on run {}", crate::escape::value(run)),
            (None, Some(reason)) => format!("WITHOUT APPROVAL: {}", crate::escape::value(reason)),
            (None, None) => "no approval named".to_owned(),
        };
        writeln!(out, "promotion: {} of {} ({}), expires {}, {on}", p.number, p.version, p.id, p.expires)?;
    }
    if let Some(a) = &s.last_attempt {
        writeln!(
            out,
            "last attempt: {} {} {} at {}: {} (record {})",
            a.action,
            crate::escape::value(&a.bundle),
            a.outcome,
            a.at,
            crate::escape::value(a.reason.as_deref().unwrap_or("no reason recorded")),
            a.record
        )?;
    }
    Ok(())
}

/// After printing what could be read: a damaged `state.json` is an error (exit 1).
fn damaged_state(s: &crate::site::Status, json: bool) -> Result<Exit> {
    match &s.state_damaged {
        Some(why) => super::after_document(
            json,
            crate::failure::Failure::new(
                Class::Runtime,
                format!("{why}; the rest is shown as read from the links and trees"),
            ),
        ),
        None => Ok(Exit::Ok),
    }
}

/// `status --run ID --json`: the root's status, and the text of every record that run wrote
/// by file name (what the controller checks a node's evidence from).
#[derive(serde::Serialize)]
struct OfRun<'a> {
    #[serde(flatten)]
    status: &'a crate::site::status::Status,
    #[serde(serialize_with = "by_name")]
    run_records: Vec<(String, String)>,
}

/// The records as one object, in the order they were read.
fn by_name<S: serde::Serializer>(records: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(records.iter().map(|(name, text)| (name, text)))
}
