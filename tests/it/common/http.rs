//! `python3 -m http.server` on a loopback port, serving a directory; or any of the Python test
//! servers in `tests/helpers`. Each binds port 0 itself and says which port it got (the first
//! line on its stdout, `… port N …`): picking a free port first and handing it over would race
//! with the other servers the suite starts in parallel.
#![allow(dead_code)]

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub struct HttpServer {
    child: Child,
    pub url: String,
}

impl HttpServer {
    pub fn start(dir: &Path) -> Self {
        Self::spawn(dir, |port| {
            vec!["-m".into(), "http.server".into(), "--bind".into(), "127.0.0.1".into(), port.to_string()]
        })
    }

    /// Any Python server that takes its port from `args(port)` (given 0) and prints the port it
    /// bound, run in `dir`.
    pub fn spawn(dir: &Path, args: impl FnOnce(u16) -> Vec<String>) -> Self {
        Self::spawn_with_stderr(dir, args, Stdio::null())
    }

    /// `spawn`, with the server's stderr (its log) going to `stderr`.
    pub fn spawn_with_stderr(dir: &Path, args: impl FnOnce(u16) -> Vec<String>, stderr: Stdio) -> Self {
        let mut child = Command::new("python3")
            .arg("-u")
            .args(args(0))
            .current_dir(dir)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("python3 is installed by scripts/test.sh");
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout);
            let mut first = String::new();
            let _ = lines.read_line(&mut first);
            let _ = tx.send(first);
            let _ = std::io::copy(&mut lines, &mut std::io::sink());
        });
        let first = rx.recv_timeout(Duration::from_secs(15)).unwrap_or_default();
        let port = first
            .split_once(" port ")
            .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|p| p.parse::<u16>().ok())
            .unwrap_or_else(|| panic!("the python server did not start (is it installed? scripts/test.sh): {first:?}"));
        Self { child, url: format!("http://127.0.0.1:{port}") }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
