//! An apt archive as the spec names it, fetched and verified: its `InRelease` (or `Release` +
//! `Release.gpg`) checked against the entry's keyring, its `Valid-Until`, and the `Packages`
//! indexes the `Release` lists by SHA256 and size (kept in the cache while it names them).

use std::collections::BTreeMap;
use std::path::Path;

use deb822_fast::Paragraph;
use pgp::composed::CleartextSignedMessage;

use super::DebError;
use super::index::{self, Compression, Index, ReadError};
use crate::digest::Sha256;
use crate::fetch::{Http, HttpError};
use crate::sources::keyring::Keyring;
use crate::sources::{SourceError, Sources};
use crate::spec::DebSpec;

/// The most a `Packages` index may be, as fetched or decompressed.
const MAX_INDEX: u64 = 256 << 20;

/// The first paragraph of a `Release` file.
fn release_fields(url: &str, text: &str) -> Result<Paragraph, DebError> {
    let doc: deb822_fast::Deb822 = text
        .parse()
        .map_err(|e| DebError::Index { url: url.to_owned(), detail: format!("not a Release file: {e}") })?;
    doc.into_iter().next().ok_or_else(|| DebError::Index { url: url.to_owned(), detail: "empty Release file".into() })
}

/// The `SHA256` section of a Release file: path -> (digest, size).
fn release_sha256(release: &Paragraph) -> BTreeMap<String, (String, u64)> {
    release
        .get("SHA256")
        .map(|v| {
            v.lines()
                .filter_map(|l| {
                    let mut it = l.split_whitespace();
                    let (hash, size, path) = (it.next()?, it.next()?.parse().ok()?, it.next()?);
                    Some((path.to_owned(), (hash.to_owned(), size)))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn refuse(k: &Keyring, url: String) -> DebError {
    DebError::Signature { url, keyring: k.path.clone(), detail: "no key in it made this signature".into() }
}

/// The verified text of the suite's Release file: `InRelease` if the repository has it, else
/// `Release` with `Release.gpg`. `allow_unsigned` skips the check (logged loudly).
async fn release(http: &Http, entry: &DebSpec, base: &Path) -> Result<String, SourceError> {
    let repo = entry.repo.trim_end_matches('/');
    let dist = dist_url(entry);
    let keyring = match &entry.keyring {
        Some(k) => Some(
            Keyring::load(&base.join(k))
                .await
                .map_err(|e| DebError::Keyring { path: base.join(k), detail: e.to_string() })?,
        ),
        None if entry.allow_unsigned => None,
        None => return Err(DebError::NoKeyring { repo: repo.to_owned() }.into()),
    };
    let unsigned_warning = || tracing::warn!("{dist}: allow_unsigned = true: the Release signature is NOT checked");
    let in_release = format!("{dist}/InRelease");
    match http.fetch_small(&in_release, "*/*", None, MAX_INDEX).await {
        Ok((bytes, _)) => {
            let bad = |detail: String| DebError::Index { url: in_release.clone(), detail };
            let text = String::from_utf8(bytes).map_err(|e| bad(e.to_string()))?;
            let (msg, _) =
                CleartextSignedMessage::from_string(&text).map_err(|e| bad(format!("not clearsigned: {e}")))?;
            match &keyring {
                Some(k) if !k.verifies(|p| msg.verify(p).is_ok(), |sk| msg.verify(sk).is_ok()) => {
                    return Err(refuse(k, in_release).into());
                }
                Some(_) => {}
                None => unsigned_warning(),
            }
            Ok(msg.text().to_owned())
        }
        Err(HttpError::Status { status: 404, .. }) => {
            let url = format!("{dist}/Release");
            let (bytes, _) = http.fetch_small(&url, "*/*", None, MAX_INDEX).await?;
            if let Some(k) = &keyring {
                let sig_url = format!("{dist}/Release.gpg");
                let sig_bytes = match http.fetch_small(&sig_url, "*/*", None, 1 << 20).await {
                    Ok((b, _)) => b,
                    Err(HttpError::Status { status: 404, .. }) => {
                        return Err(DebError::Unsigned { repo: repo.to_owned(), suite: entry.suite.clone() }.into());
                    }
                    Err(e) => return Err(e.into()),
                };
                // Archives sign with several keys at once (the current and the next archive key):
                // one valid signature from the keyring is enough.
                let ok = k
                    .verifies_detached(&bytes, &sig_bytes)
                    .map_err(|e| DebError::Index { url: sig_url.clone(), detail: e.to_string() })?;
                if !ok {
                    return Err(refuse(k, sig_url).into());
                }
            } else {
                unsigned_warning();
            }
            String::from_utf8(bytes).map_err(|e| DebError::Index { url, detail: e.to_string() }.into())
        }
        Err(e) => Err(e.into()),
    }
}

/// A flat repository (`suite = "./"`, or any suite ending in `/`): `Release` and `Packages`
/// sit in that directory, with no `dists/` tree and no components.
pub(super) fn is_flat(entry: &DebSpec) -> bool {
    entry.suite.ends_with('/')
}

/// Where the suite's `Release` files are: `REPO/dists/SUITE`, or `REPO/SUITE` for a flat one.
fn dist_url(entry: &DebSpec) -> String {
    let repo = entry.repo.trim_end_matches('/');
    if is_flat(entry) {
        format!("{repo}/{}", entry.suite.trim_end_matches('/'))
    } else {
        format!("{repo}/dists/{}", entry.suite)
    }
}

/// The forms of an index, in the order airlock asks for them (`.xz` and `.gz` are what
/// Debian and Ubuntu archives serve; `.zst` and `.bz2` are asked for when only they are
/// listed). Real archives serve only the compressed ones while their `Release` lists the
/// plain file's hashes too, so "listed" does not mean "served": a listed form that answers
/// 404 is skipped.
const VARIANTS: [(&str, Compression); 5] = [
    (".xz", Compression::Xz),
    (".gz", Compression::Gz),
    (".zst", Compression::Zst),
    (".bz2", Compression::Bz2),
    ("", Compression::Plain),
];

/// The `Release` fields that decide how indexes are fetched.
struct Release {
    sums: BTreeMap<String, (String, u64)>,
    /// `Acquire-By-Hash: yes`: fetch `…/by-hash/SHA256/HEX`, so that a mirror updating while
    /// the lock runs cannot hand over a newer index than this `Release` names.
    by_hash: bool,
}

fn check_sum(url: &str, bytes: &[u8], hash: &str, size: u64) -> Result<(), DebError> {
    let actual = Sha256::of_bytes(bytes).to_string();
    if actual != hash || bytes.len() as u64 != size {
        return Err(DebError::Mismatch {
            url: url.to_owned(),
            what: "sha256/size",
            expected: format!("{hash}/{size}"),
            actual: format!("{actual}/{}", bytes.len()),
        });
    }
    Ok(())
}

/// The Packages index of one component: the first form `Release` lists that is served,
/// verified by the `Release` SHA256 and size as fetched (and, when `Release` lists the plain
/// file too, once decompressed while it is read).
async fn packages(
    (http, cache): (&Http, &crate::cache::Cache),
    entry: &DebSpec,
    release: &Release,
    component: &str,
) -> Result<Index, SourceError> {
    let dist = dist_url(entry);
    let dir = if is_flat(entry) { String::new() } else { format!("{component}/binary-{}/", entry.arch) };
    let base = format!("{dir}Packages");
    let plain = release.sums.get(&base);
    let mut not_served = Vec::new();
    for (suffix, compression) in VARIANTS {
        let name = format!("{base}{suffix}");
        let Some((hash, size)) = release.sums.get(&name) else { continue };
        let url = if release.by_hash && !is_flat(entry) {
            format!("{dist}/{dir}by-hash/SHA256/{hash}")
        } else {
            format!("{dist}/{name}")
        };
        let bytes = match crate::sources::index::cached(cache, hash, *size, MAX_INDEX) {
            Some(bytes) => bytes,
            None => match http.fetch_small(&url, "*/*", None, MAX_INDEX).await {
                Ok((bytes, _)) => {
                    check_sum(&url, &bytes, hash, *size)?;
                    crate::sources::index::keep(cache, hash, &bytes, &name).await;
                    bytes
                }
                Err(HttpError::Status { status: 404, .. }) => {
                    not_served.push(url);
                    continue;
                }
                Err(e) => return Err(e.into()),
            },
        };
        let plain = plain.filter(|_| compression != Compression::Plain).cloned();
        let limit = crate::sources::index::plain_limit(plain.as_ref().map(|(_, size)| *size), MAX_INDEX);
        return Ok(Index { url, bytes, compression, plain, limit });
    }
    let detail = if not_served.is_empty() {
        format!("lists no form of `{base}`")
    } else {
        format!("lists `{base}` but serves none of its forms (tried {})", not_served.join(", "))
    };
    Err(DebError::Index { url: format!("{dist}/Release"), detail }.into())
}

/// Refuse a `Release` past its `Valid-Until` (a replayed, stale archive), unless the entry
/// says `allow_expired = true` (logged).
fn check_valid_until(fields: &Paragraph, entry: &DebSpec) -> Result<(), DebError> {
    let Some(until) = fields.get("Valid-Until") else { return Ok(()) };
    // RFC 2822 as archives write it, with `UTC` for the zone.
    let normalised = until.trim().replace(" UTC", " +0000").replace(" GMT", " +0000");
    let Ok(at) = time::OffsetDateTime::parse(&normalised, &time::format_description::well_known::Rfc2822) else {
        return Err(DebError::Index { url: entry.repo.clone(), detail: format!("unreadable Valid-Until `{until}`") });
    };
    if at >= time::OffsetDateTime::now_utc() {
        return Ok(());
    }
    if entry.allow_expired {
        tracing::warn!("{} {}: Release expired at {until}; accepted (allow_expired = true)", entry.repo, entry.suite);
        return Ok(());
    }
    Err(DebError::Expired { repo: entry.repo.clone(), suite: entry.suite.clone(), until: until.to_owned() })
}

/// Who made a suite: its `Release` `Origin` and `Codename` (the purl's namespace and distro).
#[derive(Debug, Clone, Default)]
pub(super) struct Distro {
    pub(super) origin: Option<String>,
    pub(super) codename: Option<String>,
}

/// The verified indexes of one entry: every component's `Packages`, and its `Release`'s
/// origin and codename.
pub(super) async fn load(sources: &Sources<'_>, entry: &DebSpec) -> Result<(Vec<Index>, Distro), SourceError> {
    let http = sources.fetch.http;
    let text = release(http, entry, sources.spec.base_dir()).await?;
    let fields = release_fields(&format!("{}/Release", dist_url(entry)), &text)?;
    check_valid_until(&fields, entry)?;
    let release = Release {
        sums: release_sha256(&fields),
        by_hash: fields.get("Acquire-By-Hash").is_some_and(|v| v.trim().eq_ignore_ascii_case("yes")),
    };
    // A flat repository has one index for everything: its components are not looked at.
    let components: Vec<&str> =
        if is_flat(entry) { vec![""] } else { entry.components.iter().map(String::as_str).collect() };
    let mut out = Vec::new();
    for component in components {
        out.push(packages((http, sources.fetch.cache), entry, &release, component).await?);
    }
    let field = |k: &str| fields.get(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
    Ok((out, Distro { origin: field("Origin"), codename: field("Codename").or_else(|| field("Suite")) }))
}

pub(super) fn read_error(url: &str, e: ReadError<index::BadStanza>) -> DebError {
    match e {
        ReadError::Mismatch { expected, actual } => {
            DebError::Mismatch { url: format!("{url} (decompressed)"), what: "sha256/size", expected, actual }
        }
        ReadError::Unreadable(detail) => DebError::Index { url: url.to_owned(), detail },
        ReadError::Refused(stanza) => DebError::Stanza { url: url.to_owned(), stanza },
    }
}
