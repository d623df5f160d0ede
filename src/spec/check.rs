//! The rules a spec must satisfy beyond its shape, each refusal naming the file and line
//! (`SpecFile::invalid`): pins or a lock per `[[wheel]]`, exact `[[deb]]` and `[[rpm]]`
//! dependencies, images, files and their sources, checks and the impact rows that name them.

use std::collections::{BTreeMap, BTreeSet};

use super::{AIRLOCK_TARGET, FileKind, FileSource, SpecError, SpecFile, metric};

impl SpecFile {
    /// `[[wheel]]`: pins or a lock file, and the targets a lock file's markers need.
    fn check_wheels(&self) -> Result<(), SpecError> {
        for wheel in &self.spec.wheel {
            let w = wheel.get_ref();
            match (w.requirements.is_empty(), &w.lockfile) {
                (false, Some(_)) => {
                    return Err(self.invalid(&wheel.span(), "`[[wheel]]` takes `requirements` or `lockfile`, not both"));
                }
                (true, None) => {
                    return Err(self.invalid(&wheel.span(), "`[[wheel]]` needs `requirements` or `lockfile`"));
                }
                _ => {}
            }
            if w.lockfile.is_some() && w.python.is_empty() {
                return Err(self.invalid(
                    &wheel.span(),
                    "`[[wheel]]` with `lockfile` needs `python` (the targets' versions) to evaluate its markers",
                ));
            }
            if let Some(bad) = w.python.iter().find(|p| crate::wheel::PythonVersion::parse(p).is_none()) {
                return Err(self.invalid(&wheel.span(), format!("invalid python `{bad}`: expected `3.12` or `3.12.4`")));
            }
        }
        Ok(())
    }

    /// `[[deb]]`: `dependencies` pinned exactly, and only where the closure is not resolved.
    fn check_debs(&self) -> Result<(), SpecError> {
        for deb in &self.spec.deb {
            let (span, d) = (deb.span(), deb.get_ref());
            if d.resolve && !d.dependencies.is_empty() {
                return Err(self.invalid(
                    &span,
                    "`[[deb]]` `dependencies` need `resolve = false` (a resolving entry finds its own)",
                ));
            }
            if let Some(bad) = d.dependencies.iter().find(|p| p.version.is_none()) {
                return Err(self.invalid(
                    &span,
                    format!("`[[deb]]` dependency `{}` needs its version (`{}=VERSION`)", bad.name, bad.name),
                ));
            }
        }
        Ok(())
    }

    /// `[[rpm]]`: a key or an explicit `allow_unsigned`, module streams as `name:stream`, a
    /// base only where the closure is resolved.
    fn check_rpms(&self) -> Result<(), SpecError> {
        for rpm in &self.spec.rpm {
            let (span, r) = (rpm.span(), rpm.get_ref());
            if r.keyring.is_none() && !r.allow_unsigned {
                return Err(self.invalid(
                    &span,
                    "`[[rpm]]` needs `keyring` to verify `repomd.xml.asc` and the packages (or `allow_unsigned = true`)",
                ));
            }
            if let Some(bad) =
                r.modules.iter().find(|m| m.split_once(':').is_none_or(|(n, s)| n.is_empty() || s.is_empty()))
            {
                return Err(self.invalid(&span, format!("invalid module stream `{bad}`: expected `name:stream`")));
            }
            if !r.resolve && (r.base_rpmdb.is_some() || !r.base.is_empty()) {
                return Err(self.invalid(&span, "`[[rpm]]` `base` and `base_rpmdb` need `resolve = true`"));
            }
            if r.url().contains('$') {
                return Err(self.invalid(
                    &span,
                    format!(
                        "`[[rpm]]` baseurl `{}` still holds a variable after expansion (set `releasever`?)",
                        r.url()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `[[impact]]`: each names a check that exists, and an expiry that parses.
    fn check_impact(&self, checks: &BTreeSet<&str>) -> Result<(), SpecError> {
        for impact in &self.spec.impact {
            let (span, i) = (impact.span(), impact.get_ref());
            if !checks.contains(i.test.as_str()) {
                let known: Vec<&str> = checks.iter().copied().collect();
                return Err(self.invalid(
                    &span,
                    format!(
                        "`[[impact]]` `{}` names test `{}`, which is no `[[validation.check]]` (the checks are: {})",
                        i.component,
                        i.test,
                        if known.is_empty() { "none".to_owned() } else { known.join(", ") }
                    ),
                ));
            }
            if let Some(e) = &i.expires {
                crate::clock::Timestamp::parse_expiry(e)
                    .map_err(|why| self.invalid(&span, format!("`[[impact]]` `{}`: expires: {why}", i.component)))?;
            }
        }
        Ok(())
    }

    /// Checks that span entries, after each entry parsed on its own.
    fn check_images(&self) -> Result<(), SpecError> {
        let spec = &self.spec;
        for image in &spec.image {
            let i = image.get_ref();
            // A layout's tag names the image on the site too, so it must be `repository:tag`.
            for name in [&i.reference, &i.tag].into_iter().flatten() {
                crate::image_ref::ImageRef::parse(name).map_err(|e| self.invalid(&image.span(), e.to_string()))?;
            }
            for p in &i.platforms {
                let parts: Vec<&str> = p.split('/').collect();
                if !(2..=3).contains(&parts.len()) || parts.iter().any(|s| s.is_empty()) {
                    return Err(
                        self.invalid(&image.span(), format!("invalid platform `{p}`: expected `os/arch[/variant]`"))
                    );
                }
            }
            match (&i.reference, &i.oci_layout, &i.tag) {
                (Some(_), None, None) | (None, Some(_), Some(_)) => {}
                (Some(_), Some(_), _) => {
                    return Err(self.invalid(&image.span(), "`[[image]]` takes either `ref` or `oci_layout`, not both"));
                }
                (Some(_), None, Some(_)) => {
                    return Err(self.invalid(
                        &image.span(),
                        "`[[image]]` with `ref` puts the tag in the reference; `tag` goes with `oci_layout`",
                    ));
                }
                (None, Some(_), None) => {
                    return Err(self.invalid(
                        &image.span(),
                        "`[[image]]` with `oci_layout` needs `tag` (its org.opencontainers.image.ref.name)",
                    ));
                }
                (None, None, _) => {
                    return Err(self.invalid(&image.span(), "`[[image]]` needs `ref` or `oci_layout`"));
                }
            }
            // The signer itself is checked as it is read (`UpstreamSigner`), for every kind.
            if i.verify.is_some() && i.reference.is_none() {
                return Err(self.invalid(
                    &image.span(),
                    "`[[image]]` `verify` needs a registry `ref`: its signatures are found among the registry's \
                     referrers and `.sig` tags",
                ));
            }
        }
        Ok(())
    }

    fn check_files(&self) -> Result<(), SpecError> {
        let spec = &self.spec;
        let mut names = BTreeSet::new();
        let mut airlocks = BTreeMap::new();
        for file in &spec.file {
            let f = file.get_ref();
            if !names.insert(f.name.as_str()) {
                return Err(self.invalid(&file.span(), format!("duplicate `[[file]]` name `{}`", f.name)));
            }
            if matches!(f.source_kind(), FileSource::Url(_)) && f.sha256.is_none() {
                return Err(
                    self.invalid(&file.span(), format!("`[[file]]` `{}` comes from a URL and needs `sha256`", f.name))
                );
            }
            if f.source.is_empty() {
                return Err(self.invalid(&file.span(), format!("`[[file]]` `{}` has an empty `source`", f.name)));
            }
            match (&f.sigstore_bundle, &f.verify) {
                (None, None) | (Some(_), Some(_)) => {}
                (Some(_), None) => {
                    return Err(self.invalid(
                        &file.span(),
                        format!(
                            "`[[file]]` `{}` has `sigstore_bundle` but no `verify` (whose signature it must be)",
                            f.name
                        ),
                    ));
                }
                (None, Some(_)) => {
                    return Err(self.invalid(
                        &file.span(),
                        format!("`[[file]]` `{}` has `verify` but no `sigstore_bundle` to verify", f.name),
                    ));
                }
            }
            if f.kind == FileKind::Airlock && f.airlock_target().is_none() {
                return Err(self.invalid(
                    &file.span(),
                    format!(
                        "`[[file]]` `{}` of kind `airlock` needs `notes = {{ {AIRLOCK_TARGET} = \"x86_64-unknown-linux-gnu\" }}`: \
                         the target it runs on",
                        f.name
                    ),
                ));
            }
            // `self-upgrade` takes the one airlock for its target: two would leave the choice
            // to the order of the manifest, which a reviewer cannot see as a choice.
            if let Some(target) = f.airlock_target()
                && let Some(first) = airlocks.insert(target, &f.name)
            {
                return Err(self.invalid(
                    &file.span(),
                    format!(
                        "`[[file]]` `{}` is an airlock for {target}, as `[[file]]` `{first}` is: a bundle carries \
                         one airlock per target (`self-upgrade` installs it)",
                        f.name
                    ),
                ));
            }
        }
        Ok(())
    }

    pub(super) fn check(&self) -> Result<(), SpecError> {
        self.check_images()?;
        self.check_wheels()?;
        self.check_debs()?;
        self.check_rpms()?;
        self.check_files()?;
        let mut checks = BTreeSet::new();
        for check in &self.spec.validation.check {
            let (span, c) = (check.span(), check.get_ref());
            if c.run.is_empty() {
                return Err(self.invalid(&span, format!("`[[validation.check]]` `{}` has an empty `run`", c.name)));
            }
            if !checks.insert(c.name.as_str()) {
                return Err(self.invalid(&span, format!("duplicate `[[validation.check]]` name `{}`", c.name)));
            }
            for m in &c.metric {
                metric::Threshold::parse(&m.threshold)
                    .and_then(|_| metric::Source::parse(&m.from).map(drop))
                    .map_err(|why| self.invalid(&span, format!("check `{}` metric `{}`: {why}", c.name, m.name)))?;
            }
        }
        self.check_impact(&checks)?;
        Ok(())
    }
}
