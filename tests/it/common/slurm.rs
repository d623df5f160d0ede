//! A real Slurm cluster on this host (Debian's `slurm-wlm` and `munge`, installed by
//! `scripts/test.sh`): a munge daemon with a generated key, one `slurmctld` and one `slurmd`
//! per node name, each on a port of its own with its own spool, all in the foreground as
//! children of the test and stopped when it ends. Clients (`scontrol`, `sinfo`, `sbatch`) find
//! it through `SLURM_CONF`. Fails, never skips, when Slurm is not installed.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Slurm {
    dir: tempfile::TempDir,
    pub conf: PathBuf,
    children: Vec<Child>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A daemon in the foreground, its own output (logs it also writes to its log file) kept out
/// of the test's.
fn spawn(c: &mut Command, what: &str) -> Child {
    c.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{what} cannot start ({e}): scripts/test.sh installs slurm-wlm and munge"))
}

impl Slurm {
    /// A cluster of `nodes` (one CPU each) in one partition, `gpu`, every node idle.
    pub fn start(nodes: &[&str]) -> Self {
        let dir = tempfile::Builder::new().prefix("airlock-slurm-").tempdir().unwrap();
        let d = dir.path();
        // munged refuses a socket whose parent directories are not searchable by everyone.
        std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        for sub in ["state", "spool", "munge"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        let key = d.join("munge/munge.key");
        let mut bytes = vec![0u8; 1024];
        std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom").unwrap(), &mut bytes).unwrap();
        std::fs::write(&key, bytes).unwrap();
        std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o400)).unwrap();
        let socket = d.join("munge/munge.socket");
        let mut children = Vec::new();
        children.push(spawn(
            Command::new("munged").args([
                "-F",
                "--force",
                &format!("--key-file={}", key.display()),
                &format!("--socket={}", socket.display()),
                &format!("--pid-file={}", d.join("munge/munged.pid").display()),
                &format!("--log-file={}", d.join("munge/munged.log").display()),
                &format!("--seed-file={}", d.join("munge/munged.seed").display()),
            ]),
            "munged",
        ));
        wait_for(|| socket.exists(), "munged's socket");
        let host = String::from_utf8(Command::new("hostname").arg("-s").output().unwrap().stdout).unwrap();
        let host = host.trim();
        let mut conf = format!(
            "ClusterName=airlock\nSlurmctldHost={host}\nSlurmctldPort={ctl}\nAuthType=auth/munge\n\
             AuthInfo=socket={sock}\nCryptoType=crypto/munge\nSlurmUser=root\nSlurmdUser=root\n\
             StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool/%n\nSlurmctldPidFile={d}/slurmctld.pid\n\
             SlurmdPidFile={d}/slurmd-%n.pid\nSlurmctldLogFile={d}/slurmctld.log\nSlurmdLogFile={d}/slurmd-%n.log\n\
             ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n\
             SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nReturnToService=2\nMpiDefault=none\n\
             MinJobAge=3600\nSlurmdParameters=config_overrides\nSchedulerParameters=sched_interval=2\n",
            ctl = free_port(),
            sock = socket.display(),
            d = d.display(),
        );
        for node in nodes {
            let _ = writeln!(conf, "NodeName={node} NodeHostname={host} Port={} CPUs=1 State=UNKNOWN", free_port());
        }
        let _ = writeln!(conf, "PartitionName=gpu Nodes={} Default=YES MaxTime=INFINITE State=UP", nodes.join(","));
        let path = d.join("slurm.conf");
        std::fs::write(&path, conf).unwrap();
        children.push(spawn(Command::new("slurmctld").args(["-D", "-i", "-f"]).arg(&path), "slurmctld"));
        let mut slurm = Self { dir, conf: path, children };
        wait_for(|| slurm.try_cmd("scontrol", &["ping"]).is_some_and(|o| o.contains("UP")), "slurmctld");
        for node in nodes {
            let child = spawn(Command::new("slurmd").args(["-D", "-f"]).arg(&slurm.conf).args(["-N", node]), "slurmd");
            slurm.children.push(child);
        }
        for node in nodes {
            wait_for(|| slurm.state(node).0 == "idle", &format!("slurmd {node} idle"));
        }
        slurm
    }

    /// `PROGRAM ARGS` against this cluster, its stdout (`None` when it fails).
    pub fn try_cmd(&self, program: &str, args: &[&str]) -> Option<String> {
        let out = Command::new(program).env("SLURM_CONF", &self.conf).args(args).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The same, which must succeed.
    pub fn cmd(&self, program: &str, args: &[&str]) -> String {
        let out = Command::new(program).env("SLURM_CONF", &self.conf).args(args).output().unwrap();
        assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// (state, reason) as sinfo names them: `idle`, `draining`, `drained`, …; reason `none`
    /// when there is none.
    pub fn state(&self, node: &str) -> (String, String) {
        let out = self.try_cmd("sinfo", &["--noheader", "--Node", "--nodes", node, "--format", "%T|%E"]);
        let line = out.unwrap_or_default();
        let (state, reason) = line.lines().next().unwrap_or("|").split_once('|').unwrap_or(("", ""));
        (state.trim().trim_end_matches('*').to_owned(), reason.trim().to_owned())
    }

    /// Submit `command` to run on `node`; its job id.
    pub fn submit(&self, node: &str, command: &str) -> String {
        let out = self.dir.path().join("job-%j.out");
        let o = self.cmd("sbatch", &["--parsable", "-w", node, "-o", &out.display().to_string(), "--wrap", command]);
        o.trim().split(';').next().unwrap().to_owned()
    }

    /// A job's fields (`scontrol show job -o`): `JobState`, `StartTime`, `EndTime`, …
    pub fn job(&self, id: &str) -> std::collections::BTreeMap<String, String> {
        let o = self.cmd("scontrol", &["show", "job", "-o", id]);
        o.split_whitespace().filter_map(|f| f.split_once('=')).map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
    }

    pub fn wait_job(&self, id: &str, state: &str) {
        wait_for(|| self.job(id).get("JobState").is_some_and(|s| s == state), &format!("job {id} {state}"));
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("slurmctld.log")).unwrap_or_default()
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        for c in self.children.iter_mut().rev() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn wait_for(mut ok: impl FnMut() -> bool, what: &str) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("{what}: not within 60 s");
}
