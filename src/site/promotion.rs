//! A mirror's signed promotion, `ROOT/public/promotion.json`: what the mirror promoted, signed
//! under the site's trust root by its `promotion` role, so a node follows only a `current` the
//! site decided on — never whatever a web server calls `current`.
//!
//! The shape is TUF's timestamp role (a signed pointer): the bundle (id and manifest sha256),
//! a **number** that only grows (each promotion and each renewal takes the next), an
//! **expiry** (short: a stale promotion cannot be replayed for long), and the approval it
//! rests on (its sha256, run and approvers) or the recorded reason it had none. The envelope is
//! the trust root's own (`trust::metadata::Signed`: OLPC canonical JSON, one signature per key
//! of the role, by TUF key id), so python-tuf's `Metadata`-style checks read it too.
//!
//! A node whose trust root delegates a `promotion` role reads it before anything else when it
//! follows `current` (`apply URL`): refused, exit 3 and nothing downloaded, when it is missing,
//! below the role's threshold, expired, lower than the highest number this node accepted
//! (`state.json`'s `promotion`), or for another bundle than the manifest served. `apply URL
//! --release ID` (a canary pinned by the rollout) needs none, and its record says so.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::root::BundleId;
use crate::clock::Timestamp;
use crate::digest::Sha256;
use crate::sign::{KeyId, SigningKey};
use crate::trust::DecisionRole;
use crate::trust::metadata::Signed;

/// How a mirror signs its promotions: the site's `promotion` role, the keys given, the expiry.
#[derive(Debug)]
pub struct Signing {
    pub role: DecisionRole,
    pub keys: Vec<SigningKey>,
    pub expires: Timestamp,
}

/// Beside `current` in a mirror's public tree.
pub const FILE: &str = "promotion.json";
/// The largest promotion read: a few hundred bytes and a signature per key.
pub const MAX_BYTES: u64 = 64 << 10;
/// How long a promotion holds unless `--promotion-expires` says otherwise: renew it
/// (`airlock promote --renew`) well within it, from the mirror host's scheduler.
pub const DEFAULT_EXPIRES: &str = "7d";
const KIND: &str = "airlock-promotion";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Promotion {
    #[serde(rename = "_type")]
    pub kind: String,
    /// The promotion number: each promotion and renewal takes the next.
    pub version: u64,
    pub expires: Timestamp,
    pub promoted_at: Timestamp,
    pub bundle: PromotedBundle,
    /// The approval the promotion rests on (none: `without_approval`, or a site with no
    /// approvers role).
    pub approval: Option<ApprovedBy>,
    /// `promote --without-approval --reason TEXT`: the recorded exception.
    pub without_approval: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromotedBundle {
    pub name: String,
    pub version: String,
    pub id: BundleId,
    pub manifest_sha256: Sha256,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovedBy {
    /// The approval file's sha256 (kept on the mirror as `approvals/ID.dsse.json`).
    pub sha256: Sha256,
    pub run: String,
    pub approvers: Vec<KeyId>,
}

#[derive(Debug, thiserror::Error)]
pub enum PromotionError {
    #[error(
        "the mirror serves no signed promotion (`{url}`), and this node's trust root has a `promotion` role: \
         refused, nothing downloaded; the mirror promotes with `airlock promote --approval FILE --sign KEY`, \
         or take a release by id with --release ID"
    )]
    Missing { url: String },
    #[error("the mirror's promotion `{url}` is not one: {detail}; refused, nothing downloaded")]
    Format { url: String, detail: String },
    #[error(
        "the mirror's promotion `{url}` is signed by {got} of the {need} key(s) of the `promotion` role: refused, \
         nothing downloaded"
    )]
    Unsigned { url: String, need: u64, got: usize },
    #[error(
        "the mirror's promotion `{url}` (number {number}) expired at {expires} (now {now}): refused, nothing \
         downloaded; the mirror renews it with `airlock promote --renew --sign KEY`"
    )]
    Expired { url: String, number: u64, expires: Timestamp, now: Timestamp },
    #[error(
        "the mirror's promotion `{url}` is number {number}, below number {seen} this node accepted already: an \
         older promotion replayed; refused, nothing downloaded"
    )]
    Replayed { url: String, number: u64, seen: u64 },
    #[error(
        "the mirror's `current` is {served}, but its signed promotion (number {number}) is {promoted}: refused, \
         nothing downloaded"
    )]
    OtherBundle { number: u64, promoted: String, served: String },
    #[error("the approval `{}` approves {approved}, not {expected}: refused", path.display())]
    NotApproved { path: std::path::PathBuf, approved: String, expected: String },
    #[error(
        "the site's trust root has an `approvers` role: promoting {release} needs an approval meeting it \
         (`--approval FILE`, made with `airlock approve`), or `--without-approval --reason TEXT` on record"
    )]
    NeedsApproval { release: String },
    #[error("{0}")]
    Usage(String),
}

impl crate::failure::Classify for PromotionError {
    fn class(&self) -> crate::failure::Class {
        match self {
            PromotionError::Usage(_) => crate::failure::Class::Usage,
            PromotionError::Missing { .. }
            | PromotionError::Format { .. }
            | PromotionError::Unsigned { .. }
            | PromotionError::Expired { .. }
            | PromotionError::Replayed { .. }
            | PromotionError::OtherBundle { .. }
            | PromotionError::NotApproved { .. }
            | PromotionError::NeedsApproval { .. } => crate::failure::Class::Verification,
        }
    }
}

impl Promotion {
    pub fn new(number: u64, bundle: PromotedBundle, now: Timestamp, expires: Timestamp) -> Self {
        Self {
            kind: KIND.to_owned(),
            version: number,
            expires,
            promoted_at: now,
            bundle,
            approval: None,
            without_approval: None,
        }
    }
}

/// What `promote` rests on, as the command verified it.
#[derive(Debug, Clone)]
pub enum Decided {
    /// An approval that met the site's `approvers` role, for the bundle `manifest_sha256`.
    Approved { by: ApprovedBy, manifest_sha256: Sha256, label: String, path: std::path::PathBuf, bytes: Vec<u8> },
    /// `--without-approval --reason TEXT`.
    Without { reason: String },
    /// The site has no approvers role.
    NoRole,
}

/// `promotion` signed by each of `signers` that holds a key of the role; refused (usage) when a
/// signer holds none or the role's threshold is not met.
pub fn sign(
    promotion: Promotion,
    role: &DecisionRole,
    signers: &[SigningKey],
) -> Result<Signed<Promotion>, PromotionError> {
    let mut doc = Signed::new(promotion);
    for signer in signers {
        let tuf = role.role.keyids.iter().find(|id| {
            role.keys.get(*id).and_then(|k| k.trusted(&role.origin).ok()).is_some_and(|k| k.key_id() == signer.key_id())
        });
        let Some(tuf) = tuf else {
            return Err(PromotionError::Usage(format!(
                "--sign key {} is not a key of the site's `promotion` role",
                signer.key_id().short()
            )));
        };
        doc.sign(signer, tuf.clone());
    }
    let got = doc.signers(&role.keys, &role.role, &role.origin).len();
    if (got as u64) < role.role.threshold {
        return Err(PromotionError::Usage(format!(
            "the site's `promotion` role needs {} signature(s): --sign gave {got}",
            role.role.threshold
        )));
    }
    Ok(doc)
}

/// A promotion read from `url`, checked as a node checks it: signed by the role's threshold,
/// not expired at `now`, its number at least `seen`.
pub fn verify(
    url: &str,
    bytes: &[u8],
    role: &DecisionRole,
    now: Timestamp,
    seen: u64,
) -> Result<Promotion, PromotionError> {
    let doc: Signed<Promotion> =
        Signed::parse(bytes).map_err(|e| PromotionError::Format { url: url.to_owned(), detail: e.to_string() })?;
    let got = doc.signers(&role.keys, &role.role, &role.origin).len();
    if (got as u64) < role.role.threshold {
        return Err(PromotionError::Unsigned { url: url.to_owned(), need: role.role.threshold, got });
    }
    let p = doc.signed;
    if p.kind != KIND {
        return Err(PromotionError::Format { url: url.to_owned(), detail: format!("_type is `{}`", p.kind) });
    }
    if p.expires <= now {
        return Err(PromotionError::Expired { url: url.to_owned(), number: p.version, expires: p.expires, now });
    }
    if p.version < seen {
        return Err(PromotionError::Replayed { url: url.to_owned(), number: p.version, seen });
    }
    Ok(p)
}

/// The mirror's promotion now, signed or not: for the mirror's own next number and renewal.
pub fn current(public: &Path) -> Option<Promotion> {
    let bytes = super::root::read_bounded(&public.join(FILE), MAX_BYTES).ok().flatten()?;
    Signed::<Promotion>::parse(&bytes).ok().map(|d| d.signed)
}

/// What a renewal signed.
#[derive(Debug, Serialize)]
pub struct Renewed {
    pub number: u64,
    pub expires: Timestamp,
    pub bundle: PromotedBundle,
}

/// `promote --renew`: the mirror's promotion signed again with the next number and a new
/// expiry, for the same bundle and decision. Refused when the mirror has none, when it does not
/// verify under the role (renewing is not a way to sign what someone planted), or when it does
/// not name the release `current` is.
pub fn renew(root: &Path, signing: &Signing, wait: std::time::Duration) -> Result<Renewed, super::SiteError> {
    let root = &super::SiteRoot::new(root);
    if !root.is_site() {
        return Err(super::SiteError::NotASite { root: root.path().to_owned() });
    }
    let lock = root.open_for_writing("promote --renew", wait)?;
    let mut tx = super::transaction::Transaction::writing(root, &lock)?;
    let public = root.public();
    let path = public.join(FILE);
    let url = path.display().to_string();
    let bytes =
        super::root::read_bounded(&path, MAX_BYTES)?.ok_or_else(|| PromotionError::Missing { url: url.clone() })?;
    let now = Timestamp::now();
    // An expired promotion may be renewed: that is what renewing is for.
    let old = verify(&url, &bytes, &signing.role, Timestamp::from_unix(0), 0).or_else(|e| match e {
        PromotionError::Expired { .. } => Signed::<Promotion>::parse(&bytes)
            .map(|d| d.signed)
            .map_err(|e| PromotionError::Format { url: url.clone(), detail: e.to_string() }),
        e => Err(e),
    })?;
    let current = root.link(super::root::Link::Current);
    if current.as_ref() != Some(&old.bundle.id) {
        return Err(PromotionError::OtherBundle {
            number: old.version,
            promoted: old.bundle.id.to_string(),
            served: current.map_or_else(|| "nothing".to_owned(), |c| c.to_string()),
        }
        .into());
    }
    let number = tx.state.promotion.max(old.version) + 1;
    let next = Promotion { version: number, expires: signing.expires, ..old };
    let doc = sign(next.clone(), &signing.role, &signing.keys)?;
    crate::atomic::write_durable(&path, &doc.to_bytes()).map_err(super::io_err(&path))?;
    root.commit_dir(&public)?;
    tx.state.promotion = number;
    tx.save(super::transaction::Step::Saved)?;
    tracing::info!("promotion {number} of {} signed at {now}, expires {}", next.bundle.id, next.expires);
    Ok(Renewed { number, expires: next.expires, bundle: next.bundle })
}
