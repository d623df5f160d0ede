//! Site views derived from a verified staged tree, written before it is renamed into place:
//! `wheels/simple/` is a PEP 503 index (relative links with `#sha256=` fragments) that pip
//! uses offline (`--index-url file://…/current/wheels/simple`) or any static web server serves;
//! `models/models--ORG--NAME/` is the Hugging Face cache layout (`blobs/SHA256` hard links to the
//! staged files, `snapshots/COMMIT/PATH` links to the blobs, `refs/REVISION` naming the commit),
//! read by `huggingface_hub` with `HF_HUB_OFFLINE=1 HF_HUB_CACHE=…/current/models`;
//! `debs/` becomes a flat apt repository (`Packages`, `Packages.gz`, `Release`, and with a site
//! signing key `InRelease`) for `deb [signed-by=/etc/apt/keyrings/site.asc] file:/…/current/debs ./`;
//! `rpms/` becomes an rpm-md repository for dnf, yum and zypper (`repodata/` with primary,
//! filelists and other, gzip-compressed and named by their sha256 as `createrepo_c` names them,
//! `repomd.xml`, and with a site signing key `repomd.xml.asc`) for `baseurl=file:///…/current/rpms`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::path::Path;

use crate::bundle::manifest::Artifact;
use crate::bundle::manifest::VerifiedManifest;
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
pub fn write_wheel_index(staged: &Path, manifest: &VerifiedManifest) -> io::Result<usize> {
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
pub fn write_hf_cache(staged: &Path, manifest: &VerifiedManifest) -> io::Result<usize> {
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
                let member = m.member(f).map_err(io::Error::other)?;
                std::fs::hard_link(member.under(staged), &blob)?;
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
pub fn describe(manifest: &VerifiedManifest) -> String {
    let has = |f: fn(&Artifact) -> bool| manifest.artifacts.iter().any(f);
    let views: Vec<&str> = [
        (has(|a| matches!(a, Artifact::Wheel(_))), "pip index"),
        (has(|a| matches!(a, Artifact::Deb(_))), "apt repository"),
        (has(|a| matches!(a, Artifact::Rpm(_))), "dnf repository"),
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

/// The rpm view's detached signature of `repomd.xml`, made at install with the site's key.
pub const REPOMD_ASC: &str = "rpms/repodata/repomd.xml.asc";

/// The carried indexes the package views are made from: a check compares them as members and
/// makes the views again from them.
pub const CARRIED_INDEXES: [&str; 4] = ["debs/Packages", "rpms/primary.xml", "rpms/filelists.xml", "rpms/other.xml"];

/// The areas whose members the views are made from (wheels, models, packages): `check` makes
/// them again over placeholders of these members only, not of a tree's thousands of files.
pub const MADE_FROM: [&str; 4] = ["wheels", "models", "debs", "rpms"];

/// The view files signed with the site key at install: a check cannot make them again (apt and
/// dnf check them).
pub const SIGNED: [&str; 2] = [IN_RELEASE, REPOMD_ASC];

/// A site's `OpenPGP` signing key for its package views (`install --apt-signing-key`).
pub struct AptSigningKey {
    pub key: pgp::composed::SignedSecretKey,
    pub password: pgp::types::Password,
}

/// Turn the staged `debs/` (the carried `Packages` and pool) into a flat apt repository;
/// with a site key, `InRelease` is the clearsigned `Release`, so apt verifies it
/// (`deb [signed-by=site.asc] file:/…/current/debs ./`) instead of trusting it blindly.
pub fn write_apt_repo(staged: &Path, manifest: &VerifiedManifest, signing: Option<&AptSigningKey>) -> io::Result<bool> {
    let debs = staged.join("debs");
    let packages = debs.join("Packages");
    if !packages.is_file() {
        return Ok(false);
    }
    let text = std::fs::read(&packages)?;
    let gz = gzip(&text)?;
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

/// Deterministic gzip (no name, no mtime), as the views serve their indexes.
fn gzip(bytes: &[u8]) -> io::Result<Vec<u8>> {
    let mut gz = flate2::GzBuilder::new().mtime(0).write(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut gz, bytes)?;
    gz.finish()
}

/// Turn the staged `rpms/` (the carried `primary.xml`, `filelists.xml` and `other.xml` and the
/// packages at their repository locations) into an rpm-md repository: each index gzipped
/// under `repodata/SHA256-TYPE.xml.gz`, `repomd.xml` listing them with both checksums and
/// sizes (revision and timestamps: the bundle's creation time), and with a site key a detached
/// armored `repomd.xml.asc`, which dnf (`repo_gpgcheck=1`) and zypper verify.
pub fn write_rpm_repo(staged: &Path, manifest: &VerifiedManifest, signing: Option<&AptSigningKey>) -> io::Result<bool> {
    let rpms = staged.join("rpms");
    if !rpms.join("primary.xml").is_file() {
        return Ok(false);
    }
    let repodata = rpms.join("repodata");
    std::fs::create_dir_all(&repodata)?;
    let when = manifest.created.unix();
    let mut repomd = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<repomd xmlns=\"http://linux.duke.edu/metadata/repo\" xmlns:rpm=\"http://linux.duke.edu/metadata/rpm\">\n  <revision>{when}</revision>\n"
    );
    for kind in ["primary", "filelists", "other"] {
        let plain = std::fs::read(rpms.join(format!("{kind}.xml")))?;
        let gz = gzip(&plain)?;
        let sum = crate::digest::Sha256::of_bytes(&gz);
        let name = format!("{sum}-{kind}.xml.gz");
        std::fs::write(repodata.join(&name), &gz)?;
        let _ = write!(
            repomd,
            "  <data type=\"{kind}\">\n    <checksum type=\"sha256\">{sum}</checksum>\n    <open-checksum type=\"sha256\">{}</open-checksum>\n    <location href=\"repodata/{name}\"/>\n    <timestamp>{when}</timestamp>\n    <size>{}</size>\n    <open-size>{}</open-size>\n  </data>\n",
            crate::digest::Sha256::of_bytes(&plain),
            gz.len(),
            plain.len()
        );
    }
    repomd.push_str("</repomd>\n");
    if let Some(k) = signing {
        let signature = pgp::composed::DetachedSignature::sign_binary_data(
            rand::thread_rng(),
            &k.key.primary_key,
            &k.password,
            pgp::crypto::hash::HashAlgorithm::Sha256,
            repomd.as_bytes(),
        )
        .and_then(|s| s.to_armored_string(pgp::composed::ArmorOptions::default()))
        .map_err(|e| io::Error::other(format!("signing repomd.xml with the site key: {e}")))?;
        std::fs::write(staged.join(REPOMD_ASC), signature)?;
    }
    std::fs::write(repodata.join("repomd.xml"), repomd)?;
    Ok(true)
}
