//! A node's page in a run's evidence (`nodes/NODE/report.html`), made on the controller from
//! the records and status the node returned once they were checked (`fleet::evidence`): the
//! node never writes HTML a reader opens. No scripts, everything escaped.

use std::fmt::Write as _;

use crate::fleet::evidence::{Checked, StatusEntry, deciding};
use crate::fleet::plan::Plan;
use crate::report::html::{STYLE, esc};

fn entry(e: Option<&StatusEntry>) -> String {
    e.map_or_else(
        || "none".to_owned(),
        |e| {
            let text = format!(
                "{} {} ({})",
                e.name.as_deref().unwrap_or("?"),
                e.version.as_deref().unwrap_or("?"),
                e.id.as_deref().unwrap_or("?")
            );
            esc(&text)
        },
    )
}

/// The page of `c`, a node of `plan`'s run.
pub fn node_page(plan: &Plan, c: &Checked) -> String {
    let mut o = String::new();
    let title = format!("{} in rollout {} — airlock", c.node, plan.run);
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n",
        esc(&title)
    );
    let verdict = deciding(&c.records).map_or("untouched".to_owned(), |(_, _, r)| super::verdict_of(r));
    let _ = writeln!(
        o,
        "<h1>{} in rollout {}</h1>\n<p><span class=\"verdict {v}\" data-verdict=\"{v}\">{}</span> its change to {} \
         ({})</p>",
        esc(c.node.as_str()),
        esc(plan.run.as_str()),
        verdict.to_uppercase(),
        esc(&plan.label),
        esc(plan.bundle.id.as_str()),
        v = esc(&verdict),
    );
    let _ = writeln!(
        o,
        "<table><tr><th>current at the run's end</th><td class=\"mono\">{}</td></tr><tr><th>previous</th>\
         <td class=\"mono\">{}</td></tr></table>",
        entry(c.status.current.as_ref()),
        entry(c.status.previous.as_ref())
    );
    records(&mut o, c);
    validations(&mut o, c);
    let _ = writeln!(
        o,
        "<p class=\"muted\">Made by airlock {} on the rollout's controller from the records and status {} returned, \
         checked as they arrived.</p>\n</body></html>",
        env!("CARGO_PKG_VERSION"),
        esc(c.node.as_str())
    );
    o
}

/// The node's records of the run, one row each.
fn records(o: &mut String, c: &Checked) {
    let _ = writeln!(
        o,
        "<h2>Its records of this run</h2>\n<table><tr><th>record</th><th>action</th><th>outcome</th><th>bundle</th>\
         <th>verdict</th><th>seconds</th><th>reason</th></tr>"
    );
    for (name, _, r) in &c.records {
        let bundle = r.bundle.as_ref().map_or_else(String::new, |b| {
            let name = b.name.as_ref().map(ToString::to_string).unwrap_or_default();
            let version = b.version.as_ref().map(ToString::to_string).unwrap_or_default();
            let id = b.id.as_ref().map(ToString::to_string).unwrap_or_default();
            format!("{name} {version} ({id})")
        });
        let _ = writeln!(
            o,
            "<tr><td class=\"mono\"><a href=\"records/{name}\">{name}</a></td><td>{}</td><td>{}</td><td class=\"mono\">{}</td>\
             <td>{}</td><td>{}</td><td>{}</td></tr>",
            r.action.as_str(),
            super::outcome_word(r.outcome()),
            esc(&bundle),
            esc(&super::verdict_of(r)),
            r.seconds.map_or_else(String::new, |s| format!("{s:.1}")),
            esc(r.reason.as_deref().unwrap_or("")),
            name = esc(name),
        );
    }
    let _ = writeln!(o, "</table>");
}

/// Each validation the records hold: its checks and their metrics.
fn validations(o: &mut String, c: &Checked) {
    for (name, _, r) in &c.records {
        let Some(e) = r.validation.as_ref().and_then(|v| v.evidence()) else { continue };
        let _ = writeln!(
            o,
            "<h2>Validation in {}</h2>\n<p>{}: {}</p>\n<table><tr><th>check</th><th>verdict</th><th>metric</th>\
             <th>current</th><th>candidate</th><th>threshold</th><th>decision</th></tr>",
            esc(name),
            crate::validate::word(e.verdict),
            esc(&e.summary)
        );
        for check in &e.checks {
            let verdict = crate::validate::word(check.verdict);
            if check.metrics.is_empty() {
                let _ = writeln!(o, "<tr><td>{}</td><td>{verdict}</td><td colspan=\"5\"></td></tr>", esc(&check.name));
            }
            for m in &check.metrics {
                let _ = writeln!(
                    o,
                    "<tr><td>{}</td><td>{verdict}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    esc(&check.name),
                    esc(&m.name),
                    m.current.map_or_else(String::new, |v| v.to_string()),
                    m.candidate.map_or_else(String::new, |v| v.to_string()),
                    esc(&m.threshold),
                    esc(&m.decision)
                );
            }
        }
        let _ = writeln!(o, "</table>");
    }
}
