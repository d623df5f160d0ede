//! The head of a bundle read alone: its manifest and signature (`read_head`), its outline, and
//! the small leading members (carried trust metadata) before the content.

use std::collections::BTreeMap;
use std::io::{self, BufReader, Read};

use super::budget::{Bounded, Budget};
use super::sinks::{Discard, OnProblem, Report};
use super::{Reader, stream_words};
use crate::bundle::format::MAX_WINDOW_LOG;
use crate::bundle::frames::FrameReader;
use crate::bundle::manifest::{MANIFEST, MAX_MANIFEST_BYTES, MAX_SIGNATURE_BYTES, Manifest, Outline};
use crate::bundle::provenance;
use crate::bundle::rejection::{Problem, Rejection};
use crate::digest::Sha256;

/// The leading members of a bundle, read without verifying anything (for `inspect`).
#[derive(Debug)]
pub struct Head {
    pub manifest: Manifest,
    /// The manifest's exact bytes (what signatures are over).
    pub manifest_bytes: Vec<u8>,
    pub manifest_sha256: Sha256,
    pub signature: Vec<u8>,
}

/// Read only the manifest and signature members. Nothing is verified: the manifest is what
/// the bundle claims, and callers must say so.
pub fn read_head(input: impl Read) -> Result<Head, Problem> {
    let mut reader = Reader { report: Report::default(), on_problem: OnProblem::Stop };
    let budget = Budget::new(HEAD_BUDGET);
    let head = reader.decoder(input).and_then(|decoder| {
        let mut archive = tar::Archive::new(Bounded::new(decoder, &budget));
        let mut members = archive.entries().map_err(|e| reader.fatal(None, Rejection::NotABundle(stream_words(&e))))?;
        reader.head(&mut members, &budget, &mut Discard)
    });
    let Ok((mut spooled, signature)) = head else {
        return Err(reader.last_problem());
    };
    // Callers want the bytes (to push them as a layer, to show them); the head is bounded.
    let mut manifest_bytes = Vec::with_capacity(usize::try_from(spooled.size).unwrap_or(0));
    spooled.rewind().and_then(|mut r| r.read_to_end(&mut manifest_bytes)).map_err(|e| Problem {
        member: Some(MANIFEST.into()),
        reason: Rejection::Truncated(format!("the spooled manifest could not be read back: {e}")),
    })?;
    let manifest: Manifest = serde_json::from_slice(&manifest_bytes)
        .map_err(|e| Problem { member: Some(MANIFEST.into()), reason: Rejection::ManifestInvalid(e.to_string()) })?;
    Ok(Head { manifest_sha256: spooled.sha256, manifest, manifest_bytes, signature })
}

/// The manifest's outline (`Outline`), parsed as member 1 streams past: neither its bytes nor
/// its entries are held. Nothing is verified; the stream is guarded as every reader's is (the
/// budget, and extension records refused before the `tar` crate reads them).
pub fn read_outline(input: impl Read) -> Result<Outline, Problem> {
    let mut reader = Reader { report: Report::default(), on_problem: OnProblem::Stop };
    let budget = Budget::new(MAX_MANIFEST_BYTES + 8 * 512);
    let outline = reader.decoder(input).and_then(|decoder| {
        let mut archive = tar::Archive::new(Bounded::new(decoder, &budget));
        let mut members = archive.entries().map_err(|e| reader.fatal(None, Rejection::NotABundle(stream_words(&e))))?;
        let entry = reader.manifest_member(&mut members, &budget)?;
        serde_json::from_reader(BufReader::new(entry.take(MAX_MANIFEST_BYTES))).map_err(|e| {
            let reason = budget.tripped().unwrap_or_else(|| Rejection::ManifestInvalid(e.to_string()));
            reader.fatal(Some(MANIFEST.into()), reason)
        })
    });
    outline.map_err(|_| reader.last_problem())
}

/// How a tar archive over the stream `S` lists its members: `tar::Archive::entries`, or
/// `entries_with_seek` where what is sought past is never read.
pub(super) type ListEntries<S> =
    for<'a> fn(&'a mut tar::Archive<Bounded<S>>) -> io::Result<tar::Entries<'a, Bounded<S>>>;

/// What a bundle's stream may yield beyond its members' declared sizes: the manifest, the
/// signature and the headers around them (`Budget`).
pub(super) const HEAD_BUDGET: u64 = MAX_MANIFEST_BYTES + MAX_SIGNATURE_BYTES + 8 * 512;

/// The most trust metadata files a bundle's head is read for.
const MAX_CARRIED_TRUST: usize = 256;

/// The site trust metadata a bundle carries (`airlock/trust/N.root.json`, `targets.json`),
/// read from its leading `airlock/` members without verifying anything: a site checks each
/// root version against the one before it, and targets against the newest root. Each file is
/// bounded; reading stops at the first content member.
pub fn leading_trust(input: impl Read) -> Result<Vec<(String, Vec<u8>)>, Problem> {
    let not_bundle = |e: io::Error| Problem { member: None, reason: Rejection::NotABundle(stream_words(&e)) };
    let decoder = FrameReader::new(input, MAX_WINDOW_LOG).map_err(not_bundle)?;
    let budget = Budget::new(u64::MAX);
    let mut archive = tar::Archive::new(Bounded::new(decoder, &budget));
    let refused = |e: io::Error| Problem { member: None, reason: budget.explain(&e, Rejection::NotABundle) };
    let mut found = Vec::new();
    for entry in archive.entries().map_err(not_bundle)?.take(MAX_CARRIED_TRUST + 8) {
        let mut entry = entry.map_err(refused)?;
        let name = crate::escape::bytes(&entry.path_bytes());
        if !name.starts_with("airlock/") {
            break;
        }
        if let Some(file) = name.strip_prefix(crate::bundle::manifest::TRUST_PREFIX)
            && crate::bundle::manifest::is_carried_trust(&name)
        {
            let mut bytes = Vec::new();
            (&mut entry).take(crate::trust::MAX_METADATA_BYTES).read_to_end(&mut bytes).map_err(not_bundle)?;
            found.push((file.to_owned(), bytes));
        }
    }
    Ok(found)
}

/// The leading members of a bundle (manifest, signature, SBOM, provenance) whose names are in
/// `wanted`, each read whole but bounded; nothing is verified. Content members are not read.
pub fn leading_members(input: impl Read, wanted: &[&str]) -> Result<BTreeMap<String, Vec<u8>>, Problem> {
    let not_bundle = |e: io::Error| Problem { member: None, reason: Rejection::NotABundle(stream_words(&e)) };
    let decoder = FrameReader::new(input, MAX_WINDOW_LOG).map_err(not_bundle)?;
    // No byte budget (nothing is trusted or kept past the first members), but the same
    // guard against extension records.
    let budget = Budget::new(u64::MAX);
    let mut archive = tar::Archive::new(Bounded::new(decoder, &budget));
    let mut found = BTreeMap::new();
    // Manifest, signature, SBOM and provenance come first; stop at the first content member.
    let refused = |e: io::Error| Problem { member: None, reason: budget.explain(&e, Rejection::NotABundle) };
    for entry in archive.entries().map_err(not_bundle)?.take(4) {
        let mut entry = entry.map_err(refused)?;
        let name = crate::escape::bytes(&entry.path_bytes());
        if !name.starts_with("airlock/") {
            break;
        }
        if wanted.contains(&name.as_str()) {
            let mut bytes = Vec::new();
            (&mut entry)
                .take(MAX_MANIFEST_BYTES.max(provenance::MAX_BYTES))
                .read_to_end(&mut bytes)
                .map_err(not_bundle)?;
            found.insert(name, bytes);
        }
    }
    Ok(found)
}
