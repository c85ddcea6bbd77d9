"""Execute every notebook in a fresh kernel and print wall time, the kernel's peak memory and
its slowest cells (so that a slowdown is seen where it happens).

Goals (issue 41): each notebook in at most 30 s on a 2-core CPU with the models cached, all
of them in at most 4 minutes, each kernel's peak resident memory at most 1.5 GB. Run:
``.venv/bin/python benchmarks/notebooks.py``.
Each notebook runs in a child process of its own, so the peak resident memory (``getrusage`` of the
children) belongs to that notebook's kernel alone. Nothing is written back to the notebooks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from course_lib.base.tables import Table

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools")
sys.path.insert(0, TOOLS)
from notebooks import notebook_paths  # noqa: E402  (tools/notebooks.py)

GOAL_SECONDS = 30
GOAL_TOTAL_SECONDS = 240
GOAL_PEAK_MIB = 1.5e9 / 2**20

CHILD = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from notebooks import execute
r = execute(Path(sys.argv[1]))
print(json.dumps({"seconds": r.seconds, "peak_rss_mib": r.peak_rss_mib,
                  "slowest": r.slowest}))
"""


def main() -> int:
    """Run the benchmark and print its table; exit 1 if a notebook misses the goal or fails."""
    rows, worst, total = [], 0, 0.0
    for path in notebook_paths():
        out = subprocess.run([sys.executable, "-c", CHILD, str(path), TOOLS], capture_output=True, text=True,
                             env=dict(os.environ, PYTHONHASHSEED="0"))
        if out.returncode != 0:
            rows.append([path.name, "failed", "-", out.stderr.strip().splitlines()[-1][:60]])
            worst = max(worst, 2)
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        ok = r["seconds"] <= GOAL_SECONDS and r["peak_rss_mib"] <= GOAL_PEAK_MIB
        worst = max(worst, 0 if ok else 1)
        total += r["seconds"]
        cells = "; ".join(f"cell {i} {t:.1f} s ({line[:28]})" for t, i, line in r["slowest"])
        rows.append([path.name, f"{r['seconds']:.1f}", f"{r['peak_rss_mib']:.0f}",
                     "yes" if ok else "NO", cells])
    rows.append(["all", f"{total:.1f}", "-", "yes" if total <= GOAL_TOTAL_SECONDS else "NO", ""])
    worst = max(worst, 0 if total <= GOAL_TOTAL_SECONDS else 1)
    cores = os.cpu_count()
    print(Table(["notebook", "wall time (s)", "kernel peak RSS (MiB)",
                 f"<= {GOAL_SECONDS} s and {GOAL_PEAK_MIB:.0f} MiB", "slowest cells"], rows,
                title=f"Executing every notebook on {cores} CPU core(s); all of them in "
                      f"<= {GOAL_TOTAL_SECONDS} s"))
    return 1 if worst else 0


if __name__ == "__main__":
    sys.exit(main())
