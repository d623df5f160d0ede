//! An rpm's header, read with the `rpm` crate without its payload: the header signature
//! checked against the repository's keyring (over the header's exact bytes as they are in the
//! file), and the rpm-md entries a site's dnf/zypper view lists for it (`primary`,
//! `filelists`, `other`), written as `createrepo_c` writes them. The XML is written by hand: it
//! is three fixed element shapes, escaped with `html-escape`, and no crate writes rpm-md.

use std::fmt::Write as _;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use html_escape::{encode_double_quoted_attribute as attr, encode_text as text};
use rpm::{DependencyFlags, FileFlags, FileType, PackageMetadata};

use crate::failure::{Class, Classify};
use crate::sources::keyring::Keyring;

/// Why an rpm's header cannot be read or does not hold. Reading the file is the host's
/// failure; everything else is the package's (it is not what the repository served it as).
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    #[error("cannot read it: {0}")]
    Io(#[source] std::io::Error),
    /// The file ends inside a part (`what`: its lead, a header).
    #[error("{what}")]
    Short { what: &'static str },
    #[error("{what}")]
    Magic { what: &'static str },
    #[error("a header of {size} bytes (more than {max})")]
    TooLarge { size: u64, max: u64 },
    /// The `rpm` crate could not read `part` (the package, its signature header, a tag).
    #[error("{part}: {source}")]
    Unreadable {
        part: String,
        #[source]
        source: rpm::Error,
    },
    #[error("its header signature was not made by a key of `{}`", keyring.display())]
    NotSignedByKeyring { keyring: std::path::PathBuf },
    /// The header's signature is not one the keyring can read.
    #[error("{0}")]
    Signature(crate::sources::keyring::KeyringError),
    #[error("its header names {got}, not what the repository metadata says")]
    NotAsListed { got: String },
}

impl Classify for HeaderError {
    fn class(&self) -> Class {
        match self {
            HeaderError::Io(_) => Class::Runtime,
            HeaderError::Short { .. }
            | HeaderError::Magic { .. }
            | HeaderError::TooLarge { .. }
            | HeaderError::Unreadable { .. }
            | HeaderError::NotSignedByKeyring { .. }
            | HeaderError::Signature(_)
            | HeaderError::NotAsListed { .. } => Class::Verification,
        }
    }
}

/// `rpm::Error` of reading `part`.
fn unreadable(part: impl Into<String>) -> impl FnOnce(rpm::Error) -> HeaderError {
    let part = part.into();
    move |source| HeaderError::Unreadable { part, source }
}

/// The most bytes a signature or main header may hold: rocm-llvm's header, with its tens of
/// thousands of files, is a few MiB; a header claiming more is refused before it is read.
const MAX_HEADER: u64 = 64 << 20;

pub struct Header {
    pub meta: PackageMetadata,
    /// `[start, end)` of the main header in the file (primary's `rpm:header-range`).
    pub range: (u64, u64),
    raw: Vec<u8>,
}

/// The size of the header structure at the reader's position (intro, index and store), from
/// its 16-byte intro: bounded before anything is allocated.
fn header_size(file: &mut std::fs::File, at: u64) -> Result<u64, HeaderError> {
    let mut intro = [0u8; 16];
    file.seek(SeekFrom::Start(at)).map_err(HeaderError::Io)?;
    file.read_exact(&mut intro).map_err(|_| HeaderError::Short { what: "cut short in a header" })?;
    if intro[..3] != [0x8e, 0xad, 0xe8] {
        return Err(HeaderError::Magic { what: "not an rpm header (bad magic)" });
    }
    let count = u64::from(u32::from_be_bytes([intro[8], intro[9], intro[10], intro[11]]));
    let store = u64::from(u32::from_be_bytes([intro[12], intro[13], intro[14], intro[15]]));
    let size = 16 + count * 16 + store;
    if size > MAX_HEADER {
        return Err(HeaderError::TooLarge { size, max: MAX_HEADER });
    }
    Ok(size)
}

impl Header {
    pub fn read(path: &Path) -> Result<Self, HeaderError> {
        let mut file = std::fs::File::open(path).map_err(HeaderError::Io)?;
        let mut lead = [0u8; 4];
        file.read_exact(&mut lead).map_err(|_| HeaderError::Short { what: "not an rpm (shorter than its lead)" })?;
        if lead != [0xed, 0xab, 0xee, 0xdb] {
            return Err(HeaderError::Magic { what: "not an rpm (bad lead magic)" });
        }
        let sig = header_size(&mut file, 96)?;
        let start = 96 + sig.div_ceil(8) * 8;
        let size = header_size(&mut file, start)?;
        file.seek(SeekFrom::Start(0)).map_err(HeaderError::Io)?;
        let meta = PackageMetadata::parse(&mut BufReader::new(&mut file)).map_err(unreadable("not an rpm"))?;
        // `size` is at most MAX_HEADER (header_size), which fits any usize airlock builds for.
        let mut raw = vec![0u8; usize::try_from(size).unwrap_or(usize::MAX)];
        file.seek(SeekFrom::Start(start)).map_err(HeaderError::Io)?;
        file.read_exact(&mut raw).map_err(|_| HeaderError::Short { what: "cut short in its header" })?;
        Ok(Self { meta, range: (start, start + size), raw })
    }

    /// The header signature, checked: `Ok(true)` made by a keyring key, `Ok(false)` unsigned;
    /// `Err` a signature no keyring key made (or that cannot be read).
    pub fn verify(&self, keyring: &Keyring) -> Result<bool, HeaderError> {
        let sigs = self.meta.raw_signatures().map_err(unreadable("unreadable signature header"))?;
        if sigs.is_empty() {
            return Ok(false);
        }
        for sig in &sigs {
            if keyring.verifies_detached(&self.raw, sig).map_err(HeaderError::Signature)? {
                return Ok(true);
            }
        }
        Err(HeaderError::NotSignedByKeyring { keyring: keyring.path.clone() })
    }

    fn nevra(&self) -> Result<(String, String, String, String, String), HeaderError> {
        let m = &self.meta;
        Ok((
            m.get_name().map_err(unreadable("its name"))?.to_owned(),
            m.get_epoch().unwrap_or(0).to_string(),
            m.get_version().map_err(unreadable("its version"))?.to_owned(),
            m.get_release().map_err(unreadable("its release"))?.to_owned(),
            m.get_arch().map_err(unreadable("its arch"))?.to_owned(),
        ))
    }

    fn version_element(&self) -> Result<String, HeaderError> {
        let (_, epoch, ver, rel, _) = self.nevra()?;
        Ok(format!("  <version epoch=\"{}\" ver=\"{}\" rel=\"{}\"/>\n", attr(&epoch), attr(&ver), attr(&rel)))
    }

    /// The `<package>` of primary.xml: `location` relative to the repository root.
    pub fn primary(&self, location: &str, sha256: &str, size: u64) -> Result<String, HeaderError> {
        let m = &self.meta;
        let (name, _, _, _, arch) = self.nevra()?;
        let s = |r: Result<&str, rpm::Error>| r.unwrap_or_default().to_owned();
        let build = m.get_build_time().unwrap_or(0);
        let mut out = String::new();
        let _ = write!(
            out,
            "<package type=\"rpm\">\n  <name>{}</name>\n  <arch>{}</arch>\n{}  <checksum type=\"sha256\" pkgid=\"YES\">{sha256}</checksum>\n  <summary>{}</summary>\n  <description>{}</description>\n  <packager>{}</packager>\n  <url>{}</url>\n  <time file=\"{build}\" build=\"{build}\"/>\n  <size package=\"{size}\" installed=\"{}\" archive=\"0\"/>\n  <location href=\"{}\"/>\n  <format>\n    <rpm:license>{}</rpm:license>\n    <rpm:vendor>{}</rpm:vendor>\n    <rpm:group>{}</rpm:group>\n    <rpm:buildhost>{}</rpm:buildhost>\n    <rpm:sourcerpm>{}</rpm:sourcerpm>\n    <rpm:header-range start=\"{}\" end=\"{}\"/>\n",
            text(&name),
            text(&arch),
            self.version_element()?,
            text(&s(m.get_summary())),
            text(&s(m.get_description())),
            text(&s(m.get_packager())),
            text(&s(m.get_url())),
            m.get_installed_size().unwrap_or(0),
            attr(location),
            text(&s(m.get_license())),
            text(&s(m.get_vendor())),
            text(&s(m.get_group())),
            text(&s(m.get_build_host())),
            text(&s(m.get_source_rpm())),
            self.range.0,
            self.range.1,
        );
        let lists = [
            ("provides", m.get_provides()),
            ("requires", m.get_requires()),
            ("conflicts", m.get_conflicts()),
            ("obsoletes", m.get_obsoletes()),
            ("recommends", m.get_recommends()),
        ];
        for (list, deps) in lists {
            let deps = deps.map_err(unreadable(format!("its {list}")))?;
            let mut entries: Vec<String> = Vec::new();
            for d in deps {
                // rpmlib() features are the installing rpm's business, as `createrepo_c` has it.
                if d.flags.contains(DependencyFlags::RPMLIB) || d.name.starts_with("rpmlib(") {
                    continue;
                }
                let entry = entry(&d);
                if !entries.contains(&entry) {
                    entries.push(entry);
                }
            }
            if !entries.is_empty() {
                let _ = writeln!(out, "    <rpm:{list}>\n{}    </rpm:{list}>", entries.concat());
            }
        }
        for path in self.files()?.into_iter().filter(primary_file) {
            let kind = match path.1 {
                "dir" => " type=\"dir\"",
                "ghost" => " type=\"ghost\"",
                _ => "",
            };
            let _ = writeln!(out, "    <file{kind}>{}</file>", text(&path.0));
        }
        out.push_str("  </format>\n</package>\n");
        Ok(out)
    }

    /// Every file of the package with its kind (`file`, `dir`, `ghost`).
    fn files(&self) -> Result<Vec<(String, &'static str)>, HeaderError> {
        let entries = self.meta.get_file_entries().map_err(unreadable("its file list"))?;
        Ok(entries
            .iter()
            .map(|f| {
                let kind = if f.flags().contains(FileFlags::GHOST) {
                    "ghost"
                } else if f.file_type() == FileType::Dir {
                    "dir"
                } else {
                    "file"
                };
                (f.path().display().to_string(), kind)
            })
            .collect())
    }

    /// The `<package>` of filelists.xml.
    pub fn filelists(&self, sha256: &str) -> Result<String, HeaderError> {
        let (name, _, _, _, arch) = self.nevra()?;
        let mut out = format!(
            "<package pkgid=\"{sha256}\" name=\"{}\" arch=\"{}\">\n{}",
            attr(&name),
            attr(&arch),
            self.version_element()?
        );
        for (path, kind) in self.files()? {
            let kind = if kind == "file" { String::new() } else { format!(" type=\"{kind}\"") };
            let _ = writeln!(out, "  <file{kind}>{}</file>", text(&path));
        }
        out.push_str("</package>\n");
        Ok(out)
    }

    /// The `<package>` of other.xml (without changelogs: a site installs, it does not browse).
    pub fn other(&self, sha256: &str) -> Result<String, HeaderError> {
        let (name, _, _, _, arch) = self.nevra()?;
        Ok(format!(
            "<package pkgid=\"{sha256}\" name=\"{}\" arch=\"{}\">\n{}</package>\n",
            attr(&name),
            attr(&arch),
            self.version_element()?
        ))
    }
}

/// Files `createrepo_c` lists in primary (the rest are in filelists): `/etc/…`, `…bin/…`,
/// `/usr/lib/sendmail`.
fn primary_file(path: &(String, &str)) -> bool {
    path.0.starts_with("/etc/") || path.0.contains("bin/") || path.0 == "/usr/lib/sendmail"
}

fn entry(d: &rpm::Dependency) -> String {
    let flags = d.flags;
    let op = match (
        flags.contains(DependencyFlags::LESS),
        flags.contains(DependencyFlags::GREATER),
        flags.contains(DependencyFlags::EQUAL),
    ) {
        (true, false, false) => Some("LT"),
        (true, false, true) => Some("LE"),
        (false, true, false) => Some("GT"),
        (false, true, true) => Some("GE"),
        (false, false, true) => Some("EQ"),
        _ => None,
    };
    let pre = if flags.intersects(DependencyFlags::PREREQ | DependencyFlags::SCRIPT_PRE | DependencyFlags::SCRIPT_POST)
    {
        " pre=\"1\""
    } else {
        ""
    };
    let mut out = format!("      <rpm:entry name=\"{}\"", attr(&d.name));
    if let (Some(op), false) = (op, d.version.is_empty()) {
        let (epoch, vr) = d.version.split_once(':').unwrap_or(("0", &d.version));
        let _ = write!(out, " flags=\"{op}\" epoch=\"{}\"", attr(epoch));
        match vr.split_once('-') {
            Some((v, r)) => {
                let _ = write!(out, " ver=\"{}\" rel=\"{}\"", attr(v), attr(r));
            }
            None => {
                let _ = write!(out, " ver=\"{}\"", attr(vr));
            }
        }
    }
    out.push_str(pre);
    out.push_str("/>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_cannot_be_read_is_the_hosts_failure_and_one_that_is_no_rpm_the_packages() {
        let dir = tempfile::tempdir().unwrap();
        let missing = Header::read(&dir.path().join("gone.rpm")).err().unwrap();
        assert!(matches!(missing, HeaderError::Io(_)) && missing.class() == Class::Runtime, "{missing}");
        let deb = dir.path().join("x.rpm");
        std::fs::write(&deb, b"!<arch>\ndebian-binary   ").unwrap();
        let not_rpm = Header::read(&deb).err().unwrap();
        assert_eq!(not_rpm.to_string(), "not an rpm (bad lead magic)");
        assert_eq!(not_rpm.class(), Class::Verification);
        std::fs::write(&deb, [0xed, 0xab]).unwrap();
        assert_eq!(Header::read(&deb).err().unwrap().to_string(), "not an rpm (shorter than its lead)");
    }
}
