//! Site views derived from a verified staged tree, written before it is renamed into place:
//! `wheels/simple/` is a PEP 503 index (relative links with `#sha256=` fragments) that pip
//! uses offline (`--index-url file://…/current/wheels/simple`) or any static web server serves.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::path::Path;

use crate::bundle::Manifest;
use crate::sources::pypi::{normalize, parse_wheel_filename};

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn page(title: &str, links: &[(String, String)]) -> String {
    let mut html = format!(
        "<!DOCTYPE html>\n<html>\n  <head><meta name=\"pypi:repository-version\" content=\"1.0\"><title>{}</title></head>\n  <body>\n    <h1>{}</h1>\n",
        escape(title),
        escape(title)
    );
    for (href, text) in links {
        let _ = writeln!(html, "    <a href=\"{}\">{}</a><br>", escape(href), escape(text));
    }
    html.push_str("  </body>\n</html>\n");
    html
}

/// Write `wheels/simple/` for the wheels the manifest lists; returns the number of projects.
pub fn write_wheel_index(staged: &Path, manifest: &Manifest) -> io::Result<usize> {
    let mut projects: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for e in &manifest.entries {
        let Some(filename) = e.path.as_str().strip_prefix("wheels/").filter(|f| !f.contains('/')) else { continue };
        let name = parse_wheel_filename(filename).map_or_else(|| normalize(filename), |w| w.name);
        projects.entry(name).or_default().push((format!("../../{filename}#sha256={}", e.sha256), filename.to_owned()));
    }
    if projects.is_empty() {
        return Ok(0);
    }
    let simple = staged.join("wheels/simple");
    for (name, files) in &projects {
        std::fs::create_dir_all(simple.join(name))?;
        std::fs::write(simple.join(name).join("index.html"), page(&format!("Links for {name}"), files))?;
    }
    let root: Vec<(String, String)> = projects.keys().map(|n| (format!("{n}/"), n.clone())).collect();
    std::fs::write(simple.join("index.html"), page("Simple index", &root))?;
    Ok(projects.len())
}
