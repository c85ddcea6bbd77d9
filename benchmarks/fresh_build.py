"""The README's two commands on a fresh clone, timed phase by phase: where a slowdown happens.

Clones this repository's HEAD into a temporary folder, points ``COURSE_LIB_CACHE`` at an empty
folder (as ``.ci/run`` does: nothing trained before helps), runs ``bash scripts/build.sh`` and then
``bash scripts/test.sh``, and prints three tables: the build's phases (from its ``==> phase`` lines:
install, npm, prepare, book, the last split into executing the notebooks and Sphinx's own work;
wall and processor seconds, and the cores they kept busy on
average by the processor time the commands waited for; for each of the two commands also the
machine's own busy time, which counts the kernels and ranks nobody waited for: compare the two
before running things side by side), each notebook's execution inside the book build (myst-nb's own
"Executed notebook in" lines), and the tests by file (pytest's JUnit XML, summed per file),
slowest first. Goals (issue 41): build at most 10 minutes, tests at most 10, both at most 20, on a
quiet 2-core machine. Exit status 1 when a command fails or a goal is missed.

    .venv/bin/python benchmarks/fresh_build.py            # about half an hour on 2 cores
    .venv/bin/python benchmarks/fresh_build.py --keep     # keep the clone and its logs
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from course_lib.base.tables import Table

ROOT = Path(__file__).resolve().parent.parent
GOALS = {"build": 600, "tests": 600, "both": 1200}  # seconds
PHASE = re.compile(r"^==> phase (\w+): (\d+) s, CPU (\d+) s$", re.MULTILINE)
EXECUTED = re.compile(r"notebooks/(\S+)\.ipynb: Executed notebook in ([\d.]+) seconds")


def cpu_seconds() -> float:
    """Processor seconds (user and system) of this process's finished children so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def machine_seconds() -> float | None:
    """Processor seconds the whole machine has been busy (``/proc/stat``: user, nice, system,
    irq, softirq), None where there is no ``/proc/stat``.

    The children's processor seconds miss what a child starts and does not wait for (a kernel,
    a rank, a browser's helper left to another parent): on a quiet machine, the machine's busy
    time is what the command cost.
    """
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def busy(cpu: float, wall: float) -> str:
    """The cores kept busy on average: processor seconds over wall seconds."""
    return f"{cpu / wall:.2f}" if wall else "-"


def run(command: list[str], cwd: Path, env: dict[str, str], log: Path) -> tuple[int, float, str]:
    """Run ``command``, its output to ``log`` and (line by line) to this terminal: status, s, text."""
    start = time.perf_counter()
    with open(log, "w") as out:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        for line in process.stdout:
            out.write(line)
            if line.startswith("==>") or "Executed notebook" in line:
                print("   ", line.rstrip(), flush=True)
        status = process.wait()
    return status, time.perf_counter() - start, log.read_text()


def tests_by_file(junit: Path) -> list[tuple[str, float, int]]:
    """(file, seconds, tests) from pytest's JUnit XML, slowest first."""
    seconds: dict[str, float] = collections.defaultdict(float)
    counts: dict[str, int] = collections.Counter()
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("file") or case.get("classname", "?").replace(".", "/") + ".py"
        seconds[name] += float(case.get("time", 0))
        counts[name] += 1
    return sorted(((f, s, counts[f]) for f, s in seconds.items()), key=lambda r: -r[1])


def build_phases(log: str) -> tuple[list[list], int, list[tuple[str, float]]]:
    """The build's phases as table rows (the book's split into executing the notebooks and
    Sphinx's own work), its processor seconds, and each notebook's seconds, slowest first."""
    phases = [[name, int(s), int(c), busy(int(c), int(s)), "-"]
              for name, s, c in PHASE.findall(log)]
    cpu = sum(row[2] for row in phases)
    notebooks = sorted(((n, float(s)) for n, s in EXECUTED.findall(log)), key=lambda r: -r[1])
    book = next((i for i, row in enumerate(phases) if row[0] == "book"), None)
    if book is not None and notebooks:
        executing = round(sum(s for _, s in notebooks))
        phases[book + 1:book + 1] = [["  executing the notebooks", executing, "-", "-", "-"],
                                     ["  the rest (Sphinx)", phases[book][1] - executing, "-",
                                      "-", "-"]]
    return phases, cpu, notebooks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--keep", action="store_true", help="keep the clone, cache and logs")
    parser.add_argument("--top", type=int, default=25, help="test files to list (default 25)")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="course-fresh-build-"))
    clone, cache = work / "clone", work / "cache"
    cache.mkdir()
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("COURSE_")}
    env.update(COURSE_LIB_CACHE=str(cache), PYTHONHASHSEED="0")
    print(f"fresh clone of {ROOT.name} at {clone}, empty model cache {cache}", flush=True)
    try:
        machine = [machine_seconds()]
        built, build_s, build_log = run(["bash", "scripts/build.sh"], clone, env,
                                        work / "build.log")
        machine.append(machine_seconds())
        junit = work / "tests.xml"
        cpu_before = cpu_seconds()
        tested, test_s, _ = (run(["bash", "scripts/test.sh", f"--junitxml={junit}", "-q"],
                                 clone, env, work / "test.log") if built == 0 else (1, 0.0, ""))
        test_cpu = cpu_seconds() - cpu_before
        machine.append(machine_seconds())
        whole = ([busy(b - a, s) for a, b, s in zip(machine, machine[1:], (build_s, test_s))]
                 if None not in machine else ["-", "-"])
        phases, build_cpu, notebooks = build_phases(build_log)
        print(Table(["phase", "seconds", "CPU seconds", "cores busy",
                     "machine's cores busy"],
                    phases + [["build.sh in all", round(build_s), build_cpu,
                               busy(build_cpu, build_s), whole[0]],
                              ["test.sh", round(test_s), round(test_cpu),
                               busy(test_cpu, test_s), whole[1]]],
                    title=f"scripts/build.sh and test.sh on a fresh clone, empty model cache, "
                          f"{os.cpu_count()} cores"))
        print(Table(["notebook", "seconds"], [[n, f"{s:.1f}"] for n, s in notebooks]
                    + [["all notebooks", f"{sum(s for _, s in notebooks):.1f}"]],
                    title="Each notebook executed by the book build (myst-nb's own timing)"))
        if junit.exists():
            files = tests_by_file(junit)
            rows = [[f, f"{s:.1f}", n] for f, s, n in files[:args.top]]
            rows.append([f"all {len(files)} files", f"{sum(s for _, s, _ in files):.1f}",
                         sum(n for _, _, n in files)])
            print(Table(["test file", "seconds", "tests"], rows,
                        title="scripts/test.sh, by file, slowest first (pytest's JUnit XML)"))
        totals = {"build": build_s, "tests": test_s, "both": build_s + test_s}
        print(Table(["command", "seconds", "goal", "met"],
                    [[k, round(v), GOALS[k], "yes" if v <= GOALS[k] else "no"]
                     for k, v in totals.items()],
                    title=f"build {'passed' if built == 0 else 'FAILED'}, tests "
                          f"{'passed' if tested == 0 else 'FAILED'}"))
        missed = any(v > GOALS[k] for k, v in totals.items())
        return 1 if built or tested or missed else 0
    finally:
        if args.keep:
            print(f"kept: {work} (build.log, test.log, tests.xml, the clone)")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
