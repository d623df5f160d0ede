//! A signed apt repository built by `tests/helpers/make_apt_repo.sh` and served over HTTP,
//! and an apt-get with private state directories for consuming a site view.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use super::http::HttpServer;
use super::{Run, helper, run, s};

pub struct Repo {
    pub dir: tempfile::TempDir,
    pub server: HttpServer,
}

pub fn signed_repo() -> Repo {
    let dir = tempfile::tempdir().unwrap();
    run(Command::new("bash").args([&helper("make_apt_repo.sh"), s(dir.path())])).ok();
    let server = HttpServer::start(&dir.path().join("repo"));
    Repo { dir, server }
}

/// apt-get with its own state, cache and sources, downloading into `out()`.
pub struct Apt {
    dir: PathBuf,
}

impl Apt {
    pub fn new(dir: &Path) -> Self {
        for d in ["state/lists/partial", "cache/archives/partial", "etc/sources.list.d", "etc/preferences.d", "out"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        std::fs::write(dir.join("state/status"), "").unwrap();
        Self { dir: dir.to_owned() }
    }

    pub fn sources(&self, line: &str) {
        std::fs::write(self.dir.join("etc/sources.list"), format!("{line}\n")).unwrap();
    }

    /// What dpkg says is installed (a status file's text).
    pub fn status(&self, text: &str) {
        std::fs::write(self.dir.join("state/status"), text).unwrap();
    }

    pub fn out(&self) -> PathBuf {
        self.dir.join("out")
    }

    pub fn get(&self, args: &[&str]) -> Run {
        let d = &self.dir;
        let opts = [
            format!("Dir::State={}", d.join("state").display()),
            format!("Dir::State::status={}", d.join("state/status").display()),
            format!("Dir::Cache={}", d.join("cache").display()),
            format!("Dir::Etc::SourceList={}", d.join("etc/sources.list").display()),
            format!("Dir::Etc::SourceParts={}", d.join("etc/sources.list.d").display()),
            format!("Dir::Etc::Preferences={}", d.join("etc/preferences").display()),
            format!("Dir::Etc::PreferencesParts={}", d.join("etc/preferences.d").display()),
            "APT::Architecture=amd64".to_owned(),
            "Debug::NoLocking=1".to_owned(),
        ];
        let mut cmd = Command::new("apt-get");
        cmd.current_dir(self.out());
        for o in &opts {
            cmd.args(["-o", o]);
        }
        run(cmd.args(args))
    }
}
