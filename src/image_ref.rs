//! Image references as users write them: `host[:port]/repo/path:tag` or `…@sha256:HEX`.
//!
//! Parsed here rather than by `oci_client::Reference` so that the repository path stays as
//! written: a site receives `rocm/vllm`, never a registry-specific normalisation of it.

use std::fmt;

use crate::digest::Sha256;

/// A reference that is not one: the text given and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid image reference `{reference}`: {why}")]
pub struct InvalidImageRef {
    pub reference: String,
    pub why: String,
}

impl crate::failure::Classify for InvalidImageRef {
    /// Given by a spec or an argument.
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Usage
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ImageRef {
    /// `host[:port]`; `docker.io` when the reference names none.
    pub registry: String,
    pub repository: String,
    pub tag: Option<String>,
    pub digest: Option<Sha256>,
}

impl ImageRef {
    pub fn parse(s: &str) -> Result<Self, InvalidImageRef> {
        let bad = |why: &str| InvalidImageRef { reference: s.to_owned(), why: why.to_owned() };
        let (rest, digest) = match s.split_once('@') {
            Some((rest, d)) => {
                let hex = d.strip_prefix("sha256:").ok_or_else(|| bad("only sha256 digests are supported"))?;
                (rest, Some(hex.parse::<Sha256>().map_err(|e| bad(&e.to_string()))?))
            }
            None => (s, None),
        };
        let (name, tag) = match rest.rfind(':') {
            Some(i) if !rest[i..].contains('/') => (&rest[..i], Some(rest[i + 1..].to_owned())),
            _ => (rest, None),
        };
        if tag.is_none() && digest.is_none() {
            return Err(bad("expected a `:tag` or an `@sha256:` digest (a mutable default tag is never implied)"));
        }
        if let Some(t) = &tag
            && (t.is_empty()
                || t.len() > 128
                || !t.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
                || t.starts_with(['.', '-']))
        {
            return Err(bad("invalid tag"));
        }
        let (registry, repository) = match name.split_once('/') {
            Some((first, repo)) if first.contains(['.', ':']) || first == "localhost" => {
                (first.to_owned(), repo.to_owned())
            }
            _ => ("docker.io".to_owned(), name.to_owned()),
        };
        let component_ok = |c: &str| {
            !c.is_empty()
                && c.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
                && c.as_bytes()[0].is_ascii_alphanumeric()
        };
        if !repository.split('/').all(component_ok) {
            return Err(bad("invalid repository path (lower-case letters, digits, `._-`, separated by `/`)"));
        }
        Ok(Self { registry, repository, tag, digest })
    }

    /// This image at `digest` in the same repository.
    #[must_use]
    pub fn at_digest(&self, digest: Sha256) -> Self {
        Self { digest: Some(digest), tag: None, ..self.clone() }
    }

    /// The same repository path and tag on another registry.
    #[must_use]
    pub fn on_registry(&self, registry: &str) -> Self {
        Self { registry: registry.to_owned(), ..self.clone() }
    }

    /// The same repository with another tag (cosign's `sha256-HEX.sig` and the like).
    #[must_use]
    pub fn with_tag(&self, tag: String) -> Self {
        Self { tag: Some(tag), digest: None, ..self.clone() }
    }

    pub fn to_client(&self) -> oci_client::Reference {
        match (&self.digest, &self.tag) {
            (Some(d), _) => oci_client::Reference::with_digest(
                self.registry.clone(),
                self.repository.clone(),
                format!("sha256:{d}"),
            ),
            (None, Some(t)) => {
                oci_client::Reference::with_tag(self.registry.clone(), self.repository.clone(), t.clone())
            }
            (None, None) => unreachable!("parse requires a tag or a digest"),
        }
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@sha256:{d}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn parses_registry_repository_tag_and_digest() {
        let r = ImageRef::parse("127.0.0.1:5000/rocm/vllm:rocm10.0.0_vllm0.27.0").unwrap();
        assert_eq!((r.registry.as_str(), r.repository.as_str()), ("127.0.0.1:5000", "rocm/vllm"));
        assert_eq!(r.tag.as_deref(), Some("rocm10.0.0_vllm0.27.0"));
        let r = ImageRef::parse(&format!("registry.example/a/b@sha256:{D}")).unwrap();
        assert_eq!(r.digest.unwrap().to_string(), D);
        assert_eq!(r.to_string(), format!("registry.example/a/b@sha256:{D}"));
        let r = ImageRef::parse("localhost/x:1").unwrap();
        assert_eq!(r.registry, "localhost");
        let r = ImageRef::parse("rocm/pytorch:latest").unwrap();
        assert_eq!((r.registry.as_str(), r.repository.as_str()), ("docker.io", "rocm/pytorch"));
        assert_eq!(r.on_registry("site:5000").to_string(), "site:5000/rocm/pytorch:latest");
    }

    #[test]
    fn refuses_what_is_not_a_pinned_reference() {
        for bad in ["127.0.0.1:5000/rocm/vllm", "x/Upper:1", "x/y:", "x/y@md5:abc", "x//y:1", "x/y:-bad"] {
            assert!(ImageRef::parse(bad).is_err(), "{bad}");
        }
    }
}
