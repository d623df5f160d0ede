//! `airlock probe [--json] [--diff OLD.json]`

use std::fmt::Write as _;
use std::io::Write as _;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::cli::ProbeArgs;
use crate::failure::{Class, Context as _, Exit, Failure, Result};
use crate::validate::probe::inventory::{Installed, family};
use crate::validate::probe::{HostRoot, Probe, probe};

/// The most of a probe record read (a node with every package listed is well under 4 MiB).
const MAX_RECORD: u64 = 64 << 20;

pub fn run(args: &ProbeArgs) -> Result<Exit> {
    if let [a, b] = args.inventory_diff.as_slice() {
        return inventory_diff(a, b, args.json);
    }
    let mut scope = crate::validate::probe::inventory::Scope::from_env(carried(args.root.as_deref()));
    scope.venvs.extend(args.venv.iter().cloned());
    scope.everything = true;
    let p = probe(&HostRoot::from_env(), &scope);
    if let Some(old_path) = &args.diff {
        return diff(old_path, &p, args.json);
    }
    if args.json {
        // With a root, its current bundle beside the probe (what `status` says of it; null
        // when there is none or the root's state cannot be read): a rollout's probe of a node
        // needs both, in one call.
        let root = args.root.as_deref().map(|root| OfRoot { current: current(root) });
        super::print_json(&Probed { probe: &p, root })?;
        return Ok(Exit::Ok);
    }
    // Tools' output is untrusted text: escaped for the terminal.
    let h = &p.host;
    let mut t = String::new();
    let _ = writeln!(t, "os:        {} {}", h.os_id, h.os_version);
    let _ = writeln!(t, "kernel:    {}", h.kernel);
    if h.amdgpu == crate::validate::probe::UNKNOWN && h.amdgpu_live {
        // No version of its own: the kernel's driver, which a row names as `amdgpu = "inbox"`.
        let _ = writeln!(t, "amdgpu:    inbox, kernel {} (the kernel's own driver: no version of its own)", h.kernel);
    } else {
        let _ = writeln!(t, "amdgpu:    {}{}", h.amdgpu, if h.amdgpu_live { " (live)" } else { "" });
    }
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
    // Every installed package is in `--json`; the text shows the stack's and the bundle's.
    let shown: Vec<_> = inv.packages.iter().filter(|(n, i)| i.carried || family(n)).collect();
    let others = inv.packages.len() - shown.len();
    let _ = writeln!(t, "packages:  {} installed ({others} outside the GPU stack: see --json)", inv.packages.len());
    // What the host's package databases, Python environments and image stores say: each value
    // escaped on its own (a line break in a version must not print a line).
    let v = |s: &str| crate::escape::value(s).into_owned();
    for (name, i) in shown {
        let source = if i.source == *name { String::new() } else { format!(" (source {})", v(&i.source)) };
        let carried = if i.carried { ", carried by the bundle" } else { "" };
        let _ = writeln!(t, "  {} {}{source} [{}{carried}]", v(name), v(&i.version), v(&i.manager));
    }
    for (venv, packages) in &inv.python {
        let _ = writeln!(t, "python {}: {} package(s)", v(venv), packages.len());
        for (name, version) in packages {
            let _ = writeln!(t, "  {} {}", v(name), v(version));
        }
    }
    for (image, digest) in &inv.images {
        let _ = writeln!(t, "image {} {}", v(image), v(digest));
    }
    std::io::stdout().lock().write_all(crate::escape::lines(&t).as_bytes())?;
    Ok(Exit::Ok)
}

/// One node's installed packages, from its probe record.
fn inventory_of(path: &Path) -> Result<BTreeMap<String, Installed>> {
    let text = crate::site::root::read_bounded(path, MAX_RECORD)
        .with_context(|| format!("cannot read `{}`", path.display()))?
        .ok_or_else(|| Failure::new(Class::Runtime, format!("`{}` does not exist", path.display())))?;
    let record: Probe = serde_json::from_slice(&text)
        .with_context(|| format!("`{}` is not a probe record (`airlock probe --json`)", path.display()))?;
    if record.inventory.packages.is_empty() {
        let why = format!(
            "`{}` lists no installed package: probe the node with this airlock (`airlock probe --json`)",
            path.display()
        );
        return Err(Failure::new(Class::Runtime, why));
    }
    Ok(record.inventory.packages)
}

/// `--diff OLD.json`: what changed since an earlier record, field by field.
fn diff(old_path: &Path, p: &crate::validate::probe::Probe, json: bool) -> Result<Exit> {
    let text = std::fs::read(old_path).with_context(|| format!("cannot read `{}`", old_path.display()))?;
    let old: serde_json::Value = serde_json::from_slice(&text)
        .with_context(|| format!("`{}` is not a probe record (JSON)", old_path.display()))?;
    let changes = crate::validate::probe::diff::diff(&old, &serde_json::to_value(p)?);
    if json {
        super::print_json(&serde_json::json!({ "changes": changes, "record": p }))?;
        return Ok(Exit::Ok);
    }
    let mut t = String::new();
    // The old record's values are a file's, the new ones tools': each escaped whole, a line
    // break in one printed as `\n`, never as a line of its own.
    for c in &changes {
        let show = |v: &Option<String>| {
            v.as_deref().map_or_else(|| "(absent)".into(), |v| crate::escape::value(v).into_owned())
        };
        let _ = writeln!(t, "~ {}: {} -> {}", crate::escape::value(&c.path), show(&c.old), show(&c.new));
    }
    let _ = writeln!(t, "{} field(s) differ from `{}`", changes.len(), old_path.display());
    std::io::stdout().lock().write_all(crate::escape::lines(&t).as_bytes())?;
    Ok(Exit::Ok)
}

/// `--inventory-diff A B`: what one node has installed that the other has not, or at another
/// version (exit 10 when anything differs).
fn inventory_diff(a: &Path, b: &Path, json: bool) -> Result<Exit> {
    let (left, right) = (inventory_of(a)?, inventory_of(b)?);
    let version = |m: &BTreeMap<String, Installed>, n: &str| m.get(n).map(|i| i.version.clone());
    let names: BTreeSet<&String> = left.keys().chain(right.keys()).collect();
    let changes: Vec<crate::validate::probe::diff::Change> = names
        .into_iter()
        .filter(|n| version(&left, n) != version(&right, n))
        .map(|n| crate::validate::probe::diff::Change {
            path: n.clone(),
            old: version(&left, n),
            new: version(&right, n),
        })
        .collect();
    let same = changes.is_empty();
    if json {
        super::print_json(
            &serde_json::json!({ "same": same, "packages": [left.len(), right.len()], "changes": changes }),
        )?;
    } else {
        // Names and versions are the inventories' (files a node wrote): each escaped as one
        // value, so a line break in one cannot print a line of its own.
        let mut t = String::new();
        let value = |v: &str| crate::escape::value(v).into_owned();
        for c in &changes {
            let show = |v: &Option<String>| v.as_deref().map_or_else(|| "(not installed)".into(), value);
            let _ = writeln!(t, "~ {}: {} -> {}", value(&c.path), show(&c.old), show(&c.new));
        }
        let _ = if same {
            writeln!(t, "the same {} package(s): one baseline serves both", left.len())
        } else {
            writeln!(t, "{} package(s) differ between `{}` and `{}`", changes.len(), a.display(), b.display())
        };
        std::io::stdout().lock().write_all(crate::escape::lines(&t).as_bytes())?;
    }
    Ok(if same { Exit::Ok } else { Exit::Differ })
}

/// The package names the active bundle under `root` carries (its manifest read unverified:
/// the names only widen what is listed; `check` verifies).
/// `probe --json`: the probe, and with `--root` the root's current bundle.
#[derive(serde::Serialize)]
struct Probed<'a> {
    #[serde(flatten)]
    probe: &'a Probe,
    #[serde(flatten)]
    root: Option<OfRoot>,
}

#[derive(serde::Serialize)]
struct OfRoot {
    current: Option<crate::site::status::Entry>,
}

/// The root's current bundle as `status` describes it; none where the root is no site or its
/// state cannot be read (`status` exits non-zero there).
fn current(root: &Path) -> Option<crate::site::status::Entry> {
    crate::site::status(root).ok().filter(|s| s.state_damaged.is_none()).and_then(|s| s.current)
}

fn carried(root: Option<&std::path::Path>) -> std::collections::BTreeSet<String> {
    let Some(root) = root else { return std::collections::BTreeSet::new() };
    let path = root.join("current").join(crate::bundle::manifest::MANIFEST);
    let manifest = crate::site::root::read_bounded(&path, crate::bundle::manifest::MAX_MANIFEST_BYTES)
        .ok()
        .flatten()
        .and_then(|b| serde_json::from_slice::<crate::bundle::Manifest>(&b).ok());
    manifest.map(|m| crate::validate::scope_of(&m).carried).unwrap_or_default()
}
