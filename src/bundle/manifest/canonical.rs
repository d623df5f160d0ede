//! The exact bytes that are signed: RFC 8785 (JCS) canonical JSON, written as they are made.

use serde::Serialize;

use super::artifacts::{Artifact, Listed};
use super::check::ByPath;
use super::{Entry, Manifest};
use crate::digest::Sha256;

impl Manifest {
    /// The exact bytes that are signed: RFC 8785 (JCS) canonical JSON.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        self.write_canonical(&mut bytes).expect("writing to memory does not fail");
        bytes
    }

    /// The canonical bytes' SHA-256 and length, without holding them.
    pub fn canonical_digest(&self) -> (Sha256, u64) {
        let mut hashing = crate::digest::HashingWriter::new(std::io::sink());
        self.write_canonical(&mut hashing).expect("writing to a sink does not fail");
        let (sha256, size, _) = hashing.finish();
        (sha256, size)
    }

    /// The canonical bytes, written as they are made. `serde_json_canonicalizer` sorts an
    /// object's members by holding every value of it first: a manifest of 100,000 entries
    /// held 90 MB to write 26 MB. Here the two lists that grow with the member count,
    /// `entries` and an artifact's `files`, are written one element at a time (each element
    /// canonicalised by the crate); everything else is the crate's output for a copy of the
    /// manifest without them. The unit test compares the two on every field.
    pub fn write_canonical(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        let to_io = |e: serde_json::Error| std::io::Error::other(e.to_string());
        let serde_json::Value::Object(top) = serde_json::to_value(self.skeleton()).map_err(to_io)? else {
            unreachable!("a manifest serialises as an object")
        };
        write_object(out, &top, |key, out| match key {
            "entries" => Some(write_list(out, &self.entries)),
            "artifacts" => Some(write_artifacts(out, &top, &self.artifacts, &self.entries)),
            _ => None,
        })
    }

    /// Every field but the lists that grow with the member count. Written out field by field,
    /// without `..`: a new field is a compile error here until it is added.
    fn skeleton(&self) -> Manifest {
        Manifest {
            schema: self.schema.clone(),
            name: self.name.clone(),
            version: self.version.clone(),
            description: self.description.clone(),
            created: self.created,
            builder: self.builder.clone(),
            spec_sha256: self.spec_sha256,
            lock_sha256: self.lock_sha256,
            artifacts: self.artifacts.iter().map(Artifact::without_files).collect(),
            entries: Vec::new(),
            base: self.base.clone(),
            validation: self.validation.clone(),
            expires: self.expires,
        }
    }
}

/// A JCS object: its members sorted by their names' UTF-16 code units (RFC 8785 3.2.3), each
/// value from `special` when it writes that member, else the crate's canonical form of it.
fn write_object(
    out: &mut dyn std::io::Write,
    object: &serde_json::Map<String, serde_json::Value>,
    mut special: impl FnMut(&str, &mut dyn std::io::Write) -> Option<std::io::Result<()>>,
) -> std::io::Result<()> {
    let mut keys: Vec<&String> = object.keys().collect();
    keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
    out.write_all(b"{")?;
    for (i, key) in keys.into_iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write_jcs(out, key)?;
        out.write_all(b":")?;
        match special(key, out) {
            Some(written) => written?,
            None => write_jcs(out, &object[key])?,
        }
    }
    out.write_all(b"}")
}

/// A JCS array of `items`, each canonicalised on its own.
fn write_list<T: Serialize>(out: &mut dyn std::io::Write, items: impl IntoIterator<Item = T>) -> std::io::Result<()> {
    out.write_all(b"[")?;
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write_jcs(out, &item)?;
    }
    out.write_all(b"]")
}

/// The `artifacts` array: each artifact's object from the skeleton's, its `files` (which the
/// skeleton left out, or empty) written from the artifact itself.
fn write_artifacts(
    out: &mut dyn std::io::Write,
    top: &serde_json::Map<String, serde_json::Value>,
    artifacts: &[Artifact],
    entries: &[Entry],
) -> std::io::Result<()> {
    let skeletons = top.get("artifacts").and_then(serde_json::Value::as_array).map_or(&[][..], Vec::as_slice);
    out.write_all(b"[")?;
    for (i, (artifact, skeleton)) in artifacts.iter().zip(skeletons).enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        let Some(object) = skeleton.as_object() else { unreachable!("an artifact serialises as an object") };
        let held = artifact.listing();
        // A directory that holds its files as entries (`FileArtifact::tree`): written from them.
        let tree = match artifact {
            Artifact::File(f) if f.tree.is_some() => Some(format!("{}/", f.path)),
            _ => None,
        };
        let mut object = std::borrow::Cow::Borrowed(object);
        if (!held.is_empty() || tree.is_some()) && !object.contains_key("files") {
            // A directory's `files` are skipped when empty: the skeleton has no such member.
            object.to_mut().insert("files".into(), serde_json::Value::Array(Vec::new()));
        }
        write_object(out, &object, |key, out| {
            (key == "files").then(|| match &tree {
                Some(dir) => {
                    let by_path = ByPath::new(entries)
                        .map_err(|p| std::io::Error::other(format!("entry `{p}` is listed twice")))?;
                    write_list(
                        out,
                        by_path.under(dir).map(|e| Listed {
                            path: &e.path.as_str()[dir.len()..],
                            member: e.path.to_string(),
                            sha256: e.sha256,
                            size: e.size,
                        }),
                    )
                }
                None => write_list(out, held.items()),
            })
        })?;
    }
    out.write_all(b"]")
}

fn write_jcs<T: Serialize>(mut out: &mut dyn std::io::Write, value: &T) -> std::io::Result<()> {
    serde_json_canonicalizer::to_writer(value, &mut out).map_err(|e| std::io::Error::other(e.to_string()))
}
