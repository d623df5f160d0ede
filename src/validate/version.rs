//! Versions as the GPU stack writes them, compared field by field as numbers, never as
//! strings (`01.25.10.00` > `01.25.9.00`): dotted decimal (`ROCm`, amdgpu, PM, `PLDM_BUNDLE`) and
//! dotted hex bytes for the firmware ids the reference names (`PSP_SOSDRV`, `TA_RAS`, `TA_XGMI`,
//! `UVD`, `VCE`, `VCN`). A build suffix (`6.4.0-15`, `25.3.0+ede62f2`) is not compared.

use std::cmp::Ordering;
use std::fmt;

/// How a version's fields are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Radix {
    Decimal,
    Hex,
}

impl Radix {
    /// The radix amd-smi writes a firmware id's version in.
    pub fn of_firmware(fw_id: &str) -> Self {
        const HEX: [&str; 6] = ["PSP_SOSDRV", "TA_RAS", "TA_XGMI", "UVD", "VCE", "VCN"];
        if HEX.iter().any(|h| fw_id.eq_ignore_ascii_case(h)) { Radix::Hex } else { Radix::Decimal }
    }
}

/// A parsed dotted version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version(Vec<u64>);

impl Version {
    pub fn parse(text: &str, radix: Radix) -> Option<Self> {
        let core = text.trim().split(['-', '+', ' ']).next()?;
        let base = match radix {
            Radix::Decimal => 10,
            Radix::Hex => 16,
        };
        let fields: Option<Vec<u64>> =
            core.split('.').map(|f| if f.is_empty() { None } else { u64::from_str_radix(f, base).ok() }).collect();
        fields.filter(|f| !f.is_empty()).map(Self)
    }

    /// Field by field; a missing field counts as 0 (`6.12` = `6.12.0`).
    pub fn compare(&self, other: &Self) -> Ordering {
        let len = self.0.len().max(other.0.len());
        (0..len)
            .map(|i| self.0.get(i).copied().unwrap_or(0).cmp(&other.0.get(i).copied().unwrap_or(0)))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    }
}

/// A requirement from a `[[validation.target]]` row: `>=6.12`, `>6`, `<=7.1`, `<7`, `=6.4.0`,
/// a bare version (equal), or a prefix with `*` (`7.0.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    op: Op,
    version: Version,
    text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Ge,
    Gt,
    Le,
    Lt,
    Eq,
    /// The given fields equal, any after them (`7.0.*`).
    Prefix,
}

/// A matrix field's text that is no version requirement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a version requirement")]
pub struct NotARequirement(pub String);

impl crate::failure::Classify for NotARequirement {
    /// Written by the bundle's author; on a site it is decided red, never returned.
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Usage
    }
}

impl Requirement {
    pub fn parse(text: &str, radix: Radix) -> Result<Self, NotARequirement> {
        let t = text.trim();
        let (op, rest) = [(">=", Op::Ge), ("<=", Op::Le), ("==", Op::Eq), (">", Op::Gt), ("<", Op::Lt), ("=", Op::Eq)]
            .iter()
            .find_map(|(p, op)| t.strip_prefix(p).map(|r| (*op, r.trim())))
            .unwrap_or((Op::Eq, t));
        let (op, rest) = match rest.strip_suffix(".*") {
            Some(prefix) if op == Op::Eq => (Op::Prefix, prefix),
            _ => (op, rest),
        };
        let version = Version::parse(rest, radix).ok_or_else(|| NotARequirement(text.to_owned()))?;
        Ok(Self { op, version, text: t.to_owned() })
    }

    pub fn matches(&self, v: &Version) -> bool {
        let o = v.compare(&self.version);
        match self.op {
            Op::Ge => o.is_ge(),
            Op::Gt => o.is_gt(),
            Op::Le => o.is_le(),
            Op::Lt => o.is_lt(),
            Op::Eq => o.is_eq(),
            Op::Prefix => v.0.len() >= self.version.0.len() && v.0[..self.version.0.len()] == self.version.0[..],
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s, Radix::Decimal).unwrap()
    }

    #[test]
    fn dotted_versions_compare_as_numbers_never_as_strings() {
        assert!(v("01.25.10.00").compare(&v("01.25.9.00")).is_gt(), "string order would say less");
        assert!(v("6.12").compare(&v("6.12.0")).is_eq());
        assert!(v("6.4.0-15").compare(&v("6.4.0")).is_eq(), "build suffix ignored");
        assert!(v("25.3.0+ede62f2").compare(&v("25.3")).is_eq());
        let hex = |s| Version::parse(s, Radix::Hex).unwrap();
        assert!(hex("00.36.02.5a").compare(&hex("00.36.02.59")).is_gt(), "dotted hex bytes");
        assert_eq!(Radix::of_firmware("PSP_SOSDRV"), Radix::Hex);
        assert_eq!(Radix::of_firmware("PLDM_BUNDLE"), Radix::Decimal);
        assert!(Version::parse("N/A", Radix::Decimal).is_none() && Version::parse("", Radix::Decimal).is_none());
    }

    #[test]
    fn requirements_cover_the_operators_rows_use() {
        let r = |s| Requirement::parse(s, Radix::Decimal).unwrap();
        assert!(r(">=6.12").matches(&v("6.12.12")) && !r(">=6.12").matches(&v("6.8.5")));
        assert!(r(">01.25.05.00").matches(&v("01.25.10.00")) && !r(">6").matches(&v("6.0")));
        assert!(r("<7").matches(&v("6.9")) && r("<=7.1").matches(&v("7.1.0")));
        assert!(r("7.0.*").matches(&v("7.0.2")) && !r("7.0.*").matches(&v("7.1.0")));
        assert!(r("6.4.0").matches(&v("6.4")) && r("=6.4.0").matches(&v("6.4.0-15")));
        assert!(Requirement::parse(">=latest", Radix::Decimal).is_err());
    }
}
