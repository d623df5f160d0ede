//! `airlock trust init|rotate|role|revoke|renew|update|show --root DIR`: the site trust root.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::cli::{TrustCommand, TrustCommon};
use crate::clock::Timestamp;
use crate::failure::{Class, Context as _, Exit, Failure, Result};
use crate::sign::{SigningKey, TrustedKey};
use crate::site::trust::change;
use crate::trust::metadata::{self, Key};
use crate::trust::{InitSpec, Presented, RoleSpec, RootChange, SiteTrust, TargetsChange, TrustError, Update};

pub fn run(cmd: &TrustCommand) -> Result<Exit> {
    match cmd {
        TrustCommand::Init(a) => init(a),
        TrustCommand::Rotate(a) => {
            let change_spec = RootChange {
                add_root: super::load_trusted(&a.add_root_key)?,
                remove_root: super::load_trusted(&a.remove_root_key)?,
                root_threshold: a.root_threshold,
                add_targets: super::load_trusted(&a.add_targets_key)?,
                remove_targets: super::load_trusted(&a.remove_targets_key)?,
                targets_threshold: a.targets_threshold,
                expires: a.expires.as_deref().map(expires).transpose()?,
            };
            let signers = signers(&a.common)?;
            let after = write(&a.common, |t| existing(t)?.rotate(&change_spec, &signers))?;
            done(&a.common, &after, "rotated", &[])
        }
        TrustCommand::Role(a) => {
            let change_spec = TargetsChange {
                set_roles: a.role.iter().map(|r| parse_role(r)).collect::<Result<_>>()?,
                remove_roles: a.remove_role.clone(),
                expires: a.expires.as_deref().map(expires).transpose()?,
                ..TargetsChange::default()
            };
            targets_change(&a.common, &change_spec, "changed the signing roles")
        }
        TrustCommand::Revoke(a) => {
            let change_spec = TargetsChange { revoke: super::load_trusted(&a.key)?, ..TargetsChange::default() };
            targets_change(&a.common, &change_spec, "revoked")
        }
        TrustCommand::Renew(a) => renew(a),
        TrustCommand::SigstoreRoot(a) => {
            let bytes = crate::sign::sigstore::read_bounded(&a.file)?;
            // Refused before anything is signed when it is not a trusted root this airlock reads.
            crate::sign::sigstore::Root::Given { from: format!("`{}`", a.file.display()), json: bytes.clone() }
                .check()?;
            let change_spec = TargetsChange {
                sigstore_root: Some(bytes),
                expires: a.expires.as_deref().map(expires).transpose()?,
                ..TargetsChange::default()
            };
            targets_change(&a.common, &change_spec, "set the site's Sigstore trusted root")
        }
        TrustCommand::Update(a) => {
            let files = a
                .files
                .iter()
                .map(|p| {
                    let bytes = crate::trust::read_metadata(p)?;
                    let bytes = bytes.ok_or_else(|| no_such_file(p))?;
                    Ok((p.clone(), bytes))
                })
                .collect::<Result<Vec<_>>>()?;
            let wait = std::time::Duration::from_secs(a.common.site.wait);
            let after = crate::site::trust::adopt(&a.common.root, wait, &files, Presented::Explicit)?
                .ok_or_else(|| TrustError::Missing { dir: a.common.root.join(crate::trust::TRUST_DIR) })?;
            done(&a.common, &after, "updated", &[])
        }
        TrustCommand::Show(a) => {
            let root = crate::site::root::SiteRoot::new(&a.root);
            let state = crate::site::state::State::load(&root)?;
            let trust = crate::site::trust::load(&root, &state)?
                .ok_or_else(|| TrustError::Missing { dir: a.root.join(crate::trust::TRUST_DIR) })?;
            let shown = Shown::of(&trust);
            if a.json {
                super::print_json(&shown)?;
            } else {
                print(&shown)?;
            }
            Ok(Exit::Ok)
        }
    }
}

fn init(a: &crate::cli::TrustInitArgs) -> Result<Exit> {
    let root_keys = super::load_trusted(&a.root_key)?;
    let (targets_keys, targets_threshold) = if a.targets_key.is_empty() {
        (root_keys.clone(), a.targets_threshold.unwrap_or(a.root_threshold))
    } else {
        (super::load_trusted(&a.targets_key)?, a.targets_threshold.unwrap_or(1))
    };
    let spec = InitSpec {
        root_keys,
        root_threshold: a.root_threshold,
        targets_keys,
        targets_threshold,
        roles: a.role.iter().map(|r| parse_role(r)).collect::<Result<_>>()?,
        expires: expires(&a.expires)?,
        signers: signers(&a.common)?,
    };
    let after = write(&a.common, |current| match current {
        Some(t) => Err(TrustError::Usage(format!(
            "`{}` already has a trust root (root version {}): change it with `airlock trust rotate`, \
             `role`, `revoke` or `renew`",
            t.dir.display(),
            t.root.signed.version
        ))),
        None => SiteTrust::init(&spec),
    })?;
    done(&a.common, &after, "created", &[])
}

/// `trust renew`: a new root version and a new targets version with the new expiry, each
/// signed by the `--sign` keys that belong to it.
fn renew(a: &crate::cli::TrustRenewArgs) -> Result<Exit> {
    let when = expires(&a.expires)?;
    let signers = signers(&a.common)?;
    let only = a.only.as_deref();
    let after = write(&a.common, |t| {
        let t = existing(t)?;
        let mut update = Update::default();
        if only != Some("targets") {
            let rotate = RootChange { expires: Some(when), ..RootChange::default() };
            let keys: Vec<_> = signers.iter().filter(|s| signs(t, "root", s)).cloned().collect();
            update.roots = t.rotate(&rotate, &keys)?.roots;
        }
        if only != Some("root") {
            let renew = TargetsChange { expires: Some(when), ..TargetsChange::default() };
            let keys: Vec<_> = signers.iter().filter(|s| signs(t, "targets", s)).cloned().collect();
            update.targets = t.change_targets(&renew, &keys)?.0.targets;
        }
        Ok(update)
    })?;
    done(&a.common, &after, "renewed", &[])
}

/// Whether signer `s` holds a key of `role` in the site's root (renewing signs each file with
/// only the keys that belong to it).
fn signs(t: &SiteTrust, role: &str, s: &SigningKey) -> bool {
    let root = &t.root.signed;
    root.roles.get(role).is_some_and(|r| {
        r.keyids
            .iter()
            .any(|id| root.keys.get(id).and_then(|k| k.trusted(role).ok()).is_some_and(|k| k.key_id() == s.key_id()))
    })
}

fn targets_change(common: &TrustCommon, spec: &TargetsChange, what: &str) -> Result<Exit> {
    let signers = signers(common)?;
    let mut warnings = Vec::new();
    let after = write(common, |t| {
        let (update, w) = existing(t)?.change_targets(spec, &signers)?;
        warnings = w;
        Ok(update)
    })?;
    done(common, &after, what, &warnings)
}

fn existing(t: Option<&SiteTrust>) -> Result<&SiteTrust, TrustError> {
    t.ok_or_else(|| TrustError::Usage("this site has no trust root: create one with `airlock trust init`".to_owned()))
}

fn write(
    common: &TrustCommon,
    make: impl FnOnce(Option<&SiteTrust>) -> Result<Update, TrustError>,
) -> Result<SiteTrust> {
    Ok(change(&common.root, std::time::Duration::from_secs(common.site.wait), make)?)
}

fn done(common: &TrustCommon, after: &SiteTrust, what: &str, warnings: &[String]) -> Result<Exit> {
    for w in warnings {
        tracing::warn!("{w}");
    }
    let shown = Shown::of(after);
    if common.json {
        super::print_json(&shown)?;
    } else {
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "{what}: `{}` is at root version {} and targets version {}",
            after.dir.display(),
            shown.root_version,
            shown.targets_version
        )?;
    }
    Ok(Exit::Ok)
}

fn signers(common: &TrustCommon) -> Result<Vec<SigningKey>> {
    if common.sign.is_empty() {
        return Err(TrustError::Usage("name the keys that sign the new metadata with --sign KEY".to_owned()).into());
    }
    let password = super::key_password();
    common.sign.iter().map(|p| Ok(SigningKey::load(p, password.as_deref())?)).collect()
}

fn expires(value: &str) -> Result<Timestamp> {
    let now = Timestamp::started();
    let t = Timestamp::parse_expires_after(value, now).map_err(|e| TrustError::Usage(e.to_string()))?;
    if t <= now {
        return Err(TrustError::Usage(format!("--expires {value} is not in the future (it is {t})")).into());
    }
    Ok(t)
}

/// `NAME=PUB[,PUB…]:THRESHOLD`.
fn parse_role(value: &str) -> Result<RoleSpec> {
    let bad = |why: &str| TrustError::Usage(format!("--role `{value}`: {why}; expected NAME=PUB[,PUB…]:THRESHOLD"));
    let (name, rest) = value.split_once('=').ok_or_else(|| bad("no `=`"))?;
    let (keys, threshold) = rest.rsplit_once(':').ok_or_else(|| bad("no `:THRESHOLD`"))?;
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return Err(bad("the name must be letters, digits, `-` or `_`").into());
    }
    let threshold: u64 = threshold.parse().map_err(|_| bad("the threshold is not a number"))?;
    let paths: Vec<PathBuf> = keys.split(',').filter(|k| !k.is_empty()).map(PathBuf::from).collect();
    if paths.is_empty() {
        return Err(bad("no keys").into());
    }
    let keys = super::load_trusted(&paths)?;
    let distinct = keys.iter().map(TrustedKey::key_id).collect::<std::collections::BTreeSet<_>>().len() as u64;
    if threshold == 0 || threshold > distinct {
        return Err(bad(&format!("a threshold of {threshold} over {distinct} distinct key(s) can never be met")).into());
    }
    Ok(RoleSpec { name: name.to_owned(), keys, threshold })
}

/// The metadata files of the trust root under `dir` (`build --trust-root DIR`), verified
/// first: every root version and the targets metadata, by file name.
pub fn carried_files(dir: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    let trust = SiteTrust::load(dir).with_context(|| format!("--trust-root `{}`", dir.display()))?;
    for e in trust.expired(Timestamp::started()) {
        tracing::warn!("{} expired at {}: sites will refuse it until it is renewed", e.path.display(), e.expires);
    }
    let mut files = Vec::new();
    for n in 1..=trust.root.signed.version {
        let name = crate::trust::root_file(n);
        let path = trust.dir.join(&name);
        let bytes = crate::trust::read_metadata(&path)?;
        files.push((name, bytes.ok_or_else(|| no_such_file(&path))?));
    }
    let path = trust.dir.join(crate::trust::TARGETS_FILE);
    let bytes = crate::trust::read_metadata(&path)?;
    files.push((crate::trust::TARGETS_FILE.to_owned(), bytes.ok_or_else(|| no_such_file(&path))?));
    // The Sigstore trusted root the targets list travels with them (checked against them first).
    if let Some((bytes, _)) = trust.sigstore_root()? {
        files.push(("trusted_root.json".to_owned(), bytes));
    }
    Ok(files)
}

/// `trust show`: what a security team checks.
#[derive(Serialize)]
struct Shown {
    dir: PathBuf,
    anchor_sha256: String,
    root_version: u64,
    root_expires: String,
    targets_version: u64,
    targets_expires: String,
    /// `root`, `targets` (and the `snapshot` and `timestamp` roles TUF requires).
    top_level: Vec<ShownRole>,
    /// The signing roles a bundle must meet.
    roles: Vec<ShownRole>,
    /// Files past their expiry now.
    expired: Vec<String>,
    /// The site's Sigstore trusted root (`sigstore/trusted_root.json`): its sha256 and length,
    /// or none (the public-good instance's, shipped with airlock).
    #[serde(skip_serializing_if = "Option::is_none")]
    sigstore_root: Option<crate::trust::metadata::TargetFile>,
}

#[derive(Serialize)]
struct ShownRole {
    name: String,
    threshold: u64,
    keys: Vec<ShownKey>,
}

#[derive(Serialize)]
struct ShownKey {
    /// airlock's key id (the sha256 of the SPKI DER): what co-signature files and records name.
    key_id: String,
    /// TUF's key id (the sha256 of the key object's canonical JSON).
    tuf_keyid: String,
}

impl Shown {
    fn of(t: &SiteTrust) -> Self {
        let key = |keys: &std::collections::BTreeMap<String, Key>, id: &String| ShownKey {
            key_id: keys
                .get(id)
                .and_then(|k| k.trusted("key").ok())
                .map_or_else(|| "?".to_owned(), |k| k.key_id().to_string()),
            tuf_keyid: id.clone(),
        };
        let root = &t.root.signed;
        let top_level = root
            .roles
            .iter()
            .map(|(name, r)| ShownRole {
                name: name.clone(),
                threshold: r.threshold,
                keys: r.keyids.iter().map(|id| key(&root.keys, id)).collect(),
            })
            .collect();
        let roles = t
            .targets
            .signed
            .delegations
            .as_ref()
            .map(|d: &metadata::Delegations| {
                d.roles
                    .iter()
                    .map(|r| ShownRole {
                        name: r.name.clone(),
                        threshold: r.threshold,
                        keys: r.keyids.iter().map(|id| key(&d.keys, id)).collect(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            dir: t.dir.clone(),
            anchor_sha256: t.anchor.to_string(),
            root_version: root.version,
            root_expires: root.expires.clone(),
            targets_version: t.targets.signed.version,
            targets_expires: t.targets.signed.expires.clone(),
            top_level,
            roles,
            expired: t
                .expired(Timestamp::started())
                .iter()
                .map(|e| format!("{} expired at {}", e.path.display(), e.expires))
                .collect(),
            sigstore_root: t.targets.signed.targets.get(crate::trust::SIGSTORE_TARGET).cloned(),
        }
    }
}

fn print(s: &Shown) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "trust root {} (1.root.json sha256 {})", s.dir.display(), s.anchor_sha256)?;
    writeln!(out, "root version {}, expires {}", s.root_version, s.root_expires)?;
    writeln!(out, "targets version {}, expires {}", s.targets_version, s.targets_expires)?;
    let (decision, signing): (Vec<&ShownRole>, Vec<&ShownRole>) =
        s.roles.iter().partition(|r| crate::trust::DECISION_ROLES.contains(&r.name.as_str()));
    let top_level: Vec<&ShownRole> = s.top_level.iter().collect();
    for (title, roles) in [
        ("top-level roles", &top_level),
        ("signing roles (every one must be met)", &signing),
        ("decision roles (approvals and promotions, never a bundle's signature)", &decision),
    ] {
        if roles.is_empty() && title.starts_with("decision") {
            writeln!(
                out,
                "decision roles: none (promote needs no approval, nodes follow the mirror's `current` unsigned; \
                 add them with `airlock trust role --role approvers=A.pub,B.pub:2 --role promotion=P.pub:1`)"
            )?;
            continue;
        }
        writeln!(out, "{title}:")?;
        for r in roles {
            let keys: Vec<_> = r.keys.iter().map(|k| k.key_id.get(..16).unwrap_or(&k.key_id)).collect();
            writeln!(out, "  {} {} of {}: {}", r.name, r.threshold, r.keys.len(), keys.join(", "))?;
        }
    }
    match s.sigstore_root.as_ref().and_then(|t| t.hashes.get("sha256").map(String::as_str)) {
        Some(sha) => writeln!(out, "Sigstore trusted root: {} (sha256 {sha})", crate::trust::SIGSTORE_TARGET)?,
        None => writeln!(out, "Sigstore trusted root: the public-good instance's, shipped with airlock")?,
    }
    for e in &s.expired {
        writeln!(out, "EXPIRED {e}")?;
    }
    Ok(())
}

/// A file a trust command was to read is not there.
fn no_such_file(path: &Path) -> Failure {
    Failure::new(Class::Runtime, format!("cannot read `{}`: no such file", path.display()))
}
