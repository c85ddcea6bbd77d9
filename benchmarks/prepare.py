"""``python -m course_lib prepare`` with its later steps side by side, against all in one process.

Run ``.venv/bin/python benchmarks/prepare.py`` (about 6 minutes on 2 cores with one repeat).
Each run starts from an empty cache that holds only what the steps of ``prepare.FIRST`` make
(the course tokenizer and the course model, copied from this machine's cache, built there
first if missing) and runs ``prepare`` in a new Python: with ``workers=1`` (every step in one
process, on all the cores: what ``prepare`` did before) and with its default (two processes
sharing the cores, where there are two). The settings take turns, ``--repeats`` times. It
prints each run's wall time, the median and range of each setting, and checks that both
leave the same files in the cache, fine-tunes compared by label: the models differ in their
last bits (a matrix product sums in another order on another number of threads), and a
stage of gradual pruning is named by the weights it starts from. Exit status 1 when side by
side is not faster in every pair, or the files differ.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from allocator import spread  # noqa: E402  (benchmarks/allocator.py: median (range))

from course_lib import prepare  # noqa: E402
from course_lib.base import env  # noqa: E402
from course_lib.base.tables import Table  # noqa: E402
from course_lib.text import course_model, data, models  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {"one process": 1, "side by side": None}  # prepare's workers=


def base_cache() -> list[Path]:
    """The folders of this machine's cache that the steps of ``prepare.FIRST`` make."""
    data.course_tokenizer()
    course_model.course_model(progress=False)
    cache = env.cache_dir()
    return [*cache.glob("tokenizer-*"), models.course_model_dir(), cache / "streams"]


def run(setting: str, folders: list[Path]) -> tuple[float, list[str]]:
    """``prepare`` in a new Python on a fresh cache holding ``folders``: (seconds, the
    files it left, each fine-tune by its label)."""
    with tempfile.TemporaryDirectory(prefix="course-prepare-") as cache:
        for folder in folders:
            if folder.is_dir():
                shutil.copytree(folder, Path(cache) / folder.name)
        code = f"from course_lib.prepare import prepare; prepare(workers={SETTINGS[setting]})"
        environ = dict(os.environ, COURSE_LIB_CACHE=cache, PYTHONHASHSEED="0")
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=environ, cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
        # a fine-tune's name ends with a hash of the weights it started from: a stage of
        # gradual pruning starts from the stage before, whose last bits differ
        files = sorted(re.sub(r"-[0-9a-f]{20}\.safetensors$", "", str(p.relative_to(cache)))
                       for p in Path(cache).rglob("*") if p.is_file())
    return seconds, files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=1, help="pairs of runs (default 1)")
    args = parser.parse_args()
    folders = base_cache()
    processes, threads = prepare.side_by_side()
    print(f"side by side here: {processes} processes of {threads} thread(s) each")
    seconds: dict[str, list[float]] = {name: [] for name in SETTINGS}
    files: dict[str, list[str]] = {}
    for repeat in range(args.repeats):
        order = list(SETTINGS) if repeat % 2 == 0 else list(reversed(SETTINGS))
        for name in order:
            took, files[name] = run(name, folders)
            seconds[name].append(took)
            print(f"  run {repeat + 1}, {name}: {took:.1f} s", flush=True)
    print(Table(["setting", "wall s: median (range)"],
                [[name, spread(seconds[name], ".1f")] for name in SETTINGS]))
    alone, beside = seconds["one process"], seconds["side by side"]
    faster = all(b < a for a, b in zip(alone, beside))
    same = files["one process"] == files["side by side"]
    print(f"side by side / one process: {min(beside) / min(alone):.2f} (fastest runs); "
          f"faster in every pair: {faster}; the same files: {same}")
    return 0 if faster and same else 1


if __name__ == "__main__":
    raise SystemExit(main())
