//! The report's facts made from a bundle that was read (`read`): its artifacts, signatures,
//! firmware and SBOM, beside what the site adds.

use std::collections::BTreeMap;

use super::read::ReadBundle;
use super::{
    BundleFacts, DiffFacts, Firmware, KindTotal, Line, Report, SCHEMA, SbomFacts, SignatureLine, Signatures, SiteFacts,
};
use crate::bundle::Manifest;
use crate::bundle::manifest::{Artifact, FileArtifact, SBOM};
use crate::bundle::reader::Report as Read_;
use crate::sign::policy::{Outcome, Source};

pub(super) fn assemble(
    kind: &'static str,
    read: &ReadBundle,
    diff: Option<DiffFacts>,
    site: Option<SiteFacts>,
) -> Report {
    let m = &read.manifest;
    let verified = match &read.kept {
        Some(k) => k.ok,
        None => read.report.as_ref().is_some_and(Read_::verified),
    };
    let problems = match (&read.report, &read.kept) {
        (Some(r), _) => r.problems.iter().map(ToString::to_string).collect(),
        (None, Some(k)) => k.problems.clone(),
        (None, None) => vec!["no --trust key was given, so this is what the bundle claims".to_owned()],
    };
    let signatures = signatures(read);
    let mut contents: BTreeMap<&str, (usize, u64)> = BTreeMap::new();
    for e in &m.entries {
        let total = contents.entry(e.path.area()).or_default();
        total.0 += 1;
        total.1 += e.size;
    }
    let checked = read.report.as_ref().map(|r| r.upstream.as_slice());
    let artifacts = m.artifacts.iter().map(|a| line(a, checked)).collect();
    let firmware = m
        .artifacts
        .iter()
        .filter_map(|a| match a {
            Artifact::File(f) if f.file_kind == crate::spec::FileKind::Firmware => Some(firmware(f)),
            _ => None,
        })
        .collect();
    Report {
        schema: SCHEMA,
        kind,
        bundle: BundleFacts {
            name: m.name.to_string(),
            version: m.version.to_string(),
            description: m.description.clone(),
            id: read.manifest_sha256.short(16),
            manifest_sha256: read.manifest_sha256,
            created: m.created.to_string(),
            tool: m.builder.tool.clone(),
            verified,
            problems,
            base: m.base.as_ref().map(ToString::to_string),
            source: read.source.clone(),
            held: read.kept.as_ref().map(|k| k.held),
        },
        signatures,
        contents: contents
            .into_iter()
            .map(|(kind, (entries, bytes))| KindTotal { kind: kind.to_owned(), entries, bytes })
            .collect(),
        artifacts,
        firmware,
        matrix: m.validation.clone(),
        sbom: read.sbom.as_deref().and_then(|b| sbom_facts(m, b)),
        diff,
        site,
    }
}

/// The roles a key signs for, by name (a site's; none for `--trust` keys).
fn roles_of(rules: &[crate::sign::policy::Rule], key_id: &str) -> Vec<String> {
    rules
        .iter()
        .filter(|r| r.role != crate::sign::policy::GIVEN_ROLE && r.keys.iter().any(|k| k.as_str() == key_id))
        .map(|r| r.role.clone())
        .collect()
}

fn signatures(read: &ReadBundle) -> Signatures {
    let m = &read.manifest;
    if let Some(k) = &read.kept {
        let signers: Vec<String> = k.signers.iter().map(ToString::to_string).collect();
        return Signatures {
            threshold: read.threshold,
            required: read.required.clone(),
            met: read.met,
            trust_root: read.trust_root,
            checked: signers
                .iter()
                .map(|s| SignatureLine {
                    source: crate::bundle::manifest::SIGNATURE.to_owned(),
                    key_id: Some(s.clone()),
                    status: "valid".to_owned(),
                    roles: roles_of(&read.rules, s),
                })
                .collect(),
            signers,
            provenance: Vec::new(),
        };
    }
    match &read.report {
        Some(r) => Signatures {
            threshold: read.threshold,
            required: read.required.clone(),
            met: read.met,
            trust_root: read.trust_root,
            signers: r.signers.iter().map(ToString::to_string).collect(),
            checked: r
                .signatures
                .iter()
                .map(|c| SignatureLine {
                    source: match &c.source {
                        Source::Embedded => crate::bundle::manifest::SIGNATURE.to_owned(),
                        Source::CoSignature(p) => {
                            p.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned())
                        }
                    },
                    key_id: c.key_id.as_ref().map(ToString::to_string),
                    roles: c.key_id.as_ref().map(|k| roles_of(&read.rules, &k.to_string())).unwrap_or_default(),
                    status: match &c.outcome {
                        Outcome::Valid => "valid".to_owned(),
                        Outcome::Untrusted => "untrusted".to_owned(),
                        Outcome::Invalid { detail } => format!("invalid: {detail}"),
                    },
                })
                .collect(),
            provenance: r.provenance.clone().unwrap_or_default().iter().map(ToString::to_string).collect(),
        },
        None => Signatures {
            threshold: 0,
            required: String::new(),
            met: false,
            trust_root: None,
            signers: Vec::new(),
            checked: vec![SignatureLine {
                source: crate::bundle::manifest::SIGNATURE.to_owned(),
                key_id: Some(m.builder.key_id.to_string()),
                status: "not checked (claimed by the manifest)".to_owned(),
                roles: Vec::new(),
            }],
            provenance: Vec::new(),
        },
    }
}

/// An artifact's line; `checked`: the upstream signatures this read verified again (`None`
/// when it could not: read unverified, or a node's kept part).
fn line(a: &Artifact, checked: Option<&[crate::bundle::reader::UpstreamCheck]>) -> Line {
    let recorded = match a {
        Artifact::Image(i) => Some(i.signature.as_ref()),
        Artifact::File(f) => Some(f.signature.as_ref()),
        Artifact::Wheel(w) => Some(w.signature.as_ref()),
        Artifact::Model(_) => Some(None),
        Artifact::Deb(_) | Artifact::Rpm(_) => None,
    };
    let (kind, name, version) = match a {
        Artifact::Image(i) => ("image", i.reference.clone(), format!("sha256:{}", i.digest)),
        Artifact::Wheel(w) => ("wheel", w.filename.clone(), w.version.clone()),
        Artifact::Deb(d) => ("deb", format!("{}:{}", d.name, d.architecture), d.version.clone()),
        Artifact::Rpm(r) => ("rpm", format!("{}.{}", r.name, r.architecture), r.evr()),
        Artifact::Model(m) => ("model", m.repo.to_string(), m.commit.to_string()),
        Artifact::File(f) => ("file", f.name.to_string(), format!("{} sha256:{}", f.file_kind, f.sha256.short(16))),
    };
    let upstream = recorded.map(|signature| match (signature, checked) {
        (None, _) => "unsigned upstream".to_owned(),
        (Some(s), Some(checked)) => match checked.iter().find(|c| c.artifact == name) {
            Some(c) => {
                let logged = c.logged_at.as_deref().map(|t| format!(", logged at {t}")).unwrap_or_default();
                format!("signed by {} ({}){logged}; verified here under {}", c.identity, c.issuer, c.root)
            }
            None => format!("{}, as recorded at lock: it does NOT verify here", s.describe()),
        },
        (Some(s), None) => format!("{}, as recorded at lock (not checked by this read)", s.describe()),
    });
    Line { kind: kind.to_owned(), name, version, upstream }
}

fn firmware(f: &FileArtifact) -> Firmware {
    Firmware {
        name: f.name.to_string(),
        sha256: f.sha256,
        size: f.size,
        floor: f.notes.get("min_version").cloned(),
        notes: f.notes.clone(),
    }
}

fn sbom_facts(m: &Manifest, bytes: &[u8]) -> Option<SbomFacts> {
    let entry = m.entries.iter().find(|e| e.path.as_str() == SBOM)?;
    let doc: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let mut by_type = BTreeMap::new();
    let (mut components, mut with_purl) = (0, 0);
    let mut stack: Vec<&serde_json::Value> =
        doc["components"].as_array().map(|a| a.iter().collect()).unwrap_or_default();
    while let Some(c) = stack.pop() {
        components += 1;
        with_purl += usize::from(c.get("purl").is_some());
        *by_type.entry(c["type"].as_str().unwrap_or("?").to_owned()).or_insert(0) += 1;
        stack.extend(c["components"].as_array().into_iter().flatten());
    }
    Some(SbomFacts {
        sha256: entry.sha256,
        spec_version: doc["specVersion"].as_str().unwrap_or_default().to_owned(),
        components,
        with_purl,
        by_type,
    })
}
