"""Tests for chapter 5's experiments (course_lib.compression.ptq, course_lib.chapters.ch05), on tiny models.

What this file proves (the course model itself is never built or loaded):

* ``test_perplexity`` is ``evaluation.perplexity`` with windows of 128 and no overlap, on the first 75
  stories of the test split
  unless ``texts`` are given;
* ``ptq_study`` quantizes with each method in order and reports ``describe`` labels, the bytes of
  ``quantize_model``'s result (FP16 exactly half of FP32), its safetensors size, bits per weight as
  counted here from the matrix shapes, and ``test_perplexity`` of each quantized copy (that function
  is monkeypatched to a fast one on a few validation stories that records the models it is given,
  because ptq_study has no ``texts=`` argument); ``ptq_table`` compares every row with the first;
* ``weights_at_precision`` / ``billion_table``: FP32 is 4 bytes per parameter, quantized presets
  cost ``storage_bytes`` of the GPT-2 matrices (listed here independently) plus 4 bytes for every
  other parameter, the same bytes ``quantize_model`` really stores for a small GPT-2 of that shape,
  and INT4 g128 lands at 4.156-4.3 bits per parameter for a billion parameters;
* ``qat`` returns a really quantized model equal to prepare_qat + train + finish_qat +
  quantize_model done by hand; ``finetune`` returns one loss per step;
* ``lowercase_split``, ``quantization_by_size`` (with ``scaling.scaling_models`` monkeypatched to two
  tiny models and the validation loss to a fast one), ``SizeRow``, ``size_trend`` and ``size_table``;
* ``nf4_derivation`` matches the paper on all 16 levels; ``torch_crosscheck`` reports agreement
  with torch's quantizers on every value; ``compare_configs`` bits are the stored bits per value;
  every ``plot_*`` returns a Figure with labelled axes; ``plot_number_line`` refuses several scales.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.figure import Figure
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel

from course_lib.chapters import ch05
from course_lib.compression import finetuning, ptq, qat, quant
from course_lib.compression import quant_layers as L
from course_lib.compression.quant import QuantConfig
from course_lib.numbers import memory
from course_lib.text import data, evaluation, models, scaling, training

HIDDEN = 64  # a multiple of 64: every group size used here (32, 64) divides every row


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def tok():
    return data.course_tokenizer()


@pytest.fixture(scope="module")
def few() -> list[str]:
    """A few validation stories: enough tokens for windows of 128, fast to score."""
    return data.load_corpus("course", "validation")[:20]


def build(tok, hidden: int = HIDDEN, layers: int = 1, context: int = 128, seed: int = 0) -> nn.Module:
    cfg = models.tiny_config("gpt2", tok, hidden=hidden, layers=layers, heads=2, context=context)
    return models.build_model(cfg, seed=seed).eval()


@pytest.fixture(scope="module")
def tiny(tok) -> nn.Module:
    return build(tok)


def matrices_of(model: nn.Module) -> list[tuple[int, int]]:
    """(out, in) of the tiny GPT-2's quantized matrices, read from the modules: the embedding, then Conv1Ds."""
    shapes = [tuple(model.transformer.wte.weight.shape)]
    for block in model.transformer.h:
        for conv in (block.attn.c_attn, block.attn.c_proj, block.mlp.c_fc, block.mlp.c_proj):
            n_in, n_out = conv.weight.shape
            shapes.append((n_out, n_in))
    return shapes


def ppl_on(texts, model, tokenizer) -> float:
    return evaluation.perplexity(model, tokenizer, texts=texts, window=128, stride=128).perplexity


# ---------------------------------------------------------------------------------------------
# test_perplexity
# ---------------------------------------------------------------------------------------------

def test_test_perplexity_uses_windows_of_128_without_overlap(tiny, tok, few):
    got = ptq.test_perplexity(tiny, tok, texts=few)
    assert got == ppl_on(few, tiny, tok)
    assert got != evaluation.perplexity(tiny, tok, texts=few, window=128, stride=64).perplexity


def test_test_perplexity_reads_the_test_split(monkeypatch, tiny, tok):
    calls = []

    def spy(model, tokenizer=None, **kwargs):
        calls.append((model, tokenizer, kwargs))
        return evaluation.Perplexity(12.5, math.log(12.5), 10, 1, 128, 128, "x")

    monkeypatch.setattr(evaluation, "perplexity", spy)
    assert ptq.test_perplexity(tiny, tok) == 12.5
    (model, tokenizer, kwargs), = calls
    assert model is tiny and tokenizer is tok
    assert kwargs == {"split": "test", "texts": data.load_corpus("course", "test")[:75], "window": 128,
                      "stride": 128, "batch_size": 8}


# ---------------------------------------------------------------------------------------------
# Post-training quantization
# ---------------------------------------------------------------------------------------------

METHODS = ("fp32", "fp16", "int8-channel", "int4-g32")


@pytest.fixture(scope="module")
def ptq_run(tiny, tok, few):
    """ptq_study with test_perplexity replaced by a fast recording one (ptq_study takes no texts=)."""
    seen = []

    def fake(model, tokenizer=None, texts=None):
        seen.append((model, tokenizer, texts))
        return ppl_on(few, model, tokenizer)

    mp = pytest.MonkeyPatch()
    mp.setattr(ptq, "test_perplexity", fake)
    try:
        results = ptq.ptq_study(tiny, METHODS, tok, progress=False)
    finally:
        mp.undo()
    return results, seen


def test_ptq_study_rows(ptq_run, tiny):
    results, _ = ptq_run
    assert [r.method for r in results] == [L.describe(m) for m in METHODS]
    assert [r.method for r in results] == ["FP32", "FP16", "INT8 absmax per channel", "INT4 zero-point g32"]
    n = models.count_parameters(tiny)
    assert results[0].model_bytes == L.model_bytes(tiny) == 4 * n
    assert 2 * results[1].model_bytes == results[0].model_bytes
    for r, m in zip(results, METHODS):
        q = L.quantize_model(tiny, m)
        assert r.model_bytes == L.model_bytes(q), m
        assert r.file_bytes == L.safetensors_bytes(q), m
        assert r.file_bytes > r.model_bytes  # the file adds a header
        assert r.seconds >= 0 and math.isfinite(r.perplexity)
    # bits per weight counted here: INT8 per channel = codes + one fp16 scale per row;
    # INT4 zero-point g32 = 4-bit codes + per group an fp16 scale and a 4-bit zero point
    shapes = matrices_of(tiny)
    numel = sum(o * i for o, i in shapes)
    int8 = sum(o * i + 2 * o for o, i in shapes)
    int4 = sum(o * i // 2 + 2 * (o * i // 32) + math.ceil(o * i // 32 / 2) for o, i in shapes)
    assert [r.bits for r in results] == pytest.approx([32.0, 16.0, 8 * int8 / numel, 8 * int4 / numel])


def test_ptq_study_scores_each_quantized_copy(ptq_run, tiny, tok, few):
    results, seen = ptq_run
    assert len(seen) == len(METHODS)
    assert all(tokenizer is tok and texts is None for _, tokenizer, texts in seen)
    models_seen = [m for m, _, _ in seen]
    assert all(m is not tiny for m in models_seen)  # copies: the original is not modified
    # the FP16 row is scored in FP32 from values rounded to FP16 (as quantized layers decode to FP32)
    assert next(models_seen[1].parameters()).dtype == torch.float32
    for p16, p32 in zip(models_seen[1].parameters(), tiny.parameters()):
        assert torch.equal(p16, p32.half().float())
    assert results[1].perplexity == ppl_on(few, L.quantize_model(tiny, "fp16").float(), tok)
    for m, name in zip(models_seen[2:], METHODS[2:]):
        assert m.quantization == quant.get_config(name)
        assert any(isinstance(x, L.QuantLinear) for x in m.modules())
    assert results[0].perplexity == ppl_on(few, tiny, tok)
    assert results[3].perplexity == ppl_on(few, L.quantize_model(tiny, "int4-g32"), tok)
    assert results[3].perplexity != results[0].perplexity
    assert all(isinstance(p, nn.Parameter) and p.dtype == torch.float32 for p in tiny.parameters())


def test_ptq_table(ptq_run):
    results, _ = ptq_run
    table = ch05.ptq_table(results, title="PTQ")
    assert table.headers == ["method", "bits / weight", "model (kB)", "of FP32", "file (kB)", "perplexity",
                             "vs FP32"]
    assert table.title == "PTQ" and len(table.rows) == len(results)
    first = table.rows[0]
    assert first[0] == "FP32" and first[1] == "32.000" and first[3] == "100.0%" and first[-1] == "+0.00%"
    assert table.rows[1][3] == "50.0%"
    for r, row in zip(results, table.rows):
        assert row[2] == f"{r.model_bytes / 1e3:,.1f}" and row[4] == f"{r.file_bytes / 1e3:,.1f}"
        assert row[5] == f"{r.perplexity:.4f}"
        change = 100 * (r.perplexity / results[0].perplexity - 1)
        assert float(row[-1].rstrip("%")) == pytest.approx(change, abs=0.006)


def test_plot_size_vs_perplexity(ptq_run):
    results, _ = ptq_run
    extra = ptq.PTQResult("BF16", 16.0, results[1].model_bytes, results[1].file_bytes, results[1].perplexity, 0.0)
    fig = ch05.plot_size_vs_perplexity([*results, extra])  # FP16 and BF16 coincide: one merged point
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    main = fig.axes[0]
    assert main.get_xlabel() and main.get_ylabel()
    assert all(ax.get_xlabel() for ax in fig.axes)
    texts = [t.get_text() for t in main.texts]
    assert "FP16 / BF16" in texts


# ---------------------------------------------------------------------------------------------
# A billion parameters
# ---------------------------------------------------------------------------------------------

def gpt2_matrices(shape: memory.ModelShape) -> list[tuple[int, int]]:
    h = shape.hidden
    return [(shape.vocab, h)] + [(3 * h, h), (h, h), (4 * h, h), (h, 4 * h)] * shape.n_layers


def test_gpt2_matrices_and_the_parameter_count():
    shape = memory.shape_for_params(1e9)
    h, layers = shape.hidden, shape.n_layers
    n_matrix = sum(o * i for o, i in gpt2_matrices(shape))
    assert n_matrix == shape.vocab * h + 12 * layers * h * h
    # the rest: position embeddings, 13h of biases and layer norms per layer, the final layer norm
    assert n_matrix + shape.positions * h + 13 * h * layers + 2 * h == shape.n_params


@pytest.mark.parametrize("method", ["int8-channel", "int4-g128", "int4-g64", "int4-g32", "nf4", "nf4-dq",
                                    "int3-g128", QuantConfig(6, "absmax", "group", 64)])
def test_weights_at_precision_quantized(method):
    shape = memory.shape_for_params(1e9)
    b = ptq.weights_at_precision(shape, method)
    mats = gpt2_matrices(shape)
    parts = [quant.storage_bytes(m, method) for m in mats]
    codes = sum(p["codes"] for p in parts)
    overhead = sum(sum(p.values()) - p["codes"] for p in parts)
    rest = 4 * (shape.n_params - sum(o * i for o, i in mats))
    assert b["codes"] == codes and b["overhead"] == overhead and b["rest"] == rest
    assert b["total"] == codes + overhead + rest
    bits = quant.get_config(method).bits
    assert codes == sum(math.ceil(o * i * bits / 8) for o, i in mats)


def test_weights_at_precision_can_keep_the_embedding_and_the_rest_in_fp16():
    """GPTQ's accounting (chapter 7): the blocks' matrices quantized, the tied embedding in FP16."""
    shape = memory.shape_for_params(1e9)
    b = ptq.weights_at_precision(shape, "int4-g128", embedding=False, rest="fp16")
    blocks = gpt2_matrices(shape)[1:]
    parts = [quant.storage_bytes(m, "int4-g128") for m in blocks]
    assert b["codes"] + b["overhead"] == sum(sum(p.values()) for p in parts)
    assert b["rest"] == 2 * (shape.n_params - sum(o * i for o, i in blocks))
    assert shape.vocab * shape.hidden * 2 <= b["rest"]  # the embedding is in the rest


@pytest.mark.parametrize("method, nbytes", [("fp32", 4), ("fp16", 2), ("bf16", 2)])
def test_weights_at_precision_float(method, nbytes):
    shape = memory.shape_for_params(1e9)
    b = ptq.weights_at_precision(shape, method)
    assert b["total"] == nbytes * shape.n_params
    assert b["overhead"] == 0 and b["rest"] == 0


@pytest.mark.parametrize("method", ["fp32", "fp16", "int8-channel", "int4-g32", "nf4-dq", "int3-g128"])
def test_weights_at_precision_is_what_quantize_model_stores(method):
    """On a small GPT-2 the estimate equals the bytes of the really quantized model."""
    shape = memory.ModelShape(n_layers=2, hidden=128, n_heads=2, vocab=320, positions=48)
    config = GPT2Config(vocab_size=shape.vocab, n_embd=shape.hidden, n_layer=shape.n_layers, n_head=2,
                        n_positions=shape.positions, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    assert models.count_parameters(model) == shape.n_params
    assert ptq.weights_at_precision(shape, method)["total"] == L.model_bytes(L.quantize_model(model, method))


def test_billion_table():
    shape = memory.shape_for_params(1e9)
    table = ch05.billion_table(1e9)
    assert [r[0] for r in table.rows] == [L.describe(m) for m in ptq.PTQ_METHODS]
    bits = {r[0]: float(r[1]) for r in table.rows}
    assert bits["FP32"] == 32.0 and bits["FP16"] == bits["BF16"] == 16.0
    assert 4.156 < bits["INT4 zero-point g128"] < 4.3
    assert bits["INT4 zero-point g128"] < bits["INT4 zero-point g64"] < bits["INT4 zero-point g32"]
    assert bits["NF4 + DQ"] < bits["NF4"]
    assert 3 < bits["INT3 zero-point g128"] < 3.3
    fp32 = table.rows[0]
    assert fp32[-1] == f"{4 * shape.n_params / 1e9:.3f}"
    assert f"{shape.n_params:,} parameters" in table.title


# ---------------------------------------------------------------------------------------------
# QAT and fine-tuning
# ---------------------------------------------------------------------------------------------

RECIPE = training.Recipe(steps=2, batch_size=2, seq_len=32, lr=1e-3, warmup_steps=1, seed=3)


def test_qat_returns_the_really_quantized_trained_model(tiny, tok):
    before = {k: v.clone() for k, v in tiny.state_dict().items()}
    result = qat.qat(tiny, "int8-channel", RECIPE, tok, progress=False, cache=False)
    assert result.label == "QAT INT8 absmax per channel"
    assert len(result.history) == RECIPE.steps and all(math.isfinite(h) for h in result.history)
    q = result.model
    assert any(isinstance(m, L.QuantLinear) for m in q.modules())
    assert isinstance(q.transformer.wte, L.QuantEmbedding)
    assert not any(hasattr(m, "parametrizations") for m in q.modules())
    ids = torch.randint(0, len(tok), (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        out = q(ids).logits
    assert torch.isfinite(out).all()
    # the same steps by hand
    fake = L.prepare_qat(tiny, "int8-channel")
    history = training.train(fake, "gpt2", tok, RECIPE, progress=False)
    with torch.no_grad():
        trained_with = fake(ids).logits  # what the fake-quantized model computes after training
    expected = L.quantize_model(L.finish_qat(fake), "int8-channel")
    assert torch.allclose(out, trained_with, rtol=1e-4, atol=1e-4)
    assert history == result.history
    with torch.no_grad():
        assert torch.equal(out, expected(ids).logits)
        assert not torch.equal(out, L.quantize_model(tiny, "int8-channel")(ids).logits)  # it did train
    assert all(torch.equal(before[k], v) for k, v in tiny.state_dict().items())  # original untouched


def test_finetune_trains_in_place_and_returns_the_history(tok, few):
    model = build(tok, hidden=32, context=64, seed=4)
    w = model.transformer.h[0].mlp.c_fc.weight.detach().clone()
    recipe = training.Recipe(steps=3, batch_size=2, seq_len=32, lr=1e-3, warmup_steps=1)
    result = finetuning.finetune(model, "full", recipe, tok, texts=few, progress=False, cache=False)
    assert result.label == "full" and result.model is model
    assert len(result.history) == recipe.steps and all(math.isfinite(h) for h in result.history)
    assert result.history == pytest.approx(
        training.train(build(tok, hidden=32, context=64, seed=4), "gpt2", tok, recipe, texts=few, progress=False))
    assert result.seconds > 0
    assert not torch.equal(model.transformer.h[0].mlp.c_fc.weight, w)


def test_finetune_caches_the_trained_parameters(monkeypatch, tmp_path, tok, few):
    """A second identical fine-tune loads the cached safetensors: same weights, same history, no training;
    a different recipe, label or starting state is a different key; a damaged file means training again."""
    monkeypatch.setenv("COURSE_LIB_CACHE", str(tmp_path))
    recipe = training.Recipe(steps=2, batch_size=2, seq_len=32, lr=1e-3, warmup_steps=1)
    first = finetuning.finetune(build(tok, hidden=32, context=64, seed=4), "full", recipe, tok, texts=few,
                         progress=False)
    path = finetuning._finetune_cache_path(build(tok, hidden=32, context=64, seed=4), "full", recipe, tok, few)
    assert path.is_file() and path.parent == tmp_path / finetuning._CACHE_FOLDER

    calls = []
    real_train = training.train
    monkeypatch.setattr(training, "train", lambda *a, **k: calls.append(1) or real_train(*a, **k))
    second = finetuning.finetune(build(tok, hidden=32, context=64, seed=4), "full", recipe, tok, texts=few,
                          progress=False)
    assert calls == []  # loaded, not trained
    assert second.history == first.history and second.seconds == first.seconds
    for a, b in zip(first.model.state_dict().values(), second.model.state_dict().values()):
        assert torch.equal(a, b)

    start = build(tok, hidden=32, context=64, seed=4)
    other_seed = build(tok, hidden=32, context=64, seed=5)
    key = finetuning._finetune_cache_path(start, "full", recipe, tok, few)
    assert finetuning._finetune_cache_path(other_seed, "full", recipe, tok, few) != key
    assert finetuning._finetune_cache_path(start, "QLoRA", recipe, tok, few) != key
    assert finetuning._finetune_cache_path(start, "full", training.Recipe(steps=3, batch_size=2, seq_len=32, lr=1e-3,
                                                                  warmup_steps=1), tok, few) != key
    assert finetuning._finetune_cache_path(start, "full", recipe, tok, few[:-1]) != key
    assert finetuning._state_fingerprint(start) == finetuning._state_fingerprint(build(tok, hidden=32, context=64, seed=4))

    path.write_bytes(b"damaged")
    third = finetuning.finetune(build(tok, hidden=32, context=64, seed=4), "full", recipe, tok, texts=few,
                         progress=False)
    assert calls == [1] and third.history == pytest.approx(first.history)


def test_finetune_cache_keeps_only_the_adapters_of_a_lora_model(monkeypatch, tmp_path, tok, few):
    from course_lib.compression import lora

    monkeypatch.setenv("COURSE_LIB_CACHE", str(tmp_path))
    recipe = training.Recipe(steps=2, batch_size=2, seq_len=32, lr=1e-2, warmup_steps=1)
    base = build(tok, hidden=64, context=64, seed=4)
    first = finetuning.finetune(lora.add_lora(base, rank=2, alpha=4), "LoRA", recipe, tok, texts=few, progress=False)
    (path,) = (tmp_path / finetuning._CACHE_FOLDER).iterdir()
    from safetensors.torch import load_file

    saved = load_file(str(path))
    assert saved and all(".lora_a" in k or ".lora_b" in k for k in saved)
    second = finetuning.finetune(lora.add_lora(base, rank=2, alpha=4), "LoRA", recipe, tok, texts=few, progress=False)
    ids = torch.randint(0, len(tok), (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(first.model(ids).logits, second.model(ids).logits)


def test_lowercase_split():
    original = data.load_corpus("course", "validation")
    lowered = qat.lowercase_split("validation")
    assert len(lowered) == len(original)
    assert lowered == [t.lower() for t in original]
    assert lowered != original
    with pytest.raises(ValueError):
        qat.lowercase_split("nope")


# ---------------------------------------------------------------------------------------------
# Quantization by model size
# ---------------------------------------------------------------------------------------------

def test_quantization_by_size(monkeypatch, tok, few):
    small, large = build(tok, hidden=32, context=64, seed=1), build(tok, hidden=64, context=64, seed=2)
    asked = {}

    def fake_scaling_models(**kwargs):
        asked.update(kwargs)
        return [SimpleNamespace(model=small), SimpleNamespace(model=large)]

    def loss(model, tokenizer, window):  # the validation loss on a few stories, to stay fast
        assert window == scaling.SCALING_RECIPE.seq_len
        return evaluation.perplexity(model, tokenizer, texts=few, window=window, stride=window).mean_nll

    monkeypatch.setattr(scaling, "scaling_models", fake_scaling_models)
    monkeypatch.setattr(scaling, "validation_loss", loss)
    configs = ("int4-channel", QuantConfig(3, "zeropoint", "channel"))
    out = ptq.quantization_by_size(configs, tok, progress=False)
    assert asked["tokenizer"] is tok
    assert list(out) == ["INT4 zero-point per channel", "INT3 zero-point per channel"]
    for config, (label, rows) in zip(configs, out.items()):
        assert len(rows) == 2
        for row, m in zip(rows, (small, large)):
            assert row.n_params == models.count_parameters(m)
            assert row.fp32_loss == loss(m, tok, 64)
            assert row.quantized_loss == loss(L.quantize_model(m, config), tok, 64)
            assert row.perplexity_change == pytest.approx(math.exp(row.quantized_loss - row.fp32_loss) - 1)
    assert out["INT4 zero-point per channel"][0].n_params < out["INT4 zero-point per channel"][1].n_params

    table = ch05.size_table(out)
    assert len(table.headers) == 2 + len(configs)
    assert table.headers[2:] == [f"{k}: perplexity change" for k in out]
    assert len(table.rows) == 2
    for i, row in enumerate(table.rows):
        first = out["INT4 zero-point per channel"][i]
        assert row[0] == f"{first.n_params:,}" and row[1] == f"{first.fp32_loss:.4f}"
        assert row[2:] == [f"{out[k][i].perplexity_change:+.2%}" for k in out]


def test_quantization_by_size_keeps_configs_with_the_same_label_apart(monkeypatch, tok, few):
    small = build(tok, hidden=32, context=64, seed=1)
    monkeypatch.setattr(scaling, "scaling_models", lambda **kwargs: [SimpleNamespace(model=small)])
    monkeypatch.setattr(scaling, "validation_loss", lambda model, tokenizer, window: evaluation.perplexity(
        model, tokenizer, texts=few, window=window, stride=window).mean_nll)
    configs = (QuantConfig(4, "absmax", "channel", scale_dtype="fp16"),
               QuantConfig(4, "absmax", "channel", scale_dtype="fp32"))
    # Two configurations that differ only in how scales are stored share a label: refused, not mixed.
    with pytest.raises(ValueError, match="share a label"):
        ptq.quantization_by_size(configs, tok, progress=False)


def test_size_row_perplexity_change():
    assert ptq.SizeRow(10, 2.0, 2.1).perplexity_change == pytest.approx(math.exp(0.1) - 1)
    assert ptq.SizeRow(10, 2.0, 2.0).perplexity_change == 0.0
    assert ptq.SizeRow(10, 2.0, 1.9).perplexity_change < 0


def rows_with_changes(changes):
    return [ptq.SizeRow(1000 * (i + 1), 3.0, 3.0 + math.log1p(c)) for i, c in enumerate(changes)]


def test_trend_sentences():
    shrinking = ch05.size_trend(rows_with_changes([0.08, 0.05, 0.02]))
    assert "shrinks at every step" in shrinking
    assert "1,000" in shrinking and "3,000" in shrinking and "+8.00%" in shrinking and "+2.00%" in shrinking
    assert "across these 3 models" in shrinking
    growing = ch05.size_trend(rows_with_changes([0.02, 0.05, 0.08]))
    assert "it does not shrink across" in growing and "shrinks at every step" not in growing
    bumpy = ch05.size_trend(rows_with_changes([0.08, 0.09, 0.02]))
    assert "does not shrink steadily" in bumpy and "shrinks overall" in bumpy


def test_trend_sentences_compare_magnitudes_not_signed_changes():
    # Chapter 5's INT4 rows: -0.26% ... -0.10% is a change that falls in size, though it rises as a signed number.
    signed_noise = ch05.size_trend(rows_with_changes([-0.0026, -0.0013, 0.0003, -0.0010]))
    assert "shrinks overall" in signed_noise and "it does not shrink across" not in signed_noise
    assert "from 0.26% to 0.10%" in signed_noise and "(-0.26% to -0.10%)" in signed_noise
    alternating = ch05.size_trend(rows_with_changes([-0.08, 0.05, -0.02]))
    assert "shrinks at every step" in alternating
    growing_down = ch05.size_trend(rows_with_changes([-0.01, -0.02, -0.05]))
    assert "it does not shrink across" in growing_down
    with pytest.raises(ValueError, match="at least one"):
        ch05.size_trend([])


# ---------------------------------------------------------------------------------------------
# NF4 and torch cross-checks
# ---------------------------------------------------------------------------------------------

def test_nf4_derivation():
    table = ch05.nf4_derivation()
    assert len(table.rows) == 16
    assert [r[-1] for r in table.rows] == ["yes"] * 16
    levels = [float(r[3]) for r in table.rows]
    assert levels == pytest.approx(quant.nf4_codebook().tolist(), abs=1e-8)
    probs = [float(r[1]) for r in table.rows]
    assert probs == sorted(probs) and probs[7] == 0.5
    z = [float(r[2]) for r in table.rows]
    assert all((a > 0) == (b > 0) for a, b in zip(z, levels))
    assert [r[0] for r in table.rows][:2] == [" 0 (0000)", " 1 (0001)"]


def test_torch_crosscheck(tiny):
    check = ptq.torch_crosscheck(tiny)
    total = sum(o * i for o, i in matrices_of(tiny))  # the Conv1Ds and lm_head (same size as wte)
    assert check.total == total
    assert check.absmax_tensor == check.absmax_channel == check.zeropoint_g64 == total
    assert total - check.zeropoint_channel <= total // 1000  # rounding order: at most a rare tie differs
    assert check.torch_order == total
    table = ch05.crosscheck_table(check)
    assert len(table.rows) == 4 and table.rows[2][2:] == [f"{check.zeropoint_channel:,} of {total:,}",
                                                          f"{total:,} of {total:,}"]


# ---------------------------------------------------------------------------------------------
# compare_configs and the plots
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def x() -> torch.Tensor:
    return torch.randn(16, 64, generator=torch.Generator().manual_seed(9))


def test_compare_configs(x):
    configs = ["int8-tensor", "int8-channel", "int4-g32", "nf4", "nf4-dq"]
    table = ch05.compare_configs(x, configs, title="one tensor")
    assert table.title == "one tensor"
    assert [r[0] for r in table.rows] == [L.describe(c) for c in configs]
    for c, row in zip(configs, table.rows):
        assert row[1] == f"{quant.quantize(x, c).bits_per_value:.3f}"
        stats = quant.error_stats(x, c)
        assert row[3] == f"{stats['rmse']:.5f}" and row[5] == f"{stats['snr_db']:.1f}"
    bits = [r[1] for r in table.rows]
    # by hand: 8 + 32/1024 (one fp32 scale), 8 + 16/64 (fp16 per row), 4 + (16 + 4)/32, 4 + 32/64
    assert bits[:4] == ["8.031", "8.250", "4.625", "4.500"]
    assert int(table.rows[0][2].replace(",", "")) <= 255
    assert int(table.rows[3][2].replace(",", "")) <= 16 * (16 * 64 // 64)


def labelled(ax) -> bool:
    return bool(ax.get_xlabel()) and bool(ax.get_ylabel())


def test_plot_error_vs_bits(x):
    fig = ch05.plot_error_vs_bits(x, {"absmax per channel": ["int8-channel", QuantConfig(4, "absmax", "channel")],
                                   "zero-point groups": ["int4-g64", "int4-g32"]})
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert labelled(ax) and ax.get_yscale() == "log"
    assert len(ax.lines) == 2
    xs = list(ax.lines[1].get_xdata())
    assert xs == pytest.approx([quant.quantize(x, c).bits_per_value for c in ("int4-g64", "int4-g32")])


def test_plot_weight_histograms(tiny):
    fig = ch05.plot_weight_histograms(tiny, "transformer.h.0.mlp.c_fc", ["int8-channel", "int4-g32"])
    assert isinstance(fig, Figure) and len(fig.axes) == 3
    assert labelled(fig.axes[0]) and all(ax.get_xlabel() for ax in fig.axes)
    assert [ax.get_title() for ax in fig.axes] == ["FP32", "INT8 absmax per channel", "INT4 zero-point g32"]


@pytest.mark.parametrize("config", ["int8-tensor", QuantConfig(3, "zeropoint", "tensor", scale_dtype="fp32")])
def test_plot_number_line(config):
    v = torch.tensor([-0.9, -0.31, 0.0, 0.12, 0.5, 1.7])
    fig = ch05.plot_number_line(v, config)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_xlabel()
    cfg = quant.get_config(config)
    levels = ax.collections[0].get_segments()
    assert len(levels) == (255 if cfg.scheme == "absmax" else 2 ** cfg.bits)


@pytest.mark.parametrize("config", ["int8-channel", "int4-g32", "nf4", QuantConfig(4, "zeropoint", "channel")])
def test_plot_number_line_needs_one_scale(config):
    with pytest.raises(ValueError, match="one scale"):
        ch05.plot_number_line(torch.linspace(-1, 1, 64), config)


def test_plot_nf4_levels(tiny):
    fig = ch05.plot_nf4_levels(tiny.transformer.h[0].mlp.c_fc.weight)
    assert isinstance(fig, Figure) and labelled(fig.axes[0])
    red = [ln for ln in fig.axes[0].lines if ln.get_color() == "tab:red"]
    assert len(red) == 16


# ---------------------------------------------------------------------------------------------
# Small tables
# ---------------------------------------------------------------------------------------------

def test_perplexity_table():
    table = ch05.perplexity_table([("base", 10.0), ("int4", 11.5)], baseline=10.0)
    assert table.rows == [["base", "10.0000", "+0.00%"], ["int4", "11.5000", "+15.00%"]]


def test_forward_seconds_times_each_dtype_on_its_own_copy(tiny):
    before = {n: p.detach().clone() for n, p in tiny.named_parameters()}
    seconds = ptq.forward_seconds(tiny, ("fp32", "bf16"), batch=2, seq_len=16, repeats=2)
    assert list(seconds) == ["fp32", "bf16"] and all(0 < s < 60 for s in seconds.values())
    assert all(p.dtype == torch.float32 and torch.equal(p, before[n]) for n, p in tiny.named_parameters())
    with pytest.raises(ValueError, match="repeats"):
        ptq.forward_seconds(tiny, repeats=0)
    with pytest.raises(ValueError):
        ptq.forward_seconds(tiny, ("int4",))
