//! apt and dpkg as a node applies packages with them: `dpkg-query` for the installed set,
//! `apt-get` under a private configuration whose only sources are the verified views of
//! bundles this root retains (sources list, lists and caches under `ROOT/apt/`; `/etc/apt` is
//! never read for sources nor written), noninteractive, keeping the admin's changed config
//! files (`--force-confold`), waiting for the dpkg lock (`DPkg::Lock::Timeout`).
//!
//! A view is `[trusted=yes]`: every `.deb` in it was checked against the sha256 in a manifest
//! whose signatures verified before it was written, so trust comes from the bundle's
//! signatures and no extra apt key needs distributing.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use std::collections::BTreeSet;

use super::{Change, PackageError, PackageManager, PackageSet, Wanted, output, tail};

/// `apt-get` under the node root's private configuration.
pub struct Apt {
    /// `ROOT/apt`: sources list, lists, caches.
    dir: PathBuf,
    /// Seconds to wait for another holder of the dpkg lock.
    lock_timeout: u64,
}

impl Apt {
    pub fn new(root: &Path, lock_timeout: u64) -> Self {
        Self { dir: root.join("apt"), lock_timeout }
    }

    /// The host's architecture as dpkg names it (`amd64`).
    pub fn architecture() -> Result<String, PackageError> {
        let out = output("dpkg", Command::new("dpkg").arg("--print-architecture"))?;
        Ok(out.trim().to_owned())
    }

    /// Point the private sources at `views` (each a flat repository, `debs/` of a retained
    /// bundle) and read their indexes.
    fn prepare(&self, views: &[PathBuf]) -> Result<(), PackageError> {
        let io = super::io_at;
        for d in ["lists/partial", "cache/archives/partial", "sources.list.d", "preferences.d"] {
            std::fs::create_dir_all(self.dir.join(d)).map_err(io(&self.dir.join(d)))?;
        }
        let mut list = String::from("# written by airlock for each apply: the verified views only\n");
        for view in views {
            let _ = writeln!(list, "deb [trusted=yes] file:{} ./", view.display());
        }
        let path = self.dir.join("sources.list");
        crate::atomic::write(&path, list.as_bytes()).map_err(io(&path))?;
        crate::atomic::write(&self.dir.join("preferences"), b"").map_err(io(&self.dir.join("preferences")))?;
        self.run("apt-get update", &["update"]).map(drop)
    }

    fn command(&self, args: &[&str]) -> Command {
        let d = |rel: &str| self.dir.join(rel).display().to_string();
        let mut c = Command::new("apt-get");
        c.env("DEBIAN_FRONTEND", "noninteractive").env("LC_ALL", "C").env("APT_LISTCHANGES_FRONTEND", "none");
        for (key, value) in [
            ("Dir::Etc::SourceList", d("sources.list")),
            ("Dir::Etc::SourceParts", d("sources.list.d")),
            ("Dir::Etc::Preferences", d("preferences")),
            ("Dir::Etc::PreferencesParts", d("preferences.d")),
            ("Dir::State::Lists", d("lists")),
            ("Dir::Cache", d("cache")),
            ("Dir::Cache::archives", d("cache/archives")),
            ("DPkg::Lock::Timeout", self.lock_timeout.to_string()),
            ("APT::Install-Recommends", "false".to_owned()),
            ("APT::Install-Suggests", "false".to_owned()),
            ("APT::Get::List-Cleanup", "false".to_owned()),
            ("Dpkg::Options::", "--force-confdef".to_owned()),
            ("Dpkg::Options::", "--force-confold".to_owned()),
            ("Dpkg::Use-Pty", "false".to_owned()),
        ] {
            c.arg("-o").arg(format!("{key}={value}"));
        }
        c.args(args);
        c
    }

    fn run(&self, what: &str, args: &[&str]) -> Result<String, PackageError> {
        tracing::debug!("apt-get {}", args.join(" "));
        let out = self
            .command(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|source| PackageError::Spawn { tool: "apt-get".to_owned(), source })?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        if out.status.success() {
            return Ok(text);
        }
        let missing = not_installable(&text);
        if missing.is_empty() {
            Err(PackageError::Apt { what: what.to_owned(), status: out.status.code(), output: tail(&text) })
        } else {
            Err(PackageError::Missing { what: what.to_owned(), missing, output: tail(&text) })
        }
    }
}

impl PackageManager for Apt {
    fn area(&self) -> &'static str {
        "debs"
    }

    /// Every installed package of `arch` or `all`, by name, with its version.
    fn installed(&self, arch: &str) -> Result<PackageSet, PackageError> {
        let format = "${Package}\\t${Architecture}\\t${Version}\\t${db:Status-Abbrev}\\n";
        let text = output("dpkg-query", Command::new("dpkg-query").args(["-W", "-f", format]))?;
        let mut set = PackageSet::new();
        for line in text.lines() {
            let mut fields = line.split('\t');
            let (Some(name), Some(a), Some(version), Some(status)) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            // `ii `, `hi `, half-installed states: the package is there. `rc`: only its
            // config files remain; `un`: not installed.
            let present = !matches!(status.as_bytes().get(1), Some(b'n' | b'c') | None);
            if present && (a == arch || a == "all") {
                set.insert(name.to_owned(), version.to_owned());
            }
        }
        Ok(set)
    }

    /// dpkg's `db:Status-Abbrev`: its second letter is the package's state, its third an error
    /// flag (`R`: reinstallation required).
    fn unsettled(&self, arch: &str) -> Result<Vec<(String, String)>, PackageError> {
        let format = "${Package}\t${Architecture}\t${db:Status-Abbrev}\n";
        let text = output("dpkg-query", Command::new("dpkg-query").args(["-W", "-f", format]))?;
        let mut out = Vec::new();
        for line in text.lines() {
            let mut fields = line.split('\t');
            let (Some(name), Some(a), Some(status)) = (fields.next(), fields.next(), fields.next()) else { continue };
            if a != arch && a != "all" {
                continue;
            }
            let state = match status.as_bytes().get(1) {
                Some(b'U') => "unpacked",
                Some(b'F') => "half-configured",
                Some(b'H') => "half-installed",
                Some(b'W') => "triggers-awaited",
                Some(b't') => "triggers-pending",
                _ if status.as_bytes().get(2) == Some(&b'R') => "reinstallation required",
                _ => continue,
            };
            out.push((name.to_owned(), format!("{state} (`{}`)", status.trim_end())));
        }
        Ok(out)
    }

    /// What apt would do to reach `wanted` from the views (`apt-get -s`): its own simulation
    /// text and the changes it lists.
    fn simulate(&self, views: &[PathBuf], wanted: &[Wanted], _: &str) -> Result<(String, Vec<Change>), PackageError> {
        self.prepare(views)?;
        let args = install_args(wanted, true);
        let text = self.run("apt-get -s install", &args.iter().map(String::as_str).collect::<Vec<_>>())?;
        Ok((text.clone(), parse_simulation(&text)))
    }

    /// Install, upgrade, downgrade or remove to reach `wanted`. apt's own message on failure.
    fn apply(&self, views: &[PathBuf], wanted: &[Wanted], _: &str) -> Result<String, PackageError> {
        self.prepare(views)?;
        let args = install_args(wanted, false);
        self.run("apt-get install", &args.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// Every view's `Packages` (a flat repository), read with `deb822-fast` as the lock reads an
    /// archive's.
    fn available(&self, views: &[PathBuf]) -> Result<BTreeSet<(String, String)>, PackageError> {
        let mut out = BTreeSet::new();
        for index in super::indexes(views, "Packages") {
            let (path, reader) = index?;
            for paragraph in deb822_fast::ParagraphReader::new(reader) {
                let p = paragraph.map_err(|e| PackageError::Index { path: path.clone(), detail: e.to_string() })?;
                if let (Some(name), Some(version)) = (p.get("Package"), p.get("Version")) {
                    out.insert((name.trim().to_owned(), version.trim().to_owned()));
                }
            }
        }
        Ok(out)
    }

    fn automatic(&self) -> Result<BTreeSet<String>, PackageError> {
        let out = output("apt-mark", Command::new("apt-mark").arg("showauto").env("LC_ALL", "C"))?;
        Ok(out
            .lines()
            .map(|l| l.trim().split(':').next().unwrap_or_default().to_owned())
            .filter(|n| !n.is_empty())
            .collect())
    }

    fn mark_automatic(&self, names: &[String]) -> Result<(), PackageError> {
        if names.is_empty() {
            return Ok(());
        }
        output("apt-mark", Command::new("apt-mark").arg("auto").args(names).env("LC_ALL", "C")).map(drop)
    }

    fn unmet(&self, view: &Path, parents: &[String], name: &str, version: &str) -> Result<Vec<String>, PackageError> {
        use debian_control::relations::VersionConstraint as C;
        let path = view.join("Packages");
        let bad = |detail: String| PackageError::Index { path: path.clone(), detail };
        let installed: debversion::Version = version.parse().map_err(|e| bad(format!("`{name}` {version}: {e}")))?;
        let file = std::fs::File::open(&path).map_err(super::io_at(&path))?;
        let mut unmet = Vec::new();
        for paragraph in deb822_fast::ParagraphReader::new(std::io::BufReader::new(file)) {
            let p = paragraph.map_err(|e| bad(e.to_string()))?;
            let Some(parent) = p.get("Package").map(str::trim).filter(|n| parents.iter().any(|w| w == n)) else {
                continue;
            };
            for field in ["Pre-Depends", "Depends"] {
                let text = p.get(field).unwrap_or_default().split_whitespace().collect::<Vec<_>>().join(" ");
                let relations: debian_control::lossy::Relations =
                    text.parse().map_err(|e| bad(format!("`{parent}` {field}: {e}")))?;
                // A group naming the package is met when one of its relations on it holds.
                for group in relations.0.iter().filter(|g| g.iter().any(|r| r.name == name)) {
                    let holds = group.iter().filter(|r| r.name == name).any(|r| match &r.version {
                        None => true,
                        Some((C::LessThan, v)) => installed < *v,
                        Some((C::LessThanEqual, v)) => installed <= *v,
                        Some((C::Equal, v)) => installed == *v,
                        Some((C::GreaterThanEqual, v)) => installed >= *v,
                        Some((C::GreaterThan, v)) => installed > *v,
                    });
                    if !holds {
                        let words: Vec<String> = group.iter().map(ToString::to_string).collect();
                        unmet.push(format!("{parent}: {}", words.join(" | ")));
                    }
                }
            }
        }
        Ok(unmet)
    }
}

/// apt's unmet dependencies that nothing it can see provides (`PKG : Depends: DEP but it is not
/// installable`, continuation lines naming no package): `PKG needs DEP`.
fn not_installable(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut package = String::new();
    for line in text.lines() {
        let (who, rest) = match line.split_once(" : ") {
            Some((who, rest)) if !who.trim().is_empty() && !who.contains(':') => (who.trim(), rest),
            _ => ("", line),
        };
        if !who.is_empty() {
            who.clone_into(&mut package);
        }
        let rest = rest.trim();
        let dep = ["Depends: ", "PreDepends: ", "Pre-Depends: "].iter().find_map(|k| rest.strip_prefix(k));
        if let (Some(dep), false) = (dep, package.is_empty())
            && let Some(dep) = dep.strip_suffix(" but it is not installable")
        {
            out.push(format!("{package} needs {dep}"));
        }
    }
    out
}

/// `apt-get install` arguments: `name=version` to install at exactly that version,
/// `name-` to remove (purged: what it brought, config files included, goes with it).
fn install_args(wanted: &[Wanted], simulate: bool) -> Vec<String> {
    let mut args: Vec<String> = ["install", "-y", "-q", "--allow-downgrades", "--no-install-recommends", "--purge"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    if simulate {
        args.push("-s".to_owned());
    }
    for w in wanted {
        args.push(match &w.version {
            Some(v) => format!("{}={v}", w.name),
            None => format!("{}-", w.name),
        });
    }
    args
}

/// The changes in `apt-get -s` output: `Inst NAME [OLD] (NEW …)`, `Remv NAME [OLD]`.
fn parse_simulation(text: &str) -> Vec<Change> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((verb @ ("Inst" | "Remv" | "Purg"), rest)) = line.split_once(' ') else { continue };
        let mut words = rest.split_whitespace();
        let Some(name) = words.next() else { continue };
        let rest: String = words.collect::<Vec<_>>().join(" ");
        let old = rest.strip_prefix('[').and_then(|r| r.split_once(']')).map(|(v, _)| v.to_owned());
        let new = rest.split_once('(').and_then(|(_, r)| r.split_whitespace().next()).map(str::to_owned);
        let name = name.split(':').next().unwrap_or(name).to_owned();
        out.push(match verb {
            "Inst" => Change { name, before: old, after: new },
            _ => Change { name, before: old, after: None },
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dependency_nothing_provides_is_named_with_what_needs_it() {
        let apt = "Reading package lists...\nSome packages could not be installed.\n\
                   The following packages have unmet dependencies:\n \
                   jq : Depends: libjq1 (= 1.6-2.1+deb12u1) but it is not installable\n      \
                   Depends: libonig5 (>= 6.8.1) but it is not installable\n \
                   tool : Depends: libc6 (>= 2.36) but 2.31-13 is to be installed\n\
                   E: Unable to correct problems, you have held broken packages.\n";
        assert_eq!(
            not_installable(apt),
            ["jq needs libjq1 (= 1.6-2.1+deb12u1)", "jq needs libonig5 (>= 6.8.1)"],
            "a version conflict is not a missing package"
        );
        assert!(not_installable("E: Unable to locate package x\n").is_empty());
    }

    #[test]
    fn apt_simulation_lines_become_changes() {
        let text = "NOTE: This is only a simulation!\n\
            Inst libfoo [1.0-1] (2.0-1 localhost [amd64]) []\n\
            Inst newpkg (3.1 localhost [all])\n\
            Inst older [5.0] (4.0 localhost [amd64])\n\
            Remv gone [0.9]\n\
            Conf libfoo (2.0-1 localhost [amd64])\n";
        let got = parse_simulation(text);
        let show: Vec<String> = got.iter().map(ToString::to_string).collect();
        assert_eq!(show, ["libfoo 1.0-1 → 2.0-1", "newpkg (new) → 3.1", "older 5.0 → 4.0", "gone 0.9 → (removed)"]);
    }
}
