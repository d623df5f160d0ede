#!/usr/bin/env bash
# The rollout at a site's scale (issue 78): `ansible-playbook airlock.site.rollout -f FORKS` over
# each N in FLEET local nodes (ansible_connection=local, each its own site root), in one quiet run
# so that the curve, not the day, shows:
#   scripts/bench-fleet.sh AIRLOCK WORK            FLEET="64 256 1024" FORKS=5 (Ansible's default)
#
# The demo's files-only bundle, qualified for three hardware tuples (SPX bare metal, CPX/NPS4, a
# passthrough guest: the recorded hosts of testdata/probes), the nodes spread over them round
# robin; batches [1, "10%", "25%", "100%"]. For each N: the playbook's wall time per node (the
# rollout's cost on this machine, the nodes' work included), airlock's own seconds per node (the
# apply records' `seconds`, wall time), the controller's CPU seconds per node (the playbook's
# processes less the nodes' airlock and the tools it ran: what a controller pays when the nodes
# are other machines; target <= 0.3 s at 1,024, flat or falling with N), the nodes' CPU seconds
# per node (airlock's own work: no higher at the largest N than at the smallest), the
# controller's peak RSS (ansible-playbook and its forks, the largest), and the fleet page
# (`airlock report --fleet`): its seconds and size. Runs on a shared machine vary by a fifth
# from one hour to the next: compare variants interleaved, not runs of different hours.
# SLURM=1 runs the Slurm path (`airlock_scheduler: slurm`: every node drained, its jobs waited for,
# resumed) over a real local cluster (munged, slurmctld and one slurmd per node name, as
# tests/it/common/slurm.rs starts it; root): FLEET's sizes are then what this machine allows.
set -euo pipefail
airlock=$1 work=$2
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$repo/scripts/bench-lib.sh"
FLEET=${FLEET:-64 256 1024} FORKS=${FORKS:-5}
command -v ansible-playbook >/dev/null || { echo "bench-fleet: ansible-core is needed (scripts/test.sh installs it)" >&2; exit 1; }
r="$work/fleet-bench"; rm -rf "$r"; mkdir -p "$r"
ansible-galaxy collection build --force --output-path "$r/built" "$repo/ansible" >/dev/null
ansible-galaxy collection install --force --offline -p "$r/collections" "$r"/built/airlock-site-*.tar.gz >/dev/null 2>&1
"$airlock" keygen --out-dir "$r/keys" --name bench >/dev/null
cp -r "$repo/testdata/demo" "$r/project"
python3 - "$r/project/airlock.toml" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
s = s.replace('partition = { compute = ["SPX"], memory = ["NPS1"] }',
              'partition = { compute = ["SPX", "CPX"], memory = ["NPS1", "NPS4"] }')
open(p, "w").write(s)
PY
(cd "$r/project" && "$airlock" build airlock.toml --key "$r/keys/bench.key" --out "$r/demo.airlock" >/dev/null 2>&1)
# The nodes' airlock runs through a wrapper that adds what it and the tools it ran (the probes)
# used of the CPU to node-cpu (bash's `times`, run in the shell itself: in a pipe it would
# report a subshell's): on a fleet that is the nodes' work, and the controller's CPU is the
# playbook's whole less it. The controller's own steps (rollout plan, next, judge, evidence)
# run the binary itself and count as the controller's.
cat > "$r/node-airlock" <<WRAP
#!/bin/bash
"$airlock" "\$@"; rc=\$?
times >> "$r/node-cpu"
exit \$rc
WRAP
chmod +x "$r/node-airlock"
probes=$repo/testdata/probes
python=$(python3 -c 'import sys; print(sys.executable)')
tuples=(mi300x mi300x-cpx guest)
slurm_vars=""
if [[ -n ${SLURM:-} ]]; then
  largest=$(echo $FLEET | awk '{print $NF}')
  sd="$r/slurm"; mkdir -p "$sd"/{state,spool,munge}; chmod 755 "$sd"
  head -c 1024 /dev/urandom > "$sd/munge/munge.key"; chmod 400 "$sd/munge/munge.key"
  pids=()
  trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
  munged -F --force --key-file="$sd/munge/munge.key" --socket="$sd/munge/munge.socket" \
    --pid-file="$sd/munge/munged.pid" --log-file="$sd/munge/munged.log" --seed-file="$sd/munge/munged.seed" \
    </dev/null >/dev/null 2>&1 & pids+=($!)
  for _ in $(seq 100); do [[ -S $sd/munge/munge.socket ]] && break; sleep 0.1; done
  host=$(hostname -s)
  { printf 'ClusterName=airlock\nSlurmctldHost=%s\nSlurmctldPort=%s\nAuthType=auth/munge\nAuthInfo=socket=%s\n' \
      "$host" "$(port)" "$sd/munge/munge.socket"
    printf 'CryptoType=crypto/munge\nSlurmUser=root\nSlurmdUser=root\nStateSaveLocation=%s/state\n' "$sd"
    printf 'SlurmdSpoolDir=%s/spool/%%n\nSlurmctldPidFile=%s/slurmctld.pid\nSlurmdPidFile=%s/slurmd-%%n.pid\n' "$sd" "$sd" "$sd"
    printf 'SlurmctldLogFile=%s/slurmctld.log\nSlurmdLogFile=%s/slurmd-%%n.log\n' "$sd" "$sd"
    printf 'ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n'
    printf 'SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nReturnToService=2\nMpiDefault=none\n'
    printf 'MinJobAge=3600\nSlurmdParameters=config_overrides\nSchedulerParameters=sched_interval=2\n'
    for i in $(seq "$largest"); do printf 'NodeName=n%04d NodeHostname=%s Port=%s CPUs=1 State=UNKNOWN\n' "$i" "$host" "$(port)"; done
    printf 'PartitionName=gpu Nodes=n[0001-%04d] Default=YES MaxTime=INFINITE State=UP\n' "$largest"
  } > "$sd/slurm.conf"
  export SLURM_CONF=$sd/slurm.conf
  slurmctld -D -i -f "$SLURM_CONF" </dev/null >/dev/null 2>&1 & pids+=($!)
  for _ in $(seq 200); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.1; done
  for i in $(seq "$largest"); do slurmd -D -f "$SLURM_CONF" -N "$(printf 'n%04d' "$i")" </dev/null >/dev/null 2>&1 & pids+=($!); done
  for _ in $(seq 600); do
    [[ $(sinfo --noheader --Node --format '%T' | grep -c '^idle') -ge $largest ]] && break; sleep 0.5
  done
  echo "slurm: $(sinfo --noheader --Node --format '%T' | grep -c '^idle') of $largest nodes idle"
  slurm_vars=", \"airlock_scheduler\": \"slurm\", \"airlock_scheduler_environment\": {\"SLURM_CONF\": \"$SLURM_CONF\"}, \"airlock_slurm_poll\": 0.5"
fi
echo "fleet: ansible-playbook airlock.site.rollout -f $FORKS over N local nodes, ${#tuples[@]} tuples, $(nproc) cores${SLURM:+, under Slurm}"
printf '  %-5s %8s %9s %10s %11s %10s %11s %9s %9s\n' N wall "s / node" "airlock's" "ctrl CPU/n" "nodes' CPU" "peak RSS" \
  "report" "page"
first_node_cpu="" ; largest=$(echo $FLEET | awk '{print $NF}')
for n in $FLEET; do
  rm -rf "$r/nodes" "$r/evidence" "$r/node-cpu"
  { echo "[airlock_nodes]"
    for i in $(seq "$n"); do
      t=${tuples[$(( (i - 1) % ${#tuples[@]} ))]}
      env="{\"PATH\": \"$probes/$t/bin:$probes/mi300x/bin:/usr/bin:/bin\", \"AIRLOCK_HOST_ROOT\": \"$probes/$t/root\"}"
      printf "n%04d ansible_connection=local airlock_root=%s/nodes/n%04d airlock_environment='%s'\n" "$i" "$r" "$i" "$env"
    done; } > "$r/inventory.ini"
  cat > "$r/vars.json" <<EOF
{"airlock_source": "$r/demo.airlock", "airlock_trust": ["$r/keys/bench.pub"], "airlock_binary": "$r/node-airlock",
 "airlock_controller_binary": "$airlock",
 "airlock_batches": [1, "10%", "25%", "100%"], "airlock_evidence_dir": "$r/evidence", "airlock_run_id": "bench-$n",
 "ansible_python_interpreter": "$python"$slurm_vars}
EOF
  start=$(date +%s.%N)
  ANSIBLE_COLLECTIONS_PATH="$r/collections" ANSIBLE_HOME="$r/home" ANSIBLE_LOCAL_TEMP="$r/tmp" ANSIBLE_NOCOLOR=1 \
    python3 "$repo/tests/helpers/peak_rss.py" ansible-playbook airlock.site.rollout -f "$FORKS" -i "$r/inventory.ini" \
    -e "@$r/vars.json" > "$r/out.$n" 2> "$r/err.$n" ||
    { echo "rollout failed:" >&2; tail -n 40 "$r/out.$n" "$r/err.$n" >&2; exit 1; }
  wall=$(python3 -c "import time; print(time.time() - $start)")
  rss=$(awk '/^peak_rss_kib/ {print $2}' "$r/err.$n")
  cpu=$(awk '/^cpu_seconds/ {print $2}' "$r/err.$n")
  # `times`' two lines (the wrapper's shell, then airlock and what it ran), `0m0.079s 0m0.088s`: user, system.
  node_cpu=$(python3 -c 'import re, sys; print(sum(int(m) * 60 + float(s) for line in open(sys.argv[1]) for m, s in re.findall(r"(\d+)m([\d.]+)s", line)))' "$r/node-cpu")
  own=$(apply_seconds "$r/nodes")
  applied=$(ls "$r"/nodes/*/records/*-apply.json | wc -l)
  [[ $applied -eq $n ]] || { echo "fleet: $applied of $n nodes applied" >&2; exit 1; }
  rstart=$(date +%s.%N)
  "$airlock" report --fleet "$r/evidence" --out "$r/fleet-$n.html" >/dev/null
  report=$(python3 -c "import time; print(time.time() - $rstart)")
  page=$(stat -c %s "$r/fleet-$n.html")
  first_node_cpu=${first_node_cpu:-$(python3 -c "print($node_cpu / $n)")}
  python3 - "$n" "$wall" "$own" "$rss" "$report" "$page" "$largest" "$first_node_cpu" "$cpu" "$node_cpu" <<'PY'
import sys
n, wall, own, rss, report, page, largest, first, cpu, node_cpu = (int(sys.argv[1]), float(sys.argv[2]),
    float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]), float(sys.argv[8]),
    float(sys.argv[9]), float(sys.argv[10]))
controller = (cpu - node_cpu) / n
verdict = ""
if n == largest:
    per = "ok" if controller <= 0.3 else "MISSED"
    # airlock's own work per node, as CPU: its apply records' seconds are wall time, which the
    # nodes' contention for this machine's cores stretches as N grows.
    flat = "ok" if node_cpu / n <= first * 1.1 else "MISSED"
    verdict = f"  controller <= 0.3 s/node: {per}; nodes' CPU no higher than at the smallest N: {flat}"
print(f"  {n:<5} {wall:7.1f}s {wall / n:8.3f}s {own / n:9.3f}s {controller:10.3f}s {node_cpu / n:9.3f}s"
      f" {rss / 1024:8.0f} MiB {report:8.2f}s {page / 1024:6.0f} KB{verdict}")
PY
done
[[ -n ${KEEP_FLEET:-} ]] || rm -rf "$r"
