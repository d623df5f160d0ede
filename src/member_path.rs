//! `MemberPath`: the name of a member inside a bundle, checked when it is built so that an unsafe
//! path cannot exist as a value. Every path that comes out of a bundle (a tar header or the
//! manifest) becomes a `MemberPath` before anything is done with it.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Longest accepted member path in bytes (`PATH_MAX` on Linux).
pub const MAX_PATH_BYTES: usize = 4096;
/// Longest accepted path component in bytes (`NAME_MAX` on Linux).
pub const MAX_COMPONENT_BYTES: usize = 255;

/// A relative, normalised, `/`-separated path: no empty, `.` or `..` components, no leading
/// or trailing `/`, no backslash, NUL or control characters, valid UTF-8, within Linux limits.
/// A `Box<str>`, not a `String`: a manifest's entries and a directory's files hold one per
/// member and file, and the capacity a `String` carries is 8 bytes each of nothing.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemberPath(Box<str>);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsafe member path `{path}`: {reason}")]
pub struct MemberPathError {
    pub path: String,
    pub reason: &'static str,
}

impl crate::failure::Classify for MemberPathError {
    fn class(&self) -> crate::failure::Class {
        // An unsafe or malformed member path in what was read.
        crate::failure::Class::Verification
    }
}

impl MemberPath {
    pub fn new(path: impl Into<String>) -> Result<Self, MemberPathError> {
        let path = path.into();
        match Self::problem(&path) {
            Some(reason) => Err(MemberPathError { path, reason }),
            None => Ok(Self(path.into_boxed_str())),
        }
    }

    /// Build from raw bytes as found in a tar header; non-UTF-8 names are refused.
    pub fn from_bytes(raw: &[u8]) -> Result<Self, MemberPathError> {
        match std::str::from_utf8(raw) {
            Ok(s) => Self::new(s),
            Err(_) => {
                Err(MemberPathError { path: String::from_utf8_lossy(raw).into_owned(), reason: "not valid UTF-8" })
            }
        }
    }

    fn problem(path: &str) -> Option<&'static str> {
        if path.is_empty() {
            return Some("empty");
        }
        if path.len() > MAX_PATH_BYTES {
            return Some("longer than 4096 bytes");
        }
        if path.starts_with('/') {
            return Some("absolute");
        }
        if path.ends_with('/') {
            return Some("ends with `/` (directories are not members)");
        }
        if path.contains('\\') {
            return Some("contains a backslash");
        }
        if path.chars().any(char::is_control) {
            return Some("contains a NUL or control character");
        }
        for component in path.split('/') {
            match component {
                "" => return Some("contains an empty component (`//`)"),
                "." => return Some("contains a `.` component"),
                ".." => return Some("contains a `..` component"),
                c if c.len() > MAX_COMPONENT_BYTES => {
                    return Some("has a component longer than 255 bytes");
                }
                _ => {}
            }
        }
        None
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first component: the area of the bundle (`airlock`, `files`, `images`, …).
    pub fn area(&self) -> &str {
        self.0.split('/').next().unwrap_or_default()
    }

    /// Every proper ancestor directory, shortest first (`a`, `a/b` for `a/b/c`).
    pub fn ancestors(&self) -> impl Iterator<Item = &str> {
        self.0.match_indices('/').map(|(i, _)| &self.0[..i])
    }

    /// This path under `base` on the local file system. Safe by construction: every component
    /// is a plain name, so the result cannot leave `base`.
    pub fn under(&self, base: &Path) -> PathBuf {
        let mut out = base.to_path_buf();
        out.extend(self.0.split('/'));
        out
    }
}

/// Read access as text (a checked path is still a string for messages, purls and URLs).
impl std::ops::Deref for MemberPath {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MemberPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for MemberPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl Serialize for MemberPath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for MemberPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Self::new(String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_relative_paths() {
        for ok in ["files/a.bin", "airlock/manifest.json", "models/org/name/abc/config.json", "a"] {
            assert_eq!(MemberPath::new(ok).unwrap().as_str(), ok);
        }
    }

    #[test]
    fn rejects_every_unsafe_form() {
        let long_component = "x".repeat(256);
        let long_path = format!("{}/y", "a/".repeat(2048));
        let cases: &[(&str, &str)] = &[
            ("", "empty"),
            ("/etc/passwd", "absolute"),
            ("files/../../etc/passwd", "`..`"),
            ("..", "`..`"),
            ("files/./a", "`.`"),
            ("files//a", "empty component"),
            ("files/", "ends with"),
            ("files\\a", "backslash"),
            ("files/a\0b", "NUL"),
            ("files/a\nb", "control"),
            (&long_component, "255"),
            (&long_path, "4096"),
        ];
        for (path, why) in cases {
            let err = MemberPath::new(*path).unwrap_err();
            assert!(err.reason.contains(why), "{path:?}: {}", err.reason);
        }
    }

    #[test]
    fn rejects_non_utf8_bytes() {
        assert_eq!(MemberPath::from_bytes(b"files/\xff").unwrap_err().reason, "not valid UTF-8");
    }

    #[test]
    fn under_stays_below_base_and_ancestors_are_listed() {
        let p = MemberPath::new("files/sub/a.bin").unwrap();
        assert_eq!(p.under(Path::new("/stage")), PathBuf::from("/stage/files/sub/a.bin"));
        assert_eq!(p.ancestors().collect::<Vec<_>>(), ["files", "files/sub"]);
        assert_eq!(p.area(), "files");
    }

    #[test]
    fn deserialising_checks_the_path() {
        assert!(serde_json::from_str::<MemberPath>("\"../x\"").is_err());
        assert!(serde_json::from_str::<MemberPath>("\"files/x\"").is_ok());
    }
}
