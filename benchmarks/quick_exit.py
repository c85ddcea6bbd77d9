"""How long a process and a notebook's kernel take to end, with ``import course_lib``'s exit
(``course_lib/base/quick_exit.py``) and with Python's own (``COURSE_LIB_QUICK_EXIT=0``).

Run ``.venv/bin/python benchmarks/quick_exit.py`` (about 90 s on 2 CPU cores). Two kinds of
process, the two settings taking turns, ``--repeats`` times each (default 5):

- a fresh Python that imports course_lib, torch and transformers and runs the course model's
  GPT-2 once: the seconds from its last line to its exit, as its parent waits for it;
- a notebook's kernel run by nbclient, as the book build and nbval run a chapter: the seconds
  of its shutdown, after its last cell. The notebook is a small one of three cells (the course
  model's GPT-2 built and run, a plot); ``--notebook notebooks/08_ddp.ipynb`` runs a chapter
  instead, once per setting and repeat.

It prints each setting's median and range. Exit status 1 when the course's exit is not faster
in every pair of runs, or its median over 0.5 s (a chapter's kernel, which also stops the
ranks' warm server, has no such goal).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from allocator import spread  # noqa: E402  (benchmarks/allocator.py: median (range))

from course_lib.base.tables import Table  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GOAL = 0.5  # seconds, the median exit with the course's setting
SETTINGS = {"course (frozen at exit)": "1", "Python's own": "0"}
WORK = """import time, torch, transformers
import course_lib
from course_lib.text import course_model, data, models
model = models.build_model(course_model.course_model_config(data.course_tokenizer()), seed=0)
ids = torch.zeros(1, 128, dtype=torch.long)
with torch.no_grad():
    model(ids, attention_mask=torch.ones_like(ids))"""


def process_exit(setting: str) -> float:
    """Seconds from a fresh Python's last line to its exit, ``COURSE_LIB_QUICK_EXIT=setting``."""
    code = WORK + "\nprint(time.time(), flush=True)"
    env = dict(os.environ, COURSE_LIB_QUICK_EXIT=setting)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             env=env, cwd=ROOT)
    try:
        last = float(child.stdout.readline())
        child.wait(timeout=120)
    finally:
        child.kill()
    if child.returncode:
        raise SystemExit(f"the child failed with exit status {child.returncode}")
    return time.time() - last


def kernel_shutdown(setting: str, notebook: Path | None) -> float:
    """Seconds of an nbclient kernel's shutdown after the notebook's last cell."""
    import nbformat
    from nbclient import NotebookClient

    if notebook is None:
        cells = [WORK, "import matplotlib.pyplot as plt\nplt.plot([1, 2]);", "model.config.n_layer"]
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
        folder = ROOT
    else:
        nb, folder = nbformat.read(notebook, as_version=4), notebook.parent
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(folder)}})
    with client.setup_kernel(env=dict(os.environ, COURSE_LIB_QUICK_EXIT=setting)):
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code":
                client.execute_cell(cell, i)
        start = time.perf_counter()
    return time.perf_counter() - start


def main() -> int:
    """Both settings in turns, both kinds of process; print the table; 1 when a goal is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--notebook", type=Path, default=None,
                        help="a chapter's notebook, run instead of the small one")
    args = parser.parse_args()
    kinds = {"a fresh Python's exit": process_exit,
             "a kernel's shutdown (nbclient)":
                 lambda setting: kernel_shutdown(setting, args.notebook)}
    times = {(kind, name): [] for kind in kinds for name in SETTINGS}
    for i in range(args.repeats):
        for kind, measure in kinds.items():
            for name, setting in SETTINGS.items():
                times[kind, name].append(measure(setting))
        print(f"repeat {i + 1}/{args.repeats} done", flush=True)
    print(Table(["process", *SETTINGS],
                [[kind, *(spread(times[kind, name], ".2f") for name in SETTINGS)]
                 for kind in kinds],
                title=f"Seconds to end, median (range) of {args.repeats} runs each"))
    course, python = SETTINGS
    met = True
    for kind in kinds:
        ours, theirs = times[kind, course], times[kind, python]
        faster = all(a < b for a, b in zip(ours, theirs))
        median = statistics.median(ours)
        # A chapter's kernel also stops its warm server (chapters 8, 9, 11, 12): no goal of 0.5 s.
        goal = GOAL if args.notebook is None or kind == "a fresh Python's exit" else None
        within = goal is None or median <= goal
        print(f"{kind}: the course's exit faster in every pair: {'yes' if faster else 'NO'}; "
              f"median {median:.2f} s"
              + ("" if goal is None else f" against a goal of {goal} s: "
                 f"{'met' if within else 'MISSED'}"))
        met &= faster and within
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
