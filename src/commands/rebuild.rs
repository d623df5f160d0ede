//! `airlock rebuild BUNDLE --spec SPEC [--lock LOCK] --key KEY [--trust-root DIR] [--keep FILE]
//! [--json]`: an independent rebuild. On a second build host, the bundle is built again from
//! its spec and lock (never resolved again), with the original's builder key id and creation
//! time in the manifest and its compression; when the rebuilt manifest is the original's byte
//! for byte (so every member's size and sha256 is the same) and so is the provenance statement,
//! the original manifest is co-signed (`BUNDLE.KEYID.sig`, as `airlock sign` writes it) with the
//! rebuilder's key. A site's `rebuilders` role counts those co-signatures: a rebuilder's key says
//! "the same bytes from the same lock", not authorship. Anything else is refused (exit 3) naming
//! the first member (or field) that differs; nothing is co-signed.

use std::io::Write;

use serde::Serialize;

use super::VerificationFailed;
use crate::build::lock::{Refresh, ensure, lock_path};
use crate::bundle::Manifest;
use crate::bundle::manifest::{MANIFEST, PROVENANCE};
use crate::bundle::parts::Input;
use crate::bundle::reader::leading_members;
use crate::bundle::writer::{Compression, Layout};
use crate::cli::RebuildArgs;
use crate::commands::terminal::TerminalReporter;
use crate::digest::Sha256;
use crate::failure::{Context as _, Exit, Result};
use crate::fetch::{Fetch, Net};
use crate::sign::SigningKey;
use crate::sign::policy::cosignature_path;
use crate::sources::Sources;

#[derive(Serialize)]
struct Rebuilt<'a> {
    bundle: &'a std::path::Path,
    manifest_sha256: String,
    identical: bool,
    signature: std::path::PathBuf,
    key_id: String,
}

/// The original's manifest (bytes and parsed) and the compression its provenance names.
struct Original {
    bytes: Vec<u8>,
    sha256: Sha256,
    manifest: Manifest,
    provenance: Option<Vec<u8>>,
    compression: Compression,
}

pub fn run(args: &RebuildArgs) -> Result<Exit> {
    let input = Input::resolve(&args.bundle)?;
    let original = original(&input)?;
    let key = SigningKey::load(&args.key, super::key_password().as_deref())?;
    let spec = super::load_spec(&args.spec)?;
    let cache = super::open_cache(&args.cache)?;
    let reporter = TerminalReporter::new(args.json);
    let net = Net::new(args.cache.net.options())?;
    let fetch = Fetch { cache: &cache, jobs: usize::from(args.cache.jobs), http: net.http(), reporter: &reporter };
    let sources = Sources::new(&spec, fetch).with_sigstore_root(super::upstream_root(&args.upstream)?);
    let (lock, _) = ensure(&sources, &net, &lock_path(&args.spec, args.lock.as_ref()), Refresh::Never)?;
    let work = tempfile::tempdir().context("cannot make a scratch directory (TMPDIR)")?;
    let out = args.keep.clone().unwrap_or_else(|| work.path().join("rebuilt.airlock"));
    let carried_trust = args.trust_root.as_deref().map(super::trust::carried_files).transpose()?.unwrap_or_default();
    let options = crate::build::Options {
        layout: Layout { compression: original.compression, split_size: None },
        base: None,
        sbom_spec: args.sbom_spec,
        carried_trust,
        blobs: crate::sources::oci::BlobRoute::Cache,
        reproduce: Some(crate::build::Reproduce {
            builder_key_id: original.manifest.builder.key_id.clone(),
            created: original.manifest.created,
        }),
    };
    let built = crate::build::build(&sources, &net, lock, &key, &out, &options, &reporter)?;
    let rebuilt = Input::resolve(&built.packed.path)?;
    let mut found = leading_members(rebuilt.open()?, &[MANIFEST, PROVENANCE])
        .map_err(|p| VerificationFailed(format!("the rebuilt bundle `{}`: {p}", out.display())))?;
    let rebuilt_manifest = found.remove(MANIFEST).unwrap_or_default();
    if rebuilt_manifest != original.bytes {
        return Err(VerificationFailed(format!(
            "the rebuild of `{}` is not the same bundle: {}; nothing co-signed",
            args.bundle.display(),
            first_difference(&original.manifest, &built.manifest)
        ))
        .into());
    }
    let statement = |envelope: Option<Vec<u8>>| envelope.and_then(|e| crate::sign::dsse::payload_unverified(&e).ok());
    if statement(found.remove(PROVENANCE)) != statement(original.provenance.clone()) {
        return Err(VerificationFailed(format!(
            "the rebuild of `{}` has the same manifest but another provenance statement ({PROVENANCE}); nothing \
             co-signed",
            args.bundle.display()
        ))
        .into());
    }
    let path = cosignature_path(input.bundle(), key.key_id());
    super::write_atomic(&path, key.sign_blob(&original.bytes).as_bytes())?;
    let done = Rebuilt {
        bundle: &args.bundle,
        manifest_sha256: original.sha256.to_string(),
        identical: true,
        signature: path,
        key_id: key.key_id().to_string(),
    };
    if args.json {
        super::print_json(&done)?;
        return Ok(Exit::Ok);
    }
    writeln!(
        std::io::stdout(),
        "rebuilt {} from its spec and lock: the same bundle (manifest {}, {} entries); co-signed with key {}: wrote {}",
        args.bundle.display(),
        original.sha256.short(16),
        original.manifest.entries.len(),
        key.key_id().short(),
        done.signature.display()
    )?;
    Ok(Exit::Ok)
}

/// The bundle's manifest and provenance as it claims them (the comparison is what checks them).
fn original(input: &Input) -> Result<Original> {
    let what = input.display();
    let mut found = leading_members(input.open()?, &[MANIFEST, PROVENANCE])
        .map_err(|p| VerificationFailed(format!("`{what}`: {p}")))?;
    let bytes = found.remove(MANIFEST).ok_or_else(|| VerificationFailed(format!("`{what}` has no manifest")))?;
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| VerificationFailed(format!("`{what}`: the manifest is not one: {e}")))?;
    manifest.check().map_err(|e| VerificationFailed(format!("`{what}`: {e}")))?;
    if manifest.base.is_some() {
        return Err(super::UsageError(format!(
            "`{what}` is a delta (its base holds part of it): rebuild the full bundle it was made beside"
        ))
        .into());
    }
    let provenance = found.remove(PROVENANCE);
    let compression = provenance
        .as_deref()
        .and_then(|e| crate::sign::dsse::payload_unverified(e).ok())
        .and_then(|p| serde_json::from_slice::<serde_json::Value>(&p).ok())
        .map(|s| {
            let c = &s["predicate"]["buildDefinition"]["externalParameters"]["compression"];
            Compression {
                level: c["zstd_level"].as_i64().and_then(|l| i32::try_from(l).ok()).unwrap_or(3),
                long_window_log: c["long_window_log"].as_u64().and_then(|l| u32::try_from(l).ok()),
            }
        })
        .unwrap_or_default();
    Ok(Original { sha256: Sha256::of_bytes(&bytes), bytes, manifest, provenance, compression })
}

/// Where two manifests first differ: a member (the issue a rebuilder acts on), else the field.
fn first_difference(original: &Manifest, rebuilt: &Manifest) -> String {
    let mut out = Vec::new();
    let pairs = original.entries.iter().zip(&rebuilt.entries);
    // Content first: the SBOM (under `airlock/`) differs because a content member does.
    let derived = |a: &&crate::bundle::manifest::Entry| a.path.area() == "airlock";
    let differing = pairs.clone().filter(|(a, b)| a != b);
    if let Some((a, b)) = differing.clone().find(|(a, _)| !derived(a)).or_else(|| differing.clone().next()) {
        out.push(if a.path == b.path {
            format!(
                "first at member `{}` (the bundle's: {} bytes, sha256 {}; rebuilt: {} bytes, sha256 {})",
                a.path, a.size, a.sha256, b.size, b.sha256
            )
        } else {
            format!("first at member `{}` (rebuilt: `{}` in its place)", a.path, b.path)
        });
    } else if original.entries.len() != rebuilt.entries.len() {
        let (longer, which) = if original.entries.len() > rebuilt.entries.len() {
            (&original.entries, "the rebuild lacks")
        } else {
            (&rebuilt.entries, "the rebuild adds")
        };
        let extra = &longer[pairs.count()];
        out.push(format!("{which} member `{}`", extra.path));
    }
    let fields = [
        ("the spec", original.spec_sha256 != rebuilt.spec_sha256, original.spec_sha256, rebuilt.spec_sha256),
        ("the lock", original.lock_sha256 != rebuilt.lock_sha256, original.lock_sha256, rebuilt.lock_sha256),
    ];
    for (what, differs, a, b) in fields {
        if differs {
            out.push(format!("{what} differs (the bundle's sha256 {a}, this one's {b})"));
        }
    }
    if out.is_empty() {
        let field = [
            (original.name != rebuilt.name, "name"),
            (original.version != rebuilt.version, "version"),
            (original.builder.tool != rebuilt.builder.tool, "builder.tool (another airlock)"),
            (original.artifacts != rebuilt.artifacts, "artifacts"),
            (original.validation != rebuilt.validation, "validation"),
            (original.expires != rebuilt.expires, "expires"),
            (original.description != rebuilt.description, "description"),
        ]
        .into_iter()
        .find_map(|(d, f)| d.then_some(f))
        .unwrap_or("the manifest's bytes");
        out.push(format!("the manifest's `{field}` differs"));
    }
    out.join("; ")
}
