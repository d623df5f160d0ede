//! Reading `Packages` indexes and dpkg status files as streams: an index is decompressed on
//! one thread into a pipe while `deb822-fast` reads paragraphs from the other end, so a 60 MB
//! distribution index never sits in memory whole; each paragraph is cut down to the fields
//! airlock resolves with ([`Pkg`]) and dropped.

use std::io::{BufReader, Read};

use deb822_fast::{Paragraph, ParagraphReader};
use debian_control::lossy::{Relation, Relations};
use debversion::Version;

pub use crate::sources::index::{Compression, Index, ReadError};

/// Call `each` with every paragraph of a `Packages` index, in order (`Index::stream`: a
/// decompression error or a digest mismatch wins over what `each` said).
pub fn paragraphs(
    index: &Index,
    mut each: impl FnMut(Paragraph) -> Result<(), BadStanza>,
) -> Result<(), ReadError<BadStanza>> {
    index.stream(|reader| {
        for paragraph in ParagraphReader::new(reader) {
            paragraph.map_err(|e| BadStanza::NotIndex(e.to_string())).and_then(&mut each)?;
        }
        Ok(())
    })
}

/// `Multi-Arch`: how a package satisfies dependencies across architectures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MultiArch {
    No,
    Same,
    Foreign,
    Allowed,
}

/// A virtual package a package provides, versioned or not.
#[derive(Debug, Clone)]
pub struct Provided {
    pub name: String,
    pub version: Option<Version>,
}

/// One package of an index (or of the target's status file), cut down to what resolving
/// needs. Relation fields stay text until the resolver visits the package: a distribution
/// index has 60 000 packages and a closure touches a few hundred.
#[derive(Debug, Clone)]
pub struct Pkg {
    pub name: String,
    pub version: Version,
    pub architecture: String,
    pub multi_arch: MultiArch,
    pub required: bool,
    /// `Priority: important`: what a standard installation has beside the required packages.
    pub important: bool,
    pub pre_depends: String,
    pub depends: String,
    pub conflicts: String,
    pub breaks: String,
    pub provides: Vec<Provided>,
    /// Which loaded index it came from (for the base: unused).
    pub source: usize,
}

/// A paragraph of an index or of dpkg's status file that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadStanza {
    #[error("`{package}`: bad Version `{version}`: {detail}")]
    Version { package: String, version: String, detail: String },
    #[error("`{package}`: bad Provides: {detail}")]
    Provides { package: String, detail: String },
    #[error("not a dpkg status file: {0}")]
    NotStatus(String),
    #[error("not a deb822 index: {0}")]
    NotIndex(String),
}

impl crate::failure::Classify for BadStanza {
    /// An archive's index (verified as signed) or a node's status file: its source's failure.
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Runtime
    }
}

impl Pkg {
    /// The fields of one paragraph; `None` for a paragraph that names no package or version.
    pub fn from_paragraph(p: &Paragraph, source: usize) -> Result<Option<Self>, BadStanza> {
        let (Some(name), Some(version)) = (p.get("Package"), p.get("Version")) else { return Ok(None) };
        let version: Version = version.parse().map_err(|e| BadStanza::Version {
            package: name.to_owned(),
            version: version.to_owned(),
            detail: format!("{e}"),
        })?;
        let text = |k: &str| p.get(k).unwrap_or_default().to_owned();
        let multi_arch = match p.get("Multi-Arch").map(str::trim) {
            Some("same") => MultiArch::Same,
            Some("foreign") => MultiArch::Foreign,
            Some("allowed") => MultiArch::Allowed,
            _ => MultiArch::No,
        };
        let provides = relations(p.get("Provides").unwrap_or_default())
            .map_err(|e| BadStanza::Provides { package: name.to_owned(), detail: e.to_string() })?
            .0
            .into_iter()
            .flatten()
            .map(|r| Provided { name: r.name, version: r.version.map(|(_, v)| v) })
            .collect();
        Ok(Some(Self {
            name: name.to_owned(),
            version,
            architecture: text("Architecture"),
            multi_arch,
            required: p.get("Priority").is_some_and(|v| v.trim() == "required")
                || p.get("Essential").is_some_and(|v| v.trim() == "yes"),
            important: p.get("Priority").is_some_and(|v| v.trim() == "important"),
            pre_depends: text("Pre-Depends"),
            depends: text("Depends"),
            conflicts: text("Conflicts"),
            breaks: text("Breaks"),
            provides,
            source,
        }))
    }

    /// `name version arch` for messages.
    pub fn label(&self) -> String {
        format!("{} {}", self.name, self.version)
    }
}

/// A relation field that does not parse: the parser's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadRelations(pub String);

impl crate::failure::Classify for BadRelations {
    /// An index's field, verified as the archive signed it: the archive's failure.
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Runtime
    }
}

/// Parse a relation field (`a (>= 1) | b, c:any`).
pub fn relations(text: &str) -> Result<Relations, BadRelations> {
    // Continuation lines of a folded field.
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    flat.parse().map_err(BadRelations)
}

/// A relation as Debian writes it: `name[:qual] (op version)`.
pub fn show(r: &Relation) -> String {
    let qual = r.archqual.as_deref().map(|q| format!(":{q}")).unwrap_or_default();
    match &r.version {
        Some((op, v)) => format!("{}{qual} ({op} {v})", r.name),
        None => format!("{}{qual}", r.name),
    }
}

/// The packages a dpkg status file says are installed (`Status: install ok installed`),
/// read as a stream.
pub fn read_status(reader: impl Read) -> Result<Vec<Pkg>, BadStanza> {
    let mut out = Vec::new();
    for p in ParagraphReader::new(BufReader::new(reader)) {
        let p = p.map_err(|e| BadStanza::NotStatus(e.to_string()))?;
        let installed = p.get("Status").is_some_and(|s| s.split_whitespace().last() == Some("installed"));
        if installed && let Some(pkg) = Pkg::from_paragraph(&p, usize::MAX)? {
            out.push(pkg);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_keeps_installed_packages_with_their_provides() {
        let status = "Package: libc6\nStatus: install ok installed\nVersion: 2.36-9\nArchitecture: amd64\nMulti-Arch: same\nProvides: libc6-x (= 2.36)\n\nPackage: gone\nStatus: deinstall ok config-files\nVersion: 1\nArchitecture: amd64\n";
        let pkgs = read_status(status.as_bytes()).unwrap();
        assert_eq!(pkgs.len(), 1);
        assert_eq!((pkgs[0].name.as_str(), pkgs[0].multi_arch), ("libc6", MultiArch::Same));
        assert_eq!(pkgs[0].provides[0].version.as_ref().map(ToString::to_string).as_deref(), Some("2.36"));
    }

    #[test]
    fn versions_order_as_debian_policy_says() {
        let v = |s: &str| s.parse::<Version>().unwrap();
        assert!(v("1.0~rc1") < v("1.0"));
        assert!(v("1:0.9") > v("2.0"));
        assert!(v("2.10-3") > v("2.9-9"));
        assert!(v("6.4.0-1") < v("6.4.0-1+b1"));
        let r = relations("a (>= 1.2) | b,\n c:any, d (<< 2~)").unwrap();
        let shown: Vec<Vec<String>> = r.0.iter().map(|g| g.iter().map(show).collect()).collect();
        assert_eq!(shown, vec![vec!["a (>= 1.2)", "b"], vec!["c:any"], vec!["d (<< 2~)"]]);
    }
}
