//! A real registry (Debian's `docker-registry`, CNCF distribution) on a free loopback port,
//! plain HTTP, with htpasswd basic auth, or with TLS from a CA made here. Missing tools fail
//! the test: `scripts/test.sh` installs them.
#![allow(dead_code)]

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Plain,
    Htpasswd,
    Tls,
    /// Bearer tokens from a token server (`WWW-Authenticate: Bearer realm=…`).
    Token,
    /// TLS and htpasswd basic auth together, as a site's registry is usually run.
    TlsHtpasswd,
}

impl Mode {
    fn tls(self) -> bool {
        matches!(self, Mode::Tls | Mode::TlsHtpasswd)
    }

    fn htpasswd(self) -> bool {
        matches!(self, Mode::Htpasswd | Mode::TlsHtpasswd)
    }
}

pub const USER: &str = "airlock";
pub const PASSWORD: &str = "correct-horse";

pub struct Registry {
    child: Child,
    token_server: Option<Child>,
    pub host: String,
    pub dir: PathBuf,
    pub ca: Option<PathBuf>,
    pub mode: Mode,
    _tmp: tempfile::TempDir,
}

fn must(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: cannot run ({e}); scripts/test.sh installs it"));
    assert!(out.status.success(), "{what} failed: {}", String::from_utf8_lossy(&out.stderr));
}

impl Registry {
    pub fn start(mode: Mode) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_owned();
        let mut extra = String::new();
        let mut ca = None;
        let mut token_server = None;
        let mut top_extra = String::new();
        if mode.htpasswd() {
            let out = Command::new("htpasswd")
                .args(["-Bbn", USER, PASSWORD])
                .output()
                .expect("htpasswd (apache2-utils) is installed by scripts/test.sh");
            std::fs::write(dir.join("htpasswd"), out.stdout).unwrap();
            top_extra =
                format!("auth:\n  htpasswd:\n    realm: airlock-test\n    path: {}\n", dir.join("htpasswd").display());
        }
        match mode {
            Mode::Plain | Mode::Htpasswd => {}
            Mode::Token => {
                self_signed(&dir, "token", "/CN=airlock test token issuer", &[]);
                let helper = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/helpers/token_server.py");
                let user = format!("{USER}:{PASSWORD}");
                // Port 0: it binds a free port itself and says which on its first line.
                let mut child = Command::new("python3")
                    .arg(helper)
                    .args(["0", "token.key", "token.pem", "airlock-issuer", "airlock-registry", &user])
                    .current_dir(&dir)
                    .stdout(Stdio::piped())
                    .spawn()
                    .expect("python3 runs");
                let mut first = String::new();
                let stdout = child.stdout.take().expect("stdout is piped");
                std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut first).unwrap();
                let token_port: u16 = first
                    .rsplit(" port ")
                    .next()
                    .and_then(|p| p.trim().parse().ok())
                    .unwrap_or_else(|| panic!("the token server did not start: {first:?}"));
                token_server = Some(child);
                wait_for(&format!("127.0.0.1:{token_port}"), &dir);
                extra = format!(
                    "auth:\n  token:\n    realm: http://127.0.0.1:{token_port}/token\n    service: airlock-registry\n    issuer: airlock-issuer\n    rootcertbundle: {}\n",
                    dir.join("token.pem").display()
                );
            }
            Mode::Tls | Mode::TlsHtpasswd => {
                make_certs(&dir);
                ca = Some(dir.join("ca.pem"));
                extra = format!(
                    "  tls:\n    certificate: {}\n    key: {}\n",
                    dir.join("leaf.pem").display(),
                    dir.join("leaf.key").display()
                );
            }
        }
        let (http_extra, top_extra) = if mode.tls() { (extra, top_extra) } else { (String::new(), top_extra + &extra) };
        // Port 0: the registry binds a free port itself and logs which (`listening on …`);
        // a port picked here and handed over could be taken by a parallel test first.
        let config = format!(
            "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:0\n{http_extra}{top_extra}",
            dir.join("data").display()
        );
        std::fs::write(dir.join("config.yml"), config).unwrap();
        let child = Command::new("docker-registry")
            .args(["serve", dir.join("config.yml").to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("registry.log")).unwrap())
            .spawn()
            .expect("docker-registry is installed by scripts/test.sh");
        let host = bound_host(&dir);
        wait_for(&host, &dir);
        Self { child, token_server, host, dir, ca, mode, _tmp: tmp }
    }

    pub fn url(&self) -> String {
        let scheme = if self.mode.tls() { "https" } else { "http" };
        format!("{scheme}://{}", self.host)
    }

    /// Push a generated image with `tests/helpers/push_image.py`; returns its digest.
    pub fn push(&self, repo: &str, tag: &str, extra: &[&str]) -> String {
        let helper = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/helpers/push_image.py");
        let mut cmd = Command::new("python3");
        cmd.arg(helper).args([self.url().as_str(), repo, tag]).args(extra);
        match self.mode {
            Mode::Htpasswd | Mode::TlsHtpasswd => {
                cmd.args(["--user", &format!("{USER}:{PASSWORD}")]);
            }
            Mode::Token => {
                cmd.args(["--token-user", &format!("{USER}:{PASSWORD}")]);
            }
            Mode::Plain | Mode::Tls => {}
        }
        if let Some(ca) = &self.ca {
            cmd.args(["--cacert", ca.to_str().unwrap()]);
        }
        let out = cmd.output().expect("python3 runs");
        assert!(out.status.success(), "push_image.py failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// The file a registry stores a blob's bytes in (to damage it on purpose).
    pub fn blob_data(&self, digest_hex: &str) -> PathBuf {
        self.dir.join(format!("data/docker/registry/v2/blobs/sha256/{}/{digest_hex}/data", &digest_hex[..2]))
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        for child in std::iter::once(&mut self.child).chain(self.token_server.as_mut()) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The `127.0.0.1:PORT` the registry logged it listens on.
fn bound_host(dir: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let log = std::fs::read_to_string(dir.join("registry.log")).unwrap_or_default();
        let port = log
            .split("listening on 127.0.0.1:")
            .nth(1)
            .map(|rest| rest.chars().take_while(char::is_ascii_digit).collect::<String>());
        if let Some(port) = port.filter(|p| !p.is_empty()) {
            return format!("127.0.0.1:{port}");
        }
        assert!(Instant::now() < deadline, "docker-registry did not say where it listens: {log}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_for(host: &str, dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while TcpStream::connect(host).is_err() {
        assert!(
            Instant::now() < deadline,
            "{host} did not start: {}",
            std::fs::read_to_string(dir.join("registry.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `dir/NAME.key` and a self-signed `dir/NAME.pem` (P-256, two days) for `subject`, with
/// `extensions` added as `-addext` values.
fn self_signed(dir: &Path, name: &str, subject: &str, extensions: &[&str]) {
    let (key, cert) = (format!("{name}.key"), format!("{name}.pem"));
    let mut args = vec!["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    args.extend(["-keyout", &key, "-out", &cert, "-days", "2", "-subj", subject]);
    for ext in extensions {
        args.extend(["-addext", ext]);
    }
    must(Command::new("openssl").current_dir(dir).args(&args), "openssl");
}

/// A CA (CA:TRUE) and a leaf for 127.0.0.1 (CA:FALSE): rustls refuses a self-signed CA as a leaf.
fn make_certs(dir: &Path) {
    self_signed(
        dir,
        "ca",
        "/CN=airlock test CA",
        &["basicConstraints=critical,CA:TRUE", "keyUsage=critical,keyCertSign,cRLSign"],
    );
    let ossl = |args: &[&str]| must(Command::new("openssl").current_dir(dir).args(args), "openssl");
    ossl(&[
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        "leaf.key",
        "-out",
        "leaf.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    std::fs::write(dir.join("leaf.ext"), "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n").unwrap();
    ossl(&[
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "leaf.pem",
        "-days",
        "2",
        "-extfile",
        "leaf.ext",
    ]);
}
