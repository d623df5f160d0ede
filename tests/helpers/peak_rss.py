#!/usr/bin/env python3
"""peak_rss.py CMD...: run CMD (its output passes through) and print, on stderr, the CPU seconds
(user + system) it and every process it waited for used, `cpu_seconds S`, then its peak resident
set size in KiB as the last line, `peak_rss_kib N`, from the child's own rusage (no cgroups);
exit with CMD's status."""
import resource, subprocess, sys

result = subprocess.run(sys.argv[1:])
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"cpu_seconds {usage.ru_utime + usage.ru_stime:.3f}", file=sys.stderr)
print(f"peak_rss_kib {usage.ru_maxrss}", file=sys.stderr)
sys.exit(result.returncode)
