//! A fault-injecting HTTP/1.1 proxy for loopback tests: forwards each request to a real
//! registry on its own connection, but cuts the first `cuts` responses for blob paths that
//! contain `target` after half their body, and answers `unavailable` of them with 503 first.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub struct Flaky {
    pub host: String,
    /// Every request head forwarded, in order.
    pub requests: Arc<Mutex<Vec<String>>>,
}

pub fn start(upstream: &str, target: &str, cuts: usize, unavailable: usize) -> Flaky {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let host = listener.local_addr().unwrap().to_string();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let state = Arc::new((AtomicUsize::new(cuts), AtomicUsize::new(unavailable)));
    let (upstream, target, log) = (upstream.to_owned(), target.to_owned(), requests.clone());
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let (upstream, target, log, state) = (upstream.clone(), target.clone(), log.clone(), state.clone());
            std::thread::spawn(move || {
                let _ = serve(client, &upstream, &target, &log, &state);
            });
        }
    });
    Flaky { host, requests }
}

fn serve(
    client: TcpStream,
    upstream: &str,
    target: &str,
    log: &Mutex<Vec<String>>,
    state: &(AtomicUsize, AtomicUsize),
) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        if line == "\r\n" {
            break;
        }
        if !line.to_ascii_lowercase().starts_with("connection:") {
            head.push_str(&line);
        }
    }
    log.lock().unwrap().push(head.clone());
    let mut client = client;
    let is_target =
        head.lines().next().is_some_and(|l| l.starts_with("GET") && l.contains("/blobs/") && l.contains(target));
    if is_target && take(&state.1) {
        return client.write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    }
    let mut up = TcpStream::connect(upstream)?;
    up.write_all(head.as_bytes())?;
    up.write_all(b"Connection: close\r\n\r\n")?;
    let mut response = Vec::new();
    up.read_to_end(&mut response)?;
    if is_target && take(&state.0) {
        let body_start = response.windows(4).position(|w| w == b"\r\n\r\n").map_or(0, |p| p + 4);
        let cut = body_start + (response.len() - body_start) / 2;
        return client.write_all(&response[..cut]); // then the connection drops
    }
    client.write_all(&response)
}

fn take(counter: &AtomicUsize) -> bool {
    counter.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok()
}
