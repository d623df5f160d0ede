//! `airlock probe [--json] [--diff OLD.json]`

use std::fmt::Write as _;
use std::io::Write as _;

use anyhow::Context as _;

use crate::cli::ProbeArgs;
use crate::validate::probe::{HostRoot, probe};

pub fn run(args: &ProbeArgs) -> anyhow::Result<u8> {
    let p = probe(&HostRoot::from_env());
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
    std::io::stdout().lock().write_all(crate::escape::lines(&t).as_bytes())?;
    Ok(super::EXIT_OK)
}
