//! Names from the spec that end up in paths and identifiers, checked when parsed.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::member_path::MemberPath;

/// A name from the spec (or a lock, or a manifest) that is not one: what kind of name, the
/// text given, and why it is refused (with what is expected).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} `{value}`: {why}")]
pub struct InvalidName {
    pub kind: &'static str,
    pub value: String,
    pub why: String,
}

impl InvalidName {
    fn new(kind: &'static str, value: &str, why: impl Into<String>) -> Self {
        Self { kind, value: value.to_owned(), why: why.into() }
    }
}

impl crate::failure::Classify for InvalidName {
    /// A name is refused where the spec (or a command's argument) gives it.
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Usage
    }
}

/// A bundle name: `[a-z0-9][a-z0-9._-]*`, at most 128 bytes.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct BundleName(String);

impl BundleName {
    pub fn new(s: &str) -> Result<Self, InvalidName> {
        let mut bytes = s.bytes();
        let first_ok = bytes.next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        let rest_ok = bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b));
        if first_ok && rest_ok && s.len() <= 128 {
            Ok(Self(s.to_owned()))
        } else {
            Err(InvalidName::new("bundle name", s, "expected [a-z0-9][a-z0-9._-]*, at most 128 bytes"))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A `[[file]]` name: one path component, so that `files/NAME` is a safe member path.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct FileName(String);

impl FileName {
    pub fn new(s: &str) -> Result<Self, InvalidName> {
        if s.contains('/') {
            return Err(InvalidName::new("file name", s, "must be a single path component (no `/`)"));
        }
        MemberPath::new(format!("files/{s}"))
            .map(|_| Self(s.to_owned()))
            .map_err(|e| InvalidName::new("file name", s, e.reason))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn member_path(&self) -> MemberPath {
        MemberPath::new(format!("files/{}", self.0)).expect("checked when the name was built")
    }
}

/// A `[[deb]]` package as the spec pins it: `name=version`, or a bare `name`. Parsed once,
/// where the spec and the lock are read; written back as it was given.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct DebPin {
    pub name: String,
    pub version: Option<String>,
}

impl DebPin {
    pub fn new(s: &str) -> Result<Self, InvalidName> {
        let bad = |why: &str| InvalidName::new("package", s, format!("{why} (expected `name=version` or `name`)"));
        let (name, version) = match s.split_once('=') {
            Some((name, version)) => (name, Some(version)),
            None => (s, None),
        };
        // Debian policy 5.6.1 / 5.6.12: names are [a-z0-9][a-z0-9+.-]+; versions have no spaces.
        let name_ok = name.len() >= 2
            && name.bytes().next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+.-".contains(&b));
        if !name_ok {
            return Err(bad("the name must be [a-z0-9][a-z0-9+.-]+"));
        }
        if version.is_some_and(|v| v.is_empty() || v.contains(|c: char| c.is_whitespace() || c == '=')) {
            return Err(bad("the version must be non-empty, without spaces"));
        }
        Ok(Self { name: name.to_owned(), version: version.map(str::to_owned) })
    }
}

impl fmt::Display for DebPin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.version {
            Some(v) => write!(f, "{}={v}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

impl Serialize for DebPin {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DebPin {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        DebPin::new(&s).map_err(serde::de::Error::custom)
    }
}

/// An `[[rpm]]` package as the spec pins it: `name=[EPOCH:]VERSION-RELEASE`, or a bare
/// `name`. Names are what rpm allows (`[A-Za-z0-9._+-]`, not starting with `-`).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct RpmPin {
    pub name: String,
    pub evr: Option<String>,
}

impl RpmPin {
    pub fn new(s: &str) -> Result<Self, InvalidName> {
        let bad = |why: &str| {
            InvalidName::new("package", s, format!("{why} (expected `name=[EPOCH:]VERSION-RELEASE` or `name`)"))
        };
        let (name, evr) = match s.split_once('=') {
            Some((name, evr)) => (name, Some(evr)),
            None => (s, None),
        };
        let name_ok = !name.is_empty()
            && !name.starts_with('-')
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b));
        if !name_ok {
            return Err(bad("the name must be [A-Za-z0-9._+-]+"));
        }
        if let Some(evr) = evr {
            let (epoch, vr) = evr.split_once(':').unwrap_or(("0", evr));
            let release_ok =
                vr.split_once('-').is_some_and(|(v, r)| !v.is_empty() && !r.is_empty() && !r.contains('-'));
            if !epoch.bytes().all(|b| b.is_ascii_digit())
                || epoch.is_empty()
                || !release_ok
                || evr.contains(char::is_whitespace)
            {
                return Err(bad("the version must be [EPOCH:]VERSION-RELEASE"));
            }
        }
        Ok(Self { name: name.to_owned(), evr: evr.map(str::to_owned) })
    }
}

impl fmt::Display for RpmPin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.evr {
            Some(v) => write!(f, "{}={v}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

impl Serialize for RpmPin {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RpmPin {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        RpmPin::new(&s).map_err(serde::de::Error::custom)
    }
}

macro_rules! string_newtype_serde {
    ($t:ty) => {
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                <$t>::new(&s).map_err(serde::de::Error::custom)
            }
        }
    };
}

string_newtype_serde!(BundleName);
string_newtype_serde!(FileName);
