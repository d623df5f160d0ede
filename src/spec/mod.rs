//! `airlock.toml` (what the user asks for) and `airlock.lock` (every input pinned to a digest).
//!
//! Every section of the spec parses here, so that later sources only add behaviour, not syntax.
//! Unknown keys and unknown entry kinds are errors naming the file, line and key.

mod check;
pub mod lock;
pub mod metric;
mod names;
pub mod upstream;

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::digest::Sha256;
pub use names::{BundleName, DebPin, FileName, InvalidName, RpmPin};
pub use upstream::{SignatureForm, UpstreamSignature, UpstreamSigner};

/// Entry kinds a spec may hold, as their TOML array-of-tables names.
pub const ENTRY_KINDS: [&str; 6] = ["image", "wheel", "deb", "rpm", "model", "file"];

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    pub bundle: BundleMeta,
    #[serde(default)]
    pub registries: BTreeMap<String, RegistrySettings>,
    #[serde(default)]
    pub image: Vec<Spanned<ImageSpec>>,
    #[serde(default)]
    pub wheel: Vec<Spanned<WheelSpec>>,
    #[serde(default)]
    pub deb: Vec<Spanned<DebSpec>>,
    #[serde(default)]
    pub rpm: Vec<Spanned<RpmSpec>>,
    #[serde(default)]
    pub model: Vec<Spanned<ModelSpec>>,
    #[serde(default)]
    pub file: Vec<Spanned<FileSpec>>,
    #[serde(default)]
    pub validation: Validation,
    #[serde(default)]
    pub impact: Vec<Spanned<Impact>>,
}

/// A bundle version, with a message that says what is expected (`1.0` is not semver).
fn semver_version<'de, D: serde::Deserializer<'de>>(d: D) -> Result<semver::Version, D::Error> {
    let text = String::deserialize(d)?;
    semver::Version::parse(&text).map_err(|e| {
        serde::de::Error::custom(format!(
            "version `{text}` must be semver, MAJOR.MINOR.PATCH such as `1.0.0` or `2026.11.0` ({e})"
        ))
    })
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleMeta {
    pub name: BundleName,
    /// Compared as semver: a site refuses a lower version of the same bundle name.
    #[serde(deserialize_with = "semver_version")]
    pub version: semver::Version,
    #[serde(default)]
    pub description: Option<String>,
    /// After this the bundle is refused (`2027-06-30`, valid through that day, or an RFC 3339
    /// time): a replayed old bundle with a known-vulnerable stack stops being installable.
    #[serde(default, deserialize_with = "expiry")]
    pub expires: Option<crate::clock::Timestamp>,
}

fn expiry<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<crate::clock::Timestamp>, D::Error> {
    let Some(s) = Option::<String>::deserialize(d)? else { return Ok(None) };
    crate::clock::Timestamp::parse_expiry(&s).map(Some).map_err(serde::de::Error::custom)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistrySettings {
    /// Plain HTTP. Never implied, not even for loopback.
    #[serde(default)]
    pub insecure: bool,
    /// Extra CA bundle (PEM), relative to the spec.
    #[serde(default)]
    pub ca: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageSpec {
    #[serde(rename = "ref", default)]
    pub reference: Option<String>,
    #[serde(default)]
    pub oci_layout: Option<PathBuf>,
    #[serde(default)]
    pub tag: Option<String>,
    #[serde(default)]
    pub platforms: Vec<String>,
    /// Its upstream Sigstore signature must verify (found among its referrers or `.sig` tag).
    #[serde(default)]
    pub verify: Option<UpstreamSigner>,
}

impl ImageSpec {
    /// What identifies this entry in the lock: the `ref`, or the layout path and its tag.
    pub fn source_key(&self) -> (&str, Option<&str>) {
        match (&self.reference, &self.oci_layout) {
            (Some(r), _) => (r.as_str(), None),
            (None, Some(l)) => (l.to_str().unwrap_or_default(), self.tag.as_deref()),
            (None, None) => ("", None),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WheelSpec {
    pub index: String,
    /// Exact pins (`name==version`); or, instead, `lockfile`.
    #[serde(default)]
    pub requirements: Vec<String>,
    /// A PEP 751 `pylock.toml` or a requirements file with `--hash` lines (relative to the spec).
    #[serde(default)]
    pub lockfile: Option<PathBuf>,
    /// The Python versions of the targets (`"3.12"`, or several): wheel tags and markers.
    #[serde(default, deserialize_with = "one_or_many")]
    pub python: Vec<String>,
    #[serde(default)]
    pub platforms: Vec<String>,
    /// Each wheel's PEP 740 attestations (the index's `provenance`) must verify as this signer.
    #[serde(default)]
    pub verify: Option<UpstreamSigner>,
}

/// A string or a list of strings.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DebSpec {
    pub repo: String,
    pub suite: String,
    pub components: Vec<String>,
    pub arch: String,
    pub packages: Vec<DebPin>,
    #[serde(default)]
    pub keyring: Option<PathBuf>,
    #[serde(default)]
    pub allow_unsigned: bool,
    /// Accept a `Release` past its `Valid-Until` (logged): for a frozen snapshot of an archive.
    #[serde(default)]
    pub allow_expired: bool,
    /// Pin the dependency closure of `packages`, not only the packages themselves.
    #[serde(default)]
    pub resolve: bool,
    /// The target's dpkg status file (relative to the spec): what it has is not carried.
    /// Without it, a resolving entry takes the suite's `Priority: required` packages as the base.
    #[serde(default)]
    pub base_status: Option<PathBuf>,
    /// A baseline's (`freeze`) pins of what the stack's packages depend on, each `name=version`:
    /// carried and locked as `packages` are, but the distribution's to patch: `apply --adopt`
    /// accepts a newer installed version while every carried package's dependency on it is
    /// still met. Only without `resolve` (a resolving entry finds its own).
    #[serde(default)]
    pub dependencies: Vec<DebPin>,
}

/// `[[rpm]]`: packages from a dnf/yum repository (RHEL, Rocky, Alma, Oracle Linux, SLES).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpmSpec {
    /// The repository's base URL, as a `.repo` file's `baseurl`: `$basearch` and `$releasever`
    /// are expanded from `arch` and `releasever`.
    pub baseurl: String,
    /// The architecture packages are taken for (`x86_64`, `aarch64`); `noarch` comes with it.
    pub arch: String,
    #[serde(default)]
    pub releasever: Option<String>,
    pub packages: Vec<RpmPin>,
    /// The repository's `OpenPGP` key (binary or armored): `repodata/repomd.xml.asc` and each
    /// package's own header signature are checked with it.
    #[serde(default)]
    pub keyring: Option<PathBuf>,
    #[serde(default)]
    pub allow_unsigned: bool,
    /// Pin the dependency closure of `packages`, not only the packages themselves.
    #[serde(default)]
    pub resolve: bool,
    /// Follow weak dependencies (`Recommends`) too; off as `install_weak_deps=False` is.
    #[serde(default)]
    pub weak: bool,
    /// Packages the target has (by name, taken from these repositories): not carried.
    #[serde(default)]
    pub base: Vec<String>,
    /// The target's rpm database file (`/var/lib/rpm/rpmdb.sqlite`, copied; relative to the
    /// spec): what it has installed is not carried. Read with the build host's `rpm`.
    #[serde(default)]
    pub base_rpmdb: Option<PathBuf>,
    /// Module streams (`name:stream`) whose packages may be carried; a modular package of a
    /// stream not named here is refused.
    #[serde(default)]
    pub modules: Vec<String>,
    /// The purl namespace (`rhel`, `rocky`, `opensuse`) and `distro` qualifier (`el9`).
    #[serde(default)]
    pub vendor: Option<String>,
    #[serde(default)]
    pub distro: Option<String>,
}

impl RpmSpec {
    /// `baseurl` with `$basearch` and `$releasever` expanded, without a trailing `/`.
    pub fn url(&self) -> String {
        let mut url = self.baseurl.replace("$basearch", &self.arch).replace("${basearch}", &self.arch);
        if let Some(r) = &self.releasever {
            url = url.replace("$releasever", r).replace("${releasever}", r);
        }
        url.trim_end_matches('/').to_owned()
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    pub hub: String,
    pub repo: String,
    #[serde(default = "default_revision")]
    pub revision: String,
    #[serde(default)]
    pub files: Vec<String>,
}

fn default_revision() -> String {
    "main".to_owned()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSpec {
    /// The member name under `files/`.
    pub name: FileName,
    /// A URL, or a path relative to the spec's directory.
    pub source: String,
    /// Required for URLs; for local files, pins the content the lock must find.
    #[serde(default)]
    pub sha256: Option<Sha256>,
    #[serde(default)]
    pub kind: FileKind,
    #[serde(default)]
    pub notes: BTreeMap<String, String>,
    /// Its upstream Sigstore bundle (a URL, or a path relative to the spec), verified at lock
    /// time under `verify`.
    #[serde(default)]
    pub sigstore_bundle: Option<String>,
    #[serde(default)]
    pub verify: Option<UpstreamSigner>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    Firmware,
    Document,
    /// An airlock release binary for the site (`notes.target`: the Rust target it runs on,
    /// `x86_64-unknown-linux-gnu`): what `airlock self-upgrade` installs.
    Airlock,
    #[default]
    Generic,
}

impl std::fmt::Display for FileKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Firmware => "firmware",
            Self::Document => "document",
            Self::Airlock => "airlock",
            Self::Generic => "generic",
        })
    }
}

/// Where a `[[file]]` comes from: decided once, from the `source` string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileSource<'a> {
    Url(&'a str),
    Local(&'a str),
}

/// The note of a `[[file]]` of kind `airlock` that names the target it runs on
/// (`x86_64-unknown-linux-gnu`): what `self-upgrade` selects a binary by.
pub const AIRLOCK_TARGET: &str = "target";

impl FileSpec {
    /// The target an airlock binary runs on; `None` for another kind of file.
    pub fn airlock_target(&self) -> Option<&str> {
        (self.kind == FileKind::Airlock).then(|| self.notes.get(AIRLOCK_TARGET).map(String::as_str)).flatten()
    }

    pub fn source_kind(&self) -> FileSource<'_> {
        let s = self.source.as_str();
        if s.starts_with("https://") || s.starts_with("http://") { FileSource::Url(s) } else { FileSource::Local(s) }
    }
}

/// The support matrix and site checks: the spec's `[validation]` section (`C`, its checks, as
/// written with their place in the file; no `impact`), and the manifest's `validation`, which
/// carries them verbatim with the spec's `[[impact]]` register
/// (`bundle::manifest::Validation`: `Validation<Check, Impact>`). One shape, so the two cannot
/// drift apart; either refuses a field it does not know.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Validation<C = Spanned<Check>, I = NotInValidation> {
    /// The installed package whose version is the stack's `rocm` where neither
    /// `/opt/rocm/.info/version` nor `rocm-core` is there (a distribution's build:
    /// Debian's `libamdhip64-5`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rocm_from: Option<String>,
    /// The same for the CUDA toolkit, where `/usr/local/cuda/version.json` is not there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_from: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target: Vec<Target>,
    #[serde(default = "Vec::new", skip_serializing_if = "Vec::is_empty")]
    pub check: Vec<C>,
    #[serde(default = "Vec::new", skip_serializing_if = "Vec::is_empty")]
    pub impact: Vec<I>,
}

impl<C, I> Default for Validation<C, I> {
    fn default() -> Self {
        Self { rocm_from: None, cuda_from: None, target: Vec::new(), check: Vec::new(), impact: Vec::new() }
    }
}

impl<C, I> Validation<C, I> {
    /// The same section with each check made another form of it, and `impact` rows given.
    pub fn with<D, J>(&self, check: impl Fn(&C) -> D, impact: Vec<J>) -> Validation<D, J> {
        Validation {
            rocm_from: self.rocm_from.clone(),
            cuda_from: self.cuda_from.clone(),
            target: self.target.clone(),
            check: self.check.iter().map(check).collect(),
            impact,
        }
    }
}

/// A spec's `[validation]` holds no `impact`: the register is the top-level `[[impact]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotInValidation {}

impl<'de> Deserialize<'de> for NotInValidation {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Err(serde::de::Error::custom(
            "`impact` rows are the top-level `[[impact]]` register, not part of `[validation]`",
        ))
    }
}

impl Serialize for NotInValidation {
    fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        match *self {}
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    pub gpu: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gfx: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub os: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amdgpu: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rocm: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub firmware: BTreeMap<String, String>,
    /// The partition modes the row was qualified in (AMD: compute SPX/DPX/TPX/QPX/CPX, memory
    /// NPS1/NPS2/NPS4/NPS8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<PartitionModes>,
    /// `baremetal`, `passthrough`, `sriov`, optionally with the hypervisor (`passthrough:kvm`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub virtualization: Vec<String>,
    /// NVIDIA: the driver version requirement, compute capability requirement, MIG mode
    /// (`enabled` or `disabled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_cap: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<String>,
    /// NVIDIA: the CUDA toolkit's version requirement (`12.8.*`), judged after the change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    /// Where the row comes from: the vendor's compatibility page (a URL), the date it was read,
    /// who reviewed the row, and its status (`supported`, `preview`, `deprecated`…): shown in
    /// the approval pack, never used to decide a verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_date: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewed_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// One entry of the impact register (`[[impact]]`): a behaviour the change alters, the check
/// that detects it, and who decided what about it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Impact {
    pub component: String,
    pub old: String,
    pub new: String,
    /// The `[[validation.check]]` that detects the change, by name.
    pub test: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mitigation: Option<String>,
    pub owner: String,
    /// `accept`, `mitigate`, `block`… as the change board wrote it.
    pub decision: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionModes {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compute: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    pub name: String,
    pub run: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<u64>,
    /// `exit0`: judge by the exit code alone (for commands whose output airlock does not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Expect>,
    /// Numbers read from what it prints, compared with the current stack's under a threshold
    /// declared before the run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metric: Vec<Metric>,
}

/// `[[validation.check.metric]]`: a number the check prints and the threshold it must meet.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Metric {
    pub name: String,
    /// `json:/a/b` (a JSON pointer into the check's standard output) or `regex:…` (one capture
    /// group).
    pub from: String,
    /// Which way is better: `lower` (latency) or `higher` (throughput).
    pub better: Better,
    /// `<= 1.05 * current`, `>= 0.95 * current`, `<= current + 5`, or absolute: `<= 250`.
    pub threshold: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    Lower,
    Higher,
}

/// How a check's result is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Expect {
    Exit0,
}

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("cannot read `{}`", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}:{column}: {message}", path.display())]
    Parse { path: PathBuf, line: usize, column: usize, message: String },
    #[error("{}:{line}: {message}", path.display())]
    Invalid { path: PathBuf, line: usize, message: String },
}

impl crate::failure::Classify for SpecError {
    fn class(&self) -> crate::failure::Class {
        use crate::failure::Class;
        match self {
            // A spec that is not there, or is wrong, is a usage error; one that cannot be read
            // is a runtime error.
            SpecError::Read { source, .. } if source.kind() == std::io::ErrorKind::NotFound => Class::Usage,
            SpecError::Read { .. } => Class::Runtime,
            SpecError::Parse { .. } | SpecError::Invalid { .. } => Class::Usage,
        }
    }
}

impl Spec {
    /// How many entries (`[[image]]`, `[[wheel]]`, `[[deb]]`, `[[model]]`, `[[file]]`) it has.
    pub fn entries(&self) -> usize {
        self.image.len() + self.wheel.len() + self.deb.len() + self.rpm.len() + self.model.len() + self.file.len()
    }
}

/// A parsed spec with what is needed to point back into its text.
#[derive(Debug)]
pub struct SpecFile {
    pub path: PathBuf,
    pub sha256: Sha256,
    pub spec: Spec,
    text: String,
}

impl SpecFile {
    pub fn load(path: &Path) -> Result<Self, SpecError> {
        let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read { path: path.to_owned(), source })?;
        Self::parse(path, text)
    }

    pub fn parse(path: &Path, text: String) -> Result<Self, SpecError> {
        let spec: Spec = toml::from_str(&text).map_err(|e| parse_error(path, &text, &e))?;
        let file = Self { path: path.to_owned(), sha256: Sha256::of_bytes(text.as_bytes()), spec, text };
        file.check()?;
        Ok(file)
    }

    /// The spec as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The directory that relative paths in the spec are resolved against.
    pub fn base_dir(&self) -> &Path {
        self.path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
    }

    /// The 1-based line of a byte offset in the spec.
    pub fn line_of(&self, span: &Range<usize>) -> usize {
        line_col(&self.text, span.start).0
    }

    pub fn invalid(&self, span: &Range<usize>, message: impl Into<String>) -> SpecError {
        SpecError::Invalid { path: self.path.clone(), line: self.line_of(span), message: message.into() }
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rfind('\n').map_or(before.len(), |nl| before.len() - nl - 1) + 1;
    (line, column)
}

/// A TOML error as `file:line:column: message`, with serde's wording made specific.
pub(crate) fn parse_error(path: &Path, text: &str, err: &toml::de::Error) -> SpecError {
    let (line, column) = err.span().map_or((1, 1), |s| line_col(text, s.start));
    let mut message = err.message().trim().to_owned();
    // serde names a stray `[[widget]]` an "unknown field"; say what the user actually wrote.
    let line_text = text.lines().nth(line - 1).unwrap_or_default().trim_start();
    if message.starts_with("unknown field") && line_text.starts_with("[[") && !line_text.starts_with("[[validation.") {
        let kind = line_text.trim_start_matches('[').split(']').next().unwrap_or_default().trim();
        message = format!(
            "unknown entry kind `[[{kind}]]`, expected one of {}",
            ENTRY_KINDS.map(|k| format!("`[[{k}]]`")).join(", ")
        );
    }
    SpecError::Parse { path: path.to_owned(), line, column, message }
}

#[cfg(test)]
mod tests;
