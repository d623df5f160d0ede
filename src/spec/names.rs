//! Names from the spec that end up in paths and identifiers, checked when parsed.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::bundle::MemberPath;

/// A bundle name: `[a-z0-9][a-z0-9._-]*`, at most 128 bytes.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct BundleName(String);

impl BundleName {
    pub fn new(s: &str) -> Result<Self, String> {
        let mut bytes = s.bytes();
        let first_ok = bytes.next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        let rest_ok = bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b));
        if first_ok && rest_ok && s.len() <= 128 {
            Ok(Self(s.to_owned()))
        } else {
            Err(format!("invalid bundle name `{s}`: expected [a-z0-9][a-z0-9._-]*, at most 128 bytes"))
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
    pub fn new(s: &str) -> Result<Self, String> {
        if s.contains('/') {
            return Err(format!("invalid file name `{s}`: must be a single path component (no `/`)"));
        }
        MemberPath::new(format!("files/{s}"))
            .map(|_| Self(s.to_owned()))
            .map_err(|e| format!("invalid file name `{s}`: {}", e.reason))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn member_path(&self) -> MemberPath {
        MemberPath::new(format!("files/{}", self.0)).expect("checked when the name was built")
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
