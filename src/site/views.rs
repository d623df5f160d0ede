//! Site views derived from a verified staged tree, written before it is renamed into place:
//! `wheels/simple/` is a PEP 503 index (relative links with `#sha256=` fragments) that pip
//! uses offline (`--index-url file://…/current/wheels/simple`) or any static web server serves;
//! `models/models--ORG--NAME/` is the Hugging Face cache layout (`blobs/SHA256` hard links to the
//! staged files, `snapshots/COMMIT/PATH` links to the blobs, `refs/REVISION` naming the commit),
//! read by `huggingface_hub` with `HF_HUB_OFFLINE=1 HF_HUB_CACHE=…/current/models`;
//! `debs/` becomes a flat apt repository (`Packages`, `Packages.gz`, `Release`, and with a site
//! signing key `InRelease`) for `deb [signed-by=/etc/apt/keyrings/site.asc] file:/…/current/debs ./`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::path::Path;

use crate::bundle::Manifest;
use crate::bundle::manifest::Artifact;
use crate::wheel::{WheelName, normalize};

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
        let name = WheelName::parse(filename).map_or_else(|| normalize(filename), |w| w.name);
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

/// Write the Hugging Face cache view for every model the manifest lists.
pub fn write_hf_cache(staged: &Path, manifest: &Manifest) -> io::Result<usize> {
    let mut count = 0;
    for a in &manifest.artifacts {
        let Artifact::Model(m) = a else { continue };
        // Every name below comes from a checked `MemberPath` (`Manifest::check` holds the file
        // paths to the member paths): nothing here can leave `staged/models`.
        let repo_dir = staged.join("models").join(format!("models--{}", m.repo.as_str().replace('/', "--")));
        let blobs = repo_dir.join("blobs");
        std::fs::create_dir_all(&blobs)?;
        for f in &m.files {
            let blob = blobs.join(f.sha256.to_string());
            if !blob.exists() {
                std::fs::hard_link(f.member.under(staged), &blob)?;
            }
            let pointer = f.path.under(&repo_dir.join("snapshots").join(m.commit.as_str()));
            if let Some(parent) = pointer.parent() {
                std::fs::create_dir_all(parent)?;
            }
            // snapshots/COMMIT/a/b.json -> ../../../blobs/SHA: up one level per path component.
            let up = "../".repeat(f.path.as_str().split('/').count() + 1);
            std::os::unix::fs::symlink(format!("{up}blobs/{}", f.sha256), &pointer)?;
        }
        // A branch or tag resolves through refs/; a commit revision needs no ref.
        if m.revision != m.commit {
            let reference = m.revision.under(&repo_dir.join("refs"));
            if let Some(parent) = reference.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(reference, m.commit.as_str())?;
        }
        count += 1;
    }
    Ok(count)
}

/// The views a bundle gets, in words (`pip index, apt repository`), or `none`.
pub fn describe(manifest: &Manifest) -> String {
    let has = |f: fn(&Artifact) -> bool| manifest.artifacts.iter().any(f);
    let views: Vec<&str> = [
        (has(|a| matches!(a, Artifact::Wheel(_))), "pip index"),
        (has(|a| matches!(a, Artifact::Deb(_))), "apt repository"),
        (has(|a| matches!(a, Artifact::Model(_))), "Hugging Face cache"),
    ]
    .into_iter()
    .filter_map(|(yes, name)| yes.then_some(name))
    .collect();
    if views.is_empty() { "none".to_owned() } else { views.join(", ") }
}

/// The apt view's clearsigned `Release`, when the site signs it: made at install with the
/// site's key, so it is the one view file a check cannot make again (apt checks it).
pub const IN_RELEASE: &str = "debs/InRelease";

/// A site's `OpenPGP` signing key for its apt view (`install --apt-signing-key`).
pub struct AptSigningKey {
    pub key: pgp::composed::SignedSecretKey,
    pub password: pgp::types::Password,
}

/// Turn the staged `debs/` (the carried `Packages` and pool) into a flat apt repository;
/// with a site key, `InRelease` is the clearsigned `Release`, so apt verifies it
/// (`deb [signed-by=site.asc] file:/…/current/debs ./`) instead of trusting it blindly.
pub fn write_apt_repo(staged: &Path, manifest: &Manifest, signing: Option<&AptSigningKey>) -> io::Result<bool> {
    let debs = staged.join("debs");
    let packages = debs.join("Packages");
    if !packages.is_file() {
        return Ok(false);
    }
    let text = std::fs::read(&packages)?;
    // Deterministic gzip: no name, no mtime.
    let mut gz = flate2::GzBuilder::new().mtime(0).write(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut gz, &text)?;
    let gz = gz.finish()?;
    std::fs::write(debs.join("Packages.gz"), &gz)?;
    let date = time::OffsetDateTime::from_unix_timestamp(i64::try_from(manifest.created.unix()).unwrap_or(0))
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc2822).ok())
        .unwrap_or_default();
    let line =
        |bytes: &[u8], name: &str| format!(" {} {} {name}\n", crate::digest::Sha256::of_bytes(bytes), bytes.len());
    let release = format!(
        "Origin: airlock\nLabel: {}\nVersion: {}\nDate: {date}\nDescription: packages carried by airlock bundle {} {}\nSHA256:\n{}{}",
        manifest.name,
        manifest.version,
        manifest.name,
        manifest.version,
        line(&text, "Packages"),
        line(&gz, "Packages.gz")
    );
    if let Some(k) = signing {
        let signed =
            pgp::composed::CleartextSignedMessage::sign(rand::thread_rng(), &release, &k.key.primary_key, &k.password)
                .and_then(|m| m.to_armored_string(pgp::composed::ArmorOptions::default()))
                .map_err(|e| io::Error::other(format!("signing Release with the site key: {e}")))?;
        std::fs::write(staged.join(IN_RELEASE), signed)?;
    }
    std::fs::write(debs.join("Release"), release)?;
    Ok(true)
}
