"""Training steps of the course model with glibc's allocator as ``import course_lib`` sets it,
and with glibc's defaults (``COURSE_LIB_MALLOC=0``): time, system time, peak memory, the losses.

Run ``.venv/bin/python benchmarks/allocator.py`` (about three minutes on 2 CPU cores). Each run is
a fresh Python that builds the course model's GPT-2 (4 layers, hidden 128, a 4,096-token
vocabulary) and trains it ``--steps`` steps of 16 x 128 tokens on this machine's threads; the two
settings take turns, ``--repeats`` times each (default 3). It prints each setting's median and
range of the training's wall time, the process's system time (the kernel mapping and zeroing
pages) and its peak resident memory, and the ratio of the medians. Exit status 1 when the two
settings' losses differ in any bit (the allocator must change nothing computed) or when the
course's setting is not faster in every pair of runs (course_lib/base/allocator.py says why it is).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from course_lib.base.tables import Table  # noqa: E402

CHILD = """
import json, resource, sys, time, dataclasses
import course_lib
from course_lib.text import course_model, data, models, training
tok = data.course_tokenizer()
model = models.build_model(course_model.course_model_config(tok), seed=0)
recipe = dataclasses.replace(course_model.COURSE_RECIPE, steps=int(sys.argv[1]))
start = time.perf_counter()
losses = training.train(model, "gpt2", tok, recipe, progress=False)
seconds = time.perf_counter() - start
used = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": seconds, "system": used.ru_stime, "peak_mib": used.ru_maxrss / 1024,
                  "losses": [float(x).hex() for x in losses]}))
"""
SETTINGS = {"course (kept)": "1", "glibc's defaults": "0"}


def run(steps: int, malloc: str) -> dict:
    """One fresh Python training ``steps`` steps with ``COURSE_LIB_MALLOC=malloc``: its record."""
    env = dict(os.environ, COURSE_LIB_MALLOC=malloc, PYTHONHASHSEED="0")
    out = subprocess.run([sys.executable, "-c", CHILD, str(steps)], capture_output=True, text=True,
                         env=env, timeout=900, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def spread(values: list[float], fmt: str) -> str:
    """The median and the range of ``values``."""
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def main() -> int:
    """Run both settings in turns; print the table; exit 1 on a changed loss or a lost pair."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {name: [] for name in SETTINGS}
    for i in range(args.repeats):
        for name, value in SETTINGS.items():
            runs[name].append(run(args.steps, value))
            print(f"run {i + 1}/{args.repeats}, {name}: {runs[name][-1]['seconds']:.1f} s", flush=True)
    rows = [[name, spread([r["seconds"] for r in rs], ".1f"), spread([r["system"] for r in rs], ".1f"),
             spread([r["peak_mib"] for r in rs], ".0f")] for name, rs in runs.items()]
    kept, default = (runs[name] for name in SETTINGS)
    ratio = statistics.median(r["seconds"] for r in kept) / statistics.median(r["seconds"] for r in default)
    print(Table(["allocator", "training (s)", "system time (s)", "peak RSS (MiB)"], rows,
                title=f"{args.steps} steps of the course model, {args.repeats} runs each "
                      "(median and range)"))
    print(f"course / defaults, median training time: {ratio:.2f}")
    same = all(r["losses"] == kept[0]["losses"] for r in kept + default)
    faster = all(k["seconds"] < d["seconds"] for k, d in zip(kept, default))
    print(f"the same losses bit for bit in every run: {'yes' if same else 'NO'}")
    print(f"the course's setting faster in every pair of runs: {'yes' if faster else 'NO'}")
    return 0 if same and faster else 1


if __name__ == "__main__":
    sys.exit(main())
