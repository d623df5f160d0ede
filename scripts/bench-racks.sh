#!/usr/bin/env bash
# Transfer at rack scale, with network limits (issue 78): RACKS racks of PER_RACK nodes, every
# node, relay and the origin mirror in its own network namespace (root needed), the racks on
# bridges joined to a core bridge by an uplink that `tc` limits to UPLINK, the origin's link to
# ORIGIN, each node's to NODE_LINK; a release of RELEASE_MIB MiB of packages on the origin (nginx).
# The defaults are a site scaled down 2,500-fold, its ratios kept (25 Gbit/s nodes, 100 Gbit/s rack
# uplinks, an 800 Gbit/s origin), so that 64 nodes on a two-core machine stay bound by the network:
# at 25 Mbit/s a node, the kernel's bridges and tc for 64 flows kept both cores 94% busy and that,
# not the network, set the time. Run alone:
#   scripts/bench-racks.sh AIRLOCK WORK
#   RACKS=8 PER_RACK=8 RELEASE_MIB=16 NODE_LINK=10mbit UPLINK=40mbit ORIGIN=320mbit
#
# direct: every node stages the release from the origin (`apply URL --download-only`).
# relay:  one relay per rack takes it (`install URL --role relay`), then the rack's nodes stage
#         it from their relay.
# For each: one rack alone, then every rack at once — the time until every node has staged (its
# relays included), each node's p50 and p99, and the bytes the origin sent against the release's
# package bytes, and how busy the machine's CPU was (MODES="direct relay" picks the modes). Targets (relay, every rack): the origin sends the release once per relay
# (<= 1.02 x release x racks), the fleet stages within 1.3 x one rack's own time, p99 <= 1.5 x p50.
set -euo pipefail
airlock=$1 work=$2
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RACKS=${RACKS:-8} PER_RACK=${PER_RACK:-8} RELEASE_MIB=${RELEASE_MIB:-16}
UPLINK=${UPLINK:-40mbit} ORIGIN=${ORIGIN:-320mbit} NODE_LINK=${NODE_LINK:-10mbit}
[[ $(id -u) -eq 0 ]] || { echo "bench-racks: network namespaces need root" >&2; exit 1; }
command -v nginx >/dev/null && command -v tc >/dev/null ||
  { echo "bench-racks: nginx and tc are needed (scripts/test.sh installs nginx-light and iproute2)" >&2; exit 1; }
. "$repo/scripts/bench-lib.sh"
m="$work/racks-bench"; rm -rf "$m"; mkdir -p "$m"
repo_pid="" pids=()
spaces() { ip netns list | awk '/^al-/ {print $1}'; }
cleanup() {
  for p in $repo_pid "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for ns in $(spaces); do ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true; ip netns del "$ns"; done
  for l in $(ip -o link show | awk -F': ' '/al-/ {print $2}' | cut -d@ -f1); do ip link del "$l" 2>/dev/null || true; done
}
trap cleanup EXIT
cleanup

"$airlock" keygen --out-dir "$m/keys" --name bench >/dev/null 2>&1
bench_release "$airlock" "$m" "$RELEASE_MIB" "$m/keys/bench"
"$airlock" install "$m/b1.airlock" --role mirror --trust "$m/keys/bench.pub" --root "$m/origin" >/dev/null
release_bytes=$(find "$m/origin/public/current/debs" -name '*.deb' -printf '%s\n' | awk '{s += $1} END {print s}')

# The network: a core bridge; the origin on it behind ORIGIN; each rack a bridge behind an
# uplink limited to UPLINK toward the rack; nodes and the rack's relay on the rack's bridge.
ip link add al-core type bridge && ip link set al-core up
attach() { # attach NS BRIDGE ADDR [RATE]: a namespace with one veth on BRIDGE (RATE toward it)
  local ns=$1 br=$2 addr=$3 rate=${4:-} v="al-v$RANDOM$RANDOM"
  ip netns add "$ns"
  ip link add "${v:0:14}a" type veth peer name "${v:0:14}b"
  ip link set "${v:0:14}a" netns "$ns"
  ip link set "${v:0:14}b" master "$br" up
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "${v:0:14}a" name eth0
  ip -n "$ns" addr add "$addr/16" dev eth0
  ip -n "$ns" link set eth0 up
  [[ -z $rate ]] || tc qdisc add dev "${v:0:14}b" root tbf rate "$rate" burst 64kb latency 100ms
}
attach al-origin al-core 10.78.0.1
ip netns exec al-origin tc qdisc add dev eth0 root tbf rate "$ORIGIN" burst 256kb latency 100ms
for r in $(seq "$RACKS"); do
  ip link add "al-r$r" type bridge && ip link set "al-r$r" up
  ip link add "al-u$r" type veth peer name "al-d$r"
  ip link set "al-u$r" master al-core up && ip link set "al-d$r" master "al-r$r" up
  tc qdisc add dev "al-u$r" root tbf rate "$UPLINK" burst 256kb latency 100ms
  attach "al-relay$r" "al-r$r" "10.78.$r.250"
  for i in $(seq "$PER_RACK"); do attach "al-n$r-$i" "al-r$r" "10.78.$r.$i" "$NODE_LINK"; done
done

serve() { # serve NS ADDR ROOT LOG: nginx in NS on ADDR:80
  local ns=$1 addr=$2 root=$3 log=$4 d; d=$(mktemp -d "$m/nginx.XXXX")
  cat > "$d/nginx.conf" <<CONF
user root;
daemon off;
worker_processes 2;
pid $d/nginx.pid;
error_log $d/error.log;
events { worker_connections 4096; }
http {
    log_format bytes '\$request_uri \$status \$body_bytes_sent';
    access_log $log bytes;
    client_body_temp_path $d/body; proxy_temp_path $d/proxy; fastcgi_temp_path $d/fastcgi;
    uwsgi_temp_path $d/uwsgi; scgi_temp_path $d/scgi;
    default_type application/octet-stream;
    sendfile on;
    server { listen $addr:80; root $root; }
}
CONF
  ip netns exec "$ns" nginx -e "$d/error.log" -c "$d/nginx.conf" &
  pids+=($!)
  for _ in $(seq 100); do ip netns exec "$ns" curl -sf -o /dev/null "http://$addr/releases.json" && return; sleep 0.1; done
  echo "nginx in $ns did not start: $(cat "$d/error.log")" >&2; exit 1
}
serve al-origin 10.78.0.1 "$m/origin/public" "$m/origin.log"

stage() { # stage NS URL ROOT: one node stages the release; prints its seconds
  local start; start=$(date +%s.%N)
  ip netns exec "$1" "$airlock" apply "$2" --download-only --trust "$m/keys/bench.pub" --root "$3" >/dev/null 2>"$3.err" ||
    { echo "stage failed in $1: $(tail -n 3 "$3.err")" >&2; return 1; }
  python3 -c "import time; print(time.time() - $start)"
}
relay_in() { # relay_in RACK: the rack's relay takes the release, then serves it
  ip netns exec "al-relay$1" "$airlock" install http://10.78.0.1/ --role relay --trust "$m/keys/bench.pub" \
    --root "$m/relay$1" >/dev/null 2>"$m/relay$1.err" || { echo "relay $1 failed: $(tail -n 3 "$m/relay$1.err")" >&2; return 1; }
  [[ -e $m/relay$1.log ]] || serve "al-relay$1" "10.78.$1.250" "$m/relay$1/public" "$m/relay$1.log"
}
rack() { # rack MODE R: every node of rack R stages (after its relay, in relay mode); seconds per node
  local mode=$1 r=$2 url=http://10.78.0.1/ i staging=()
  if [[ $mode == relay ]]; then relay_in "$r"; url="http://10.78.$r.250/"; fi
  for i in $(seq "$PER_RACK"); do
    stage "al-n$r-$i" "$url" "$m/nodes/$mode-$r-$i" > "$m/t.$mode.$r.$i" &
    staging+=($!)
  done
  # Only the nodes: the relay's nginx, started here, runs on.
  for p in "${staging[@]}"; do wait "$p"; done
}
measure() { # measure MODE RACKS...: prints wall, p50, p99 and origin bytes / release
  local mode=$1 r racks=(); shift
  for r in $(seq "$RACKS"); do ip netns pids "al-relay$r" | xargs -r kill 2>/dev/null || true; done
  sleep 0.5
  : > "$m/origin.log"; rm -rf "$m/nodes" "$m"/relay[0-9]* "$m"/t.*; mkdir -p "$m/nodes"
  local start cpu0 cpu1; start=$(date +%s.%N); cpu0=$(head -1 /proc/stat)
  for r in "$@"; do rack "$mode" "$r" & racks+=($!); done
  for p in "${racks[@]}"; do wait "$p"; done
  local wall; wall=$(python3 -c "import time; print(time.time() - $start)")
  cpu1=$(head -1 /proc/stat)
  # The machine's CPU busy over the measure (softirq included: the bridges and tc are the kernel's).
  local busy; busy=$(python3 -c "
a, b = [list(map(int, l.split()[1:])) for l in ('$cpu0', '$cpu1')]
d = [y - x for x, y in zip(a, b)]
print(f'{100 * (1 - (d[3] + d[4]) / sum(d)):.0f}')")
  local sent; sent=$(awk '{s += $3} END {print s + 0}' "$m/origin.log")
  cat "$m"/t.* | python3 -c "
import statistics, sys
t = sorted(float(x) for x in sys.stdin.read().split())
p99 = t[min(len(t) - 1, round(0.99 * (len(t) - 1)))]
print(f'{$wall:.1f} {statistics.median(t):.1f} {p99:.1f} {$sent / $release_bytes:.3f} {len(t)} {$busy}')"
}

echo "racks: $RACKS x $PER_RACK nodes at $NODE_LINK, uplinks $UPLINK, origin $ORIGIN, a release of $RELEASE_MIB MiB of packages, $(nproc) cores"
printf '  %-7s %-10s %7s %7s %7s %16s\n' mode racks wall p50 p99 "origin sent / release, CPU busy"
declare -A one
for mode in ${MODES:-direct relay}; do
  read -r w p50 p99 x n busy < <(measure "$mode" 1); one[$mode]=$w
  printf '  %-7s %-10s %6.1fs %6.1fs %6.1fs %10.2f x (%s nodes) %3s%%\n' "$mode" "one" "$w" "$p50" "$p99" "$x" "$n" "$busy"
  read -r w p50 p99 x n busy < <(measure "$mode" $(seq "$RACKS"))
  verdict=""
  if [[ $mode == relay ]]; then
    verdict=$(python3 -c "
w, one, p50, p99, x, racks = $w, ${one[relay]}, $p50, $p99, $x, $RACKS
print('  origin <= 1.02 x relays: ' + ('ok' if x <= 1.02 * racks else 'MISSED')
      + '; fleet <= 1.3 x one rack: ' + ('ok' if w <= 1.3 * one else 'MISSED')
      + '; p99 <= 1.5 x p50: ' + ('ok' if p99 <= 1.5 * p50 else 'MISSED'))")
  fi
  printf '  %-7s %-10s %6.1fs %6.1fs %6.1fs %10.2f x (%s nodes) %3s%%%s\n' "$mode" "all $RACKS" "$w" "$p50" "$p99" "$x" "$n" "$busy" "$verdict"
done
