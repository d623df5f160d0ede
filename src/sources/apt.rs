//! `[[deb]]` entries: packages from an apt repository. `InRelease` (or `Release` +
//! `Release.gpg`) is verified against the spec's keyring with `OpenPGP` (the `pgp` crate); the
//! `Packages` index is verified by the Release's SHA256 and size; each pinned `name=version`
//! for `arch` (or `all`) is downloaded and verified by its SHA256 and Size. An unsigned
//! repository is refused unless the spec says `allow_unsigned = true`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use pgp::composed::{CleartextSignedMessage, Deserializable, DetachedSignature, SignedPublicKey, SignedPublicSubKey};

use super::{Plan, SourceError, Sources};
use crate::bundle::manifest::{Artifact, DebArtifact};
use crate::bundle::pins::deb_member;
use crate::bundle::writer::Member;
use crate::digest::Sha256;
use crate::failure::{Class, Classify};
use crate::fetch::{Http, HttpError, Wanted, blocking};
use crate::member_path::MemberPath;
use crate::spec::DebSpec;
use crate::spec::lock::{LockFile, LockedDeb};

const MAX_INDEX: u64 = 256 << 20;

#[derive(Debug, thiserror::Error)]
pub enum DebError {
    #[error("keyring `{}`: {detail}", path.display())]
    Keyring { path: PathBuf, detail: String },
    #[error("{url}: the signature does not verify with keyring `{}` ({detail})", keyring.display())]
    Signature { url: String, keyring: PathBuf, detail: String },
    #[error("{repo}: suite `{suite}` is unsigned and the spec does not say `allow_unsigned = true`")]
    Unsigned { repo: String, suite: String },
    #[error("{repo}: `[[deb]]` needs `keyring` to verify the repository (or `allow_unsigned = true`)")]
    NoKeyring { repo: String },
    #[error("{url}: {detail}")]
    Index { url: String, detail: String },
    #[error("{url}: expected {what} {expected}, got {actual}")]
    Mismatch { url: String, what: &'static str, expected: String, actual: String },
    #[error(
        "{repo} {suite}: the Release expired at {until} (a stale or replayed archive); `allow_expired = true` accepts it"
    )]
    Expired { repo: String, suite: String, until: String },
    #[error("{repo} {suite}: `{package}` for {arch} is not in the repository ({available})")]
    NotFound { repo: String, suite: String, package: String, arch: String, available: String },
}

impl Classify for DebError {
    fn class(&self) -> Class {
        match self {
            // A signature or digest that does not hold.
            DebError::Signature { .. }
            | DebError::Unsigned { .. }
            | DebError::Mismatch { .. }
            | DebError::Expired { .. } => Class::Verification,
            DebError::NoKeyring { .. }
            | DebError::Keyring { .. }
            | DebError::Index { .. }
            | DebError::NotFound { .. } => Class::Runtime,
        }
    }
}

/// Deb822 paragraphs: `Field: value` lines, continuation lines starting with a space.
/// Hand-written: the format is a few lines of grammar, and the crates for it pull far more.
pub fn paragraphs(text: &str) -> Vec<(String, BTreeMap<String, String>)> {
    let mut out = Vec::new();
    for block in text.split("\n\n").map(|b| b.trim_matches('\n')).filter(|b| !b.trim().is_empty()) {
        let mut fields: BTreeMap<String, String> = BTreeMap::new();
        let mut last: Option<String> = None;
        for line in block.lines() {
            if line.starts_with([' ', '\t']) {
                if let Some(key) = &last {
                    let v = fields.entry(key.clone()).or_default();
                    v.push('\n');
                    v.push_str(line.trim());
                }
            } else if let Some((k, v)) = line.split_once(':') {
                last = Some(k.trim().to_owned());
                fields.insert(k.trim().to_owned(), v.trim().to_owned());
            }
        }
        out.push((block.to_owned(), fields));
    }
    out
}

/// The `SHA256` section of a Release file: path -> (digest, size).
fn release_sha256(release: &BTreeMap<String, String>) -> BTreeMap<String, (String, u64)> {
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

async fn load_keyring(path: &Path) -> Result<Vec<SignedPublicKey>, DebError> {
    let bad = |detail: String| DebError::Keyring { path: path.to_owned(), detail };
    let bytes = tokio::fs::read(path).await.map_err(|e| bad(e.to_string()))?;
    let (keys, _) = SignedPublicKey::from_reader_many(bytes.as_slice()).map_err(|e| bad(e.to_string()))?;
    let keys: Vec<SignedPublicKey> = keys.collect::<Result<_, _>>().map_err(|e| bad(e.to_string()))?;
    if keys.is_empty() {
        return Err(bad("holds no OpenPGP public key".into()));
    }
    Ok(keys)
}

/// The keyring a spec entry names (relative to the spec), if any.
struct Keyring {
    path: PathBuf,
    keys: Vec<SignedPublicKey>,
}

impl Keyring {
    /// Whether any key of the keyring, primary or subkey, made the signature: repositories
    /// often sign with a subkey. (Two closures: the two key types share no object-safe trait.)
    fn verifies(&self, primary: impl Fn(&SignedPublicKey) -> bool, sub: impl Fn(&SignedPublicSubKey) -> bool) -> bool {
        self.keys.iter().any(|k| primary(k) || k.public_subkeys.iter().any(&sub))
    }

    fn refuse(&self, url: String) -> DebError {
        DebError::Signature { url, keyring: self.path.clone(), detail: "no key in it made this signature".into() }
    }
}

/// The verified text of the suite's Release file: `InRelease` if the repository has it, else
/// `Release` with `Release.gpg`. `allow_unsigned` skips the check (logged loudly).
async fn release(http: &Http, entry: &DebSpec, base: &Path) -> Result<String, SourceError> {
    let repo = entry.repo.trim_end_matches('/');
    let dist = dist_url(entry);
    let keyring = match &entry.keyring {
        Some(k) => Some(Keyring { path: base.join(k), keys: load_keyring(&base.join(k)).await? }),
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
                    return Err(k.refuse(in_release).into());
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
                let (sigs, _) = DetachedSignature::from_reader_many(sig_bytes.as_slice())
                    .map_err(|e| DebError::Index { url: sig_url.clone(), detail: e.to_string() })?;
                let sigs: Vec<DetachedSignature> = sigs.filter_map(Result::ok).collect();
                let any = |verify: &dyn Fn(&DetachedSignature) -> bool| sigs.iter().any(verify);
                let ok = k.verifies(
                    |p| any(&|sig: &DetachedSignature| sig.verify(p, &bytes).is_ok()),
                    |sk| any(&|sig: &DetachedSignature| sig.verify(sk, &bytes).is_ok()),
                );
                if !ok {
                    return Err(k.refuse(sig_url).into());
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
fn is_flat(entry: &DebSpec) -> bool {
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

/// How an index is compressed, by its file name's suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compression {
    Xz,
    Gz,
    Zst,
    Bz2,
    Plain,
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

/// Decompress an index, refusing more than `limit` bytes out, on the blocking pool: it is CPU
/// work.
async fn decompress(bytes: Vec<u8>, compression: Compression, limit: u64) -> Result<Vec<u8>, String> {
    blocking(move || {
        let mut out = Vec::new();
        let mut limited = LimitedWriter { inner: &mut out, left: limit, limit };
        let mut input = bytes.as_slice();
        match compression {
            Compression::Plain => return Ok(bytes),
            Compression::Xz => lzma_rs::xz_decompress(&mut input, &mut limited).map_err(|e| e.to_string())?,
            Compression::Gz => {
                std::io::copy(&mut flate2::read::GzDecoder::new(input), &mut limited).map_err(|e| e.to_string())?;
            }
            Compression::Zst => zstd::stream::copy_decode(input, &mut limited).map_err(|e| e.to_string())?,
            Compression::Bz2 => {
                std::io::copy(&mut bzip2::read::BzDecoder::new(input), &mut limited).map_err(|e| e.to_string())?;
            }
        }
        Ok(out)
    })
    .await
}

/// A writer that refuses more than `left` bytes (a small compressed index can expand to anything).
struct LimitedWriter<'a> {
    inner: &'a mut Vec<u8>,
    left: u64,
    limit: u64,
}

impl std::io::Write for LimitedWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() as u64 > self.left {
            return Err(std::io::Error::other(format!("decompresses to more than {} bytes", self.limit)));
        }
        self.left -= buf.len() as u64;
        self.inner.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
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
/// verified by the `Release` SHA256 and size as fetched and, when `Release` lists the plain
/// file too, once decompressed.
async fn packages(http: &Http, entry: &DebSpec, release: &Release, component: &str) -> Result<String, SourceError> {
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
        let bytes = match http.fetch_small(&url, "*/*", None, MAX_INDEX).await {
            Ok((bytes, _)) => bytes,
            Err(HttpError::Status { status: 404, .. }) => {
                not_served.push(url);
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        check_sum(&url, &bytes, hash, *size)?;
        let text = decompress(bytes, compression, MAX_INDEX)
            .await
            .map_err(|detail| DebError::Index { url: url.clone(), detail })?;
        if let (Some((hash, size)), false) = (plain, compression == Compression::Plain) {
            check_sum(&format!("{url} (decompressed)"), &text, hash, *size)?;
        }
        return String::from_utf8(text).map_err(|e| DebError::Index { url, detail: e.to_string() }.into());
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
fn check_valid_until(fields: &BTreeMap<String, String>, entry: &DebSpec) -> Result<(), DebError> {
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
    Err(DebError::Expired { repo: entry.repo.clone(), suite: entry.suite.clone(), until: until.clone() })
}

pub async fn resolve(sources: &Sources<'_>) -> Result<Vec<LockedDeb>, SourceError> {
    let mut out = Vec::new();
    for entry in &sources.spec.spec.deb {
        out.extend(resolve_entry(sources, entry.get_ref()).await?);
    }
    Ok(out)
}

async fn resolve_entry(sources: &Sources<'_>, entry: &DebSpec) -> Result<Vec<LockedDeb>, SourceError> {
    let (http, fetch) = (sources.fetch.http, &sources.fetch);
    let repo = entry.repo.trim_end_matches('/');
    let text = release(http, entry, sources.spec.base_dir()).await?;
    let fields = paragraphs(&text).into_iter().next().map(|(_, f)| f).unwrap_or_default();
    check_valid_until(&fields, entry)?;
    let release = Release {
        sums: release_sha256(&fields),
        by_hash: fields.get("Acquire-By-Hash").is_some_and(|v| v.trim().eq_ignore_ascii_case("yes")),
    };
    let mut stanzas = Vec::new();
    // A flat repository has one index for everything: its components are not looked at.
    let components: Vec<&str> =
        if is_flat(entry) { vec![""] } else { entry.components.iter().map(String::as_str).collect() };
    for component in components {
        stanzas.extend(paragraphs(&packages(http, entry, &release, component).await?));
    }
    let mut out = Vec::new();
    for wanted in &entry.packages {
        let name = wanted.name.as_str();
        let arch_ok =
            |f: &BTreeMap<String, String>| f.get("Architecture").is_some_and(|a| a == &entry.arch || a == "all");
        // A bare name is not resolved to a candidate yet: it lists what there is to pin.
        let found = stanzas.iter().find(|(_, f)| {
            f.get("Package").is_some_and(|p| p == name)
                && f.get("Version").is_some_and(|v| wanted.version.as_ref() == Some(v))
                && arch_ok(f)
        });
        let Some((stanza, f)) = found else {
            let versions: BTreeSet<String> = stanzas
                .iter()
                .filter(|(_, f)| f.get("Package").is_some_and(|p| p == name) && arch_ok(f))
                .filter_map(|(_, f)| f.get("Version").cloned())
                .collect();
            let available = if versions.is_empty() {
                "no such package".to_owned()
            } else {
                format!("it has {}", versions.into_iter().collect::<Vec<_>>().join(", "))
            };
            return Err(DebError::NotFound {
                repo: repo.to_owned(),
                suite: entry.suite.clone(),
                package: wanted.to_string(),
                arch: entry.arch.clone(),
                available,
            }
            .into());
        };
        let field = |k: &str| {
            f.get(k).cloned().ok_or_else(|| DebError::Index {
                url: repo.to_owned(),
                detail: format!("`{wanted}` has no `{k}` field"),
            })
        };
        // Relative to the repository's root; flat repositories often write `./name.deb`.
        let filename = field("Filename")?.trim_start_matches("./").to_owned();
        let size: u64 = field("Size")?
            .parse()
            .map_err(|_| DebError::Index { url: repo.to_owned(), detail: format!("`{wanted}`: bad Size") })?;
        let sha256: Sha256 = field("SHA256")?.parse().map_err(|e: crate::digest::DigestParseError| {
            DebError::Index { url: repo.to_owned(), detail: e.to_string() }
        })?;
        deb_member(&filename).map_err(|e| DebError::Index { url: repo.to_owned(), detail: e.to_string() })?;
        let url = format!("{repo}/{filename}");
        http.download(&url, sha256, Some(size), None, fetch, &format!("deb {wanted}")).await?;
        out.push(LockedDeb {
            repo: entry.repo.clone(),
            suite: entry.suite.clone(),
            arch: entry.arch.clone(),
            package: wanted.clone(),
            architecture: field("Architecture")?,
            filename,
            sha256,
            size,
            stanza: format!("{}\n", stanza.trim_end()),
        });
    }
    Ok(out)
}

/// Every locked package (downloaded into the cache if needed) and `debs/Packages` with the
/// upstream stanzas of exactly those files.
pub async fn plan(sources: &Sources<'_>, lock: &LockFile) -> Result<Plan, SourceError> {
    let mut debs: Vec<&LockedDeb> = lock.lock.deb.iter().collect();
    if debs.is_empty() {
        return Ok(Plan::default());
    }
    debs.sort_by(|a, b| a.filename.cmp(&b.filename));
    let wanted: Vec<Wanted> = debs
        .iter()
        .map(|d| Wanted {
            url: format!("{}/{}", d.repo.trim_end_matches('/'), d.filename),
            sha256: d.sha256,
            size: Some(d.size),
            bearer: None,
            what: format!("deb {}", d.package),
        })
        .collect();
    let origins = sources.fetch.http.download_all(&wanted, &sources.fetch).await?;
    let mut plan = Plan::default();
    for ((d, origin), want) in debs.iter().zip(origins).zip(wanted) {
        let artifact =
            DebArtifact::try_from(*d).map_err(|e| DebError::Index { url: want.url.clone(), detail: e.to_string() })?;
        plan.members.push(Member {
            path: artifact.path.clone(),
            size: d.size,
            sha256: d.sha256,
            origin,
            what: want.what,
        });
        plan.artifacts.push(Artifact::Deb(artifact));
    }
    let index: String = debs.iter().map(|d| d.stanza.as_str()).collect::<Vec<_>>().join("\n");
    let (digest, size) = (Sha256::of_bytes(index.as_bytes()), index.len() as u64);
    let cache = sources.fetch.cache.clone();
    let origin = blocking(move || cache.put(digest, Some(size), "debs/Packages", index.as_bytes())).await?;
    let path = MemberPath::new("debs/Packages").expect("a valid member path");
    plan.members.push(Member { path, size, sha256: digest, origin, what: "debs/Packages".into() });
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::{Compression, decompress};

    fn compress(plain: &[u8], compression: Compression) -> Vec<u8> {
        match compression {
            Compression::Plain => plain.to_vec(),
            Compression::Xz => {
                let mut out = Vec::new();
                lzma_rs::xz_compress(&mut &plain[..], &mut out).unwrap();
                out
            }
            Compression::Gz => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(plain).unwrap();
                e.finish().unwrap()
            }
            Compression::Zst => zstd::encode_all(plain, 3).unwrap(),
            Compression::Bz2 => {
                let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
                e.write_all(plain).unwrap();
                e.finish().unwrap()
            }
        }
    }

    #[tokio::test]
    async fn every_served_form_decompresses_and_none_past_the_limit() {
        let plain = b"Package: hello\nVersion: 2.10-3\n\n".repeat(1000);
        let n = plain.len() as u64;
        for c in [Compression::Xz, Compression::Gz, Compression::Zst, Compression::Bz2, Compression::Plain] {
            assert_eq!(decompress(compress(&plain, c), c, n).await.unwrap(), plain, "{c:?}");
            if c != Compression::Plain {
                // One byte over is refused, never cut short and used.
                let err = decompress(compress(&plain, c), c, n - 1).await.unwrap_err();
                assert!(err.contains(&format!("more than {} bytes", n - 1)), "{c:?}: {err}");
            }
        }
        let err = decompress(b"not xz".to_vec(), Compression::Xz, n).await.unwrap_err();
        assert!(!err.is_empty());
    }
}
