#!/usr/bin/env bash
# Run every test: unit and property tests, nbval over every notebook, and the browser tests
# (Playwright driving Debian's chromium in JupyterLab and on the built book).
# Sets up .venv and builds the book first when they are missing. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
if [ ! -f book/_build/html/index.html ]; then
  echo "==> the book is not built yet: building it first"
  bash scripts/build.sh
fi
export PYTHONHASHSEED=0
exec .venv/bin/python -m pytest "$@"
