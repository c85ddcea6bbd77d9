#!/usr/bin/env bash
# Build the course from a fresh clone: set up .venv, execute every notebook, build the book offline
# into book/_build/html (warnings are errors). Needs Python 3.10+, npm, and the package registries.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each phase ends with a line "==> phase NAME: N s, CPU M s" (benchmarks/fresh_build.py reads
# them): M is the processor time its commands took, all cores together (bash's `times`).
started=$SECONDS
times_file=$(mktemp)
trap 'rm -f "$times_file"' EXIT
# `times` runs in this shell (a $(...) subshell would see none of its children's time).
cpu_seconds() { awk -F'[ms ]+' 'NR == 2 { print int($1 * 60 + $2 + $3 * 60 + $4) }' "$times_file"; }
times > "$times_file"; cpu_started=$(cpu_seconds)
took() {
  times > "$times_file"
  local now; now=$(cpu_seconds)
  echo "==> phase $1: $((SECONDS - started)) s, CPU $((now - cpu_started)) s"
  started=$SECONDS; cpu_started=$now
}

bash scripts/setup.sh
took install
export PYTHONHASHSEED=0

echo "==> fetching the book's view-time JavaScript from the npm registry"
if ! command -v npm >/dev/null; then
  echo "error: npm is needed to fetch MathJax for the offline book; install Node.js (e.g. apt-get install npm) and retry." >&2
  exit 1
fi
(cd book && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
# book/_vendor/vendor/ becomes _static/vendor/ in the built book (html_static_path in book/_config.yml).
vendor=book/_vendor/vendor
rm -rf book/_vendor && mkdir -p "$vendor/mathjax"
cp -r book/node_modules/mathjax/es5/. "$vendor/mathjax/"
took npm

echo "==> checking that every notebook's badges and setup cell match course_lib/_about.py"
.venv/bin/python tools/notebooks.py --check

echo "==> training (or loading from the cache) every model the notebooks use"
.venv/bin/python -m course_lib prepare
took prepare

echo "==> executing every notebook and building the book"
rm -rf book/_build/html/reports  # tracebacks of an earlier build
if ! .venv/bin/jupyter-book build book --warningiserror --keep-going --all; then
  # jupyter-book names a failed notebook's traceback file but does not print it: show it here.
  for log in $(find book/_build/html/reports -name '*.err.log' 2>/dev/null); do
    echo "==> $log (the failed cell and its traceback):"
    tail -n 60 "$log"
  done
  exit 1
fi
# scripts/test.sh checks these executed copies as nbval would rather than executing every notebook
# again, for as long as no notebook, library file or package changes (tools/executed.py).
.venv/bin/python tools/executed.py --stamp
took book
echo "==> book built: book/_build/html/index.html"
