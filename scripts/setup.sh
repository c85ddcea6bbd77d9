#!/usr/bin/env bash
# Create .venv in the repository and install the course into it: torch==2.13.0 first (so pip never
# pulls a CUDA build), then uv and with it the package with its book and dev extras under the
# tested constraints.
# Idempotent: a second run only checks that everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "error: Python 3.10 or newer is needed (found: $("$PYTHON" --version 2>&1)). Set PYTHON=/path/to/python3.11 and retry." >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv with $("$PYTHON" --version)"
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip --disable-pip-version-check)
stamp=.venv/.course-installed
want="$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "==> .venv is up to date"
  exit 0
fi
echo "==> installing torch==2.13.0"
"${PIP[@]}" install -q "torch==2.13.0"
# The rest is installed by uv (from the package registry, as pip would, and at the same versions:
# constraints.txt), which downloads, unpacks and compiles to bytecode on every core: 30 s for a
# fresh install on 2 cores where pip took 131 s (2026-12-03). torch stays with pip, which takes
# the machine's own torch file where its configuration names one (uv reads no pip configuration).
echo "==> installing uv, then course-lib[book,dev] with constraints.txt"
"${PIP[@]}" install -q -c constraints.txt uv
.venv/bin/uv pip install -q --python .venv/bin/python --compile-bytecode -c constraints.txt -e ".[book,dev]"
.venv/bin/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (course)" >/dev/null
echo "$want" > "$stamp"
