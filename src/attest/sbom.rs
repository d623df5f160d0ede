//! The `CycloneDX` 1.5 SBOM of a bundle, built with the `cyclonedx-bom` crate: the bundle as the
//! main component, airlock as the tool, one component per artifact with a purl and a SHA-256
//! hash (image platform manifests and model files as nested components), firmware notes as
//! properties. Upstream SBOMs, attestations and signatures carried with an image are external
//! references to their manifests in the bundle (`images/blobs/sha256/HEX`, with the hash), not
//! merged into this document. Deterministic: the timestamp is the bundle's `created`, and the serial number is
//! a UUID derived from the artifacts' content, never random.

use cyclonedx_bom::external_models::uri::Uri;
use cyclonedx_bom::models::bom::{Bom, SpecVersion, UrnUuid};
use cyclonedx_bom::models::component::{Classification, Component, Components};
use cyclonedx_bom::models::dependency::{Dependencies, Dependency};
use cyclonedx_bom::models::external_reference::{ExternalReference, ExternalReferenceType, ExternalReferences};
use cyclonedx_bom::models::hash::{Hash, HashAlgorithm, HashValue, Hashes};
use cyclonedx_bom::models::metadata::Metadata;
use cyclonedx_bom::models::property::{Properties, Property};
use cyclonedx_bom::models::tool::{Tool, Tools};
use cyclonedx_bom::prelude::{DateTime, NormalizedString, Purl, Validate};
use purl::GenericPurlBuilder;

use crate::bundle::manifest::{Artifact, AttachmentKind, FileArtifact, ImageArtifact, ModelArtifact};
use crate::clock::Timestamp;
use crate::digest::Sha256;
use crate::spec::{BundleName, FileKind};

#[derive(Debug, thiserror::Error)]
pub enum SbomError {
    #[error("SBOM: invalid package URL for `{name}`: {detail}")]
    Purl { name: String, detail: String },
    #[error("SBOM: {0}")]
    Invalid(String),
}

impl crate::failure::Classify for SbomError {
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Runtime
    }
}

/// What the SBOM describes.
pub struct Subject<'a> {
    pub name: &'a BundleName,
    pub version: &'a semver::Version,
    pub created: Timestamp,
    pub artifacts: &'a [Artifact],
    pub spec: SbomSpec,
}

/// The `CycloneDX` version written (`build --sbom-spec`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SbomSpec {
    #[default]
    V1_5,
    /// 1.6. `cyclonedx-bom` 0.8 models and validates 1.5 only; every 1.5 document is a valid
    /// 1.6 one (1.6 only adds), so it is the 1.5 document declared as 1.6 (the tests check it
    /// against the official 1.6 schema).
    V1_6,
}

impl std::str::FromStr for SbomSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "1.5" => Ok(Self::V1_5),
            "1.6" => Ok(Self::V1_6),
            other => Err(format!("`{other}`: CycloneDX 1.5 or 1.6")),
        }
    }
}

fn purl(
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    version: &str,
    qualifiers: &[(&str, &str)],
) -> Result<Purl, SbomError> {
    let err = |e: purl::ParseError| SbomError::Purl { name: name.to_owned(), detail: e.to_string() };
    let mut b = GenericPurlBuilder::new(kind.to_owned(), name).with_version(version);
    if let Some(ns) = namespace {
        b = b.with_namespace(ns);
    }
    for (k, v) in qualifiers {
        b = b.with_qualifier(*k, *v).map_err(err)?;
    }
    let built = b.build().map_err(err)?;
    Ok(built.to_string().parse().expect("Purl::from_str is infallible"))
}

fn sha256(d: &Sha256) -> Hashes {
    Hashes(vec![Hash { alg: HashAlgorithm::SHA_256, content: HashValue(d.to_string()) }])
}

fn component(
    class: Classification,
    name: &str,
    version: &str,
    bom_ref: String,
    digest: &Sha256,
    purl: Purl,
) -> Component {
    let mut c = Component::new(class, name, version, Some(bom_ref));
    c.hashes = Some(sha256(digest));
    c.purl = Some(purl);
    c
}

fn artifact_component(artifact: &Artifact) -> Result<Component, SbomError> {
    Ok(match artifact {
        Artifact::Image(i) => image_component(i)?,
        Artifact::Wheel(w) => {
            let p = purl("pypi", None, &w.name, &w.version, &[("file_name", w.filename.as_str())])?;
            let mut c =
                component(Classification::Library, &w.name, &w.version, format!("wheel:{}", w.filename), &w.sha256, p);
            if let Some(sig) = &w.signature {
                c.external_references = Some(ExternalReferences(vec![signature_reference(sig)]));
            }
            c
        }
        Artifact::Deb(d) => {
            // purl's deb type: the vendor as namespace (`Release` `Origin`: debian, ubuntu),
            // `arch`, and `distro` (its `Codename`), which advisories are matched by.
            let vendor = d.origin.as_deref().map_or_else(|| "debian".to_owned(), str::to_ascii_lowercase);
            let mut q = vec![("arch", d.architecture.as_str())];
            if let Some(codename) = &d.codename {
                q.push(("distro", codename.as_str()));
            }
            let p = purl("deb", Some(&vendor), &d.name, &d.version, &q)?;
            component(
                Classification::Library,
                &d.name,
                &d.version,
                format!("deb:{}={}:{}", d.name, d.version, d.architecture),
                &d.sha256,
                p,
            )
        }
        Artifact::Rpm(r) => {
            // purl's rpm type: the vendor as namespace (`rhel`, `rocky`, `opensuse`), the
            // version as EVR with its epoch as the `epoch` qualifier, `arch` and `distro`.
            let version = format!("{}-{}", r.version, r.release);
            let epoch = r.epoch.to_string();
            let mut q = vec![("arch", r.architecture.as_str())];
            if r.epoch != 0 {
                q.push(("epoch", epoch.as_str()));
            }
            if let Some(distro) = &r.distro {
                q.push(("distro", distro.as_str()));
            }
            let vendor = r.vendor.as_deref().map(str::to_ascii_lowercase);
            let p = purl("rpm", vendor.as_deref(), &r.name, &version, &q)?;
            component(
                Classification::Library,
                &r.name,
                &r.evr(),
                format!("rpm:{}-{}.{}", r.name, r.evr(), r.architecture),
                &r.sha256,
                p,
            )
        }
        Artifact::Model(m) => model_component(m)?,
        Artifact::File(f) => file_component(f)?,
    })
}

fn file_class(f: &FileArtifact) -> Classification {
    match f.file_kind {
        FileKind::Firmware => Classification::Firmware,
        FileKind::Airlock => Classification::Application,
        FileKind::Document | FileKind::Generic => Classification::File,
    }
}

/// A firmware file's version is the one its notes give (`version`, else the `min_version` it
/// brings the board to); the digest stays in the hashes and purl.
fn file_version(f: &FileArtifact, class: &Classification) -> String {
    let noted =
        ["version", "min_version"].iter().find_map(|k| f.notes.get(*k)).filter(|_| *class == Classification::Firmware);
    noted.cloned().unwrap_or_else(|| f.sha256.to_string())
}

/// A `[[file]]`: firmware, a document, an airlock binary or a generic file; a directory's
/// files nested under it, each with its own hash.
fn file_component(f: &FileArtifact) -> Result<Component, SbomError> {
    let class = file_class(f);
    let url = f.source.starts_with("http://") || f.source.starts_with("https://");
    let checksum = format!("sha256:{}", f.sha256);
    let mut q: Vec<(&str, &str)> = vec![("checksum", checksum.as_str())];
    if url {
        q.push(("download_url", f.source.as_str()));
    }
    let version = file_version(f, &class);
    let p = purl("generic", None, f.name.as_str(), &version, &q)?;
    let mut c = component(class.clone(), f.name.as_str(), &version, format!("file:{}", f.name), &f.sha256, p);
    if let Some(sig) = &f.signature {
        c.external_references = Some(ExternalReferences(vec![signature_reference(sig)]));
    }
    if !f.notes.is_empty() {
        let props = f
            .notes
            .iter()
            .map(|(k, v)| Property { name: format!("airlock:note:{k}"), value: NormalizedString::new(v) })
            .collect();
        c.properties = Some(Properties(props));
    }
    if !f.files.is_empty() {
        // A directory: its digest is the tree's, no member's; each file is a nested
        // component with its own hash, as a model's files are (written by `write`, a batch
        // at a time: a tree may hold 100,000 files).
        c.hashes = None;
    }
    Ok(c)
}

/// The nested components of a `[[file]]` directory's files `files` (a slice of `f.files`).
fn tree_components(
    f: &FileArtifact,
    files: &[crate::bundle::manifest::ModelFile],
) -> Result<Vec<Component>, SbomError> {
    let class = file_class(f);
    let version = file_version(f, &class);
    files
        .iter()
        .map(|t| {
            let p = purl("generic", None, &t.path.as_str().replace('/', "_"), &t.sha256.to_string(), &[])?;
            Ok(component(class.clone(), t.path.as_str(), &version, format!("file:{}/{}", f.name, t.path), &t.sha256, p))
        })
        .collect()
}

fn image_component(i: &ImageArtifact) -> Result<Component, SbomError> {
    let image = crate::oci::ImageRef::parse(&i.reference).map_err(|e| SbomError::Invalid(e.to_string()))?;
    let last = image.repository.rsplit('/').next().unwrap_or(&image.repository).to_owned();
    let url = format!("{}/{}", image.registry, image.repository);
    let version = format!("sha256:{}", i.digest);
    let mut q = vec![("repository_url", url.as_str())];
    if let Some(tag) = &image.tag {
        q.push(("tag", tag.as_str()));
    }
    let mut c = component(
        Classification::Container,
        &i.reference,
        &version,
        format!("image:{}", i.digest),
        &i.digest,
        purl("oci", None, &last, &version, &q)?,
    );
    let nested = i
        .platforms
        .iter()
        .map(|p| {
            let v = format!("sha256:{}", p.digest);
            let arch = p.platform.split('/').nth(1).unwrap_or_default();
            let purl = purl("oci", None, &last, &v, &[("repository_url", url.as_str()), ("arch", arch)])?;
            Ok(component(
                Classification::Container,
                &format!("{} {}", i.reference, p.platform),
                &v,
                format!("image:{}:{}", i.digest, p.digest),
                &p.digest,
                purl,
            ))
        })
        .collect::<Result<Vec<_>, SbomError>>()?;
    if !nested.is_empty() {
        c.components = Some(Components(nested));
    }
    let references: Vec<_> = i
        .attached
        .iter()
        .map(|a| {
            let (kind, what) = match a.kind {
                AttachmentKind::Sbom => (ExternalReferenceType::Bom, "upstream SBOM"),
                AttachmentKind::Attestation => (ExternalReferenceType::Attestation, "upstream attestation"),
                AttachmentKind::Signature => (ExternalReferenceType::Other, "upstream signature"),
                AttachmentKind::Other => (ExternalReferenceType::Other, "upstream artifact"),
            };
            let mut found: Vec<String> = a.tag.iter().map(|t| format!("tag {t}")).collect();
            found.extend(a.artifact_type.iter().map(|t| format!("artifactType {t}")));
            let found = if found.is_empty() { "a referrer".to_owned() } else { found.join(", ") };
            let mut r = ExternalReference::new(kind, Uri::new(&format!("images/blobs/sha256/{}", a.digest)));
            r.comment = Some(format!("{what} ({found}), an OCI manifest carried in the bundle; not merged"));
            r.hashes = Some(sha256(&a.digest));
            r
        })
        .collect();
    let references: Vec<_> = references.into_iter().chain(i.signature.iter().map(signature_reference)).collect();
    if !references.is_empty() {
        c.external_references = Some(ExternalReferences(references));
    }
    Ok(c)
}

/// An upstream Sigstore signature that verified at lock time: a reference to the member the
/// site re-checks it from, and who signed.
fn signature_reference(s: &crate::spec::UpstreamSignature) -> ExternalReference {
    let (path, digest) = s.members().into_iter().next().expect("a signature names at least its bundle");
    let mut r = ExternalReference::new(ExternalReferenceType::Other, Uri::new(path.as_str()));
    let form = match s.form {
        crate::spec::SignatureForm::Referrer => "a Sigstore bundle (OCI referrer)",
        crate::spec::SignatureForm::CosignSig => "a cosign `.sig` signature manifest",
        crate::spec::SignatureForm::File => "a Sigstore bundle",
        crate::spec::SignatureForm::Pep740 => "a PEP 740 provenance object",
    };
    r.comment = Some(format!("upstream signature, {form}, carried in the bundle: {}", s.describe()));
    r.hashes = Some(sha256(&digest));
    r
}

fn model_component(m: &ModelArtifact) -> Result<Component, SbomError> {
    let (org, name) = m.repo.split_once('/').unwrap_or(("", &m.repo));
    let p = purl("huggingface", (!org.is_empty()).then_some(org), name, &m.commit, &[])?;
    let mut c = Component::new(
        Classification::MachineLearningModel,
        &m.repo,
        &m.commit,
        Some(format!("model:{}@{}", m.repo, m.commit)),
    );
    c.purl = Some(p);
    // A model is many files: each is a nested component with its own hash.
    let files = m
        .files
        .iter()
        .map(|f| {
            let p = purl("generic", None, &f.path.replace('/', "_"), &f.sha256.to_string(), &[])?;
            Ok(component(
                Classification::File,
                &f.path,
                &m.commit,
                format!("model:{}@{}:{}", m.repo, m.commit, f.path),
                &f.sha256,
                p,
            ))
        })
        .collect::<Result<Vec<_>, SbomError>>()?;
    c.components = Some(Components(files));
    Ok(c)
}

/// A UUID (version 5 layout) from a digest, so the serial number follows the content.
fn uuid_from(d: &Sha256) -> String {
    let mut b = [0u8; 16];
    b.copy_from_slice(&d.as_bytes()[..16]);
    b[6] = (b[6] & 0x0f) | 0x50;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!("urn:uuid:{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
}

/// The SBOM's JSON bytes (what `write` writes).
pub fn build(subject: &Subject<'_>) -> Result<Vec<u8>, SbomError> {
    let mut out = Vec::new();
    write(subject, &mut out)?;
    Ok(out)
}

/// Files of a `[[file]]` directory modelled, checked and written at once.
const TREE_BATCH: usize = 1024;

/// Write the SBOM as JSON, each part checked against the `CycloneDX` 1.5 rules before it is
/// written. Memory does not grow with a directory's file count: the document is modelled
/// without those files, and they are modelled, checked and written `TREE_BATCH` at a time
/// into their directory's component. Written by hand, the joining only: `cyclonedx-bom`
/// writes a whole modelled document (234 MB for 100,000 components), never a part of one;
/// every object in the output is the crate's own JSON.
pub fn write(subject: &Subject<'_>, out: &mut dyn std::io::Write) -> Result<(), SbomError> {
    let fields = skeleton(subject)?;
    put(out, b"{")?;
    for (n, (key, value)) in fields.iter().enumerate() {
        put(out, if n == 0 { b"" } else { b"," })?;
        json(out, key)?;
        put(out, b":")?;
        let (Some(listed), "components") = (value.as_array(), key.as_str()) else {
            json(out, value)?;
            continue;
        };
        put(out, b"[")?;
        for (i, (component, artifact)) in listed.iter().zip(subject.artifacts).enumerate() {
            put(out, if i == 0 { b"" } else { b"," })?;
            match (artifact, component.as_object()) {
                (Artifact::File(f), Some(fields)) if !f.files.is_empty() => write_tree(f, fields, out)?,
                _ => json(out, component)?,
            }
        }
        put(out, b"]")?;
    }
    put(out, b"}\n")
}

fn put(out: &mut dyn std::io::Write, bytes: &[u8]) -> Result<(), SbomError> {
    out.write_all(bytes).map_err(|e| SbomError::Invalid(e.to_string()))
}

fn json(out: &mut dyn std::io::Write, value: &(impl serde::Serialize + ?Sized)) -> Result<(), SbomError> {
    serde_json::to_writer(out, value).map_err(|e| SbomError::Invalid(e.to_string()))
}

/// The document without any directory's files, as JSON (in the crate's key order).
fn skeleton(subject: &Subject<'_>) -> Result<serde_json::Map<String, serde_json::Value>, SbomError> {
    let invalid = |e: &dyn std::fmt::Display| SbomError::Invalid(e.to_string());
    let components = subject.artifacts.iter().map(artifact_component).collect::<Result<Vec<_>, _>>()?;
    // The artifacts' JSON, hashed as it is written: held, it was 30 MB at 200,000 files.
    let mut identity = crate::digest::HashingWriter::new(std::io::sink());
    serde_json::to_writer(&mut identity, subject.artifacts).map_err(|e| invalid(&e))?;
    let (identity, _, _) = identity.finish();
    let serial = UrnUuid::new(uuid_from(&identity)).map_err(|e| SbomError::Invalid(format!("{e:?}")))?;
    let version = subject.version.to_string();
    let bundle = purl("generic", Some("airlock"), subject.name.as_str(), &version, &[])?;
    let mut main = Component::new(
        Classification::Platform,
        subject.name.as_str(),
        &version,
        Some(format!("bundle:{}@{version}", subject.name)),
    );
    main.purl = Some(bundle);
    let tool = Tool {
        vendor: Some(NormalizedString::new("airlock")),
        name: Some(NormalizedString::new("airlock")),
        version: Some(NormalizedString::new(env!("CARGO_PKG_VERSION"))),
        hashes: None,
        external_references: None,
    };
    let timestamp = DateTime::try_from(subject.created.to_string()).map_err(|e| invalid(&e))?;
    let bom = Bom {
        version: 1,
        serial_number: Some(serial),
        metadata: Some(Metadata {
            timestamp: Some(timestamp),
            tools: Some(Tools::List(vec![tool])),
            authors: None,
            component: Some(main),
            manufacture: None,
            supplier: None,
            licenses: None,
            properties: None,
            lifecycles: None,
        }),
        components: Some(Components(components)),
        dependencies: Some(Dependencies(dependencies(subject))),
        spec_version: SpecVersion::V1_5,
        ..Bom::default()
    };
    let mut doc = json_of(bom)?;
    if subject.spec == SbomSpec::V1_6 {
        doc["specVersion"] = "1.6".into();
        if doc.get("$schema").is_some() {
            doc["$schema"] = "http://cyclonedx.org/schema/bom-1.6.schema.json".into();
        }
    }
    match doc {
        serde_json::Value::Object(fields) => Ok(fields),
        _ => Err(invalid(&"the document is not an object")),
    }
}

/// A directory's component (`fields`) with its files nested, `TREE_BATCH` at a time.
fn write_tree(
    f: &FileArtifact,
    fields: &serde_json::Map<String, serde_json::Value>,
    out: &mut dyn std::io::Write,
) -> Result<(), SbomError> {
    put(out, b"{")?;
    for (key, value) in fields {
        json(out, key)?;
        put(out, b":")?;
        json(out, value)?;
        put(out, b",")?;
    }
    put(out, b"\"components\":[")?;
    for (b, batch) in f.files.chunks(TREE_BATCH).enumerate() {
        let part = Bom {
            serial_number: None,
            metadata: None,
            components: Some(Components(tree_components(f, batch)?)),
            spec_version: SpecVersion::V1_5,
            ..Bom::default()
        };
        let part = json_of(part)?;
        for (k, nested) in part["components"].as_array().into_iter().flatten().enumerate() {
            put(out, if b == 0 && k == 0 { b"" } else { b"," })?;
            json(out, nested)?;
        }
    }
    put(out, b"]}")
}

/// A modelled document, checked against the `CycloneDX` 1.5 rules, as the crate writes it.
fn json_of(bom: Bom) -> Result<serde_json::Value, SbomError> {
    let result = bom.validate_version(SpecVersion::V1_5);
    if !result.passed() {
        return Err(SbomError::Invalid(format!("{result:?}")));
    }
    let mut bytes = Vec::new();
    bom.output_as_json_v1_5(&mut bytes).map_err(|e| SbomError::Invalid(e.to_string()))?;
    serde_json::from_slice(&bytes).map_err(|e| SbomError::Invalid(e.to_string()))
}

/// The bom-ref of an artifact's component (as `artifact_component` names it).
fn bom_ref(a: &Artifact) -> String {
    match a {
        Artifact::Image(i) => format!("image:{}", i.digest),
        Artifact::Wheel(w) => format!("wheel:{}", w.filename),
        Artifact::Deb(d) => format!("deb:{}={}:{}", d.name, d.version, d.architecture),
        Artifact::Rpm(r) => format!("rpm:{}-{}.{}", r.name, r.evr(), r.architecture),
        Artifact::Model(m) => format!("model:{}@{}", m.repo, m.commit),
        Artifact::File(f) => format!("file:{}", f.name),
    }
}

/// The dependency graph: the bundle depends on every artifact; a deb on the packages of its
/// closure it requires (from the lock's `required_by`, inverted); a wheel on the wheels of the
/// projects its Python lock file lists as its dependencies. Every artifact has an entry.
fn dependencies(subject: &Subject<'_>) -> Vec<Dependency> {
    use std::collections::{BTreeMap, BTreeSet};
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut debs: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut rpms: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut wheels: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for a in subject.artifacts {
        graph.entry(bom_ref(a)).or_default();
        match a {
            Artifact::Deb(d) => debs.entry(d.name.as_str()).or_default().push(bom_ref(a)),
            Artifact::Rpm(r) => rpms.entry(r.name.as_str()).or_default().push(bom_ref(a)),
            Artifact::Wheel(w) => wheels.entry(w.name.as_str()).or_default().push(bom_ref(a)),
            _ => {}
        }
    }
    for a in subject.artifacts {
        match a {
            Artifact::Deb(d) => {
                for parent in d.required_by.iter().filter_map(|p| debs.get(p.as_str())).flatten() {
                    graph.entry(parent.clone()).or_default().insert(bom_ref(a));
                }
            }
            Artifact::Rpm(r) => {
                for parent in r.required_by.iter().filter_map(|p| rpms.get(p.as_str())).flatten() {
                    graph.entry(parent.clone()).or_default().insert(bom_ref(a));
                }
            }
            Artifact::Wheel(w) => {
                let needed: BTreeSet<String> =
                    w.dependencies.iter().filter_map(|n| wheels.get(n.as_str())).flatten().cloned().collect();
                graph.entry(bom_ref(a)).or_default().extend(needed);
            }
            _ => {}
        }
    }
    let main = format!("bundle:{}@{}", subject.name, subject.version);
    let all: Vec<String> = subject.artifacts.iter().map(bom_ref).collect::<BTreeSet<_>>().into_iter().collect();
    std::iter::once(Dependency { dependency_ref: main, dependencies: all })
        .chain(graph.into_iter().map(|(r, d)| Dependency { dependency_ref: r, dependencies: d.into_iter().collect() }))
        .collect()
}
