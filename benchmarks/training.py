"""Training throughput of the three tiny models, and the time and perplexity of the course model.

Run ``.venv/bin/python benchmarks/training.py`` (about 4 minutes on 2 CPU cores). It

* trains each tiny model of chapter 1 (BERT, GPT-2, T5; the chapter's shapes and recipe) for
  ``--steps`` steps without the cache and reports training tokens per second (tokens read by the
  encoder or decoder input: steps x batch x window);
* builds the course model from scratch with ``python -m course_lib train-course-model`` into a
  temporary directory, timing the whole command (goal: at most 5 minutes on 2 CPU cores), and
  reports its validation and test perplexity (window 128, stride 64).

``--skip-build`` reports the course model in the cache instead (building it if it is missing),
with the build time recorded when it was trained. Timings are noisy on a shared machine: the
figures are what this machine did at this moment, with torch's default thread count.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from course_lib.base.tables import Table  # noqa: E402
from course_lib.text import course_model, data, models, training  # noqa: E402

GOAL_SECONDS = 300


def throughput(steps: int) -> list[list[str]]:
    """Train each tiny model for ``steps`` steps (no cache) and return its table rows."""
    tokenizer = data.course_tokenizer()
    next(training.training_batches("gpt2", tokenizer, training.Recipe(steps=1)))  # tokenize the corpus once, untimed
    rows = []
    for kind in models.KINDS:
        recipe = training.Recipe(steps=steps)
        result = training.train_model(kind, recipe=recipe, tokenizer=tokenizer, cache=False, progress=False)
        rows.append([models.ARCHITECTURES[kind].model_class, f"{result.n_params:,}",
                     f"{recipe.batch_size} x {recipe.seq_len}", f"{result.seconds / steps * 1000:.0f}",
                     f"{result.tokens_per_second:,.0f}"])
    return rows


def build(skip: bool) -> tuple[dict, float | None]:
    """Build the course model with its command in a temporary directory; return its record and wall time."""
    if skip:
        course_model.course_model(progress=False)
        info = json.loads((course_model.course_model_dir() / "training.json").read_text(encoding="utf-8"))
        return info, None
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / course_model.COURSE_MODEL_NAME
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "course_lib", "train-course-model", "--output", str(out)],
                       check=True, env=dict(os.environ, PYTHONHASHSEED="0"))
        wall = time.perf_counter() - start
        return json.loads((out / "training.json").read_text(encoding="utf-8")), wall


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its tables; exit 1 if the build misses the 5-minute goal."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60, help="training steps per tiny model (default 60)")
    parser.add_argument("--skip-build", action="store_true", help="report the cached course model instead of building one")
    args = parser.parse_args(argv)

    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), {os.cpu_count()} CPU(s)\n")
    print(Table(["model", "parameters", "batch x window", "ms per step", "training tokens/s"],
                throughput(args.steps), title=f"Tiny models of chapter 1, {args.steps} steps each"))
    print()
    info, wall = build(args.skip_build)
    ref = course_model.course_model_reference()
    rows = [
        ["parameters", f"{info['n_params']:,}", f"{ref.get('n_params', 0):,}"],
        ["training tokens", f"{course_model.COURSE_RECIPE.tokens:,}", f"{course_model.COURSE_RECIPE.tokens:,}"],
        ["training time (s)", f"{info['seconds']:.0f}", f"{ref.get('seconds', float('nan')):.0f}"],
        ["whole command (s)", f"{wall:.0f}" if wall is not None else "not run (--skip-build)", "-"],
        ["training tokens/s", f"{course_model.COURSE_RECIPE.tokens / info['seconds']:,.0f}",
         f"{course_model.COURSE_RECIPE.tokens / ref['seconds']:,.0f}" if ref.get("seconds") else "-"],
        ["validation loss", f"{info['validation_loss']:.4f}", f"{ref.get('validation_loss', float('nan')):.4f}"],
        ["validation perplexity", f"{info['validation_perplexity']:.3f}", f"{ref.get('validation_perplexity', float('nan')):.3f}"],
        ["test perplexity", f"{info['test_perplexity']:.3f}", f"{ref.get('test_perplexity', float('nan')):.3f}"],
    ]
    print(Table(["course model", "this run", "reference build"], rows,
                title=f"{course_model.COURSE_MODEL_NAME}: `{course_model.REBUILD_COMMAND}` (goal: at most {GOAL_SECONDS} s on 2 cores)"))
    return 0 if wall is None or wall <= GOAL_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
