//! Python package names and wheel filenames, as both sides need them: the build side matches
//! an index's files against pins, the site's pip view groups carried wheels by project.
//! PEP 503 name normalisation; the wheel filename convention of PEP 427 / the binary
//! distribution format spec (`{name}-{ver}(-{build})?-{python}-{abi}-{platform}.whl`).

/// PEP 503 normalisation: lower case, runs of `-`, `_`, `.` become one `-`.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The parts of a wheel filename.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WheelName {
    /// PEP 503-normalised project name.
    pub name: String,
    pub version: String,
    pub python: Vec<String>,
    pub abi: String,
    pub platforms: Vec<String>,
}

impl WheelName {
    /// The parts of `filename`, or `None` when it is not a wheel's name.
    pub fn parse(filename: &str) -> Option<Self> {
        let stem = filename.strip_suffix(".whl")?;
        let parts: Vec<&str> = stem.split('-').collect();
        let (name, version, rest) = match parts.as_slice() {
            [n, v, _build, p, a, pl] => (n, v, [p, a, pl]),
            [n, v, p, a, pl] => (n, v, [p, a, pl]),
            _ => return None,
        };
        Some(Self {
            name: normalize(name),
            version: (*version).to_owned(),
            python: rest[0].split('.').map(str::to_owned).collect(),
            abi: (*rest[1]).to_owned(),
            platforms: rest[2].split('.').map(str::to_owned).collect(),
        })
    }
}

/// A target's Python version as a spec names it: `3.12` (markers see `3.12.0`) or `3.12.4`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonVersion {
    pub major: u32,
    pub minor: u32,
    /// `python_full_version` for markers.
    pub full: String,
}

impl PythonVersion {
    pub fn parse(text: &str) -> Option<Self> {
        let parts: Vec<u32> = text.split('.').map(|p| p.parse().ok()).collect::<Option<_>>()?;
        match parts.as_slice() {
            [major, minor] => Some(Self { major: *major, minor: *minor, full: format!("{major}.{minor}.0") }),
            [major, minor, _] => Some(Self { major: *major, minor: *minor, full: text.to_owned() }),
            _ => None,
        }
    }

    /// `python_version` for markers: `3.12`.
    pub fn short(&self) -> String {
        format!("{}.{}", self.major, self.minor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_names() {
        assert_eq!(normalize("Friendly_Bard..x-Y"), "friendly-bard-x-y");
    }

    #[test]
    fn parses_wheel_filenames() {
        let w = WheelName::parse("torch-2.9.0+rocm7.0-cp312-cp312-manylinux_2_28_x86_64.whl").unwrap();
        assert_eq!((w.name.as_str(), w.version.as_str()), ("torch", "2.9.0+rocm7.0"));
        let any = WheelName::parse("Six-1.16.0-py2.py3-none-any.whl").unwrap();
        assert_eq!(
            (any.name.as_str(), any.python.as_slice(), any.platforms.as_slice()),
            ("six", &["py2".to_owned(), "py3".to_owned()][..], &["any".to_owned()][..])
        );
        assert!(WheelName::parse("six-1.16.0.tar.gz").is_none());
        assert_eq!(WheelName::parse("pkg-1.0-1-py3-none-any.whl").unwrap().version, "1.0");
    }
}
