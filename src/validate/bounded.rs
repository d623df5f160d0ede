//! Running a GPU tool or an acceptance check bounded in time and in output: it runs in its own
//! process group, so a timeout kills everything it started (a test harness's children, the
//! Python behind amd-smi); stdout and stderr are read on threads, kept up to a limit and
//! drained past it, so a chatty tool can neither block on a full pipe nor fill memory.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
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
    let status = wait_until(&mut child, deadline);
    let joined = |h: JoinHandle<Vec<u8>>| h.join().unwrap_or_default();
    Ok(Finished { status, stdout: joined(stdout), stderr: joined(stderr) })
}

/// The first `max` bytes of a stream, read on a thread; the rest is drained.
fn keep(stream: Option<impl Read + Send + 'static>, max: u64) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        if let Some(mut s) = stream {
            let _ = s.by_ref().take(max).read_to_end(&mut kept);
            let _ = std::io::copy(&mut s, &mut std::io::sink());
        }
        kept
    })
}

/// Its exit status, or `None` after killing its whole group at `deadline`.
fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                if let Some(pid) = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap_or(0)) {
                    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
                }
                let _ = child.wait();
                return None;
            }
        }
    }
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
