#!/usr/bin/env bash
# A mirror serving a fleet, and the rollout's own cost as the fleet grows (issue 61); run by
# scripts/bench.sh (SERVE_MIB, NODES, ROLLOUT), or alone:
#   scripts/bench-mirror.sh AIRLOCK WORK
#
#   serve    nginx (Debian's nginx-light, started here on a loopback port: worker_processes auto,
#            sendfile) serving a mirror's public tree with a release of SERVE_MIB MiB of packages
#            (40 .debs of incompressible data); for each N in NODES, N node roots stage it at once
#            (`apply URL --download-only`): total wall, per-node p50 and p99, bytes nginx sent per
#            node (its access log) against the release's package bytes, nginx's CPU seconds, and
#            the aggregate rate against N `curl`s fetching the same files into N directories at
#            once. Targets: bytes per node = the package bytes once (+ manifest, signatures,
#            index: <= 1.02x), p99 <= 2 x p50 at the largest N, rate >= 0.8 x curl's.
#   update   release 2 changes 2 of the 40 packages (5% of the bytes), a candidate on the mirror;
#            the largest N's roots stage it (`--release 2.0.0 --download-only`): bytes sent per
#            node <= 1.02 x the changed packages' bytes + the manifest, signatures and index.
#   rollout  `ansible-playbook airlock.site.rollout -f FORKS` (5, Ansible's default) over each N in ROLLOUT local nodes (one tuple,
#            the demo's files-only bundle, batches [1, "25%", "100%"]): controller seconds per
#            node (wall / N), target <= 0.4 s at the largest N; and airlock's own share.
set -euo pipefail
airlock=$1 work=$2
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SERVE_MIB=${SERVE_MIB:-1024} NODES=${NODES:-1 8 32} ROLLOUT=${ROLLOUT-8 32 64} FORKS=${FORKS:-5}
m="$work/mirror-bench"
mkdir -p "$m"
nginx_pid="" repo_pid=""
cleanup() { for p in $nginx_pid $repo_pid; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
. "$repo/scripts/bench-lib.sh"

if [[ -n ${SERVE_MIB} && ${SERVE_MIB} -gt 0 ]]; then
  # The largest N's roots hold the release at once, beside the mirror's two releases and bundles.
  need_mib=$(( SERVE_MIB * ($(echo $NODES | tr ' ' '\n' | sort -n | tail -1) + 6) * 21 / 20 ))
  free_mib=$(df -Pm "$m" | awk 'NR == 2 {print $4}')
  if (( free_mib < need_mib )); then
    echo "serve: about $need_mib MiB free needed under $m for SERVE_MIB=$SERVE_MIB and NODES=\"$NODES\", $free_mib there" >&2
    exit 1
  fi
  bench_release "$airlock" "$m" "$SERVE_MIB" "$work/keys/bench"
  "$airlock" install "$m/b1.airlock" --role mirror --trust "$work/keys/bench.pub" --root "$m/root" >/dev/null
  nport=$(port)
  user=""; [[ $(id -u) -ne 0 ]] || user="user root;"
  cat > "$m/nginx.conf" <<EOF
$user
daemon off;
worker_processes auto;
pid $m/nginx.pid;
error_log $m/nginx-error.log;
events { worker_connections 4096; }
http {
    log_format bytes '\$request_uri \$status \$body_bytes_sent';
    access_log $m/access.log bytes;
    client_body_temp_path $m/nginx-body;
    proxy_temp_path $m/nginx-proxy;
    fastcgi_temp_path $m/nginx-fastcgi;
    uwsgi_temp_path $m/nginx-uwsgi;
    scgi_temp_path $m/nginx-scgi;
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    server {
        listen 127.0.0.1:$nport;
        root $m/root/public;
        autoindex off;
    }
}
EOF
  nginx -e "$m/nginx-error.log" -c "$m/nginx.conf" &
  nginx_pid=$!
  wait_port "$nport" "current/airlock/manifest.json"
  url="http://127.0.0.1:$nport/"
  # nginx's CPU seconds so far: the master and its workers.
  nginx_cpu() { python3 - "$nginx_pid" <<'EOF'
import os, sys
master = sys.argv[1]
pids = [master] + [p for p in os.listdir("/proc") if p.isdigit() and open(f"/proc/{p}/stat").read().split(") ")[1].split()[1] == master]
tick = os.sysconf("SC_CLK_TCK")
print(sum(int(f[11]) + int(f[12]) for f in (open(f"/proc/{p}/stat").read().split(") ")[1].split() for p in pids)) / tick)
EOF
  }
  current=$(readlink -f "$m/root/public/current")
  pkg_bytes=$(find "$current/debs" -name '*.deb' -printf '%s\n' | awk '{s += $1} END {printf "%.0f", s}')
  mapfile -t deb_urls < <(cd "$current" && find debs -name '*.deb' | sort | sed "s|^|${url}current/|")
  echo
  echo "serve: nginx, a release of $((pkg_bytes / 1048576)) MiB in ${#deb_urls[@]} packages, N nodes staging it at once (--download-only)"
  printf '  %-4s %8s %8s %8s %10s %8s %9s %9s %7s  %s\n' N wall p50 p99 "sent/node" "x pkgs" "nginx cpu" "curl wall" "rate" verdicts
  for n in $NODES; do
    rm -rf "$m/nodes" "$m/curl"; mkdir -p "$m/nodes" "$m/curl"
    sync
    : > "$m/access.log"; cpu0=$(nginx_cpu); start=$(date +%s.%N)
    pids=()
    for i in $(seq "$n"); do
      /usr/bin/time -f "%e" -o "$m/nodes/t.$i" "$airlock" apply "$url" --download-only \
        --trust "$work/keys/bench.pub" --root "$m/nodes/$i" >/dev/null 2>"$m/nodes/err.$i" &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || { echo "a node failed:" >&2; cat "$m"/nodes/err.* >&2; exit 1; }; done
    wall=$(python3 -c "import time; print(time.time() - $start)")
    cpu1=$(nginx_cpu)
    sent=$(awk '{s += $3} END {printf "%.0f", s}' "$m/access.log")
    rm -rf "$m/nodes/"[0-9]*; sync
    # The same bytes by curl: N clients, each fetching every package in turn, into its directory.
    cstart=$(date +%s.%N)
    pids=()
    for i in $(seq "$n"); do
      (mkdir -p "$m/curl/$i" && cd "$m/curl/$i" && for u in "${deb_urls[@]}"; do curl -sf -O "$u"; done; sync -f .) &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    cwall=$(python3 -c "import time; print(time.time() - $cstart)")
    rm -rf "$m/curl"
    python3 - "$n" "$wall" "$cwall" "$sent" "$pkg_bytes" "$cpu0" "$cpu1" "$m/nodes" "$(echo $NODES | awk '{print $NF}')" <<'EOF'
import statistics, sys, glob
n, wall, cwall, sent, pkgs, c0, c1, nodes, largest = sys.argv[1:]
n, wall, cwall, sent, pkgs = int(n), float(wall), float(cwall), int(sent), int(pkgs)
times = sorted(float(open(p).read().split()[-1]) for p in glob.glob(f"{nodes}/t.*"))
p50 = statistics.median(times)
p99 = times[min(len(times) - 1, int(round(0.99 * (len(times) - 1))))]
per = sent / n
rate, crate = n * pkgs / wall, n * pkgs / cwall
v = ["bytes " + ("ok" if per <= 1.02 * pkgs else "MISSED"), "rate " + ("ok" if rate >= 0.8 * crate else "MISSED")]
if n == int(largest):
    v.append("p99 " + ("ok" if p99 <= 2 * p50 else "MISSED"))
print(f"  {n:<4} {wall:7.1f}s {p50:7.1f}s {p99:7.1f}s {per / 1048576:8.1f}Mi {per / pkgs:8.3f} {float(c1) - float(c0):8.1f}s"
      f" {cwall:8.1f}s {rate / crate:7.2f}  {', '.join(v)}")
EOF
  done
  # Release 2: two packages changed; the largest N's roots hold release 1 staged.
  n=$(echo $NODES | awk '{print $NF}')
  rm -rf "$m/nodes"; mkdir -p "$m/nodes"
  pids=()
  for i in $(seq "$n"); do
    "$airlock" apply "$url" --download-only --trust "$work/keys/bench.pub" --root "$m/nodes/$i" >/dev/null 2>"$m/nodes/err.$i" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { echo "a node failed:" >&2; cat "$m"/nodes/err.* >&2; exit 1; }; done
  "$airlock" install "$m/b2.airlock" --role mirror --candidate --trust "$work/keys/bench.pub" --root "$m/root" >/dev/null
  : > "$m/access.log"; start=$(date +%s.%N)
  pids=()
  for i in $(seq "$n"); do
    "$airlock" apply "$url" --release 2.0.0 --download-only --trust "$work/keys/bench.pub" --root "$m/nodes/$i" >/dev/null 2>"$m/nodes/err.$i" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { echo "a node failed:" >&2; cat "$m"/nodes/err.* >&2; exit 1; }; done
  wall=$(python3 -c "import time; print(time.time() - $start)")
  changed=$(find "$(readlink -f "$m/root/public/releases/2.0.0")/debs" -name '*1.1-1*.deb' -printf '%s\n' | awk '{s += $1} END {printf "%.0f", s}')
  sent=$(awk '{s += $3} END {printf "%.0f", s}' "$m/access.log")
  python3 - "$n" "$sent" "$changed" "$pkg_bytes" "$wall" <<'EOF'
import sys
n, sent, changed, pkgs, wall = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
per = sent / n
print(f"update: release 2 changes {changed / pkgs:.1%} of the package bytes; {n} nodes staged it in {wall:.1f} s")
print(f"  sent per node {per / 1048576:.2f} MiB for {changed / 1048576:.2f} MiB changed: {per / changed:.3f} x"
      f"  <= 1.02  {'ok' if per <= 1.02 * changed else 'MISSED'}")
EOF
  rm -rf "$m/nodes"
  kill "$nginx_pid"; nginx_pid=""
  rm -rf "$m/root" "$m"/b*.airlock
fi

if [[ -n ${ROLLOUT} ]]; then
  command -v ansible-playbook >/dev/null || { echo "rollout: ansible-core is needed (scripts/test.sh installs it)" >&2; exit 1; }
  r="$m/rollout"; mkdir -p "$r"
  ansible-galaxy collection build --force --output-path "$r/built" "$repo/ansible" >/dev/null
  ansible-galaxy collection install --force --offline -p "$r/collections" "$r"/built/airlock-site-*.tar.gz >/dev/null 2>&1
  cp -r "$repo/testdata/demo" "$r/project"
  (cd "$r/project" && "$airlock" build airlock.toml --key "$work/keys/bench.key" --out "$r/demo.airlock" >/dev/null 2>&1)
  probes=$repo/testdata/probes/mi300x
  python=$(python3 -c 'import sys; print(sys.executable)')
  echo
  echo "rollout: ansible-playbook airlock.site.rollout -f $FORKS over N local nodes (one tuple, a files-only bundle, batches [1, \"25%\", \"100%\"])"
  printf '  %-4s %8s %10s %12s  %s\n' N wall "s / node" "airlock's" "target <= 0.4 s / node"
  largest=$(echo $ROLLOUT | awk '{print $NF}')
  for n in $ROLLOUT; do
    rm -rf "$r/nodes" "$r/evidence"
    { echo "[airlock_nodes]"
      for i in $(seq "$n"); do
        printf 'n%03d ansible_connection=local airlock_root=%s/nodes/n%03d\n' "$i" "$r" "$i"
      done; } > "$r/inventory.ini"
    cat > "$r/vars.json" <<EOF
{"airlock_source": "$r/demo.airlock", "airlock_trust": ["$work/keys/bench.pub"], "airlock_binary": "$airlock",
 "airlock_batches": [1, "25%", "100%"], "airlock_evidence_dir": "$r/evidence", "ansible_python_interpreter": "$python",
 "airlock_environment": {"PATH": "$probes/bin:/usr/bin:/bin", "AIRLOCK_HOST_ROOT": "$probes/root"}}
EOF
    start=$(date +%s.%N)
    ANSIBLE_COLLECTIONS_PATH="$r/collections" ANSIBLE_HOME="$r/home" ANSIBLE_LOCAL_TEMP="$r/tmp" ANSIBLE_NOCOLOR=1 \
      ansible-playbook airlock.site.rollout -f "$FORKS" -i "$r/inventory.ini" -e "@$r/vars.json" > "$r/out.$n" 2>&1 ||
      { echo "rollout failed:" >&2; tail -n 40 "$r/out.$n" >&2; exit 1; }
    wall=$(python3 -c "import time; print(time.time() - $start)")
    own=$(apply_seconds "$r/nodes")
    python3 - "$n" "$wall" "$own" "$largest" <<'EOF'
import sys
n, wall, own, largest = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
verdict = ("ok" if wall / n <= 0.4 else "MISSED") if n == largest else "-"
print(f"  {n:<4} {wall:7.1f}s {wall / n:9.2f}s {own / n:10.3f} s  {verdict}")
EOF
  done
  [[ -n ${KEEP_ROLLOUT:-} ]] || rm -rf "$r"
fi
