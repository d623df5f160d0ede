//! Python lock files written by the tools users already use: a PEP 751 `pylock.toml` (`uv pip
//! compile --format pylock.toml`, `pip lock`) or a requirements file with `--hash` options
//! (`uv pip compile --generate-hashes`, `pip-compile --generate-hashes`). The file is the
//! resolution — airlock does not resolve Python dependencies — and its environment markers are
//! evaluated (`pep508_rs`) for each target: a package no target needs is left out.

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;

use pep508_rs::pep440_rs::{Operator, Version, VersionSpecifiers};
use pep508_rs::{MarkerEnvironment, MarkerEnvironmentBuilder, MarkerTree, Requirement, VersionOrUrl};
use serde::Deserialize;

use crate::digest::Sha256;
use crate::wheel::{PythonVersion, normalize};

/// One environment the bundle is for: a Python version on an operating system and machine.
pub struct Target {
    pub python: PythonVersion,
    env: MarkerEnvironment,
    label: String,
}

/// The operating system and machine a platform tag implies: `sys_platform`, `platform_system`,
/// `os_name`, `platform_machine`. `None` for `any`.
fn platform_of(tag: &str) -> Option<(&'static str, &'static str, &'static str, &'static str)> {
    const MACHINES: [(&str, &str); 8] = [
        ("x86_64", "x86_64"),
        ("aarch64", "aarch64"),
        ("ppc64le", "ppc64le"),
        ("s390x", "s390x"),
        ("i686", "i686"),
        ("armv7l", "armv7l"),
        ("riscv64", "riscv64"),
        ("arm64", "arm64"),
    ];
    let machine = || MACHINES.iter().find(|(m, _)| tag.ends_with(m)).map(|(_, m)| *m);
    if tag.starts_with("manylinux") || tag.starts_with("musllinux") || tag.starts_with("linux") {
        Some(("linux", "Linux", "posix", machine()?))
    } else if tag.starts_with("macosx") {
        Some(("darwin", "Darwin", "posix", if tag.ends_with("x86_64") { "x86_64" } else { "arm64" }))
    } else if tag.starts_with("win") {
        let m = match tag {
            "win_amd64" => "AMD64",
            "win_arm64" => "ARM64",
            _ => "x86",
        };
        Some(("win32", "Windows", "nt", m))
    } else {
        None
    }
}

/// Why a lock file (or an entry's targets) cannot be carried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LockFileError {
    #[error("invalid python `{0}`")]
    Python(String),
    /// The marker environment of a Python version cannot be made.
    #[error("python `{python}`: {detail}")]
    Environment { python: String, detail: String },
    /// A PEP 751 lock that is not one this airlock reads, or a package in it airlock does not
    /// carry (a VCS, a directory, no wheels, no sha256): why.
    #[error("{0}")]
    PyLock(String),
    /// A requirements file's line that airlock does not carry (an option, no `==`, no hash).
    #[error("line {line}: {why}")]
    Line { line: usize, why: String },
}

impl crate::failure::Classify for LockFileError {
    /// The spec's lock file, written by its author.
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Usage
    }
}

/// Every (Python version × platform) target of an entry. Platforms come from the entry's
/// platform tags; with none but `any`, the target is Linux on `x86_64` (a GPU cluster's node).
pub fn targets(python: &[String], platforms: &[String]) -> Result<Vec<Target>, LockFileError> {
    let mut systems: Vec<_> = platforms.iter().filter_map(|p| platform_of(p)).collect();
    systems.sort_unstable();
    systems.dedup();
    if systems.is_empty() {
        systems.push(("linux", "Linux", "posix", "x86_64"));
    }
    let mut out = Vec::new();
    for p in python {
        let version = PythonVersion::parse(p).ok_or_else(|| LockFileError::Python(p.clone()))?;
        for &(sys_platform, platform_system, os_name, machine) in &systems {
            let short = version.short();
            let env = MarkerEnvironment::try_from(MarkerEnvironmentBuilder {
                implementation_name: "cpython",
                implementation_version: &version.full,
                os_name,
                platform_machine: machine,
                platform_python_implementation: "CPython",
                platform_release: "",
                platform_system,
                platform_version: "",
                python_full_version: &version.full,
                python_version: &short,
                sys_platform,
            })
            .map_err(|e| LockFileError::Environment { python: p.clone(), detail: e.to_string() })?;
            out.push(Target {
                label: format!("python {} on {sys_platform} {machine}", version.full),
                python: version.clone(),
                env,
            });
        }
    }
    Ok(out)
}

/// What a lock file lists for one package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listed {
    /// A requirements file: the hashes any file of the version may have (pip's hash-checking
    /// mode).
    Hashes(Vec<Sha256>),
    /// A `pylock.toml`: its wheels by filename, each with its hash.
    Wheels(Vec<(String, Sha256)>),
}

/// One package a lock file pins for at least one target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pinned {
    /// PEP 503-normalised.
    pub name: String,
    pub version: String,
    pub listed: Listed,
    /// What the lock file says it depends on (PEP 751 `dependencies`), normalised names.
    pub dependencies: Vec<String>,
}

/// Read a lock file: `*.toml` is a PEP 751 lock, anything else a requirements file.
pub fn read(path: &Path, text: &str, targets: &[Target]) -> Result<Vec<Pinned>, LockFileError> {
    if path.extension().is_some_and(|e| e == "toml") {
        pylock(text, targets).map_err(LockFileError::PyLock)
    } else {
        requirements(text, targets)
    }
}

fn wanted(marker: &MarkerTree, targets: &[Target]) -> bool {
    targets.iter().any(|t| marker.evaluate(&t.env, &[]))
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct PyLock {
    lock_version: String,
    #[serde(default)]
    requires_python: Option<String>,
    #[serde(default)]
    packages: Vec<PyLockPackage>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct PyLockPackage {
    name: String,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    marker: Option<String>,
    #[serde(default)]
    wheels: Vec<PyLockWheel>,
    #[serde(default)]
    dependencies: Vec<PyLockDependency>,
    #[serde(default)]
    vcs: Option<toml::Value>,
    #[serde(default)]
    directory: Option<toml::Value>,
    #[serde(default)]
    archive: Option<toml::Value>,
}

/// A PEP 751 `packages.dependencies` entry: enough keys to name one package of the lock.
#[derive(Deserialize)]
struct PyLockDependency {
    name: String,
}

#[derive(Deserialize)]
struct PyLockWheel {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    hashes: BTreeMap<String, String>,
}

impl PyLockWheel {
    /// The filename: `name`, else the last segment of `url` or `path` (PEP 751).
    fn filename(&self) -> Option<String> {
        if let Some(n) = &self.name {
            return Some(n.clone());
        }
        let from = self.url.as_deref().or(self.path.as_deref())?;
        let last = from.split(['?', '#']).next()?.rsplit('/').next()?;
        // URLs percent-encode what filenames hold literally (`+` in local versions as `%2B`).
        Some(percent_encoding::percent_decode_str(last).decode_utf8().ok()?.into_owned())
    }
}

fn pylock(text: &str, targets: &[Target]) -> Result<Vec<Pinned>, String> {
    let lock: PyLock = toml::from_str(text).map_err(|e| format!("not a PEP 751 lock file: {}", e.message()))?;
    if lock.lock_version.split('.').next() != Some("1") {
        return Err(format!("lock-version `{}`: this airlock reads PEP 751 version 1", lock.lock_version));
    }
    if let Some(requires) = &lock.requires_python {
        let specifiers = VersionSpecifiers::from_str(requires).map_err(|e| format!("requires-python: {e}"))?;
        for t in targets {
            let v = Version::from_str(&t.python.full).map_err(|e| e.to_string())?;
            if !specifiers.contains(&v) {
                return Err(format!("requires-python `{requires}` excludes the target {}", t.label));
            }
        }
    }
    let mut out = Vec::new();
    for p in lock.packages {
        let marker = match &p.marker {
            Some(m) => MarkerTree::from_str(m).map_err(|e| format!("`{}`: marker `{m}`: {e}", p.name))?,
            None => MarkerTree::TRUE,
        };
        if !wanted(&marker, targets) {
            continue;
        }
        let kind =
            [("a VCS", p.vcs.is_some()), ("a directory", p.directory.is_some()), ("an archive", p.archive.is_some())];
        if let Some((what, _)) = kind.iter().find(|(_, is)| *is) {
            return Err(format!("`{}` comes from {what}; airlock carries wheels from an index", p.name));
        }
        let version = p.version.clone().ok_or_else(|| format!("`{}` has no version", p.name))?;
        if p.wheels.is_empty() {
            return Err(format!(
                "`{}=={version}` lists no wheels (only a source distribution); airlock carries wheels",
                p.name
            ));
        }
        let mut wheels = Vec::new();
        for w in &p.wheels {
            let filename = w.filename().ok_or_else(|| format!("`{}`: a wheel with no name, url or path", p.name))?;
            let hash = w.hashes.get("sha256").ok_or_else(|| format!("`{filename}` has no sha256 hash"))?;
            let sha256 = hash.parse().map_err(|e| format!("`{filename}`: {e}"))?;
            wheels.push((filename, sha256));
        }
        let mut dependencies: Vec<String> = p.dependencies.iter().map(|d| normalize(&d.name)).collect();
        dependencies.sort();
        dependencies.dedup();
        out.push(Pinned { name: normalize(&p.name), version, listed: Listed::Wheels(wheels), dependencies });
    }
    Ok(out)
}

/// Options that take effect for the whole file in pip; the spec's `index` is what airlock uses.
const GLOBAL_OPTIONS: [&str; 11] = [
    "--index-url",
    "-i",
    "--extra-index-url",
    "--find-links",
    "-f",
    "--trusted-host",
    "--no-binary",
    "--only-binary",
    "--prefer-binary",
    "--pre",
    "--require-hashes",
];

fn requirements(text: &str, targets: &[Target]) -> Result<Vec<Pinned>, LockFileError> {
    // Continuation lines (a trailing `\`) are joined first; then `#` at the start or after
    // whitespace begins a comment (pip's rules).
    let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
    let mut out = Vec::new();
    for (n, raw) in joined.lines().enumerate() {
        let line = match raw.find(" #").or_else(|| raw.find("\t#")) {
            Some(i) => &raw[..i],
            None if raw.trim_start().starts_with('#') => "",
            None => raw,
        }
        .trim();
        let at = |why: String| LockFileError::Line { line: n + 1, why };
        if line.is_empty() {
            continue;
        }
        if line.starts_with('-') {
            let option = line.split([' ', '=']).next().unwrap_or_default();
            if GLOBAL_OPTIONS.contains(&option) {
                tracing::debug!("requirements file: `{option}` ignored; the spec's `index` is used");
                continue;
            }
            return Err(at(format!("`{option}` is not supported (one self-contained file with hashes)")));
        }
        let (requirement, options) = match line.find("--") {
            Some(i) => (line[..i].trim(), &line[i..]),
            None => (line, ""),
        };
        let mut hashes = Vec::new();
        let mut words = options.split_whitespace();
        while let Some(word) = words.next() {
            let value = match word.strip_prefix("--hash") {
                Some("") => words.next().unwrap_or_default(),
                Some(v) => v.trim_start_matches('='),
                None => return Err(at(format!("`{word}` is not supported on a requirement line"))),
            };
            let (algorithm, hex) = value.split_once(':').ok_or_else(|| at(format!("bad hash `{value}`")))?;
            if algorithm == "sha256" {
                hashes.push(hex.parse::<Sha256>().map_err(|e| at(format!("hash `{value}`: {e}")))?);
            }
        }
        let req = Requirement::<pep508_rs::VerbatimUrl>::from_str(requirement).map_err(|e| at(e.to_string()))?;
        if !wanted(&req.marker, targets) {
            continue;
        }
        let name = req.name.to_string();
        let version = match &req.version_or_url {
            Some(VersionOrUrl::VersionSpecifier(specs))
                if specs.len() == 1 && matches!(specs[0].operator(), Operator::Equal | Operator::ExactEqual) =>
            {
                specs[0].version().to_string()
            }
            _ => return Err(at(format!("`{requirement}` is not pinned with `==`"))),
        };
        if hashes.is_empty() {
            return Err(at(format!(
                "`{name}=={version}` has no --hash=sha256:… (write the file with `uv pip compile --generate-hashes`)"
            )));
        }
        out.push(Pinned { name: normalize(&name), version, listed: Listed::Hashes(hashes), dependencies: Vec::new() });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn t(python: &[&str]) -> Vec<Target> {
        let python: Vec<String> = python.iter().map(|s| (*s).to_owned()).collect();
        targets(&python, &["manylinux_2_17_x86_64".into(), "any".into()]).unwrap()
    }

    fn names(p: &[Pinned]) -> Vec<String> {
        p.iter().map(|p| format!("{}=={}", p.name, p.version)).collect()
    }

    #[test]
    fn requirements_with_hashes_as_uv_writes_them() {
        let text = format!(
            "# This file was autogenerated by uv via the following command:\n#    uv pip compile --generate-hashes\n--index-url https://pypi.org/simple\n\
             numpy==2.1.3 ; python_full_version >= '3.11' \\\n    --hash=sha256:{A} \\\n    --hash=sha256:{B}\n    # via -r req.in\n\
             tomli==2.0.1 ; python_full_version < '3.11' \\\n    --hash=sha256:{A}\n\
             Six==1.16.0 --hash sha256:{B}  # trailing comment\n\
             pywin==1 ; sys_platform == 'win32' --hash=sha256:{A}\n"
        );
        let got = requirements(&text, &t(&["3.12"])).unwrap();
        assert_eq!(names(&got), ["numpy==2.1.3", "six==1.16.0"]);
        assert_eq!(got[0].listed, Listed::Hashes(vec![A.parse().unwrap(), B.parse().unwrap()]));
        // Two targets: what either needs.
        assert_eq!(
            names(&requirements(&text, &t(&["3.10", "3.12"])).unwrap()),
            ["numpy==2.1.3", "tomli==2.0.1", "six==1.16.0"]
        );
    }

    #[test]
    fn requirements_refuse_what_is_not_a_pin_with_hashes() {
        let ts = t(&["3.12"]);
        let why = |text: &str| match requirements(text, &ts).unwrap_err() {
            LockFileError::Line { line, why } => (line, why),
            other => panic!("not a line's error: {other}"),
        };
        let (line, err) = why(&format!("six>=1.0 --hash=sha256:{A}"));
        assert!(line == 1 && err.contains("not pinned with `==`"), "{err}");
        let (line, err) = why("six==1.16.0\n");
        assert!(line == 1 && err.contains("--generate-hashes"), "{err}");
        let (_, err) = why("-r other.txt\n");
        assert!(err.contains("`-r` is not supported"), "{err}");
    }

    #[test]
    fn pylock_as_uv_writes_it() {
        let text = format!(
            r#"lock-version = "1.0"
created-by = "uv"
requires-python = ">=3.11"

[[packages]]
name = "numpy"
version = "2.1.3"
marker = "python_full_version >= '3.11'"
sdist = {{ url = "https://files.example/numpy-2.1.3.tar.gz", size = 1, hashes = {{ sha256 = "{A}" }} }}
wheels = [
    {{ url = "https://files.example/p/numpy-2.1.3-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", size = 2, hashes = {{ sha256 = "{B}" }} }},
]

[[packages]]
name = "pywin32"
version = "308"
marker = "sys_platform == 'win32'"
wheels = [{{ url = "https://files.example/pywin32-308-cp312-cp312-win_amd64.whl", hashes = {{ sha256 = "{A}" }} }}]

[[packages]]
name = "Torch"
version = "2.9.0+rocm7.0"
wheels = [{{ name = "torch-2.9.0+rocm7.0-cp312-cp312-manylinux_2_28_x86_64.whl", url = "https://x/torch-2.9.0%2Brocm7.0-cp312-cp312-manylinux_2_28_x86_64.whl", hashes = {{ sha256 = "{A}" }} }}]
"#
        );
        let got = pylock(&text, &t(&["3.12"])).unwrap();
        assert_eq!(names(&got), ["numpy==2.1.3", "torch==2.9.0+rocm7.0"]);
        assert_eq!(
            got[0].listed,
            Listed::Wheels(vec![(
                "numpy-2.1.3-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl".into(),
                B.parse().unwrap()
            )])
        );
        let err = pylock(&text, &t(&["3.10"])).unwrap_err();
        assert!(err.contains("requires-python `>=3.11` excludes the target python 3.10.0"), "{err}");
        let sdist_only =
            "lock-version = \"1.0\"\n[[packages]]\nname = \"x\"\nversion = \"1\"\nsdist = { url = \"u\" }\n";
        assert!(pylock(sdist_only, &t(&["3.12"])).unwrap_err().contains("lists no wheels"));
        let by_url = PyLockWheel {
            name: None,
            url: Some("https://x/p/torch-2.9.0%2Brocm7.0-cp312-cp312-manylinux_2_28_x86_64.whl?x=1".into()),
            path: None,
            hashes: BTreeMap::new(),
        };
        assert_eq!(by_url.filename().as_deref(), Some("torch-2.9.0+rocm7.0-cp312-cp312-manylinux_2_28_x86_64.whl"));
        let v2 = "lock-version = \"2.0\"\n";
        assert!(pylock(v2, &t(&["3.12"])).unwrap_err().contains("version 1"));
    }
}
