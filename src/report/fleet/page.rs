//! The fleet page: the run's verdict and bundle first, the counts per tuple and state, then
//! every node as the run left it,
//! the waves inside the run, the capacity rule before each batch, this run's problems, and the
//! earlier runs behind a fold. Everything shown is escaped evidence.

use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

use super::{Capacity, Fleet, MetricMedian, Problem};
use crate::report::html::{STYLE, esc};

/// The page; `page_dir` is where it will be written, so that the node approval packs it links
/// to are found from there (relative links survive copying the evidence elsewhere).
pub fn render(f: &Fleet, page_dir: Option<&Path>) -> String {
    let mut o = String::new();
    let title = match &f.bundle {
        Some(b) => format!("{} {} — airlock rollout {}", b.name, b.version, f.run.id),
        None => format!("airlock rollout {}", f.run.id),
    };
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n",
        esc(&title)
    );
    head(&mut o, f);
    counts(&mut o, f);
    nodes(&mut o, f, page_dir);
    waves(&mut o, f);
    capacity(&mut o, f);
    let _ = writeln!(o, "<h2>Refusals, restores and exceptions in this run</h2>");
    problems(&mut o, &f.problems, "problems");
    earlier(&mut o, f);
    let _ = writeln!(
        o,
        "<p class=\"muted\">Made by airlock {} from the evidence in {}: each node's records of run {}, and its \
         status at the end of the run.</p>\n</body></html>",
        env!("CARGO_PKG_VERSION"),
        esc(&f.dir.display().to_string()),
        esc(&f.run.id)
    );
    o
}

fn head(o: &mut String, f: &Fleet) {
    let bundle = f
        .bundle
        .as_ref()
        .map_or_else(|| "no bundle named by this run's records".to_owned(), |b| format!("{} {}", b.name, b.version));
    let _ = writeln!(o, "<h1>Rollout of {}</h1>", esc(&bundle));
    let red_nodes = f.nodes.iter().filter(|n| n.verdict == "red").count();
    let _ = writeln!(
        o,
        "<p><span id=\"verdict\" class=\"verdict {v}\" data-verdict=\"{v}\">{}</span> run <code>{}</code>: {} node(s) \
         in {} tuple(s), {} red, {} problem(s){}</p>",
        f.verdict.to_uppercase(),
        esc(&f.run.id),
        f.nodes.len(),
        f.tuples.len(),
        red_nodes,
        f.problems.len(),
        if f.run.aborted { ", <strong>aborted</strong>" } else { "" },
        v = f.verdict,
    );
    if let Some(reason) = f.run.reason.as_ref().filter(|_| f.run.aborted) {
        let _ = writeln!(o, "<p class=\"bad\" id=\"stopped\">Stopped: {}</p>", esc(reason));
    }
    approval(o, f);
    let when = |t: Option<crate::clock::Timestamp>| t.map_or_else(|| "—".to_owned(), |t| t.to_string());
    let _ = writeln!(o, "<table><tbody>");
    let rows = [
        ("Bundle", esc(&bundle)),
        ("Bundle id", esc(f.bundle.as_ref().and_then(|b| b.id.as_deref()).unwrap_or("—"))),
        ("Source", format!("<code>{}</code>", esc(&f.source))),
        ("Run", format!("<code>{}</code> from {} to {}", esc(&f.run.id), when(f.run.started), when(f.run.ended))),
    ];
    for (k, v) in rows {
        let _ = writeln!(o, "<tr><th>{k}</th><td>{v}</td></tr>");
    }
    let _ = writeln!(o, "</tbody></table>");
}

/// The run's decision: awaiting an approval, the approval it expanded on, one prepared.
fn approval(o: &mut String, f: &Fleet) {
    let Some(a) = &f.approval else { return };
    let mut lines = Vec::new();
    if a.awaiting {
        lines.push(
            "<span class=\"warn\">Awaiting approval</span>: the canaries are done and the batches wait for \
                    an approval of their evidence (<code>airlock approve</code>)."
                .to_owned(),
        );
    }
    if let Some(e) = &a.expanded_on {
        let who: Vec<&str> = e.approvers.iter().map(crate::sign::KeyId::short).collect();
        lines.push(format!(
            "Expanded on the approval of run <code>{}</code> by {} approver(s) ({}), sha256 <code>{}</code>, \
             verified when the run was planned.",
            esc(&e.run),
            who.len(),
            who.join(", "),
            e.sha256
        ));
    } else if a.required && !a.awaiting {
        lines.push("<span class=\"bad\">An approval was required and none was given.</span>".to_owned());
    }
    if let Some(p) = &a.prepared {
        let keys: Vec<&str> = p.keyids.iter().map(|k| k.get(..16).unwrap_or(k)).collect();
        lines.push(format!(
            "Approval of this run's canaries: <code>{}</code> (sha256 <code>{}</code>), signatures by {} \
             (not verified here: <code>airlock verify-approval</code> checks them against the approvers role).",
            esc(&p.file),
            p.sha256,
            esc(&keys.join(", "))
        ));
    }
    let _ = writeln!(o, "<div id=\"approval\">");
    for l in lines {
        let _ = writeln!(o, "<p>{l}</p>");
    }
    let _ = writeln!(o, "</div>");
}

/// What a person reads first on a page of a thousand nodes: per tuple, how many nodes ended in
/// each verdict and in each state of the run (every node is listed below).
fn counts(o: &mut String, f: &Fleet) {
    use std::collections::{BTreeMap, BTreeSet};
    let states: BTreeSet<&str> = f.nodes.iter().map(|n| n.state.as_str()).collect();
    let mut by_tuple: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    for n in &f.nodes {
        let row = by_tuple.entry(n.tuple.as_str()).or_default();
        *row.entry(n.verdict.as_str()).or_default() += 1;
        *row.entry(n.state.as_str()).or_default() += 1;
    }
    let verdicts = ["green", "amber", "red"];
    let _ = write!(o, "<h2>Counts</h2><table id=\"counts\"><tr><th>tuple</th><th>nodes</th>");
    for v in verdicts {
        let _ = write!(o, "<th class=\"{v}\">{v}</th>");
    }
    for s in &states {
        let _ = write!(o, "<th>{}</th>", esc(s));
    }
    let _ = writeln!(o, "</tr>");
    for t in &f.tuples {
        let row = by_tuple.get(t.tuple.as_str());
        let count = |k: &str| row.and_then(|r| r.get(k)).copied().unwrap_or(0);
        let _ = write!(o, "<tr><td class=\"mono\">{}</td><td>{}</td>", esc(&t.tuple), t.nodes.len());
        for v in verdicts {
            let n = count(v);
            let class = if n > 0 { v } else { "" };
            let _ = write!(o, "<td class=\"{class}\">{n}</td>");
        }
        for s in &states {
            let _ = write!(o, "<td>{}</td>", count(s));
        }
        let _ = writeln!(o, "</tr>");
    }
    let _ = writeln!(o, "</table>");
}

fn nodes(o: &mut String, f: &Fleet, page_dir: Option<&Path>) {
    let _ = writeln!(o, "<h2>Nodes at the end of the run, by hardware tuple</h2>");
    // Each node looked up by name once, not searched for in every tuple's list.
    let by_name: std::collections::HashMap<&str, &super::NodeLine> =
        f.nodes.iter().map(|n| (n.node.as_str(), n)).collect();
    for t in &f.tuples {
        let _ = writeln!(o, "<h3 class=\"mono\">{} ({} node(s))</h3>", esc(&t.tuple), t.nodes.len());
        let _ = writeln!(
            o,
            "<table class=\"nodes\"><tr><th>node</th><th>wave</th><th>in this run</th><th>runs now</th><th>its change</th>\
             <th>put back</th><th>its page</th></tr>"
        );
        for n in t.nodes.iter().filter_map(|name| by_name.get(name.as_str())) {
            let rolled = match (n.rolled_back_s, n.restored_s) {
                (Some(s), _) => format!("rolled back ({s:.2} s)"),
                (None, Some(s)) => format!("restored by airlock ({s:.2} s)"),
                (None, None) => String::new(),
            };
            let state = match &n.reason {
                Some(r) => format!("{} <span class=\"muted\">({})</span>", esc(&n.state), esc(r)),
                None => esc(&n.state),
            };
            let pack = n.pack.as_ref().map_or_else(String::new, |p| {
                let href = link(&f.dir.join(p), page_dir);
                format!("<a href=\"{}\">report.html</a>", esc(&href))
            });
            let class = if matches!(n.verdict.as_str(), "green" | "amber" | "red") { n.verdict.as_str() } else { "" };
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{state}</td><td>{}</td><td class=\"{class}\">{}</td><td>{rolled}</td>\
                 <td>{pack}</td></tr>",
                esc(&n.node),
                esc(&n.wave),
                esc(n.version.as_deref().unwrap_or("nothing current")),
                esc(&n.verdict),
            );
        }
        let _ = writeln!(o, "</table>");
        if let Some(r) = &t.rollbacks {
            let _ = writeln!(
                o,
                "<p class=\"rollbacks\">Rollbacks in this run: median {:.2} s, worst {:.2} s over {}.</p>",
                r.median_seconds, r.worst_seconds, r.count
            );
        }
        results(o, &t.results);
    }
}

/// `target` as a link from `page_dir`: relative when both are absolute paths, else the path.
fn link(target: &Path, page_dir: Option<&Path>) -> String {
    let absolute = |p: &Path| std::path::absolute(p).ok();
    let (Some(target), Some(base)) = (absolute(target), page_dir.and_then(absolute)) else {
        return target.display().to_string();
    };
    let (t, b): (Vec<Component>, Vec<Component>) = (target.components().collect(), base.components().collect());
    let common = t.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut rel = PathBuf::new();
    for _ in common..b.len() {
        rel.push("..");
    }
    for c in &t[common..] {
        rel.push(c.as_os_str());
    }
    rel.display().to_string()
}

fn waves(o: &mut String, f: &Fleet) {
    let _ = writeln!(
        o,
        "<h2>Waves, in the order they ran</h2><table id=\"waves\"><tr><th>wave</th><th>nodes</th><th>from</th><th>to</th></tr>"
    );
    for w in &f.waves {
        let at = |t: Option<crate::clock::Timestamp>| t.map_or_else(String::new, |t| t.to_string());
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&w.name),
            esc(&w.nodes.join(", ")),
            at(w.from),
            at(w.to)
        );
    }
    let _ = writeln!(o, "</table>");
}

fn capacity(o: &mut String, f: &Fleet) {
    if f.capacity.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "<h2>Capacity before each batch</h2><table id=\"capacity\"><tr><th>before</th><th>total</th><th>in \
         change × per node</th><th>reserved</th><th>available</th><th>demand + headroom</th><th>rule</th><th>from</th></tr>"
    );
    for Capacity { before_wave, figures: c } in &f.capacity {
        let named = |n: &[String]| if n.is_empty() { String::new() } else { format!(" ({})", esc(&n.join(", "))) };
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{} × {}{}</td><td>{}{}</td><td>{}</td><td>{} + {}</td><td class=\"{}\">{}</td><td>{}</td></tr>",
            esc(before_wave),
            c.total,
            c.in_change,
            c.per_node,
            named(&c.in_change_nodes),
            c.reserved,
            named(&c.reserved_nodes),
            c.available,
            c.demand,
            c.headroom,
            if c.ok { "green" } else { "red" },
            if c.ok { "met" } else { "broken: the batch did not run" },
            esc(&c.source)
        );
    }
    let _ = writeln!(o, "</table>");
}

fn problems(o: &mut String, problems: &[Problem], id: &str) {
    if problems.is_empty() {
        let _ = writeln!(o, "<p class=\"ok\">None.</p>");
        return;
    }
    let _ = writeln!(
        o,
        "<table id=\"{id}\"><tr><th>node</th><th>at</th><th>action</th><th>outcome</th><th>reason</th></tr>"
    );
    for p in problems {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"bad\">{}</td><td>{}</td></tr>",
            esc(if p.node.is_empty() { "the run" } else { &p.node }),
            esc(&p.at),
            esc(&p.action),
            esc(&p.outcome),
            esc(&p.reason)
        );
    }
    let _ = writeln!(o, "</table>");
}

fn earlier(o: &mut String, f: &Fleet) {
    if f.earlier.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "<details id=\"earlier\"><summary>Earlier runs in this evidence directory ({}): history, not judged \
         here</summary>",
        f.earlier.len()
    );
    for r in &f.earlier {
        let started = r.started.map_or_else(|| "—".to_owned(), |t| t.to_string());
        let _ = writeln!(
            o,
            "<h3 class=\"mono\">{} (started {}): {}, {} problem(s)</h3>",
            esc(&r.id),
            started,
            r.verdict,
            r.problems.len()
        );
        problems(o, &r.problems, "earlier-problems");
    }
    let _ = writeln!(o, "</details>");
}

/// A tuple's results sheet: medians over its nodes.
fn results(o: &mut String, rows: &[MetricMedian]) {
    if rows.is_empty() {
        return;
    }
    let num = |v: Option<f64>| v.map_or_else(|| "—".to_owned(), |v| format!("{v}"));
    let _ = writeln!(
        o,
        "<table class=\"results\"><tr><th>check</th><th>metric</th><th>nodes</th><th>current (median)</th><th>candidate (median)</th><th>change</th><th>threshold</th><th>met / missed</th></tr>"
    );
    for r in rows {
        let class = if r.failed == 0 { "green" } else { "red" };
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"mono\">{}</td><td class=\"{class}\">{} / {}</td></tr>",
            esc(&r.check),
            esc(&r.metric),
            r.nodes,
            num(r.current_median),
            num(r.candidate_median),
            r.change_percent.map_or_else(|| "—".to_owned(), |p| format!("{p:+.1}%")),
            esc(&r.threshold),
            r.passed,
            r.failed
        );
    }
    let _ = writeln!(o, "</table>");
}
