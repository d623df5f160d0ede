//! dnf (RHEL, Rocky, Alma, Oracle Linux) and zypper (SLES) as a node applies rpms with them:
//! `rpm -qa` for the installed set, and the package manager under a private configuration whose
//! only repositories are the verified views of bundles this root retains (repository files
//! and caches under `ROOT/dnf/` or `ROOT/zypper/`; `/etc/yum.repos.d` and `/etc/zypp/repos.d`
//! are never read nor written), weak dependencies off (`install_weak_deps=False`,
//! `--no-recommends`), downgrades allowed. dnf gets one transaction (`dnf shell`): install,
//! upgrade, downgrade and remove to exact NEVRAs together.
//!
//! As with apt's `[trusted=yes]`, a view's packages are not checked again by the package
//! manager's own keys (`gpgcheck=0`): every rpm in it was checked against the sha256 in a
//! manifest whose signatures verified before it was written.
//!
//! `AIRLOCK_PACKAGE_ROOT` (default `/`) is the system changed: dnf's `--installroot`, zypper's
//! and rpm's `--root` (an image being prepared, or a test's system).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use std::collections::BTreeSet;

use super::{Change, PackageError, PackageManager, PackageSet, Wanted, output, tail};

/// Which rpm package manager the host has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manager {
    Dnf,
    Zypper,
}

pub struct Rpm {
    manager: Manager,
    /// `ROOT/dnf` or `ROOT/zypper`: repository files and caches.
    dir: PathBuf,
    /// The system changed (`AIRLOCK_PACKAGE_ROOT`, default `/`).
    system: PathBuf,
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

impl Rpm {
    /// The host's manager: dnf where it is (`yum` on RHEL 8+ is dnf), else zypper.
    pub fn new(root: &Path) -> Result<Self, PackageError> {
        let manager = if on_path("dnf") {
            Manager::Dnf
        } else if on_path("zypper") {
            Manager::Zypper
        } else {
            return Err(PackageError::Spawn {
                tool: "dnf".to_owned(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "neither dnf nor zypper is on PATH"),
            });
        };
        let name = if manager == Manager::Dnf { "dnf" } else { "zypper" };
        let system = std::env::var_os("AIRLOCK_PACKAGE_ROOT").map_or_else(|| PathBuf::from("/"), PathBuf::from);
        Ok(Self { manager, dir: root.join(name), system })
    }

    /// The host's architecture as rpm names it (`x86_64`).
    pub fn architecture() -> Result<String, PackageError> {
        let out = output("rpm", Command::new("rpm").args(["--eval", "%{_arch}"]))?;
        Ok(out.trim().to_owned())
    }

    /// The repository file naming `views` (each `rpms/` of a retained bundle).
    fn prepare(&self, views: &[PathBuf]) -> Result<(), PackageError> {
        let io = super::io_at;
        let repos = self.dir.join("repos.d");
        std::fs::create_dir_all(&repos).map_err(io(&repos))?;
        let mut text = String::from("# written by airlock for each apply: the verified views only\n");
        for (i, view) in views.iter().enumerate() {
            let view = std::path::absolute(view).map_err(io(view))?;
            let _ = write!(
                text,
                "[airlock-{i}]\nname=airlock view {}\nbaseurl=file://{}\nenabled=1\ngpgcheck=0\nrepo_gpgcheck=0\nskip_if_unavailable=False\nautorefresh=1\n\n",
                view.display(),
                view.display()
            );
        }
        let path = repos.join("airlock.repo");
        crate::atomic::write(&path, text.as_bytes()).map_err(io(&path))
    }

    fn dnf(&self) -> Command {
        let d = |rel: &str| self.dir.join(rel).display().to_string();
        let mut c = Command::new("dnf");
        c.env("LC_ALL", "C").arg("--installroot").arg(&self.system).args([
            "-y",
            "--setopt",
            &format!("reposdir={}", d("repos.d")),
            "--setopt",
            &format!("cachedir={}", d("cache")),
            "--setopt",
            &format!("persistdir={}", d("persist")),
            "--setopt",
            "install_weak_deps=False",
            "--setopt",
            "keepcache=False",
            "--setopt",
            "metadata_expire=0",
            "--disableplugin=*",
        ]);
        c
    }

    fn zypper(&self) -> Command {
        let mut c = Command::new("zypper");
        c.env("LC_ALL", "C")
            .arg("--root")
            .arg(&self.system)
            .arg("--reposd-dir")
            .arg(self.dir.join("repos.d"))
            .arg("--cache-dir")
            .arg(self.dir.join("cache"))
            .args(["--non-interactive", "--no-gpg-checks"]);
        c
    }

    fn run(&self, what: &str, mut command: Command) -> Result<String, PackageError> {
        tracing::debug!("{command:?}");
        let tool = if self.manager == Manager::Dnf { "dnf" } else { "zypper" };
        let out = command
            .stdin(Stdio::null())
            .output()
            .map_err(|source| PackageError::Spawn { tool: tool.to_owned(), source })?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        if out.status.success() {
            Ok(text)
        } else {
            Err(PackageError::Apt { what: what.to_owned(), status: out.status.code(), output: tail(&text) })
        }
    }

    /// dnf's transaction for `wanted`, as `dnf shell` commands: each package installed,
    /// upgraded or downgraded to its exact EVR, or removed.
    fn transaction(wanted: &[Wanted], installed: &PackageSet) -> String {
        let mut script = String::new();
        for w in wanted {
            let line = match (&w.version, installed.get(&w.name)) {
                (None, _) => format!("remove {}", w.name),
                (Some(v), None) => format!("install {}-{v}", w.name),
                // Already there: nothing to do (a reinstall would run its scriptlets again).
                (Some(v), Some(have)) if have == v => continue,
                (Some(v), Some(have)) if super::newer(have, v) => format!("downgrade {}-{v}", w.name),
                (Some(v), Some(_)) => format!("upgrade {}-{v}", w.name),
            };
            let _ = writeln!(script, "{line}");
        }
        script.push_str("run\n");
        script
    }

    /// Whether the change can be made (dnf resolves the transaction and stops before it; zypper
    /// `--dry-run`): dnf's or zypper's own words.
    fn simulation(&self, views: &[PathBuf], wanted: &[Wanted], installed: &PackageSet) -> Result<String, PackageError> {
        self.prepare(views)?;
        match self.manager {
            Manager::Dnf => {
                // dnf runs a shell script's transaction when the script ends: as an rpm test
                // transaction (`tsflags=test`, file conflicts included), nothing changes.
                let script = Self::transaction(wanted, installed).replace("run\n", "");
                let path = self.dir.join("transaction");
                crate::atomic::write(&path, script.as_bytes())
                    .map_err(|source| PackageError::Io { path: path.clone(), source })?;
                let mut c = self.dnf();
                c.args(["--setopt", "tsflags=test", "shell"]).arg(&path);
                let mut text = self.run("dnf shell (test transaction)", c)?;
                text.push_str(&script);
                Ok(text)
            }
            Manager::Zypper => {
                let mut c = self.zypper();
                c.args(["install", "--dry-run", "--oldpackage", "--no-recommends"]).args(zypper_args(wanted));
                self.run("zypper install --dry-run", c)
            }
        }
    }
}

impl PackageManager for Rpm {
    fn area(&self) -> &'static str {
        "rpms"
    }

    /// Every installed package of `arch` or `noarch`, by name, with its `[EPOCH:]VERSION-RELEASE`.
    fn installed(&self, arch: &str) -> Result<PackageSet, PackageError> {
        let format = "%{NAME}\\t%{ARCH}\\t%|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}\\n";
        let text = output("rpm", Command::new("rpm").arg("--root").arg(&self.system).args(["-qa", "--qf", format]))?;
        let mut set = PackageSet::new();
        for line in text.lines() {
            let mut fields = line.split('\t');
            let (Some(name), Some(a), Some(evr)) = (fields.next(), fields.next(), fields.next()) else { continue };
            if a == arch || a == "noarch" {
                set.insert(name.to_owned(), evr.to_owned());
            }
        }
        Ok(set)
    }

    /// dnf's or zypper's simulation, and the changes `wanted` makes to what is installed (dnf
    /// decides the rest of the transaction; the closure was resolved at build time, so these are
    /// all of them as a rule).
    fn simulate(
        &self,
        views: &[PathBuf],
        wanted: &[Wanted],
        arch: &str,
    ) -> Result<(String, Vec<Change>), PackageError> {
        let installed = self.installed(arch)?;
        let text = self.simulation(views, wanted, &installed)?;
        Ok((text, planned(&installed, wanted)))
    }

    /// Install, upgrade, downgrade or remove to reach `wanted`, in one transaction.
    fn apply(&self, views: &[PathBuf], wanted: &[Wanted], arch: &str) -> Result<String, PackageError> {
        self.prepare(views)?;
        match self.manager {
            Manager::Dnf => {
                let installed = self.installed(arch)?;
                let script = Self::transaction(wanted, &installed);
                let path = self.dir.join("transaction");
                crate::atomic::write(&path, script.as_bytes())
                    .map_err(|source| PackageError::Io { path: path.clone(), source })?;
                let mut c = self.dnf();
                c.arg("shell").arg(&path);
                self.run("dnf shell", c)
            }
            Manager::Zypper => {
                let mut c = self.zypper();
                c.args(["install", "--oldpackage", "--no-recommends", "--force-resolution"]).args(zypper_args(wanted));
                self.run("zypper install", c)
            }
        }
    }

    /// Every view's `primary.xml` (airlock wrote it when the view was made), read with
    /// `rpmmd::primary` as the lock reads a repository's.
    fn available(&self, views: &[PathBuf]) -> Result<BTreeSet<(String, String)>, PackageError> {
        let mut out = BTreeSet::new();
        for index in super::indexes(views, "primary.xml") {
            let (path, mut reader) = index?;
            crate::rpmmd::primary(&mut reader, |p| {
                out.insert((p.name.clone(), p.evr()));
            })
            .map_err(|e| PackageError::Index { path, detail: e.to_string() })?;
        }
        Ok(out)
    }
}

/// zypper's words: `name=EVR` to reach exactly that version, `-name` to remove it.
fn zypper_args(wanted: &[Wanted]) -> Vec<String> {
    wanted
        .iter()
        .map(|w| match &w.version {
            Some(v) => format!("{}={v}", w.name),
            None => format!("-{}", w.name),
        })
        .collect()
}

/// The changes `wanted` makes to `installed`.
fn planned(installed: &PackageSet, wanted: &[Wanted]) -> Vec<Change> {
    wanted
        .iter()
        .filter(|w| installed.get(&w.name) != w.version.as_ref())
        .map(|w| Change { name: w.name.clone(), before: installed.get(&w.name).cloned(), after: w.version.clone() })
        .collect()
}
