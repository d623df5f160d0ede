//! `airlock install BUNDLE --trust PUB [--threshold N] --root DIR [--registry HOST[:PORT]]
//! [--keep N] [--allow-downgrade] [--role mirror [--candidate]] [--wait SECONDS] [--json]`

use std::io::Write;

use std::sync::Arc;

use crate::artifact::Location;
use crate::bundle::parts::{Input, Remote};
use crate::cli::InstallArgs;
use crate::commands::terminal::TerminalReporter;
use crate::failure::{Class, Exit, Failure, Result};
use crate::fetch::Net;
use crate::oci::Transport;
use crate::sign::Policy;
use crate::site::registry::SiteRegistry;
use crate::site::trust::ExpiryRule;
use crate::site::{Downgrade, Options, install};

pub fn run(args: &InstallArgs) -> Result<Exit> {
    use crate::cli::RoleArg;
    if args.candidate && args.role != RoleArg::Mirror {
        let why = "--candidate is a mirror's (--role mirror): a host installs what it runs";
        return Err(super::UsageError(why.to_owned()).into());
    }
    if args.all || args.release.is_some() || !args.allow_redirect_host.is_empty() {
        let why = "--all, --release and --allow-redirect-host are a relay's (--role relay URL)";
        return Err(super::UsageError(why.to_owned()).into());
    }
    let net = std::sync::Arc::new(Net::new(args.net.options())?);
    let expiry = ExpiryRule::from_flags(args.allow_expired, args.reason.as_deref());
    let from = Source {
        bundle: &args.bundle,
        trust: &args.trust,
        root: &args.root,
        expiry: &expiry,
        wait: std::time::Duration::from_secs(args.site.wait),
        insecure: args.insecure_registry,
        ca: args.registry_ca.as_ref(),
        net: &args.net,
        writes: super::Writes::Yes,
    };
    let opened = from.open(&net);
    // A refusal before the root's lock (its trust root, the metadata carried, the bundle
    // unreadable) is on record too, on a site.
    if let Err(e) = &opened {
        super::record_early(&args.root, crate::site::records::Action::Install, &args.bundle, args.run.id.as_ref(), e);
    }
    let Opened { input, policy, tag_version, referrers } = opened?;
    let reporter = TerminalReporter::new(args.json);
    let registry = args.registry.as_ref().map(|host| SiteRegistry {
        host: host.clone(),
        transport: if args.insecure_registry { Transport::InsecureHttp } else { Transport::Https },
    });
    let apt_key = args.apt_signing_key.as_deref().map(load_apt_key).transpose()?;
    let amber = super::amber(args.accept_amber, args.reason.as_ref(), &args.amber)?;
    let opts = Options {
        role: match args.role {
            RoleArg::Host => crate::site::Role::Host,
            RoleArg::Mirror | RoleArg::Relay => crate::site::Role::Mirror,
        },
        amber,
        registry,
        apt_key,
        keep: usize::from(args.kept()),
        candidate: args.candidate,
        downgrade: if args.allow_downgrade { Downgrade::Allow } else { Downgrade::Refuse },
        wait: std::time::Duration::from_secs(args.site.wait),
        tag_version,
        expiry,
        run: args.run.id.clone(),
    };
    let done = install(&input, &policy, &args.root, &opts, &net, &reporter)?;
    if args.json {
        super::print_json(&WithReferrers { done: &done, cosignature_referrers: referrers })?;
    } else {
        print(args, &done)?;
        if let Some(r) = referrers {
            writeln!(std::io::stdout(), "{r}")?;
        }
    }
    Ok(Exit::Ok)
}

/// How many co-signature referrers a registry listed for a bundle read from it, and how many
/// were fetched: those under a key the site's policy holds.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub(super) struct Referrers {
    pub listed: usize,
    pub fetched: usize,
}

impl std::fmt::Display for Referrers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self { listed, fetched } = self;
        write!(f, "co-signature referrers: {fetched} of {listed} listed fetched (those under a key the policy holds)")
    }
}

/// A command's result, and the referrers of the bundle when it was read from a registry.
#[derive(serde::Serialize)]
pub(super) struct WithReferrers<'a, T> {
    #[serde(flatten)]
    pub done: &'a T,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cosignature_referrers: Option<Referrers>,
}

/// A bundle opened for `install` or `apply`, with the policy that judges it.
pub(super) struct Opened {
    pub input: Input,
    pub policy: Policy,
    /// The tag it was read by (`oci://…:TAG`), if any.
    pub tag_version: Option<String>,
    /// For a bundle read from a registry or layout.
    pub referrers: Option<Referrers>,
}

fn print(args: &InstallArgs, done: &crate::site::Installed) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let how = if done.already_present { "re-activated" } else { "installed" };
    writeln!(out, "{how} {} {} as {} at {}", done.name, done.version, done.id, done.path.display())?;
    if let Some(base) = &done.base {
        writeln!(out, "delta: the members it leaves out were taken from bundles/{base}, verified again")?;
    }
    if args.role == crate::cli::RoleArg::Mirror {
        writeln!(out, "role mirror: not validated here; each node judges its own stack (`airlock apply`)")?;
    }
    if let Some(v) = &done.validation {
        // Tools' words are untrusted text: escaped for the terminal.
        let lines = crate::validate::not_green(&v.rows);
        let summary = crate::commands::terminal::painted_summary(v, crate::commands::terminal::Stream::Stdout);
        writeln!(out, "validation {summary}")?;
        for line in lines {
            writeln!(out, "{}", crate::escape::value(&line))?;
        }
    }
    let signers: Vec<_> = done.signers.iter().map(crate::sign::KeyId::short).collect();
    writeln!(out, "signed by {} ({} co-signature(s) retained)", signers.join(", "), done.cosignatures.len())?;
    for image in &done.images {
        let (pushed, present) = (image.blobs_pushed, image.blobs_present);
        let digest = image.digest.0;
        writeln!(
            out,
            "pushed {} -> {} (sha256:{digest}; {pushed} blobs pushed, {present} already there)",
            image.reference, image.target
        )?;
    }
    if done.downgrade {
        writeln!(out, "downgrade: installed below the version this site ran before (--allow-downgrade)")?;
    }
    for id in &done.pruned {
        writeln!(out, "pruned bundles/{id} (--keep {})", args.kept())?;
    }
    if done.candidate {
        writeln!(
            out,
            "candidate {} {} ({}): served as public/releases/{} and public/releases/{}; current unchanged until \
             `airlock promote --root {} {}`",
            done.name,
            done.version,
            done.id,
            done.version,
            done.id,
            args.root.display(),
            done.version
        )?;
        writeln!(out, "record: {}", done.record.display())?;
        return Ok(());
    }
    if done.images_not_published > 0 {
        writeln!(out, "{} image manifest(s) not published: no --registry given", done.images_not_published)?;
    }
    writeln!(out, "{}", super::switched(&done.id, done.previous.as_ref(), done.seconds, &done.record))?;
    Ok(())
}

/// Where `install` and `apply` read a bundle: a file (or parts), or `oci://…` / `oci-layout:…`.
pub(super) struct Source<'a> {
    pub bundle: &'a std::path::Path,
    pub trust: &'a crate::cli::TrustArgs,
    /// The site root whose trust root (when it has one) decides the policy.
    pub root: &'a std::path::Path,
    pub expiry: &'a ExpiryRule,
    pub wait: std::time::Duration,
    pub insecure: bool,
    pub ca: Option<&'a std::path::PathBuf>,
    pub net: &'a crate::cli::NetArgs,
    /// `Writes::No` for a dry run: no trust metadata adopted, nothing pinned.
    pub writes: super::Writes,
}

impl Source<'_> {
    /// The input, the policy it is verified under, and the tag it was named by.
    pub(super) fn open(&self, net: &Arc<Net>) -> Result<Opened> {
        if let Some(location) = self.bundle.to_str().filter(|b| Location::looks_like(b)) {
            let location = Location::parse(location)?;
            let (input, policy, referrers) = self.streamed(&location, net)?;
            let tag_version = location.tag().map(str::to_owned);
            return Ok(Opened { input, policy, tag_version, referrers: Some(referrers) });
        }
        let input = Input::resolve(self.bundle)?;
        let cosignatures = super::cosignatures_beside(input.bundle());
        let policy = self.policy(cosignatures, || super::carried_trust(&input))?;
        Ok(Opened { input, policy, tag_version: None, referrers: None })
    }

    fn policy(
        &self,
        cosignatures: Vec<crate::sign::CoSignature>,
        carried: impl FnOnce() -> Vec<(std::path::PathBuf, Vec<u8>)>,
    ) -> Result<Policy> {
        super::site_policy(self.root, self.trust, cosignatures, carried, self.expiry, self.wait, self.writes)
    }

    /// A bundle streamed from a registry (or layout), its tag resolved once; the
    /// co-signatures it holds as referrers count toward the threshold.
    fn streamed(&self, location: &Location, net: &Arc<Net>) -> Result<(Input, Policy, Referrers)> {
        let insecure = if self.insecure { vec!["*".to_owned()] } else { Vec::new() };
        let reach = crate::oci::Reach { insecure, ca: self.ca.cloned(), options: self.net.options() };
        if !self.trust.trust.is_empty() {
            // An impossible policy is a usage error before the registry is asked anything.
            let keys = super::load_trusted(&self.trust.trust)?;
            Policy::reachable(&keys, usize::try_from(self.trust.threshold).unwrap_or(usize::MAX))?;
        }
        let mut found = crate::artifact::resolve(location, &reach, net)?;
        tracing::info!("{location} is {} (bundle {})", found.resolved.digest, found.resolved.id);
        let (store, listed) = (found.store.clone(), std::mem::take(&mut found.listed));
        let name = std::path::PathBuf::from(found.pinned.to_string());
        let bytes = found.resolved.bytes;
        let stream_net = net.clone();
        let open = move || crate::artifact::open_stream(&found, stream_net.clone()).map_err(std::io::Error::other);
        let input = Input::Remote(Box::new(Remote { name, bytes, open: Box::new(open) }));
        // The keys that count are known once the site has adopted the trust the bundle
        // carries: only the co-signatures listed under one of them are fetched.
        let policy = self.policy(Vec::new(), || super::carried_trust(&input))?;
        let wanted = policy.key_ids().into_iter().collect();
        let cosignatures = crate::artifact::fetch_cosignatures(&store, &listed, &wanted, net);
        let referrers = Referrers { listed: listed.len(), fetched: cosignatures.len() };
        tracing::info!("{referrers}");
        Ok((input, policy.with_cosignatures(cosignatures), referrers))
    }
}

pub(super) fn load_apt_key(path: &std::path::Path) -> Result<crate::site::views::AptSigningKey> {
    use crate::failure::Context as _;
    use pgp::composed::Deserializable as _;
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read apt signing key `{}`", path.display()))?;
    let (key, _) = pgp::composed::SignedSecretKey::from_armor_single(std::io::BufReader::new(file))
        .map_err(|e| Failure::classed(Class::Runtime, e))
        .with_context(|| format!("`{}` is not an armored OpenPGP secret key", path.display()))?;
    let password = std::env::var("AIRLOCK_APT_KEY_PASSWORD")
        .map_or_else(|_| pgp::types::Password::empty(), pgp::types::Password::from);
    Ok(crate::site::views::AptSigningKey { key, password })
}
