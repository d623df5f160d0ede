//! `airlock probe [--json] [--diff OLD.json]`

use std::fmt::Write as _;
use std::io::Write as _;

use anyhow::Context as _;

use crate::cli::ProbeArgs;
use crate::validate::probe::{HostRoot, probe};

pub fn run(args: &ProbeArgs) -> anyhow::Result<u8> {
    let mut scope = crate::validate::probe::inventory::Scope::from_env(carried(args.root.as_deref()));
    scope.venvs.extend(args.venv.iter().cloned());
    let p = probe(&HostRoot::from_env(), &scope);
    if let Some(old_path) = &args.diff {
        let text = std::fs::read(old_path).with_context(|| format!("cannot read `{}`", old_path.display()))?;
        let old: serde_json::Value = serde_json::from_slice(&text)
            .with_context(|| format!("`{}` is not a probe record (JSON)", old_path.display()))?;
        let changes = crate::validate::probe::diff::diff(&old, &serde_json::to_value(&p)?);
        if args.json {
            super::print_json(&serde_json::json!({ "changes": changes, "record": p }))?;
            return Ok(super::EXIT_OK);
        }
        let mut t = String::new();
        for c in &changes {
            let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(absent)".into());
            let _ = writeln!(t, "~ {}: {} -> {}", c.path, show(&c.old), show(&c.new));
        }
        let _ = writeln!(t, "{} field(s) differ from `{}`", changes.len(), old_path.display());
        std::io::stdout().lock().write_all(crate::escape::lines(&t).as_bytes())?;
        return Ok(super::EXIT_OK);
    }
    if args.json {
        super::print_json(&p)?;
        return Ok(super::EXIT_OK);
    }
    // Tools' output is untrusted text: escaped for the terminal.
    let h = &p.host;
    let mut t = String::new();
    let _ = writeln!(t, "os:        {} {}", h.os_id, h.os_version);
    let _ = writeln!(t, "kernel:    {}", h.kernel);
    let _ = writeln!(t, "amdgpu:    {}{}", h.amdgpu, if h.amdgpu_live { " (live)" } else { "" });
    let _ = writeln!(t, "rocm:      {}", h.rocm);
    let _ = writeln!(
        t,
        "platform:  {} (hypervisor {}), {} {}",
        h.virtualization.mode, h.virtualization.hypervisor, h.vendor, h.product
    );
    let _ = writeln!(t, "gpus:      {}", p.gpus.len());
    for g in &p.gpus {
        let _ = writeln!(
            t,
            "  {} {}: {} ({}) bdf {} cu {} vbios {}",
            g.vendor, g.index, g.market_name, g.gfx, g.bdf, g.compute_units, g.vbios
        );
        for (id, v) in &g.firmware {
            let _ = writeln!(t, "      {id} {v}");
        }
    }
    for (name, tool) in &p.tools {
        let _ = writeln!(t, "tool {name}: {}", tool.status);
    }
    let inv = &p.inventory;
    let _ = writeln!(t, "packages:  {}", inv.packages.len());
    for (name, i) in &inv.packages {
        let source = if i.source == *name { String::new() } else { format!(" (source {})", i.source) };
        let carried = if i.carried { ", carried by the bundle" } else { "" };
        let _ = writeln!(t, "  {name} {}{source} [{}{carried}]", i.version, i.manager);
    }
    for (venv, packages) in &inv.python {
        let _ = writeln!(t, "python {venv}: {} package(s)", packages.len());
        for (name, version) in packages {
            let _ = writeln!(t, "  {name} {version}");
        }
    }
    for (image, digest) in &inv.images {
        let _ = writeln!(t, "image {image} {digest}");
    }
    std::io::stdout().lock().write_all(crate::escape::lines(&t).as_bytes())?;
    Ok(super::EXIT_OK)
}

/// The package names the active bundle under `root` carries (its manifest read unverified:
/// the names only widen what is listed; `check` verifies).
fn carried(root: Option<&std::path::Path>) -> std::collections::BTreeSet<String> {
    let Some(root) = root else { return std::collections::BTreeSet::new() };
    let path = root.join("current").join(crate::bundle::manifest::MANIFEST);
    let manifest = crate::site::state::read_bounded(&path, crate::bundle::manifest::MAX_MANIFEST_BYTES)
        .ok()
        .flatten()
        .and_then(|b| serde_json::from_slice::<crate::bundle::Manifest>(&b).ok());
    manifest.map(|m| crate::validate::scope_of(&m).carried).unwrap_or_default()
}
