#!/bin/sh
# Slurm's HealthCheckProgram for a node airlock manages (docs/fleet.md, "Slurm"):
#   HealthCheckProgram=/usr/local/sbin/airlock-healthcheck
#   HealthCheckInterval=300
#   HealthCheckNodeState=ANY,CYCLE
# slurmd runs it as root; Slurm ignores its exit status, so a red node is drained here, with
# airlock's one line as the reason. A node airlock already holds (its reason starts with
# `airlock`) or an admin drained is left as it is. AIRLOCK_ROOT (default /var/lib/airlock) and
# AIRLOCK (default airlock) may be set in /etc/default/airlock.
[ -r /etc/default/airlock ] && . /etc/default/airlock
root=${AIRLOCK_ROOT:-/var/lib/airlock}
node=${SLURMD_NODENAME:-$(hostname -s)}
line=$("${AIRLOCK:-airlock}" validate --root "$root" --nhc 2>/dev/null)
status=$?
[ -n "$line" ] || line="airlock: red, not judged: airlock validate printed nothing (exit $status)"
if [ "$status" -ne 0 ]; then
  state=$(sinfo --noheader --Node --nodes "$node" --format '%T|%E' | head -n 1)
  case $state in
    drain*\|* | down*\|* | fail*\|* | maint*\|*) exit 0 ;;  # already out of service: whoever did it keeps it
  esac
  scontrol update NodeName="$node" State=DRAIN Reason="$line"
fi
exit 0
