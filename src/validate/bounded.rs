//! Running a GPU tool or an acceptance check bounded in time and in output: it runs in its own
//! process group, so a timeout kills everything it started (a test harness's children, the
//! Python behind amd-smi); stdout and stderr are read on threads, kept up to a limit and
//! drained past it, so a chatty tool can neither block on a full pipe nor fill memory.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How a bounded run ended.
pub struct Finished {
    /// `None`: it outlived its time and its process group was killed.
    pub status: Option<ExitStatus>,
    /// The first `max_output` bytes of each stream.
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Run `program` with `args` (stdin empty) for at most `timeout`. Errors only when it cannot
/// be started.
pub fn run(
    program: impl AsRef<OsStr>,
    args: &[impl AsRef<OsStr>],
    timeout: Duration,
    max_output: u64,
) -> std::io::Result<Finished> {
    let deadline = Instant::now() + timeout;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()?;
    let stdout = keep(child.stdout.take(), max_output);
    let stderr = keep(child.stderr.take(), max_output);
    let group = child.id();
    let status = wait_until(child, deadline);
    // What it started in the background (a daemon, `sleep 300 &`) would keep the pipes open
    // and the readers waiting: the check is over, so its whole group goes with it.
    kill_group(group);
    // A grandchild that left the group (setsid) can still hold a pipe: what was read by then
    // is what the check said.
    let joined = |k: Kept| k.take(AFTER_EXIT);
    Ok(Finished { status, stdout: joined(stdout), stderr: joined(stderr) })
}

/// How long the output of a finished check may still take to arrive.
const AFTER_EXIT: Duration = Duration::from_secs(2);

/// The first bytes of a stream, read on a thread that drains the rest.
struct Kept {
    bytes: Arc<Mutex<Vec<u8>>>,
    done: Receiver<()>,
}

impl Kept {
    /// What was read, once the stream closed or `grace` passed.
    fn take(self, grace: Duration) -> Vec<u8> {
        let _ = self.done.recv_timeout(grace);
        std::mem::take(&mut *self.bytes.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

/// The first `max` bytes of a stream, read on a thread; the rest is drained.
fn keep(stream: Option<impl Read + Send + 'static>, max: u64) -> Kept {
    let bytes = Arc::new(Mutex::new(Vec::new()));
    let (send, done) = std::sync::mpsc::channel();
    let shared = Arc::clone(&bytes);
    std::thread::spawn(move || {
        if let Some(mut s) = stream {
            let mut buf = [0u8; 8192];
            let mut left = usize::try_from(max).unwrap_or(usize::MAX);
            while let Ok(n @ 1..) = s.read(&mut buf) {
                let n_kept = n.min(left);
                if n_kept > 0 {
                    shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend_from_slice(&buf[..n_kept]);
                    left -= n_kept;
                }
            }
        }
        let _ = send.send(());
    });
    Kept { bytes, done }
}

/// Kill every process left in the process group `group` (the child leads its own group).
fn kill_group(group: u32) {
    if let Some(pid) = rustix::process::Pid::from_raw(i32::try_from(group).unwrap_or(0)) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// Its exit status, or `None` after killing its whole group at `deadline`. The child is waited
/// for on a thread, so its end is seen the moment it comes (a probe runs a dozen tools: polling
/// every few milliseconds cost a node's apply a tenth of a second).
fn wait_until(mut child: Child, deadline: Instant) -> Option<ExitStatus> {
    let group = child.id();
    let (send, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(child.wait());
    });
    if let Ok(status) = ended.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        return status.ok();
    }
    kill_group(group);
    let _ = ended.recv();
    None
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn output_past_the_limit_is_drained_not_kept_and_does_not_block() {
        // 4 MiB through a 64 KiB pipe: it finishes only if the rest is read.
        let f = super::run("sh", &["-c", "head -c 4194304 /dev/zero; echo oops >&2"], Duration::from_secs(30), 1000)
            .unwrap();
        assert!(f.status.is_some_and(|s| s.success()));
        assert_eq!((f.stdout.len(), f.stderr.as_slice()), (1000, &b"oops\n"[..]));
    }

    #[test]
    fn a_program_that_cannot_start_is_an_error() {
        assert!(super::run("/nonexistent/amd-smi", &["static"], Duration::from_secs(5), 10).is_err());
    }
}
