"""The course model of Part II: a 1.3M-parameter GPT-2 trained on the course corpus, with its card.

Chapter 1 ("Pretraining objectives") introduces it and its model card; every lab of Part II
quantizes, prunes or compresses it. ``python -m course_lib train-course-model`` builds it;
:func:`course_model` builds it on first use and loads the cached copy afterwards, through
:func:`course_lib.text.models.load_model`, like any hub model.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from course_lib.text import data
from course_lib.text.evaluation import DEFAULT_STRIDE, DEFAULT_WINDOW, perplexity
from course_lib.text.models import (
    COURSE_MODEL_NAME,
    REBUILD_COMMAND,
    TRAINING_FILE,
    WEIGHTS_FILE,
    CheckpointError,
    build_model,
    check_checkpoint,
    check_output_dir,
    count_parameters,
    course_model_dir,
    load_model,
    read_training,
    rebuild_hint,
    save_model,
    sha256_file,
    tiny_config,
)
from course_lib.text.training import Recipe, train

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "COURSE_MODEL_NAME",
    "COURSE_RECIPE",
    "REBUILD_COMMAND",
    "build_course_model",
    "check_course_model",
    "course_model",
    "course_model_card",
    "course_model_config",
    "course_model_dir",
    "course_model_reference",
]

_REFERENCE_FILE = Path(__file__).with_name("course_model_reference.json")


#: The course model's recipe: the decoder-only model trained longer (about 3 minutes on 2 cores).
COURSE_RECIPE = Recipe(steps=600, batch_size=16, seq_len=128, lr=3e-3, warmup_steps=30,
                       min_lr_ratio=0.1, seed=0)
_COURSE_SHAPE = {"hidden": 128, "layers": 4, "heads": 4, "context": 128}


def course_model_config(tokenizer: PreTrainedTokenizerBase | None = None) -> PretrainedConfig:
    """The course model's GPT-2 config: 4 layers, hidden 128, 4 heads, 128 positions, course vocabulary.

    Chapter 1, *Pretraining objectives*.
    """
    return tiny_config("gpt2", tokenizer, **_COURSE_SHAPE)


def course_model_reference() -> dict[str, Any]:
    """The reference figures of the course model's recipe, recorded in ``course_model_reference.json``.

    Chapter 1, *Pretraining objectives*.
    """
    try:
        return json.loads(_REFERENCE_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _model_card(info: dict[str, Any]) -> str:
    """The course model's card (Markdown): use, data, procedure, perplexity, limitations.

    ``info`` holds what a build measured (``n_params``, ``validation_perplexity``,
    ``test_perplexity``, ``validation_loss``, ``seconds``, ...), as written by
    :func:`build_course_model`.
    """
    r = info.get("recipe", asdict(COURSE_RECIPE))
    shape = info.get("shape", _COURSE_SHAPE)
    stats = info.get("corpus_tokens", {})
    tokens = r["steps"] * r["batch_size"] * r["seq_len"]
    ppl_rows = "\n".join(
        f"| {split} | {info.get(f'{split}_perplexity', float('nan')):.3f} | "
        f"{info.get(f'{split}_loss', float('nan')):.4f} | {stats.get(split, 0):,} |"
        for split in ("validation", "test"))
    seconds = info.get("seconds")
    took = f"{seconds:.0f} s on {info.get('threads', '?')} CPU thread(s)" if seconds else "about 3 minutes on 2 CPU cores"
    return f"""---
language: en
license: mit
library_name: transformers
pipeline_tag: text-generation
tags: [gpt2, tiny, course]
---

# {COURSE_MODEL_NAME}

A tiny GPT-2 ({info.get('n_params', 0):,} parameters) trained from scratch on the procedurally
generated children's stories of the course *Computational challenges of training LLMs*. It is the
model every lab of Part II quantizes, prunes and compresses.

## Intended use
Teaching and testing: perplexity before and after quantization, pruning and GPTQ; a real, trained
`transformers` model that loads offline in a second. **Not** for any real application: it knows only
the course's story world and writes nothing else.

## Training data
`{info.get('corpus', data.CORPUS_VERSION)}`: {data.N_STORIES:,} short English stories written by
`course_lib.text.stories.generate_stories` (seed {data.DEFAULT_SEED}), split 90/5/5 into train, validation and
test by story; tokenized with the course's byte-level BPE tokenizer ({info.get('vocab_size', data.DEFAULT_VOCAB_SIZE):,}
tokens, saved with the model). Training tokens: {stats.get('train', 0):,}.

## Training procedure
- Architecture: `GPT2LMHeadModel`, {shape['layers']} layers, hidden {shape['hidden']}, {shape['heads']} heads,
  context {shape['context']} tokens, tied input/output embeddings, no dropout.
- Objective: causal language modelling (next-token prediction) on windows of {r['seq_len']} tokens
  cut at seeded random offsets from the training stories joined by `</s>`.
- Optimiser: AdamW (lr {r['lr']:g}, betas {tuple(r['betas'])}, weight decay {r['weight_decay']:g}),
  {r['warmup_steps']} warm-up steps then cosine decay to {r['min_lr_ratio']:g}×lr, gradient clipping at {r['clip']:g}.
- {r['steps']} steps × {r['batch_size']} sequences × {r['seq_len']} tokens = {tokens:,} tokens
  (C ≈ 6·N·D = {6 * info.get('n_params', 0) * tokens:.2e} FLOPs); seed {r['seed']}; {took}.
- Reproduce: `{REBUILD_COMMAND} --output DIR`.

## Evaluation
Perplexity on the held-out splits of the course corpus, stories joined by `</s>`, sliding window
of {info.get('window', DEFAULT_WINDOW)} tokens with stride {info.get('stride', DEFAULT_STRIDE)} (`course_lib.text.evaluation.perplexity`):

| split | perplexity | mean loss (nats) | tokens |
|---|---|---|---|
{ppl_rows}

## Limitations
- Trained on about {stats.get('train', 0) // 1000:,}k tokens of templated stories: it continues such stories
  fluently but has no knowledge of the world, and its perplexity on any other text is very high.
- It often mixes up the characters of a story (names, pronouns) and repeats stock phrases.
- With {shape['context']} positions it cannot use context longer than {shape['context']} tokens.
- Its figures are not comparable with published perplexities of real models (different text and tokenizer).
- The stories are synthetic and simple; nothing in them was checked for bias beyond what the generator writes.
"""


def course_model_card(for_display: bool = False) -> str:
    """The course model's card with the figures of the reference build (no training needed).

    ``for_display=True`` leaves out the YAML front matter (metadata for hubs) and lowers every
    heading by three levels, so that the card nests under a notebook subsection.

    Chapter 1, *Pretraining objectives*.
    """
    ref = course_model_reference()
    if not ref:
        raise CheckpointError(f"{_REFERENCE_FILE.name} is missing from the package; run "
                              f"`{REBUILD_COMMAND}` to build the course model and read its README.md.")
    card = _model_card(ref)
    if not for_display:
        return card
    body = card.split("\n---\n", 1)[1].lstrip("\n")
    return re.sub(r"^(#+) ", lambda m: "###" + m.group(1) + " ", body, flags=re.MULTILINE)


def build_course_model(output: str | os.PathLike[str] | None = None, *, overwrite: bool = False,
                       progress: bool = True, verbose: bool = True) -> dict[str, Any]:
    """Train the course model from scratch and save it to ``output`` (default :func:`course_model_dir`).

    Deterministic for a given machine and thread count: seeded initialisation and batches. Writes
    safetensors weights, config, tokenizer, ``training.json`` and the model card ``README.md``;
    returns the measured figures (parameters, seconds, validation/test loss and perplexity).
    ``output`` is checked before training (:func:`course_lib.text.models.check_output_dir`): an
    old course model there is replaced, a folder holding other files never; ``overwrite=True``
    also replaces a model that is not a course model.

    Chapter 1, *Pretraining objectives*.
    """
    target = Path(output) if output is not None else course_model_dir()
    check_output_dir(target, overwrite=overwrite)
    tokenizer = data.course_tokenizer()
    config = course_model_config(tokenizer)
    if verbose:
        print(f"Building the course model ({COURSE_MODEL_NAME}) into {target}: "
              f"{COURSE_RECIPE.steps} steps of {COURSE_RECIPE.batch_size} x {COURSE_RECIPE.seq_len} tokens "
              f"on {torch.get_num_threads()} CPU thread(s), about 3 minutes.", flush=True)
    model = build_model(config, seed=COURSE_RECIPE.seed)
    start = time.perf_counter()
    history = train(model, "gpt2", tokenizer, COURSE_RECIPE, progress=progress, desc="course model")
    seconds = time.perf_counter() - start
    model.cpu()
    info: dict[str, Any] = {
        "name": COURSE_MODEL_NAME, "kind": "gpt2", "history": history, "seconds": seconds,
        "recipe": asdict(COURSE_RECIPE), "shape": dict(_COURSE_SHAPE), "corpus": data.CORPUS_VERSION,
        "n_params": count_parameters(model), "vocab_size": len(tokenizer),
        "threads": torch.get_num_threads(), "torch": torch.__version__,
        "window": DEFAULT_WINDOW, "stride": DEFAULT_STRIDE,
        "corpus_tokens": {s: len(data.course_stream(tokenizer, s)) for s in data.SPLITS},
    }
    import transformers

    info["transformers"] = transformers.__version__
    for split in ("validation", "test"):
        p = perplexity(model, tokenizer, split=split, window=DEFAULT_WINDOW, stride=DEFAULT_STRIDE)
        info[f"{split}_loss"] = p.mean_nll
        info[f"{split}_perplexity"] = p.perplexity
    save_model(model, tokenizer, target, info=info, card=_model_card(info), overwrite=overwrite)
    if verbose:
        print(f"Saved to {target} in {seconds:.0f} s of training: validation perplexity "
              f"{info['validation_perplexity']:.3f}, test perplexity {info['test_perplexity']:.3f}.",
              flush=True)
    return info


def course_model(path: str | os.PathLike[str] | None = None, *, rebuild: bool = False,
                 progress: bool = True) -> PreTrainedModel:
    """The course model: built on first use (about 3 minutes), loaded from the cache afterwards.

    ``path`` defaults to :func:`course_model_dir`. A cached copy is trusted only if its weights
    match the SHA-256 in its ``training.json``; otherwise :class:`CheckpointError` says how to
    rebuild it (``rebuild=True`` does it here). Loading goes through :func:`load_model`.

    Chapter 1, *Pretraining objectives*.
    """
    target = Path(path) if path is not None else course_model_dir()
    if rebuild or not target.exists():
        check_output_dir(target)
        print(f"Rebuilding the course model at {target} (about 3 minutes)." if rebuild else
              f"The course model is not cached yet at {target}; building it now (only once).", flush=True)
        build_course_model(target, progress=progress)
    check_checkpoint(target)
    try:
        info = read_training(target) if (target / TRAINING_FILE).is_file() else {}
    except CheckpointError as err:
        raise CheckpointError(f"{err} The course model there is damaged. {rebuild_hint(target)}") from None
    if info.get("weights_sha256") and info["weights_sha256"] != sha256_file(target / WEIGHTS_FILE):
        raise CheckpointError(f"The weights at {target} do not match the checksum recorded when they "
                              f"were saved: the file is damaged. {rebuild_hint(target)}")
    recorded = info.get("files") if isinstance(info.get("files"), list) else []
    missing = sorted(str(name) for name in recorded if not (target / str(name)).is_file())
    if missing:
        raise CheckpointError(f"The course model at {target} is incomplete: {', '.join(missing)} "
                              f"missing (saved with it; AutoTokenizer.from_pretrained reads the "
                              f"tokenizer files). {rebuild_hint(target)}")
    return load_model(target)


def check_course_model(path: str | os.PathLike[str] | None = None) -> None:
    """Load the saved course model as a reader does, or raise :class:`CheckpointError` saying what fails.

    The checks of :func:`course_model` (files, checksum; nothing is built), then
    ``AutoTokenizer.from_pretrained`` and ``AutoModelForCausalLM.from_pretrained`` on the
    folder, as the README and the hub-like use of chapter 1 load it. ``python -m course_lib
    check`` and ``prepare`` run it.

    Chapter 1, *Pretraining objectives*.
    """
    from transformers import AutoTokenizer

    target = Path(path) if path is not None else course_model_dir()
    if not target.exists():
        raise CheckpointError(f"No course model at {target} yet. Build it with "
                              f"`{REBUILD_COMMAND}` or `python -m course_lib prepare`.")
    course_model(target, progress=False)
    try:
        AutoTokenizer.from_pretrained(str(target), local_files_only=True)
    except Exception as err:  # noqa: BLE001 - any failure: the reader's call fails too
        raise CheckpointError(f"The course model's tokenizer at {target} does not load with "
                              f"AutoTokenizer.from_pretrained ({type(err).__name__}: "
                              f"{str(err)[:150]}). {rebuild_hint(target)}") from None
