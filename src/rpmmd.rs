//! rpm-md repository metadata (`repodata/`) as `createrepo_c` writes it: `repomd.xml` (what
//! each metadata file is, with its checksum), `primary.xml` (one `<package>` per rpm: NEVRA,
//! checksum, location, provides, requires, the files in `bin/` and `/etc`), `updateinfo.xml`
//! (advisories) and `modules.yaml` (module streams and their rpms). `primary` and `updateinfo`
//! are read as streams with `quick-xml`, one package or advisory at a time.

use std::borrow::Cow;
use std::io::BufRead;

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

/// A checksum as rpm-md names it: `sha256`, `sha512`, …
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checksum {
    pub kind: String,
    pub hex: String,
}

impl Checksum {
    /// Only SHA-2: a repository that offers sha1 or md5 alone is refused by name.
    pub fn strong(&self) -> bool {
        matches!(self.kind.as_str(), "sha256" | "sha384" | "sha512")
    }
}

/// One `<data>` of `repomd.xml`.
#[derive(Debug, Clone, Default)]
pub struct RepoData {
    pub kind: String,
    pub location: String,
    pub checksum: Option<Checksum>,
    pub open_checksum: Option<Checksum>,
    pub size: Option<u64>,
    pub open_size: Option<u64>,
}

#[derive(Debug, Clone, Default)]
pub struct Repomd {
    pub revision: Option<String>,
    pub data: Vec<RepoData>,
}

impl Repomd {
    pub fn get(&self, kind: &str) -> Option<&RepoData> {
        self.data.iter().find(|d| d.kind == kind)
    }
}

/// A dependency as primary lists it: `name`, or `name OP [EPOCH:]VER[-REL]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Dep {
    pub name: String,
    /// `EQ`, `LT`, `LE`, `GT`, `GE`, or none.
    pub flags: Option<String>,
    pub epoch: Option<String>,
    pub ver: Option<String>,
    pub rel: Option<String>,
}

impl std::fmt::Display for Dep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)?;
        if let (Some(flags), Some(ver)) = (&self.flags, &self.ver) {
            let op = match flags.as_str() {
                "EQ" => "=",
                "LT" => "<",
                "LE" => "<=",
                "GT" => ">",
                _ => ">=",
            };
            write!(f, " {op} ")?;
            if let Some(e) = self.epoch.as_deref().filter(|e| *e != "0") {
                write!(f, "{e}:")?;
            }
            f.write_str(ver)?;
            if let Some(r) = &self.rel {
                write!(f, "-{r}")?;
            }
        }
        Ok(())
    }
}

/// One `<package>` of primary, cut down to what resolving and pinning need.
#[derive(Debug, Clone, Default)]
pub struct Package {
    pub name: String,
    pub arch: String,
    pub epoch: u32,
    pub version: String,
    pub release: String,
    pub checksum: Option<Checksum>,
    pub location: String,
    pub size: u64,
    pub provides: Vec<Dep>,
    pub requires: Vec<Dep>,
    pub recommends: Vec<Dep>,
    pub files: Vec<String>,
}

impl Package {
    pub fn nevra(&self) -> String {
        format!("{}-{}.{}", self.name, self.evr(), self.arch)
    }

    pub fn evr(&self) -> String {
        if self.epoch == 0 {
            format!("{}-{}", self.version, self.release)
        } else {
            format!("{}:{}-{}", self.epoch, self.version, self.release)
        }
    }
}

/// Why repository metadata cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    /// Not well-formed XML (or YAML, for `modules.yaml`): the parser's words.
    #[error("not {format}: {detail}")]
    Syntax { format: &'static str, detail: String },
    #[error("bad attribute{}: {detail}", .name.as_ref().map(|n| format!(" `{n}`")).unwrap_or_default())]
    Attribute { name: Option<String>, detail: String },
    #[error("unknown entity `&{0};`")]
    Entity(String),
    #[error("cut short inside {0}")]
    CutShort(&'static str),
    /// A field that must be a number and is not (`size`, a package's `epoch`).
    #[error("{what} is not a number: `{value}`")]
    NotANumber { what: String, value: String },
    /// Well-formed, but not the metadata it should be: what is missing or out of place.
    #[error("{0}")]
    Shape(String),
}

impl crate::failure::Classify for MetadataError {
    /// Metadata a repository served that cannot be read is that repository's failure (its
    /// checksum was verified before it was read).
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Runtime
    }
}

fn xml(e: impl std::fmt::Display) -> MetadataError {
    MetadataError::Syntax { format: "XML", detail: e.to_string() }
}

fn shape(what: &str) -> MetadataError {
    MetadataError::Shape(what.to_owned())
}

fn attr(e: &BytesStart<'_>, name: &str) -> Result<Option<String>, MetadataError> {
    let bad = |name: Option<&str>, e: &dyn std::fmt::Display| MetadataError::Attribute {
        name: name.map(str::to_owned),
        detail: e.to_string(),
    };
    for a in e.attributes() {
        let a = a.map_err(|e| bad(None, &e))?;
        if a.key.as_ref() == name.as_bytes() {
            return Ok(Some(a.unescape_value().map_err(|e| bad(Some(name), &e))?.into_owned()));
        }
    }
    Ok(None)
}

/// The text up to the element's end (entity references resolved).
fn text<R: BufRead>(reader: &mut Reader<R>, buf: &mut Vec<u8>) -> Result<String, MetadataError> {
    let mut out = String::new();
    loop {
        match reader.read_event_into(buf).map_err(xml)? {
            Event::Text(t) => out.push_str(&t.decode().map_err(xml)?),
            Event::CData(t) => out.push_str(&t.decode().map_err(xml)?),
            Event::GeneralRef(r) => {
                if let Some(c) = r.resolve_char_ref().map_err(xml)? {
                    out.push(c);
                } else {
                    let name = r.decode().map_err(xml)?;
                    out.push_str(match name.as_ref() {
                        "amp" => "&",
                        "lt" => "<",
                        "gt" => ">",
                        "quot" => "\"",
                        "apos" => "'",
                        other => return Err(MetadataError::Entity(other.to_owned())),
                    });
                }
            }
            Event::End(_) => return Ok(out),
            Event::Eof => return Err(MetadataError::CutShort("an element")),
            _ => {}
        }
        buf.clear();
    }
}

fn number(value: Option<String>, what: &str) -> Result<Option<u64>, MetadataError> {
    value
        .map(|v| v.trim().parse::<u64>().map_err(|_| MetadataError::NotANumber { what: format!("`{what}`"), value: v }))
        .transpose()
}

/// `repomd.xml`, read whole (it is small and bounded by the caller).
pub fn repomd(bytes: &[u8]) -> Result<Repomd, MetadataError> {
    let mut reader = Reader::from_reader(bytes);
    let mut buf = Vec::new();
    let mut out = Repomd::default();
    let mut current: Option<RepoData> = None;
    loop {
        let event = reader.read_event_into(&mut buf).map_err(xml)?.into_owned();
        buf.clear();
        match event {
            Event::Start(e) | Event::Empty(e) => match (e.local_name().as_ref(), current.as_mut()) {
                (b"data", _) => {
                    let kind = attr(&e, "type")?.ok_or_else(|| shape("a `<data>` without `type`"))?;
                    current = Some(RepoData { kind, ..RepoData::default() });
                }
                (b"revision", None) => out.revision = Some(text(&mut reader, &mut buf)?),
                (b"location", Some(d)) => {
                    d.location = attr(&e, "href")?.ok_or_else(|| shape("a `<location>` without `href`"))?;
                }
                (name @ (b"checksum" | b"open-checksum"), Some(d)) => {
                    let kind = attr(&e, "type")?.ok_or_else(|| shape("a checksum without `type`"))?;
                    let sum = Some(Checksum { kind, hex: text(&mut reader, &mut buf)?.trim().to_ascii_lowercase() });
                    if name == b"checksum" {
                        d.checksum = sum;
                    } else {
                        d.open_checksum = sum;
                    }
                }
                (b"size", Some(d)) => d.size = number(Some(text(&mut reader, &mut buf)?), "size")?,
                (b"open-size", Some(d)) => d.open_size = number(Some(text(&mut reader, &mut buf)?), "open-size")?,
                _ => {}
            },
            Event::End(e) if e.local_name().as_ref() == b"data" => {
                out.data.extend(current.take());
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if out.data.is_empty() {
        return Err(shape("lists no metadata (`<data>`)"));
    }
    Ok(out)
}

fn dep(e: &BytesStart<'_>) -> Result<Dep, MetadataError> {
    Ok(Dep {
        name: attr(e, "name")?.ok_or_else(|| shape("an `<rpm:entry>` without `name`"))?,
        flags: attr(e, "flags")?,
        epoch: attr(e, "epoch")?,
        ver: attr(e, "ver")?,
        rel: attr(e, "rel")?,
    })
}

/// Call `each` with every `<package>` of a primary stream, in order.
pub fn primary(input: &mut dyn BufRead, mut each: impl FnMut(Package)) -> Result<(), MetadataError> {
    let mut reader = Reader::from_reader(input);
    let mut buf = Vec::new();
    let mut pkg: Option<Package> = None;
    // Which dependency list `<rpm:entry>` elements go to.
    let mut list: Option<&'static str> = None;
    let mut seen_root = false;
    loop {
        let event = reader.read_event_into(&mut buf).map_err(xml)?.into_owned();
        buf.clear();
        match event {
            Event::Start(e) | Event::Empty(e) => {
                let name = e.name();
                match (name.as_ref(), pkg.as_mut()) {
                    (b"metadata", None) => seen_root = true,
                    (b"package", None) => pkg = Some(Package::default()),
                    (b"name", Some(p)) => p.name = text(&mut reader, &mut buf)?,
                    (b"arch", Some(p)) => p.arch = text(&mut reader, &mut buf)?,
                    (b"version", Some(p)) => {
                        let epoch = attr(&e, "epoch")?.unwrap_or_else(|| "0".into());
                        p.epoch = epoch.parse().map_err(|_| MetadataError::NotANumber {
                            what: format!("`{}`: its epoch", p.name),
                            value: epoch.clone(),
                        })?;
                        p.version = attr(&e, "ver")?.unwrap_or_default();
                        p.release = attr(&e, "rel")?.unwrap_or_default();
                    }
                    (b"checksum", Some(p)) => {
                        let kind = attr(&e, "type")?.ok_or_else(|| shape("a checksum without `type`"))?;
                        p.checksum =
                            Some(Checksum { kind, hex: text(&mut reader, &mut buf)?.trim().to_ascii_lowercase() });
                    }
                    (b"size", Some(p)) => p.size = number(attr(&e, "package")?, "size package")?.unwrap_or(0),
                    (b"location", Some(p)) => p.location = attr(&e, "href")?.unwrap_or_default(),
                    (b"rpm:provides", Some(_)) => list = Some("provides"),
                    (b"rpm:requires", Some(_)) => list = Some("requires"),
                    (b"rpm:recommends", Some(_)) => list = Some("recommends"),
                    (
                        b"rpm:conflicts" | b"rpm:obsoletes" | b"rpm:suggests" | b"rpm:supplements" | b"rpm:enhances",
                        _,
                    ) => {
                        list = None;
                    }
                    (b"rpm:entry", Some(p)) => match list {
                        Some("provides") => p.provides.push(dep(&e)?),
                        Some("requires") => p.requires.push(dep(&e)?),
                        Some("recommends") => p.recommends.push(dep(&e)?),
                        _ => {}
                    },
                    (b"file", Some(p)) => p.files.push(text(&mut reader, &mut buf)?),
                    _ => {}
                }
            }
            Event::End(e) => match e.name().as_ref() {
                b"package" => {
                    let done = pkg.take().ok_or_else(|| shape("`</package>` without `<package>`"))?;
                    if done.name.is_empty() || done.arch.is_empty() || done.location.is_empty() {
                        return Err(MetadataError::Shape(format!(
                            "a package without name, arch or location (`{}`)",
                            done.name
                        )));
                    }
                    each(done);
                }
                b"rpm:provides" | b"rpm:requires" | b"rpm:recommends" => list = None,
                _ => {}
            },
            Event::Eof => break,
            _ => {}
        }
    }
    if !seen_root {
        return Err(shape("not a primary metadata file (no `<metadata>`)"));
    }
    if pkg.is_some() {
        return Err(MetadataError::CutShort("a `<package>`"));
    }
    Ok(())
}

/// One package an advisory fixes.
#[derive(Debug, Clone, Default)]
pub struct Fixed {
    pub name: String,
    pub epoch: u32,
    pub version: String,
    pub release: String,
    pub arch: String,
}

/// One `<update>` of updateinfo.
#[derive(Debug, Clone, Default)]
pub struct Advisory {
    pub id: String,
    /// `security`, `bugfix`, `enhancement`, `newpackage`.
    pub kind: String,
    pub severity: Option<String>,
    pub title: String,
    pub packages: Vec<Fixed>,
}

/// Call `each` with every `<update>` of an updateinfo stream.
pub fn updateinfo(input: &mut dyn BufRead, mut each: impl FnMut(Advisory)) -> Result<(), MetadataError> {
    let mut reader = Reader::from_reader(input);
    let mut buf = Vec::new();
    let mut update: Option<Advisory> = None;
    loop {
        let event = reader.read_event_into(&mut buf).map_err(xml)?.into_owned();
        buf.clear();
        match event {
            Event::Start(e) | Event::Empty(e) => match (e.name().as_ref(), update.as_mut()) {
                (b"update", None) => {
                    update = Some(Advisory { kind: attr(&e, "type")?.unwrap_or_default(), ..Advisory::default() });
                }
                (b"id", Some(u)) => text(&mut reader, &mut buf)?.trim().clone_into(&mut u.id),
                (b"title", Some(u)) => text(&mut reader, &mut buf)?.trim().clone_into(&mut u.title),
                (b"severity", Some(u)) => u.severity = Some(text(&mut reader, &mut buf)?.trim().to_owned()),
                (b"package", Some(u)) => {
                    let epoch = attr(&e, "epoch")?.unwrap_or_else(|| "0".into());
                    u.packages.push(Fixed {
                        name: attr(&e, "name")?.unwrap_or_default(),
                        epoch: epoch.parse().map_err(|_| MetadataError::NotANumber {
                            what: "an epoch".to_owned(),
                            value: epoch.clone(),
                        })?,
                        version: attr(&e, "version")?.unwrap_or_default(),
                        release: attr(&e, "release")?.unwrap_or_default(),
                        arch: attr(&e, "arch")?.unwrap_or_default(),
                    });
                }
                _ => {}
            },
            Event::End(e) if e.name().as_ref() == b"update" => {
                let done = update.take().ok_or_else(|| shape("`</update>` without `<update>`"))?;
                each(done);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(())
}

/// A module stream and the rpms it is made of (`NAME-EPOCH:VERSION-RELEASE.ARCH`).
#[derive(Debug, Clone)]
pub struct ModuleStream {
    pub name: String,
    pub stream: String,
    pub rpms: Vec<String>,
}

/// Every `modulemd` document of `modules.yaml` (the defaults and obsoletes documents beside
/// them are skipped). Read with `yaml-rust2` (pure Rust; libyaml's ports are what lintian
/// flags as an embedded library).
pub fn modules(text: &str) -> Result<Vec<ModuleStream>, MetadataError> {
    use yaml_rust2::Yaml;
    let docs = yaml_rust2::YamlLoader::load_from_str(text)
        .map_err(|e| MetadataError::Syntax { format: "modulemd YAML", detail: e.to_string() })?;
    let mut out = Vec::new();
    for doc in &docs {
        if doc["document"].as_str() != Some("modulemd") {
            continue;
        }
        let data = &doc["data"];
        let stream = match &data["stream"] {
            Yaml::String(s) => s.clone(),
            Yaml::Integer(n) => n.to_string(),
            Yaml::Real(r) => r.clone(),
            _ => continue,
        };
        let Some(name) = data["name"].as_str() else { continue };
        let rpms = data["artifacts"]["rpms"]
            .as_vec()
            .map(|v| v.iter().filter_map(|r| r.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        out.push(ModuleStream { name: name.to_owned(), stream, rpms });
    }
    Ok(out)
}

/// `NAME-[EPOCH:]VERSION-RELEASE.ARCH` split; `None` when it is not one.
pub fn split_nevra(nevra: &str) -> Option<(Cow<'_, str>, u32, &str, &str, &str)> {
    let (rest, arch) = nevra.rsplit_once('.')?;
    let (rest, release) = rest.rsplit_once('-')?;
    let (name, ev) = rest.rsplit_once('-')?;
    let (epoch, version) = match ev.split_once(':') {
        Some((e, v)) => (e.parse().ok()?, v),
        None => (0, ev),
    };
    Some((Cow::Borrowed(name), epoch, version, release, arch))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRIMARY: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<metadata xmlns="http://linux.duke.edu/metadata/common" xmlns:rpm="http://linux.duke.edu/metadata/rpm" packages="1">
<package type="rpm">
  <name>rocm-core</name>
  <arch>x86_64</arch>
  <version epoch="1" ver="6.4.1~rc1" rel="1.el9"/>
  <checksum type="sha256" pkgid="YES">0C13B9b0da16e72c30e017244db9878d05dafa914b4eb72150759460fd013517</checksum>
  <summary>R&amp;D &lt;test&gt;</summary>
  <size package="6262" installed="3" archive="256"/>
  <location href="Packages/rocm-core-6.4.1~rc1-1.el9.x86_64.rpm"/>
  <format>
    <rpm:provides>
      <rpm:entry name="rocm-core" flags="EQ" epoch="1" ver="6.4.1~rc1" rel="1.el9"/>
      <rpm:entry name="rocm-core-abi" flags="EQ" epoch="0" ver="6"/>
    </rpm:provides>
    <rpm:requires>
      <rpm:entry name="(libfoo or libbar)"/>
      <rpm:entry name="/usr/bin/helper" pre="1"/>
    </rpm:requires>
    <rpm:obsoletes><rpm:entry name="old"/></rpm:obsoletes>
    <file>/opt/rocm/bin/a&amp;b</file>
  </format>
</package>
</metadata>"#;

    #[test]
    fn primary_packages_stream_with_their_dependencies() {
        let mut got = Vec::new();
        primary(&mut PRIMARY.as_bytes(), |p| got.push(p)).unwrap();
        let p = &got[0];
        assert_eq!((p.name.as_str(), p.epoch, p.evr().as_str()), ("rocm-core", 1, "1:6.4.1~rc1-1.el9"));
        assert_eq!(
            p.checksum.as_ref().unwrap().hex,
            "0c13b9b0da16e72c30e017244db9878d05dafa914b4eb72150759460fd013517"
        );
        assert_eq!((p.provides.len(), p.requires.len()), (2, 2));
        assert_eq!(p.provides[1].to_string(), "rocm-core-abi = 6");
        assert_eq!(p.files, ["/opt/rocm/bin/a&b"]);
        assert_eq!(p.size, 6262);
        // Cut short: refused, never half-read.
        let cut = &PRIMARY[..PRIMARY.len() - 30];
        assert!(primary(&mut cut.as_bytes(), drop).is_err());
        assert!(primary(&mut "<html></html>".as_bytes(), drop).is_err());
    }

    #[test]
    fn modules_yaml_lists_streams_and_their_rpms() {
        let yaml = "---\ndocument: modulemd\nversion: 2\ndata:\n  name: nodejs\n  stream: 18\n  artifacts:\n    rpms:\n    - nodejs-1:18.14.2-2.module+el9.2.0+17912+ab2d1d3d.x86_64\n...\n---\ndocument: modulemd-defaults\nversion: 1\ndata:\n  module: nodejs\n  stream: 18\n...\n";
        let m = modules(yaml).unwrap();
        assert_eq!((m.len(), m[0].name.as_str(), m[0].stream.as_str()), (1, "nodejs", "18"));
        let (name, epoch, v, r, a) = split_nevra(&m[0].rpms[0]).unwrap();
        assert_eq!(
            (name.as_ref(), epoch, v, r, a),
            ("nodejs", 1, "18.14.2", "2.module+el9.2.0+17912+ab2d1d3d", "x86_64")
        );
    }
}
