#!/usr/bin/env bash
# Run every test: unit and property tests, nbval over every notebook, the browser tests (Playwright
# driving chromium or Chrome in JupyterLab and on the built book; COURSE_BROWSER=/path picks one) and
# the wheel job (tests/test_wheel.py: the course built, installed in a fresh virtual environment, run).
# Sets up .venv and builds the book first when they are missing. Extra arguments go to pytest.
# The notebooks the book build just executed stand for nbval's run while they are fresh (no notebook,
# library file or package changed since: tools/executed.py, tests/test_executed.py), so that no
# notebook is executed twice; COURSE_NBVAL=execute has nbval execute them again anyway.
# The tests run on two workers (pytest-xdist), each taking a whole test file or notebook at a
# time, so that a module's fixtures are built once and a notebook's cells run in order, in the
# order collected (tests/conftest.py puts the minutes-long wheel job first); one test process
# uses about one core (rank launches, browsers and kernels wait on each other), and torch in each
# worker gets its share of the cores (OMP_NUM_THREADS).
# COURSE_TEST_WORKERS=1 runs them in this process, one after another.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
if [ ! -f book/_build/html/index.html ]; then
  echo "==> the book is not built yet: building it first"
  bash scripts/build.sh
fi
export PYTHONHASHSEED=0
# pytest keeps each test file as it rewrote its asserts (tests/__pycache__) and every Python the
# tests start keeps the library's compiled modules, where PYTHONDONTWRITEBYTECODE (set on some
# machines) would have each of them compile everything again: collecting the tests took 20 s a
# worker with it set and 6 s without (2026-12-03).
unset PYTHONDONTWRITEBYTECODE
if [ "${COURSE_NBVAL:-}" != "execute" ] && .venv/bin/python tools/executed.py --fresh; then
  export COURSE_NBVAL=executed  # tests/conftest.py deselects nbval's items
fi
workers=${COURSE_TEST_WORKERS:-2}
parallel=()
if [ "$workers" != 1 ]; then
  parallel=(-n "$workers" --dist loadfile --no-loadscope-reorder)
  # Each worker, and each kernel, rank or Python it starts, computes on its share of the cores:
  # two workers with torch's default of a thread per core keep twice as many threads as cores
  # busy, and torch's threads wait for each other at every parallel region (a chapter's
  # notebook took 3-4 times as long beside another). Set OMP_NUM_THREADS to choose otherwise.
  if [ -z "${OMP_NUM_THREADS:-}" ]; then
    cores=$(.venv/bin/python -c "import os; print(len(os.sched_getaffinity(0)))")
    export OMP_NUM_THREADS=$(( cores / workers > 1 ? cores / workers : 1 ))
  fi
fi
exec .venv/bin/python -m pytest ${parallel[@]+"${parallel[@]}"} "$@"
