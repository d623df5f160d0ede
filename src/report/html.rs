//! The report as one self-contained HTML page: inline CSS, no scripts, no fonts or images from
//! anywhere, readable offline and printable. Written by hand (a template engine would add a
//! dependency for a page this size); every value from a bundle or record is escaped.

use std::fmt::Write as _;

use super::{RecordLine, Report};

/// Text for the page: HTML's specials encoded, and control characters other than the line
/// breaks and tabs a `<pre>` lays out shown as visible escapes (`escape::lines`): a bundle's or
/// a node's words reach a terminal too when the page is read with `cat` or `grep`.
pub(super) fn esc(s: &str) -> String {
    html_escape::encode_text(&crate::escape::lines(s)).into_owned()
}

fn attr(s: &str) -> String {
    html_escape::encode_double_quoted_attribute(&crate::escape::value(s)).into_owned()
}

pub(super) const STYLE: &str = "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:70em;color:#1f2328;padding:0 1em}\
h1{font-size:1.6em;margin:.2em 0}h2{font-size:1.2em;border-bottom:1px solid #d0d7de;padding-bottom:.2em;margin-top:1.6em}\
table{border-collapse:collapse;width:100%;margin:.5em 0}th,td{border:1px solid #d0d7de;padding:.25em .5em;text-align:left;vertical-align:top}\
th{background:#f6f8fa}code,pre,.mono{word-break:break-all;font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.9em}\
pre{background:#f6f8fa;padding:.5em;overflow-x:auto;white-space:pre-wrap;word-break:break-all}\
.verdict{display:inline-block;padding:.3em .9em;border-radius:.3em;color:#fff;font-weight:700;letter-spacing:.05em}\
.green{background:#1a7f37}.amber{background:#9a6700}.red{background:#cf222e}.unknown{background:#6e7781}\
td.green,td.amber,td.red{color:#fff;font-weight:600}.warn{color:#9a6700;font-weight:600}.bad{color:#cf222e;font-weight:600}\
.ok{color:#1a7f37;font-weight:600}.muted{color:#656d76}\
.banner{border:2px solid #cf222e;background:#ffebe9;padding:.6em;margin:.5em 0;font-weight:600}@media print{body{margin:0;max-width:none}h2{break-after:avoid}}";

/// The page.
pub fn render(r: &Report) -> String {
    let mut o = String::new();
    let b = &r.bundle;
    let title = format!("{} {} — airlock approval pack", b.name, b.version);
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n",
        esc(&title)
    );
    // A bundle or site that did not verify leads with that, and shows no verdict colour.
    if let Some(reason) = not_verified(r) {
        let _ = writeln!(
            o,
            "<div id=\"not-verified\" class=\"banner\"><span class=\"verdict red\">NOT VERIFIED</span> {}</div>",
            esc(&reason)
        );
    }
    let _ = writeln!(o, "<h1>{} {}</h1>", esc(&b.name), esc(&b.version));
    if let Some(d) = &b.description {
        let _ = writeln!(o, "<p>{}</p>", esc(d));
    }
    header(&mut o, r);
    signatures(&mut o, r);
    if let Some(site) = &r.site {
        validation(&mut o, site);
    }
    diff(&mut o, r);
    contents(&mut o, r);
    firmware(&mut o, r);
    matrix(&mut o, r);
    impact(&mut o, r);
    if let Some(site) = &r.site {
        records(&mut o, site);
    }
    sbom(&mut o, r);
    let _ = writeln!(
        o,
        "<p class=\"muted\">Made by airlock {} from {}; every value comes from the bundle verified above \
         {}or the site's records.</p>\n</body></html>",
        env!("CARGO_PKG_VERSION"),
        esc(&b.source),
        if b.verified { "" } else { "(NOT verified: read as it claims) " }
    );
    o
}

/// Why the page must not be read as verified: the bundle's signatures, threshold, roles or
/// members did not verify here, or the site's tree is not what verified; `None` when all did.
pub fn not_verified(r: &Report) -> Option<String> {
    let b = &r.bundle;
    let check = r.site.as_ref().map(|s| &s.check).filter(|c| !c.ok);
    if b.verified && check.is_none() {
        return None;
    }
    if let Some(policy) = check.and_then(|c| c.policy.as_ref()) {
        return Some(policy.clone());
    }
    let mut reasons: Vec<String> = if b.verified { Vec::new() } else { b.problems.clone() };
    if let Some(c) = check {
        reasons.extend(c.damage.iter().map(|d| format!("{}: {}", d.path, d.problem)));
    }
    reasons.dedup();
    Some(reasons.join("; "))
}

fn verdict_of(r: &Report) -> (&str, String) {
    if not_verified(r).is_some() {
        return ("", String::new());
    }
    match r.site.as_ref().and_then(|s| s.validation.as_ref()) {
        Some(v) => (crate::validate::word(v.evidence.verdict), v.evidence.summary.clone()),
        None if r.site.is_some() => ("unknown", "no validation evidence on this site".to_owned()),
        None => ("", String::new()),
    }
}

fn header(o: &mut String, r: &Report) {
    let b = &r.bundle;
    let (class, summary) = verdict_of(r);
    if !class.is_empty() {
        let _ = writeln!(
            o,
            "<p><span class=\"verdict {class}\" id=\"verdict\" data-verdict=\"{class}\">{}</span> {}</p>",
            class.to_uppercase(),
            esc(&summary)
        );
        if let Some(a) = r.site.as_ref().and_then(|s| s.accepted_amber.as_ref()) {
            let class = if a.expired { "bad" } else { "warn" };
            let flag = if a.expired { " — EXPIRED: requalify or accept again" } else { "" };
            let _ = writeln!(
                o,
                "<p class=\"{class}\" id=\"amber\">Amber accepted at install: {} ({}){flag}</p>",
                esc(&a.acceptance.reason),
                esc(&a.acceptance.terms())
            );
        }
    }
    let verified = if b.verified && b.held.is_some() {
        "<span class=\"ok\" id=\"verified\">verified</span>: signatures, threshold and every member this node keeps"
            .to_owned()
    } else if b.verified {
        "<span class=\"ok\" id=\"verified\">verified</span>: signatures, threshold and every member".to_owned()
    } else {
        format!("<span class=\"bad\" id=\"verified\">NOT verified</span>: {}", esc(&b.problems.join("; ")))
    };
    let _ = writeln!(o, "<table><tbody>");
    let rows = [
        ("Bundle id", format!("<code>{}</code> (manifest sha256 <code>{}</code>)", esc(&b.id), b.manifest_sha256)),
        ("Verification", verified),
        ("Created", esc(&b.created)),
        ("Built by", esc(&b.tool)),
        ("Read from", format!("<code>{}</code>", esc(&b.source))),
    ];
    for (k, v) in rows {
        let _ = writeln!(o, "<tr><th>{k}</th><td>{v}</td></tr>");
    }
    if let Some(base) = &b.base {
        let _ = writeln!(o, "<tr><th>Delta against</th><td>{}</td></tr>", esc(base));
    }
    if let Some(h) = &b.held {
        let _ = writeln!(
            o,
            "<tr><th>Held here</th><td id=\"held\">the package part of the bundle: {} member(s), {} bytes; {} member(s), {} bytes \
             (images, wheels, models, files) stayed on the mirror, which keeps and verifies the whole bundle</td></tr>",
            h.entries, h.bytes, h.on_mirror_entries, h.on_mirror_bytes
        );
    }
    if let Some(site) = &r.site {
        let _ = writeln!(
            o,
            "<tr><th>Site</th><td><code>{}</code>: current {}, previous {}</td></tr>",
            esc(&site.root.display().to_string()),
            esc(site.current.as_ref().map_or("none", crate::site::BundleId::as_str)),
            esc(site.previous.as_ref().map_or("none", crate::site::BundleId::as_str))
        );
        let c = &site.check;
        let found = if c.ok {
            format!("as verified ({} files compared)", c.files_checked)
        } else if let Some(policy) = &c.policy {
            format!("<strong>NOT TRUSTED NOW</strong>: {}", esc(policy))
        } else {
            let first = c.damage.first().map(|d| format!(": <code>{}</code> {}", esc(&d.path), esc(&d.problem)));
            format!("<strong>DAMAGED</strong>, {} finding(s){}", c.damage.len(), first.unwrap_or_default())
        };
        let _ = writeln!(o, "<tr><th>On disk</th><td id=\"check\">{found}. {}</td></tr>", esc(&c.how));
    }
    let _ = writeln!(o, "</tbody></table>");
}

fn signatures(o: &mut String, r: &Report) {
    let s = &r.signatures;
    let _ = writeln!(o, "<h2>Signatures</h2>");
    let root = s.trust_root.map(|t| {
        format!(" (the site trust root: root version {}, targets version {})", t.root_version, t.targets_version)
    });
    let met = if s.threshold == 0 {
        "<span class=\"bad\">not checked</span>".to_owned()
    } else {
        let class = if s.met { "ok" } else { "bad" };
        format!(
            "<span class=\"{class}\">{}; required: {}</span>{}",
            s.signers.len(),
            esc(&s.required),
            root.unwrap_or_default()
        )
    };
    let _ = writeln!(o, "<p id=\"signers\">Distinct trusted signers: {met}.</p>");
    let _ = writeln!(
        o,
        "<table id=\"signatures\"><thead><tr><th>Signature</th><th>Key id</th><th>Role</th><th>Status</th></tr></thead><tbody>"
    );
    for c in &s.checked {
        let _ = writeln!(
            o,
            "<tr><td class=\"mono\">{}</td><td class=\"mono key\">{}</td><td>{}</td><td>{}</td></tr>",
            esc(&c.source),
            esc(c.key_id.as_deref().unwrap_or("?")),
            esc(&c.roles.join(", ")),
            esc(&c.status)
        );
    }
    let _ = writeln!(o, "</tbody></table>");
    let provenance = if r.bundle.held.is_some() {
        // A node fed from a mirror keeps no provenance: the mirror's pack shows it verified.
        "kept on the mirror (this node holds the package part only; the mirror's approval pack verifies it)".to_owned()
    } else if s.provenance.is_empty() {
        "<span class=\"bad\">not verified</span>".to_owned()
    } else {
        format!("signed by <span class=\"mono\">{}</span>", esc(&s.provenance.join(", ")))
    };
    let _ = writeln!(o, "<p>SLSA provenance: {provenance}.</p>");
}

/// The results sheet: a row per metric, the current stack's value beside the candidate's, the
/// change, the threshold declared before the run, and the decision.
fn results_sheet(o: &mut String, checks: &[crate::validate::checks::CheckResult]) {
    if checks.iter().all(|c| c.metrics.is_empty()) {
        return;
    }
    let _ = writeln!(
        o,
        "<h3>Results sheet</h3><table id=\"results\"><thead><tr><th>Check</th><th>Metric</th><th>Current</th><th>Candidate</th><th>Change</th><th>Threshold</th><th>Decision</th></tr></thead><tbody>"
    );
    let num = |v: Option<f64>| v.map_or_else(|| "—".to_owned(), |v| format!("{v}"));
    for c in checks {
        for m in &c.metrics {
            let class = match m.decision.as_str() {
                "pass" => "green",
                "no-baseline" => "amber",
                _ => "red",
            };
            let change = m.change_percent.map_or_else(|| "—".to_owned(), |p| format!("{p:+.1}%"));
            let better = match m.better {
                crate::spec::Better::Lower => "lower is better",
                crate::spec::Better::Higher => "higher is better",
            };
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{} <span class=\"muted\">({better})</span></td><td>{}</td><td>{}</td><td>{change}</td><td class=\"mono\">{}</td><td class=\"{class}\">{}: {}</td></tr>",
                esc(&c.name),
                esc(&m.name),
                num(m.current),
                num(m.candidate),
                esc(&m.threshold),
                esc(&m.decision),
                esc(&m.reason)
            );
        }
    }
    let _ = writeln!(o, "</tbody></table>");
}

fn validation(o: &mut String, site: &super::SiteFacts) {
    let _ = writeln!(o, "<h2>Validation on this site</h2>");
    let Some(v) = &site.validation else {
        let _ = writeln!(o, "<p class=\"warn\">No install or validate record holds validation evidence.</p>");
        return;
    };
    let _ = writeln!(o, "<p>From record <code>{}</code>.</p>", esc(&v.record));
    let e = &v.evidence;
    let _ = writeln!(o, "<p id=\"detected\">Detected: {}</p>", esc(&grouped_gpus(&e.detected)));
    results_sheet(o, &e.checks);
    if !e.checks.is_empty() {
        let _ = writeln!(
            o,
            "<h3>Checks</h3><table id=\"checks\"><thead><tr><th>Check</th><th>Verdict</th><th>Exit</th><th>Seconds</th><th>Summary</th></tr></thead><tbody>"
        );
        for c in &e.checks {
            let cv = crate::validate::word(c.verdict);
            let exit = c.exit_code.map_or_else(|| "none".to_owned(), |x| x.to_string());
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td class=\"{cv}\">{cv}</td><td>{exit}</td><td>{:.1}</td><td>{}</td></tr>",
                esc(&c.name),
                c.duration_s,
                esc(&c.summary)
            );
            // The end of the output: where a tool says how it finished.
            let excerpt: String = {
                let chars: Vec<char> = c.output.chars().collect();
                chars[chars.len().saturating_sub(2000)..].iter().collect()
            };
            if !excerpt.is_empty() {
                let _ = writeln!(o, "<tr><td colspan=\"5\"><pre>{}</pre></td></tr>", esc(&excerpt));
            }
        }
        let _ = writeln!(o, "</tbody></table>");
    }
    // GPUs that gave one row the same result, field for field, share one table.
    let mut groups: Vec<(Vec<&str>, &crate::validate::matrix::RowResult)> = Vec::new();
    for row in &e.rows {
        match groups.iter_mut().find(|(_, g)| same_result(g, row)) {
            Some((detected, _)) => detected.push(&row.detected),
            None => groups.push((vec![&row.detected], row)),
        }
    }
    for (detected, row) in &groups {
        let verdict = crate::validate::word(row.verdict);
        let _ = writeln!(
            o,
            "<h3>Matrix row {} ({}) against {}: <span class=\"verdict {verdict}\">{}</span></h3>",
            row.target,
            esc(&row.gpu),
            esc(&detected.join(", ")),
            verdict.to_uppercase()
        );
        let _ = writeln!(
            o,
            "<table class=\"row\"><thead><tr><th>Field</th><th>Expected</th><th>Actual</th><th>Verdict</th><th>Reason</th></tr></thead><tbody>"
        );
        for f in &row.fields {
            let fv = crate::validate::word(f.verdict);
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td class=\"mono\">{}</td><td class=\"mono\">{}</td><td class=\"{fv}\">{fv}</td><td class=\"reason\">{}</td></tr>",
                esc(&f.field),
                esc(&f.expected),
                esc(&f.actual),
                esc(&f.reason)
            );
        }
        let _ = writeln!(o, "</tbody></table>");
    }
    let _ = writeln!(
        o,
        "<h3>Current-state record (probe)</h3><details><summary>host, GPUs, firmware, tools</summary><pre id=\"probe\">{}</pre></details>",
        esc(&serde_json::to_string_pretty(&e.probe).unwrap_or_default())
    );
}

/// Two rows that gave the same result, field for field (the same row of the matrix, against
/// two GPUs alike).
fn same_result(a: &crate::validate::matrix::RowResult, b: &crate::validate::matrix::RowResult) -> bool {
    a.target == b.target && a.gpu == b.gpu && a.verdict == b.verdict && a.fields == b.fields
}

fn diff(o: &mut String, r: &Report) {
    let Some(d) = &r.diff else { return };
    let verified = if d.base_verified { "verified" } else { "NOT verified" };
    let _ = writeln!(o, "<h2>Changes since {} ({verified})</h2>", esc(&d.base));
    let _ = writeln!(
        o,
        "<p>{} added, {} removed, {} changed.</p>",
        d.diff.added.len(),
        d.diff.removed.len(),
        d.diff.changed.len()
    );
    let _ = writeln!(
        o,
        "<table id=\"diff\"><thead><tr><th></th><th>Kind</th><th>Name</th><th>From</th><th>To</th></tr></thead><tbody>"
    );
    for i in &d.diff.added {
        let _ = writeln!(
            o,
            "<tr class=\"added\"><td>+</td><td>{}</td><td>{}</td><td></td><td class=\"mono\">{}</td></tr>",
            esc(&i.kind),
            esc(&i.name),
            esc(&i.version)
        );
    }
    for i in &d.diff.removed {
        let _ = writeln!(
            o,
            "<tr class=\"removed\"><td>−</td><td>{}</td><td>{}</td><td class=\"mono\">{}</td><td></td></tr>",
            esc(&i.kind),
            esc(&i.name),
            esc(&i.version)
        );
    }
    for c in &d.diff.changed {
        let _ = writeln!(
            o,
            "<tr class=\"changed\"><td>~</td><td>{}</td><td>{}</td><td class=\"mono\">{}</td><td class=\"mono\">{}</td></tr>",
            esc(&c.kind),
            esc(&c.name),
            esc(&c.from),
            esc(&c.to)
        );
    }
    let _ = writeln!(o, "</tbody></table>");
}

fn contents(o: &mut String, r: &Report) {
    let _ = writeln!(
        o,
        "<h2>What the bundle carries</h2><table><thead><tr><th>Area</th><th>Entries</th><th>Bytes</th></tr></thead><tbody>"
    );
    for k in &r.contents {
        let _ = writeln!(o, "<tr><td>{}</td><td>{}</td><td>{}</td></tr>", esc(&k.kind), k.entries, k.bytes);
    }
    let _ = writeln!(
        o,
        "</tbody></table><table id=\"artifacts\"><thead><tr><th>Kind</th><th>Name</th><th>Version or digest</th><th>Upstream signature</th></tr></thead><tbody>"
    );
    for a in &r.artifacts {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td class=\"mono\">{}</td><td>{}</td></tr>",
            esc(&a.kind),
            esc(&a.name),
            esc(&a.version),
            esc(a.upstream.as_deref().unwrap_or("—"))
        );
    }
    let _ = writeln!(o, "</tbody></table>");
}

fn firmware(o: &mut String, r: &Report) {
    if r.firmware.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "<h2>Firmware</h2><table id=\"firmware\"><thead><tr><th>File</th><th>Floor</th><th>Notes</th><th>sha256</th></tr></thead><tbody>"
    );
    for f in &r.firmware {
        let notes: Vec<String> = f.notes.iter().map(|(k, v)| format!("{}: {}", esc(k), esc(v))).collect();
        let _ = writeln!(
            o,
            "<tr><td>{} ({} bytes)</td><td>{}</td><td>{}</td><td class=\"mono\">{}</td></tr>",
            esc(&f.name),
            f.size,
            esc(f.floor.as_deref().unwrap_or("—")),
            notes.join("<br>"),
            f.sha256
        );
    }
    let _ = writeln!(o, "</tbody></table>");
}

/// A matrix field as the site's validation rows name and write it: lists as `a | b`, tables
/// as one row per key (`firmware.PLDM_BUNDLE`, `partition.compute`), so the bundle's claim and
/// the site's evidence read alike.
fn claim_rows(key: &str, value: &serde_json::Value) -> Vec<(String, String)> {
    match value {
        serde_json::Value::String(s) => vec![(key.to_owned(), s.clone())],
        serde_json::Value::Array(items) => {
            let words: Vec<String> = items.iter().flat_map(|i| claim_rows(key, i)).map(|(_, v)| v).collect();
            vec![(key.to_owned(), words.join(" | "))]
        }
        serde_json::Value::Object(map) => map.iter().flat_map(|(k, v)| claim_rows(&format!("{key}.{k}"), v)).collect(),
        other => vec![(key.to_owned(), other.to_string())],
    }
}

fn matrix(o: &mut String, r: &Report) {
    let targets = &r.matrix.target;
    let _ = writeln!(o, "<h2>Support matrix the bundle claims</h2>");
    if targets.is_empty() {
        let _ = writeln!(o, "<p class=\"warn\">The bundle names no <code>[[validation.target]]</code>.</p>");
    }
    for (i, t) in targets.iter().enumerate() {
        let _ = writeln!(o, "<table class=\"target\"><thead><tr><th colspan=\"2\">Row {i}</th></tr></thead><tbody>");
        let _ = writeln!(o, "<tr><th>provenance</th><td>{}</td></tr>", provenance(t));
        // Every field the row sets, as the site's evidence names it (a new field shows without
        // a change here).
        let fields = serde_json::to_value(t).unwrap_or_default();
        for (k, v) in fields.as_object().into_iter().flatten().filter(|(k, _)| !PROVENANCE.contains(&k.as_str())) {
            for (field, value) in claim_rows(k, v) {
                let _ = writeln!(o, "<tr><th>{}</th><td class=\"mono\">{}</td></tr>", esc(&field), esc(&value));
            }
        }
        let _ = writeln!(o, "</tbody></table>");
    }
    for c in &r.matrix.check {
        let _ = writeln!(o, "<p>Check <b>{}</b>: <code>{}</code></p>", esc(&c.name), esc(&c.run.join(" ")));
    }
}

/// The fields of a matrix row that say where it comes from, not what it requires.
const PROVENANCE: [&str; 4] = ["source", "source_date", "reviewed_by", "status"];

/// `status, from SOURCE (read DATE), reviewed by NAME`, or a warning that the row names none.
fn provenance(t: &crate::spec::Target) -> String {
    let field = |v: &Option<String>| v.as_deref().filter(|v| !v.is_empty()).map(str::to_owned);
    let (status, source, date, reviewer) =
        (field(&t.status), field(&t.source), field(&t.source_date), field(&t.reviewed_by));
    if [&status, &source, &date, &reviewer].iter().all(|f| f.is_none()) {
        return "<span class=\"warn\">the row names no source, date, reviewer or status</span>".to_owned();
    }
    let mut parts = Vec::new();
    if let Some(s) = status {
        parts.push(format!("<b>{}</b>", esc(&s)));
    }
    // The page is self-contained (it travels into the approval meeting): the URL as text.
    if let Some(src) = source {
        parts.push(format!("from <span class=\"mono\">{}</span>", esc(&src)));
    }
    if let Some(d) = date {
        parts.push(format!("read {}", esc(&d)));
    }
    match reviewer {
        Some(who) => parts.push(format!("reviewed by {}", esc(&who))),
        None => parts.push("<span class=\"warn\">not reviewed</span>".to_owned()),
    }
    parts.join(", ")
}

/// The impact register: each changed behaviour beside the verdict of the check that detects it
/// (on a site, from the latest validation; for a bundle, not run yet).
fn impact(o: &mut String, r: &Report) {
    let entries = &r.matrix.impact;
    if entries.is_empty() {
        return;
    }
    let checks = r.site.as_ref().and_then(|s| s.validation.as_ref()).map(|v| &v.evidence.checks);
    let _ = writeln!(o, "<h2>Impact register</h2>");
    let _ = writeln!(
        o,
        "<table class=\"impact\"><thead><tr><th>component</th><th>old behaviour</th><th>new behaviour</th><th>detection test</th><th>verdict</th><th>mitigation</th><th>owner</th><th>decision</th><th>expires</th></tr></thead><tbody>"
    );
    for e in entries {
        let test = e.test.as_str();
        let verdict = match checks {
            None => "<td class=\"muted\">not run here</td>".to_owned(),
            Some(list) => match list.iter().find(|c| c.name == test) {
                Some(c) => {
                    let word = crate::validate::word(c.verdict);
                    format!("<td class=\"{word}\">{word}: {}</td>", esc(&c.summary))
                }
                None => "<td class=\"warn\">no result for this check</td>".to_owned(),
            },
        };
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"mono\">{}</td>{verdict}<td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&e.component),
            esc(&e.old),
            esc(&e.new),
            esc(test),
            esc(e.mitigation.as_deref().unwrap_or("")),
            esc(&e.owner),
            esc(&e.decision),
            esc(e.expires.as_deref().unwrap_or(""))
        );
    }
    let _ = writeln!(o, "</tbody></table>");
}

fn record_row(o: &mut String, l: &RecordLine) {
    let phases = l.phases.0.iter().map(|(k, v)| format!("{k} {v:.2} s")).collect::<Vec<_>>().join(", ");
    let seconds = l.seconds.map_or_else(String::new, |s| format!("{s:.2}"));
    let action = match &l.reason {
        Some(reason) => format!("{} <span class=\"bad\">{}</span>: {}", esc(&l.action), esc(&l.outcome), esc(reason)),
        None => esc(&l.action),
    };
    let _ = writeln!(
        o,
        "<tr><td>{action}</td><td>{}</td><td>{}</td><td>{seconds}</td><td>{}</td><td class=\"mono\">{}</td></tr>",
        esc(&l.at),
        esc(&l.bundle),
        esc(&phases),
        attr(&l.file)
    );
}

/// Each promotion or apply from a mirror and the signed decision it rested on: approved by
/// whom on which run (the approval's sha256), the exception in red, the unsigned in amber.
fn decisions(o: &mut String, site: &super::SiteFacts) {
    if site.decisions.is_empty() {
        return;
    }
    let _ = writeln!(o, "<h2>Decisions</h2><ul id=\"decisions\">");
    for d in &site.decisions {
        let u = &d.decision;
        let promotion = u.promotion.map(|n| format!(", signed promotion {n}")).unwrap_or_default();
        let what = if let Some(reason) = &u.without_approval {
            format!("<span class=\"verdict red\">WITHOUT APPROVAL</span> {}{promotion}", esc(reason))
        } else if let Some(sha) = u.approval {
            let who: Vec<&str> = u.approvers.iter().map(crate::sign::KeyId::short).collect();
            format!(
                "approved on run {} by {} approver(s) ({}), approval sha256 <code>{sha}</code>{promotion}",
                esc(u.run.as_deref().unwrap_or("?")),
                who.len(),
                who.join(", ")
            )
        } else if let Some(n) = u.promotion {
            format!("signed promotion {n}")
        } else {
            format!("<span class=\"warn\">unsigned</span>: {}", esc(u.unsigned.as_deref().unwrap_or("")))
        };
        let replaced =
            d.replaced_by.as_ref().map(|r| format!("; <b>later replaced</b> by {}", esc(r))).unwrap_or_default();
        let _ = writeln!(
            o,
            "<li>{} {} at {}: {what}{replaced} ({})</li>",
            esc(&d.action),
            esc(&d.bundle),
            esc(&d.at),
            esc(&d.record)
        );
    }
    let _ = writeln!(o, "</ul>");
}

fn records(o: &mut String, site: &super::SiteFacts) {
    decisions(o, site);
    if let Some(b) = &site.baseline {
        let kept = if b.retained {
            "still retained: what it pins can be put back"
        } else {
            "no longer retained (pruned): a restore below the releases kept is not possible"
        };
        let _ = writeln!(
            o,
            "<h2>Baseline</h2><p id=\"baseline\">The freeze of the guide's first step: {} {} (what this node ran \
             before airlock changed it, frozen with <code>airlock freeze</code>) adopted {} without a package \
             change ({}); {kept}.</p>",
            esc(&b.name),
            esc(&b.version),
            esc(&b.at),
            esc(&b.record)
        );
    }
    if let Some(a) = &site.attempt {
        let _ = writeln!(
            o,
            "<h2>Last attempt</h2><p id=\"attempt\" class=\"warn\">{} of {} {} at {}: {} ({}). This node runs its \
             current bundle again; the verdict above is that bundle's, on the stack as it is now.</p>",
            esc(&a.action),
            esc(&a.bundle),
            esc(&a.outcome),
            esc(&a.at),
            esc(a.reason.as_deref().unwrap_or("no reason recorded")),
            esc(&a.file)
        );
    }
    let _ = writeln!(o, "<h2>Rollback</h2>");
    match &site.rollback {
        Some(l) => {
            let _ = writeln!(
                o,
                "<p id=\"rollback\">Rehearsed: the last rollback took <b>{:.2} s</b> ({}, to {}).</p>",
                l.seconds.unwrap_or(0.0),
                esc(&l.at),
                esc(&l.bundle)
            );
            if let Some(r) = &site.rollbacks {
                let _ = writeln!(
                    o,
                    "<p id=\"rollbacks\">Over {} rollback(s): median <b>{:.2} s</b>, worst <b>{:.2} s</b>.</p>",
                    r.count, r.median_seconds, r.worst_seconds
                );
            }
        }
        None => {
            let _ = writeln!(o, "<p id=\"rollback\" class=\"warn\">No rollback has been rehearsed on this site.</p>");
        }
    }
    let _ = writeln!(
        o,
        "<h2>Records</h2><table id=\"records\"><thead><tr><th>Action</th><th>At</th><th>Bundle</th><th>Seconds</th><th>Phases</th><th>Record</th></tr></thead><tbody>"
    );
    for l in &site.records {
        record_row(o, l);
    }
    let _ = writeln!(o, "</tbody></table>");
}

fn sbom(o: &mut String, r: &Report) {
    let _ = writeln!(o, "<h2>SBOM</h2>");
    let Some(s) = &r.sbom else {
        let _ = writeln!(o, "<p class=\"warn\">The bundle has no SBOM.</p>");
        return;
    };
    let types: Vec<String> = s.by_type.iter().map(|(k, v)| format!("{v} {}", esc(k))).collect();
    let _ = writeln!(
        o,
        "<p>CycloneDX {}, sha256 <code>{}</code>: {} components ({}), {} with a purl. \
         <code>airlock sbom BUNDLE</code> writes it for a scanner.</p>",
        esc(&s.spec_version),
        s.sha256,
        s.components,
        types.join(", "),
        s.with_purl
    );
}

/// Identical GPUs once, with their count and indexes: `8 × AMD Instinct MI300X (gfx942) (amd
/// 0–7)` for `amd 0 AMD Instinct MI300X (gfx942)` … `amd 7 …`, in the order first seen.
fn grouped_gpus(detected: &[String]) -> String {
    let mut groups: Vec<(String, String, Vec<u64>)> = Vec::new();
    for d in detected {
        let mut parts = d.splitn(3, ' ');
        let (vendor, index, model) = (parts.next(), parts.next().and_then(|i| i.parse::<u64>().ok()), parts.next());
        let (Some(vendor), Some(index), Some(model)) = (vendor, index, model) else {
            groups.push((d.clone(), String::new(), Vec::new()));
            continue;
        };
        match groups.iter_mut().find(|(m, v, _)| m == model && v == vendor) {
            Some((_, _, indexes)) => indexes.push(index),
            None => groups.push((model.to_owned(), vendor.to_owned(), vec![index])),
        }
    }
    let spans = |indexes: &[u64]| {
        let mut out: Vec<String> = Vec::new();
        let mut i = 0;
        while i < indexes.len() {
            let mut j = i;
            while j + 1 < indexes.len() && indexes[j + 1] == indexes[j] + 1 {
                j += 1;
            }
            out.push(if i == j { indexes[i].to_string() } else { format!("{}–{}", indexes[i], indexes[j]) });
            i = j + 1;
        }
        out.join(", ")
    };
    groups
        .iter()
        .map(|(model, vendor, indexes)| match indexes.len() {
            0 => model.clone(),
            n => format!("{n} × {model} ({vendor} {})", spans(indexes)),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn identical_gpus_are_shown_once_with_their_count() {
        let detected: Vec<String> = (0..8)
            .map(|i| format!("amd {i} AMD Instinct MI300X (gfx942)"))
            .chain(["nvidia 0 NVIDIA H200 (sm_90)".to_owned(), "nvidia 2 NVIDIA H200 (sm_90)".to_owned()])
            .collect();
        assert_eq!(
            super::grouped_gpus(&detected),
            "8 × AMD Instinct MI300X (gfx942) (amd 0–7); 2 × NVIDIA H200 (sm_90) (nvidia 0, 2)"
        );
        assert_eq!(super::grouped_gpus(&["odd".to_owned()]), "odd");
    }
}
