//! `python3 -m http.server` on a free loopback port, serving a directory.

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

    /// Any Python server that takes its port from `args(port)`, run in `dir`.
    pub fn spawn(dir: &Path, args: impl FnOnce(u16) -> Vec<String>) -> Self {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new("python3")
            .args(args(port))
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 is installed by scripts/test.sh");
        let deadline = Instant::now() + Duration::from_secs(15);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the python server did not start (is it installed? scripts/test.sh)");
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { child, url: format!("http://127.0.0.1:{port}") }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
