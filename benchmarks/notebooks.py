"""Execute every notebook in a fresh kernel and print wall time and the kernel's peak memory.

Goal: each notebook in at most 60 s on a 2-core CPU. Run: ``.venv/bin/python benchmarks/notebooks.py``.
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

GOAL_SECONDS = 60

CHILD = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from notebooks import execute
r = execute(Path(sys.argv[1]))
print(json.dumps({"seconds": r.seconds, "peak_rss_mib": r.peak_rss_mib}))
"""


def main() -> int:
    """Run the benchmark and print its table; exit 1 if a notebook misses the goal or fails."""
    rows, worst = [], 0
    for path in notebook_paths():
        out = subprocess.run([sys.executable, "-c", CHILD, str(path), TOOLS], capture_output=True, text=True,
                             env=dict(os.environ, PYTHONHASHSEED="0"))
        if out.returncode != 0:
            rows.append([path.name, "failed", "-", out.stderr.strip().splitlines()[-1][:60]])
            worst = max(worst, 2)
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        ok = r["seconds"] <= GOAL_SECONDS
        worst = max(worst, 0 if ok else 1)
        rows.append([path.name, f"{r['seconds']:.1f}", f"{r['peak_rss_mib']:.0f}", "yes" if ok else "NO"])
    cores = os.cpu_count()
    print(Table(["notebook", "wall time (s)", "kernel peak RSS (MiB)", f"<= {GOAL_SECONDS} s"], rows,
                title=f"Executing every notebook on {cores} CPU core(s)"))
    return 1 if worst else 0


if __name__ == "__main__":
    sys.exit(main())
