"""The training planner in the page: inputs, memory per GPU, verdict, step time, days,
no kernel.

Chapters 2, 9, 10, 11 and 12 show it. :func:`planner` returns a self-contained HTML +
JavaScript view (one ``<div>`` and one inline ``<script>``, no ipywidgets comm, nothing
fetched), as the bit explorer (:mod:`course_lib.numbers.bit_explorer`) does, so it
answers every change in JupyterLab, in Colab and in the static book alike. The script
carries ``planner.js`` (the JavaScript twin of :mod:`course_lib.planner.model`, proven
equal to it by the tests) and every table and text it needs
(:func:`js_tables`), so the page computes exactly what Python
computes. The view shows the inputs (model, hardware, strategy), a stacked bar of memory
per GPU against the card's capacity with the line tensors may not pass, the verdict and
the cheapest change, the step time by part, the bubble, days and GPU-hours, and the
achieved MFU. ``language="nl"`` says it all in Dutch (numbers with a decimal comma); the
boxes read a decimal point, as the command line does. ``focus="memory"`` (chapter 2 and
the Dutch edition) opens it on memory: the step time folds under a line that opens it.

Without JavaScript (a viewer that strips scripts) the view shows Python's one-line
summary.
"""

from __future__ import annotations

import dataclasses
import html
import itertools
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from course_lib.numbers import i18n, memory
from course_lib.parallel import cost_model
from course_lib.planner import inputs, model, presets, recomputation, report, texts
from course_lib.planner.inputs import Plan, Raw

__all__ = ["FOCUSES", "Planner", "js_tables", "planner", "planner_css", "planner_js"]

HERE = Path(__file__).resolve().parent
#: What a view opens on: everything, or memory with the step time folded.
FOCUSES = ("all", "memory")
#: Per-process counter: ids are unique per view and the same on every run.
_ids = itertools.count(1)


@lru_cache(maxsize=None)
def planner_js() -> str:
    """The planner's JavaScript (model and view), as inlined into every view.

    Chapter 2, *The memory wall*.
    """
    return (HERE / "planner.js").read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def planner_css() -> str:
    """The planner's style sheet, scoped to ``.course-plan``.

    Chapter 2, *The memory wall*.
    """
    return (HERE / "planner.css").read_text(encoding="utf-8")


def js_tables() -> dict[str, Any]:
    """Every number and text ``planner.js`` uses, from the tables the Python model uses.

    Chapter 2, *The memory wall*.
    """
    def link(l: cost_model.Link) -> dict[str, Any]:
        return {"name": l.name, "bandwidth": l.bandwidth, "latency": l.latency}

    key_of = presets.KEY_OF_LINK
    return {
        "fields": [dataclasses.asdict(f) for f in inputs.FIELDS],
        "defaults": {f.name: f.default for f in dataclasses.fields(Plan)},
        "choices": {f.name: inputs.choices(f.name)
                    for f in inputs.FIELDS if f.kind in ("choice", "switch")},
        "presets": {key: {"name": p.name, "params": p.params,
                          "layers": p.shape.n_layers, "hidden": p.shape.hidden,
                          "heads": p.shape.n_heads, "vocab": p.shape.vocab,
                          "seq_len": p.seq_len, "global_batch": p.global_batch,
                          "tokens": p.tokens, "kv_heads": p.kv_heads, "mlp": p.mlp,
                          "experts": p.experts, "top_k": p.top_k,
                          "expert_params": p.expert_params}
                    for key, p in presets.PRESETS.items()},
        "gpus": {key: {"name": a.name, "memory": a.memory, "hbm": a.bandwidth,
                       "peak": {name: a.dense[dtype]
                                for name, dtype in presets.PEAK_DTYPE.items()},
                       "own_link": key_of[a.gpu_link or a.host_link],
                       "host_link": key_of[a.host_link]}
                 for key, a in presets.GPUS.items()},
        "links": {key: link(presets.LINKS[name])
                  for key, name in presets.LINK_KEYS.items()},
        "precisions": {name: dataclasses.asdict(p)
                       for name, p in memory.PRECISIONS.items()},
        "optimizers": {name: dataclasses.asdict(o)
                       for name, o in memory.OPTIMIZERS.items()},
        "constants": {
            "cuda_context": memory.CUDA_CONTEXT_BYTES,
            "margin": memory.ALLOCATOR_MARGIN, "bucket": cost_model.DDP_BUCKET_BYTES,
            "max_gpus": inputs.MAX_GPUS,
            "custom_global_batch": inputs.CUSTOM_GLOBAL_BATCH,
            "tokens_per_param": inputs.TOKENS_PER_PARAM,
            "backward_share": model.BACKWARD_SHARE,
            "custom_gpu_links": list(presets.CUSTOM_GPU_LINKS),
            "seconds_per_day": model.SECONDS_PER_DAY, "hbm_passes": model.HBM_PASSES,
            "reduce_bytes": model.REDUCE_BYTES,
            "collective_passes": recomputation.COLLECTIVE_PASSES,
            # the gradient buckets chapter 2's estimator adds on more than one GPU
            "bucket_temporaries": memory.training_memory(
                1, batch=1, seq_len=1, gpus=2, shape=memory.ModelShape(1, 1, 1, 1, 0)
            ).temporaries,
        },
        "texts": {language: texts.texts(language) for language in i18n.LANGUAGES},
    }


def _script_json(value: object) -> str:
    """JSON to write inside <script>: '<', '>' and '&' escaped, so no text can close the
    tag."""
    out = json.dumps(value, ensure_ascii=True, allow_nan=False)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        out = out.replace(char, escape)
    return out


def _given(spec: Plan) -> dict[str, Any]:
    """The inputs that differ from the defaults, as JSON-safe values (text, numbers,
    bools)."""
    defaults = Plan()
    out = {}
    for field in dataclasses.fields(Plan):
        value = getattr(spec, field.name)
        if value != getattr(defaults, field.name) and value is not None:
            plain = isinstance(value, (str, bool, int, float))
            out[field.name] = value if plain else str(value)
    return out


class Planner:
    """The planner as a live view; Python plans its starting inputs (a bad one is a
    ValueError).

    Chapter 2, *The memory wall*.
    """

    def __init__(self, spec: Plan | None = None, language: str = "en",
                 focus: str = "all", **inputs: Raw) -> None:
        self.language = i18n.check_language(language)
        if focus not in FOCUSES:
            raise ValueError(f"focus must be one of {', '.join(FOCUSES)}, got {focus!r}")
        self.focus = focus
        self.spec = dataclasses.replace(spec or Plan(), **inputs)
        self.result = model.plan(self.spec, self.language)

    def summary(self) -> str:
        """The verdict, the cheapest change if any, and the run, in one line."""
        lines = report.sentences(self.result)
        keep = [lines[0]] + ([lines[1]] if not self.result.fits else []) + [lines[-2]]
        return "; ".join(keep)

    def __repr__(self) -> str:
        return f"Planner({self.result.setup.name}): {self.summary()}"

    def _repr_html_(self) -> str:
        element_id = f"course-plan-{next(_ids)}"
        config = {"inputs": _given(self.spec), "language": self.language,
                  "focus": self.focus,
                  "tables": js_tables()}
        static = html.escape(texts.text("plan_fallback", self.language,
                                        summary=self.summary()))
        start = (
            "(function () {\n"
            f"  var id = {json.dumps(element_id)}, cfg = {_script_json(config)};\n"
            "  var script = document.currentScript;\n"
            "  function start(tries) {\n"
            "    var el = script && script.previousElementSibling;\n"
            "    if (!el || el.id !== id) el = document.getElementById(id);\n"
            "    if (el) { window.coursePlanner.mount(el, cfg); return; }\n"
            "    if (tries < 200) setTimeout(function () { start(tries + 1); }, 50);\n"
            "  }\n"
            "  start(0);\n"
            "})();\n"
        )
        return (
            f'<div class="course-plan tex2jax_ignore mathjax_ignore" id="{element_id}">'
            f"<style>{planner_css()}</style>"
            f'<div class="course-plan-static">{static}</div></div>'
            f"<script>\n{planner_js()}\n{start}</script>"
        )


def planner(spec: Plan | None = None, language: str = "en", focus: str = "all",
            **inputs: Raw) -> Planner:
    """An interactive training planner, starting from ``spec`` and ``inputs`` (see
    :class:`Plan`).

    ``planner(model="llama3-405b", nodes=2048, tp=8, pp=16, zero=1,
    checkpointing=True)``; ``language="nl"`` shows it in Dutch, ``focus="memory"``
    opens it on memory (see :data:`FOCUSES`).

    Chapter 2, *The memory wall*.
    """
    return Planner(spec, language, focus, **inputs)
