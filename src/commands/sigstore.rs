//! `airlock verify-blob (FILE | --digest sha256:HEX) --bundle FILE (--identity ID | --identity-regexp RE) --issuer URL
//! | --key PEM [--trusted-root FILE | --root DIR] [--json]` (the earlier spelling, `airlock sigstore
//! verify` with cosign's `--certificate-identity`/`--certificate-oidc-issuer`, still works).

use std::io::Write as _;

use crate::cli::SigstoreVerifyArgs;
use crate::failure::{Context as _, Exit, Result};
use crate::progress::Reporter as _;
use crate::sign::sigstore::{Identity, Root, Signer, Subject, read_bounded, verify as verify_bundle};

pub fn verify(args: &SigstoreVerifyArgs) -> Result<Exit> {
    let signer = match (&args.key, &args.identity, &args.identity_regexp) {
        (Some(key), _, _) => Signer::key(key)?,
        (None, exact, pattern) => {
            let issuer = args.issuer.clone().unwrap_or_default();
            let identity = match (exact, pattern) {
                (Some(id), _) => Identity::Exact(id.clone()),
                (None, Some(p)) => Identity::pattern(p)?,
                (None, None) => {
                    return Err(super::UsageError("name the signer: an identity and issuer, or --key".into()).into());
                }
            };
            Signer::Keyless { identity, issuer }
        }
    };
    let root = match (&args.trusted_root, &args.root) {
        (Some(path), _) => Root::file(path)?,
        (None, Some(dir)) => {
            let site = crate::site::root::SiteRoot::new(dir);
            let state = crate::site::state::State::load(&site)?;
            match crate::site::trust::load(&site, &state)? {
                Some(trust) => trust.sigstore()?,
                None => Root::PublicGood,
            }
        }
        (None, None) => Root::PublicGood,
    };
    let bundle = read_bounded(&args.bundle)?;
    let from = format!("`{}`", args.bundle.display());
    // The digest form is explicit (`--digest`): a positional argument is a file, always, so a
    // file named like a digest, planted or not, is never mistaken for one, nor one for it.
    let subject = args.subject.as_deref().unwrap_or_default();
    let verified = if let Some(d) = args.digest {
        verify_bundle(&from, &bundle, Subject::Digest(d), &signer, &root)?
    } else {
        let path = std::path::Path::new(subject);
        if !path.exists() && subject.starts_with("sha256:") {
            return Err(super::UsageError(format!(
                "there is no file `{}`: a digest is given as `--digest {}`",
                crate::escape::value(subject),
                crate::escape::value(subject)
            ))
            .into());
        }
        // A FIFO or a device would be read without end: a regular file only.
        let file = crate::sign::policy::open_regular(path)
            .with_context(|| format!("cannot read `{}`", path.display()))?
            .ok_or_else(|| super::UsageError(format!("`{}` is not a regular file", path.display())))?;
        // A release tarball or an image can be large: progress as it is hashed (a TTY only).
        let reporter = crate::commands::terminal::TerminalReporter::new(args.json);
        reporter.start("hashing", file.metadata().map_or(0, |m| m.len()));
        let mut counted = Counted { inner: file, reporter: &reporter };
        let verified = verify_bundle(&from, &bundle, Subject::Reader(&mut counted), &signer, &root);
        reporter.finish();
        verified?
    };
    if args.json {
        super::print_json(&verified)?;
        return Ok(Exit::Ok);
    }
    let mut out = std::io::stdout().lock();
    let who = match (&verified.identity, &verified.issuer) {
        (Some(id), Some(issuer)) => format!("signed by {id} ({issuer})"),
        (Some(id), None) => format!("signed by {id}"),
        _ => "signed by the given key".to_owned(),
    };
    let when = verified.logged_at.as_ref().map(|t| format!(", logged at {t}")).unwrap_or_default();
    let what = args.digest.map_or_else(|| subject.to_owned(), |d| format!("sha256:{d}"));
    writeln!(out, "{}: verified, {}{when}", crate::escape::value(&what), crate::escape::value(&who))?;
    Ok(Exit::Ok)
}

/// A reader that tells `reporter` how far it got.
struct Counted<'a, R> {
    inner: R,
    reporter: &'a dyn crate::progress::Reporter,
}

impl<R: std::io::Read> std::io::Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.reporter.advance(n as u64);
        Ok(n)
    }
}
