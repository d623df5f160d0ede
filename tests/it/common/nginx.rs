//! Debian's nginx (nginx-light, installed by `scripts/test.sh`) serving a directory on a
//! loopback port, one process (`master_process off`), with an access log that says what each
//! request was sent: `URI STATUS BYTES "RANGE"`. What a mirror's nodes really talk to.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Nginx {
    child: Child,
    dir: tempfile::TempDir,
    pub url: String,
}

/// One line of the access log.
#[derive(Debug, Clone)]
pub struct Request {
    pub uri: String,
    pub status: u16,
    pub bytes: u64,
    pub range: String,
}

/// A one-process nginx's configuration: `root` served on 127.0.0.1:`port`, its log, pid and
/// temporary files under `dir` (the access log `dir/access.log`).
pub fn conf(root: &Path, port: u16, dir: &Path) -> String {
    let server = format!("    server {{\n        listen 127.0.0.1:{port};\n        root {};\n    }}", root.display());
    http_conf(&server, dir)
}

/// The rack cache of docs/examples/rack-cache.nginx.conf as it is documented, listening on
/// 127.0.0.1:`port` in front of `upstream`, its cache under `dir/cache`.
pub fn cache_conf(upstream: &str, port: u16, dir: &Path) -> String {
    let documented = include_str!("../../../docs/examples/rack-cache.nginx.conf");
    let ours = documented
        .replace("/var/cache/nginx/airlock", &dir.join("cache").display().to_string())
        .replace("listen 80;", &format!("listen 127.0.0.1:{port};"))
        .replace("http://site-mirror.example", upstream.trim_end_matches('/'));
    assert_ne!(ours, documented);
    let log = format!(
        "    log_format cached '$request_uri $status $body_bytes_sent \"$http_range\" $upstream_cache_status';\n    \
         access_log {}/cache.log cached;\n",
        dir.display()
    );
    http_conf(&format!("{log}{ours}"), dir)
}

/// A one-process nginx's `http` block around `body`.
fn http_conf(body: &str, dir: &Path) -> String {
    let user = if rustix::process::geteuid().is_root() { "user root;" } else { "" };
    let d = dir.display();
    format!(
        r#"{user}
daemon off;
master_process off;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 1024; }}
http {{
    log_format bytes '$request_uri $status $body_bytes_sent "$http_range"';
    access_log {d}/access.log bytes;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    default_type application/octet-stream;
{body}
}}
"#
    )
}

/// The requests of an access log written with `conf`'s format.
pub fn read_log(path: &Path) -> Vec<Request> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut parts = l.splitn(4, ' ');
            Some(Request {
                uri: parts.next()?.to_owned(),
                status: parts.next()?.parse().ok()?,
                bytes: parts.next()?.parse().ok()?,
                range: parts.next()?.trim_matches('"').to_owned(),
            })
        })
        .collect()
}

impl Nginx {
    /// nginx serving `root` (as root, its workers read files in 0700 temporary directories).
    pub fn serve(root: &Path) -> Self {
        Self::start(|port, dir| conf(root, port, dir))
    }

    /// The documented rack cache (`cache_conf`) in front of `upstream`.
    pub fn cache_in_front_of(upstream: &str) -> Self {
        Self::start(|port, dir| cache_conf(upstream, port, dir))
    }

    /// The cache's log: each request with `$upstream_cache_status` (HIT, MISS, or `-`).
    pub fn cache_log(&self) -> Vec<(String, String)> {
        let text = std::fs::read_to_string(self.dir.path().join("cache.log")).unwrap_or_default();
        text.lines()
            .filter_map(|l| {
                let (uri, rest) = l.split_once(' ')?;
                Some((uri.to_owned(), rest.rsplit(' ').next()?.to_owned()))
            })
            .collect()
    }

    fn start(conf_for: impl Fn(u16, &Path) -> String) -> Self {
        let dir = tempfile::tempdir().unwrap();
        for _ in 0..10 {
            let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let conf = conf_for(port, dir.path());
            std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
            let mut child = Command::new("nginx")
                .arg("-e")
                .arg(dir.path().join("error.log"))
                .arg("-c")
                .arg(dir.path().join("nginx.conf"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("nginx is installed by scripts/test.sh (nginx-light)");
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(10) {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Self { child, dir, url: format!("http://127.0.0.1:{port}") };
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let log = std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default();
        panic!("nginx did not start: {log}");
    }

    pub fn access_log(&self) -> PathBuf {
        self.dir.path().join("access.log")
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        read_log(&self.access_log())
    }

    /// Forget the requests so far (the next `requests` starts here).
    pub fn clear(&self) {
        std::fs::write(self.access_log(), "").unwrap();
    }

    /// The status `path` is answered with.
    pub fn status_of(&self, path: &str) -> u16 {
        let out = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "--path-as-is", "-w", "%{http_code}"])
            .arg(format!("{}{path}", self.url))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).parse().unwrap_or(0)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
