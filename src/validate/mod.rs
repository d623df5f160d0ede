//! GPU validation on the site: probe the host's stack (`probe`), compare it with the bundle's
//! support matrix field by field (`matrix`, versions compared as numbers by `version`), and run
//! the bundle's acceptance checks (`checks`). The verdict is the worst of the matrix and the
//! checks; `install` activates on green, on amber only when the operator accepts it, never on
//! red.

mod bounded;
pub mod checks;
pub mod matrix;
pub mod metrics;
pub mod probe;
pub mod version;

use serde::Serialize;

use crate::bundle::manifest::Validation;
use matrix::{RowResult, Verdict};

/// What validation found, kept as evidence in the site's records.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Evidence {
    pub verdict: Verdict,
    pub summary: String,
    pub detected: Vec<String>,
    pub rows: Vec<RowResult>,
    pub checks: Vec<checks::CheckResult>,
    pub probe: probe::Probe,
}

/// Validate this host against a manifest's `validation` section; `None` when it names no
/// targets (nothing to decide; the record says validation was skipped). A section this airlock
/// cannot read (a newer airlock's fields) never gets here: the manifest is refused when read.
pub fn validate(
    validation: &Validation,
    host: &probe::HostRoot,
    baseline: Option<&metrics::Baseline>,
    scope: &probe::inventory::Scope,
) -> Option<Evidence> {
    let probed = probe::probe(host, scope);
    let outcome = matrix::classify(&validation.target, &probed)?;
    let results: Vec<checks::CheckResult> = validation.check.iter().map(|c| checks::run(c, baseline)).collect();
    let (mut verdict, mut summary) = (outcome.verdict, outcome.summary);
    if let Some(worst) = results.iter().filter(|c| c.verdict > verdict).max_by_key(|c| c.verdict) {
        verdict = worst.verdict;
        summary = format!("{}: check `{}`: {}", word(verdict), worst.name, worst.summary);
    }
    Some(Evidence { verdict, summary, detected: outcome.detected, rows: outcome.rows, checks: results, probe: probed })
}

/// The pre-flight: this host against the matrix before anything changes, on every field the
/// probe can already answer (GPU, gfx, device, OS, kernel, firmware, partition modes,
/// virtualization, and the driver when `manifest` does not carry one). The fields its
/// packages decide (`deferred`) and its checks wait for the stack they install. `None` when
/// it names no targets.
pub fn preflight(manifest: &crate::bundle::manifest::VerifiedManifest, host: &probe::HostRoot) -> Option<Evidence> {
    let deferred = deferred(manifest);
    let probed = probe::probe(host, &scope_of(manifest));
    let outcome = matrix::classify_without(&manifest.validation.target, &probed, &|f| deferred.contains(&f))?;
    Some(Evidence {
        verdict: outcome.verdict,
        summary: format!("pre-flight {}", outcome.summary),
        detected: outcome.detected,
        rows: outcome.rows,
        checks: Vec::new(),
        probe: probed,
    })
}

/// The matrix fields a bundle's packages decide, judged only after they are installed: the
/// stack's version (`rocm`, `cuda`) always, and the driver (`amdgpu`, NVIDIA's `driver`) when it carries one.
pub fn deferred(manifest: &crate::bundle::manifest::VerifiedManifest) -> Vec<&'static str> {
    use crate::bundle::manifest::Artifact;
    let names: Vec<&str> = manifest
        .artifacts
        .iter()
        .filter_map(|a| match a {
            Artifact::Deb(d) => Some(d.name.as_str()),
            Artifact::Rpm(r) => Some(r.name.as_str()),
            _ => None,
        })
        .collect();
    let mut out = vec!["rocm", "cuda"];
    if names.iter().any(|n| n.starts_with("amdgpu") || n.starts_with("kmod-amdgpu")) {
        out.push("amdgpu");
    }
    if names.iter().any(|n| {
        ["nvidia-driver", "nvidia-kernel", "nvidia-open", "kmod-nvidia", "cuda-drivers"]
            .iter()
            .any(|p| n.starts_with(p))
    }) {
        out.push("driver");
    }
    out
}

pub fn word(v: Verdict) -> &'static str {
    match v {
        Verdict::Green => "green",
        Verdict::Amber => "amber",
        Verdict::Red => "red",
    }
}

/// The fields of an outcome that are not green, as lines for a person: each GPU by its best row
/// (the one that decided it: a row written for another GPU, or one its best row beats, is not
/// why it is amber or red), the same finding on several GPUs (8× MI300X) one line with their
/// count. Untrusted text: escape it to show it.
pub fn not_green(rows: &[RowResult]) -> Vec<String> {
    let rank = |v: Verdict| match v {
        Verdict::Green => 2,
        Verdict::Amber => 1,
        Verdict::Red => 0,
    };
    let mut best: Vec<&RowResult> = Vec::new();
    for r in rows {
        match best.iter_mut().find(|b| b.detected == r.detected) {
            Some(b) if rank(r.verdict) > rank(b.verdict) => *b = r,
            Some(_) => {}
            None => best.push(r),
        }
    }
    let mut lines: Vec<(String, usize)> = Vec::new();
    for f in best.iter().flat_map(|r| r.fields.iter()).filter(|f| f.verdict != Verdict::Green) {
        let line = format!(
            "  {:<22} {}: {} (expected `{}`, found `{}`)",
            f.field,
            word(f.verdict),
            f.reason,
            f.expected,
            f.actual
        );
        match lines.iter_mut().find(|(l, _)| *l == line) {
            Some((_, n)) => *n += 1,
            None => lines.push((line, 1)),
        }
    }
    lines.into_iter().map(|(l, n)| if n > 1 { format!("{l} on {n} GPUs") } else { l }).collect()
}

/// The inventory's scope for a bundle: the packages it carries, the environments configured.
pub fn scope_of(manifest: &crate::bundle::Manifest) -> probe::inventory::Scope {
    use crate::bundle::manifest::Artifact;
    let carried = manifest
        .artifacts
        .iter()
        .filter_map(|a| match a {
            Artifact::Deb(d) => Some(d.name.clone()),
            Artifact::Rpm(r) => Some(r.name.clone()),
            _ => None,
        })
        .collect();
    let mut scope = probe::inventory::Scope::from_env(carried);
    (scope.rocm_from, scope.cuda_from) = (manifest.validation.rocm_from.clone(), manifest.validation.cuda_from.clone());
    for name in scope.rocm_from.iter().chain(&scope.cuda_from) {
        scope.carried.insert(name.clone());
    }
    scope
}
