#!/usr/bin/env python3
"""peak_rss.py CMD...: run CMD (its output passes through) and print its peak resident set size
in KiB as the last line on stderr, `peak_rss_kib N`, from the child's own rusage (no cgroups);
exit with CMD's status."""
import resource, subprocess, sys

result = subprocess.run(sys.argv[1:])
print(f"peak_rss_kib {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}", file=sys.stderr)
sys.exit(result.returncode)
