"""The training planner (course_lib.planner): one model, in Python and in JavaScript,
checked.

* Python and ``planner.js`` (run by node, in one process) agree on hundreds of seeded
  plans: every number within a relative 1e-12, the same verdicts, the same cheapest
  change, the same error message (in English and in Dutch) for every bad input.
* The model's formulas by hand: model states, activations, the bubble, compute = 6 N T /
  (G peak MFU), the cheapest change, what CPU offload moves.
* Every bad input is one ValueError line saying what to do.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import shutil
import string
import subprocess
from pathlib import Path

import pytest

from course_lib.numbers import i18n, memory
from course_lib.parallel import cost_model, pipeline
from course_lib.planner import compute_time, inputs, model, recomputation, report, texts, widget
from course_lib.planner.inputs import PRESETS, Plan
from course_lib.planner.model import plan

ROOT = Path(__file__).resolve().parents[1]
PLANNER_JS = ROOT / "course_lib" / "planner" / "planner.js"
NODE = shutil.which("node")
N_PLANS = 600
_RUNNER = """
const fs = require("fs");
require(process.argv[1]);
const input = JSON.parse(fs.readFileSync(0, "utf8"));
const out = input.cases.map(([spec, language]) => {
  try { return {result: globalThis.coursePlanner.plan(spec, input.tables, language)}; }
  catch (err) {
    if (err && err.planError) return {error: err.message};
    return {crash: String(err.stack || err)};
  }
});
process.stdout.write(JSON.stringify(out));
"""


# --------------------------------------------------------------------------------------
# Python and JavaScript on the same plans
# --------------------------------------------------------------------------------------


def _random_plan(rng: random.Random) -> dict:
    """A plan from the space learners reach: presets and custom shapes, every strategy,
    every link."""
    p: dict = {}
    preset = rng.choice([*PRESETS, "custom", "custom"])
    p["model"] = preset
    if preset == "custom":
        heads = rng.choice([8, 12, 16, 32, 64])
        p.update(
            params=rng.choice([125e6, 1.3e9, "7B", 13e9, "70e9", 3e11]),
            layers=rng.choice([12, 24, 32, 48, 80]),
            hidden=heads * rng.choice([64, 128]),
            heads=heads,
            vocab=rng.choice([32000, 50257, 128000]),
            seq_len=rng.choice([512, 1024, 2048, "4096", 8192]),
        )
    elif rng.random() < 0.2:
        p["seq_len"] = rng.choice([1024, 2048, 16384])
    heads = p.get("heads", PRESETS[preset].shape.n_heads if preset != "custom" else 8)
    if rng.random() < 0.3:  # grouped-query attention
        p["kv_heads"] = rng.choice([1, 2, 8, heads, "4"])
    if rng.random() < 0.3:  # a gated (SwiGLU) MLP, or GELU's 4h on a Llama preset
        p["mlp"] = rng.choice([0, 11008, "28672", heads * 344, "53248"])
    if rng.random() < 0.3:  # a mixture of experts
        p["experts"] = rng.choice([8, 16, 64, "256"])
        p["top_k"] = rng.choice([1, 2, 8])
        total = (inputs.read_number(p["params"]) if "params" in p
                 else PRESETS[preset].params)
        p["expert_params"] = rng.choice([0.5, 0.9, "0.5B"]) if rng.random() < 0.2 \
            else round(rng.choice([0.5, 0.9]) * total)
    elif preset == "deepseek-v3" and rng.random() < 0.3:
        p.update(experts=1, top_k=1, expert_params=0)  # the same shape, dense
    p["precision"] = rng.choice(list(memory.PRECISIONS))
    p["optimizer"] = rng.choice(list(memory.OPTIMIZERS))
    p["gpu"] = rng.choice([*inputs.GPUS, "custom"])
    if p["gpu"] == "custom" or rng.random() < 0.1:
        p.update(
            gpu_memory_gb=rng.choice([24, 48, "96", 141, 192.5]),
            gpu_tflops=rng.choice([100, 312, "989.5", 2250]),
            gpu_hbm_tbs=rng.choice([0.9, "2", 3.35, 8]),
        )
    p["gpus_per_node"] = rng.choice([1, 2, 4, 8, 8, 8, 16])
    p["nodes"] = rng.choice([1, 1, 2, 3, 4, 8, 16, 64, 512])
    for which, alpha, beta in (
        ("node_link", "node_alpha_us", "node_beta_gbs"),
        ("network_link", "net_alpha_us", "net_beta_gbs"),
    ):
        r = rng.random()
        if r < 0.15:
            p[which] = "custom"
            p[alpha], p[beta] = rng.choice([0, 1.5, 10]), rng.choice([12.5, 100, "450"])
        elif r < 0.6:
            p[which] = rng.choice(list(inputs.LINK_KEYS))
            if rng.random() < 0.2:
                p[beta] = rng.choice([25, 200])
    gpus = p["gpus_per_node"] * p["nodes"]
    p["tp"] = rng.choice([t for t in (1, 1, 2, 4, 8) if p["gpus_per_node"] % t == 0])
    p["pp"] = rng.choice([q for q in (1, 1, 2, 4, 8, 16) if gpus % (p["tp"] * q) == 0])
    if rng.random() < 0.3:
        p["cp"] = rng.choice([c for c in (1, 2, 4, 8, 16)
                              if gpus % (p["tp"] * p["pp"] * c) == 0])
    if rng.random() < 0.3:
        p["tp_overlap"] = rng.choice([0, 0.3, "0.5", 1])
    layers = p.get("layers", 32)
    if p["pp"] > 1 and rng.random() < 0.4:
        p["virtual_stages"] = rng.choice([2, 3, 4, 64])
    if p["pp"] > 2 and rng.random() < 0.4:
        p["edge_layers"] = rng.choice([1, 2, 3, layers // p["pp"], layers])
    p["zero"] = rng.choice([0, 1, 2, 3])
    if p["zero"] and rng.random() < 0.25:
        p["shard"] = rng.choice([1, 2, 4, 8])
    if rng.random() < 0.2:
        p["zero3_live"] = rng.choice([0, 1e9, "5e7", "2B"])
    p["offload"] = rng.random() < 0.2
    r = rng.random()  # none, full, selective, attention, as bools or as names
    p["checkpointing"] = r < 0.3 if r < 0.5 else rng.choice(
        ["selective", "selective", " Selective", "full", "none", "attention", "Attention"])
    p["flash_attention"] = rng.random() < 0.8
    p["dropout"] = rng.random() < 0.3
    if rng.random() < 0.5:
        p["sequence_parallel"] = rng.random() < 0.3
    dp = max(1, gpus // (p["tp"] * p["pp"] * p.get("cp", 1)))
    experts = int(p.get("experts", 256 if preset == "deepseek-v3" else 1))
    if experts > 1 and rng.random() < 0.6:
        group = dp * p.get("cp", 1)
        p["ep"] = rng.choice([e for e in (1, 2, 4, 8, 16, 64)
                              if experts % e == 0 and group % e == 0])
        if rng.random() < 0.5:
            p["ep_overlap"] = rng.choice([0, 0.3, "0.5", 1])
    if rng.random() < 0.6:
        micro = rng.choice([1, 2, 4, 8, 16, 32])
        p["micro_batches"] = micro
        p["global_batch"] = dp * micro * rng.choice([1, 2, 4])
    elif rng.random() < 0.5:
        p["global_batch"] = dp * rng.choice([1, 2, 8, 64])
    if rng.random() < 0.3:
        p["tokens"] = rng.choice([1e9, "300B", "2T", 15.6e12])
    p["mfu"] = rng.choice([0.25, 0.4, "0.5", 1])
    return p


#: Bad values for each kind of input: negatives, zero, letters, a decimal comma, too
#: large, wrong type.
_BAD = {
    "whole": [
        -3,
        0,
        "0",
        2.5,
        "abc",
        "1,5",
        "1e30",
        True,
        "",
        " 8 x",
        "nan",
        "inf",
        "-0.5",
        [1],
    ],
    "positive": [-1, 0, "0", "x", "1,5", "1e30", False, "inf", "-inf"],
    "nonneg": [-1, "-0.1", "abc", "1e12"],
    "choice": ["h200", 7, "", "NVLink", True, None],
    "bool": ["yes", 1, 0, "true"],
    "switch": ["yes", 1, 0, "true", "", "selectively", None],
}


def _bad_plan(rng: random.Random) -> dict:
    """A plan with one bad value, or a combination the planner must refuse."""
    p = _random_plan(rng)
    if rng.random() < 0.55:
        field = rng.choice(inputs.FIELDS)
        value = rng.choice(_BAD[field.kind])
        if value is None:  # the default of a choice: refuse another way
            value = "nope"
        p[field.name] = value
        if field.name in ("node_alpha_us", "node_beta_gbs"):
            p["node_link"] = "custom"
        if field.name in ("net_alpha_us", "net_beta_gbs"):
            p["network_link"] = "custom"
        if field.name in ("gpu_memory_gb", "gpu_tflops", "gpu_hbm_tbs"):
            p["gpu"] = "custom"
        return p
    kind = rng.choice(
        ["tp", "heads", "pp", "mp", "shard", "batch", "missing", "gpus", "link", "memory",
         "kv", "cp", "moe", "ep"]
    )
    if kind == "kv":
        p.update(kv_heads=rng.choice([3, 5, 7]))
    elif kind == "cp":
        p.update(cp=rng.choice([3, 16, 1024]), seq_len=rng.choice([1000, 4096, 4097]))
    elif kind == "moe":
        p.update(rng.choice([{"experts": 4, "top_k": 8}, {"expert_params": 1e9},
                             {"experts": 8, "top_k": 2},
                             {"experts": 8, "top_k": 2, "expert_params": 1e15}]))
    elif kind == "ep":
        p.update(rng.choice([{"ep": 2}, {"ep": 3, "experts": 8, "top_k": 2,
                                          "expert_params": 1e9},
                             {"ep": 64, "experts": 64, "top_k": 2, "expert_params": 1e9}]))
    elif kind == "tp":
        p["tp"] = rng.choice([3, 16, 32])
    elif kind == "heads":
        p.update(
            model="custom",
            params=1e9,
            layers=24,
            hidden=rng.choice([1000, 2048]),
            heads=rng.choice([3, 24, 7]),
            vocab=50257,
            seq_len=1024,
            tp=1,
        )
    elif kind == "pp":
        p.update(pp=rng.choice([200, 97]), tp=1)
    elif kind == "mp":
        p.update(gpus_per_node=8, nodes=rng.choice([1, 3]), tp=8, pp=rng.choice([3, 5]))
    elif kind == "shard":
        p.update(shard=rng.choice([3, 5, 7]), zero=rng.choice([0, 1, 3]))
    elif kind == "batch":
        p.update(
            global_batch=rng.choice([1, 7, 1001]), micro_batches=rng.choice([None, 3])
        )
    elif kind == "missing":
        p = {
            k: v
            for k, v in p.items()
            if k not in ("params", "layers", "hidden", "heads")
        }
        p["model"] = "custom"
        if rng.random() < 0.5:
            p.update(gpu="custom", gpu_memory_gb=None)
    elif kind == "gpus":
        p.update(gpus_per_node=1024, nodes=rng.choice([2048, 1_000_000]))
    elif kind == "memory":  # less than the CUDA context and the margin take
        p.update(gpu_memory_gb=rng.choice([0.5, 0.8]))
    else:
        p.update(
            node_link="custom", node_alpha_us=None, node_beta_gbs=rng.choice([None, 10])
        )
    return p


def _cases(n: int, seed: int = 30) -> list[tuple[dict, str]]:
    rng = random.Random(seed)
    fixed = [
        ({}, "en"),
        ({"zero": 3}, "nl"),
        (
            {
                "model": "llama3-405b",
                "nodes": 2048,
                "tp": 8,
                "pp": 16,
                "zero": 1,
                "checkpointing": True,
            },
            "en",
        ),
        ({"model": "t5-11b", "gpu": "a100-80", "global_batch": 64}, "en"),
        ({"model": "llama2-70b", "nodes": 4}, "nl"),
        ({"offload": True, "zero": 2}, "en"),
        ({"model": "llama3-405b", "nodes": 2048, "tp": 8, "cp": 16, "pp": 16,
          "seq_len": 131072, "global_batch": 128, "zero": 2, "edge_layers": 7}, "en"),
        ({"model": "deepseek-v3", "gpu": "h800", "nodes": 256, "pp": 16, "ep": 64,
          "zero": 1}, "nl"),
        ({"model": "llama2-70b", "nodes": 4, "cp": 4, "tp": 2, "ep": 2}, "en"),
        ({"model": "llama2-70b", "nodes": 4, "cp": 3}, "nl"),
        ({"model": "llama2-70b", "nodes": 4, "tp": 8, "sequence_parallel": False,
          "mlp": "14336"}, "en"),
        ({"model": "llama2-7b", "mlp": -1}, "nl"),
        ({"model": "llama2-70b", "nodes": 4, "tp": 8, "checkpointing": "selective"}, "en"),
        ({"model": "llama2-70b", "nodes": 4, "tp": 8, "sequence_parallel": False,
          "checkpointing": "selective", "zero": 3}, "nl"),
        ({"model": "gpt3-175b", "nodes": 64, "tp": 8, "pp": 8, "flash_attention": False,
          "dropout": True, "checkpointing": "selective"}, "en"),
        ({"model": "deepseek-v3", "gpu": "h800", "nodes": 256, "pp": 16, "ep": 64,
          "zero": 1, "cp": 2, "checkpointing": "selective"}, "en"),
        ({"model": "llama2-7b", "zero": 3, "global_batch": 64, "micro_batches": 1,
          "checkpointing": "selective", "gpu": "a100-40"}, "nl"),
        ({"checkpointing": "maybe"}, "nl"),
    ]
    out = list(fixed)
    while len(out) < n:
        spec = _random_plan(rng) if rng.random() < 0.6 else _bad_plan(rng)
        out.append((spec, rng.choice(["en", "nl"])))
    return out


def _leaves(data: object, path: str = "") -> dict[str, object]:
    if isinstance(data, dict):
        out: dict[str, object] = {}
        for key, value in data.items():
            out.update(_leaves(value, f"{path}.{key}"))
        return out
    return {path: data}


def _same(a: object, b: object) -> bool:
    if (
        isinstance(a, bool)
        or isinstance(b, bool)
        or a is None
        or b is None
        or isinstance(a, str)
    ):
        return a == b and type(a) is type(b)
    if a == b:
        return True
    return abs(a - b) <= 1e-12 * max(abs(a), abs(b))


def _python(spec: dict, language: str) -> dict:
    try:
        return {"result": plan(Plan(**spec), language).as_dict()}
    except ValueError as err:
        return {"error": str(err)}


@pytest.mark.skipif(
    NODE is None,
    reason="node (Node.js) is not installed: the JavaScript "
    "twin of the planner cannot be run outside a browser here",
)
def test_javascript_equals_python_on_hundreds_of_plans():
    cases = _cases(N_PLANS)
    payload = json.dumps({"tables": widget.js_tables(), "cases": cases})
    done = subprocess.run(
        [NODE, "-e", _RUNNER, str(PLANNER_JS)],
        input=payload,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    js = json.loads(done.stdout)
    assert len(js) == len(cases)
    kinds = {"result": 0, "error": 0, "fits": 0, "no fit": 0, "change": 0}
    spread = {"cp": 0, "ep": 0, "experts": 0, "kv_heads": 0, "tp without sp": 0,
              "gated mlp": 0, "gelu mlp": 0, "none": 0, "full": 0, "selective": 0,
              "attention": 0}
    for (spec, language), got in zip(cases, js):
        want = _python(spec, language)
        assert "crash" not in got, (spec, got["crash"])
        assert want.keys() == got.keys(), (spec, language, want, got)
        if "error" in want:
            assert got["error"] == want["error"], (spec, language)
            assert "\n" not in want["error"]
            kinds["error"] += 1
            continue
        a, b = _leaves(want["result"]), _leaves(got["result"])
        assert a.keys() == b.keys(), (spec, sorted(a.keys() ^ b.keys()))
        wrong = {k: (a[k], b[k]) for k in a if not _same(a[k], b[k])}
        assert not wrong, (spec, language, wrong)
        kinds["result"] += 1
        kinds["fits" if want["result"]["memory"]["fits"] else "no fit"] += 1
        kinds["change"] += want["result"]["change"] is not None
        setup = want["result"]["setup"]
        for name in ("cp", "ep", "experts"):
            spread[name] += setup[name] > 1
        spread["kv_heads"] += setup["kv_heads"] != setup["heads"]
        spread["tp without sp"] += setup["tp"] > 1 and not setup["sequence_parallel"]
        spread["gated mlp" if setup["mlp"] else "gelu mlp"] += 1
        spread[setup["checkpointing"]] += 1
    # The sample reaches every outcome: plans that fit, that do not, changes found,
    # errors.
    assert kinds["result"] >= 200 and kinds["error"] >= 150, kinds
    assert (
        kinds["fits"] >= 50 and kinds["no fit"] >= 50 and kinds["change"] >= 20
    ), kinds
    # Context and expert parallelism, mixtures, grouped-query attention, tensor
    # parallelism without sequence parallelism, both MLPs and every checkpointing
    # setting are drawn.
    assert min(spread.values()) >= 30, spread


# --------------------------------------------------------------------------------------
# The model by hand
# --------------------------------------------------------------------------------------


def test_model_states_follow_zero_and_model_parallelism():
    base = dict(
        model="custom",
        params=8e9,
        layers=32,
        hidden=4096,
        heads=32,
        vocab=32000,
        seq_len=2048,
        nodes=2,
        global_batch=16,
    )
    ddp = plan(**base).memory
    assert (ddp.parameters, ddp.gradients, ddp.optimizer) == (
        16e9,
        16e9,
        96e9,
    )  # 2 + 2 + 12
    z3 = plan(**base, zero=3).memory
    assert (z3.parameters, z3.gradients, z3.optimizer) == (
        1e9,
        1e9,
        6e9,
    )  # over 16 GPUs
    tp_pp = plan(
        **base, tp=2, pp=4, zero=1
    ).memory  # dp = 2: optimizer over 2; the first stage's 8 layers and the embedding
    first = 8 * (8e9 - 32000 * 4096) / 32 + 32000 * 4096
    assert tp_pp.parameters == pytest.approx(2 * first / 2, rel=1e-12)
    assert tp_pp.optimizer == pytest.approx(12 * first / 2 / 2, rel=1e-12)
    # Llama 3's stages: 7 layers on the first (and last), 8 on the 14 others.
    llama = plan(model="llama3-405b", nodes=16, tp=8, pp=16, zero=1, edge_layers=7)
    even = plan(model="llama3-405b", nodes=16, tp=8, pp=16, zero=1)
    assert (llama.setup.edge_layers, llama.setup.middle_layers) == (7, 8)
    assert (even.setup.edge_layers, even.setup.middle_layers) == (8, 8)
    # Interleaved as the paper ran it: a layer per chunk, 8 chunks per GPU, the first
    # and the last holding the embedding and the head alone; the bubble (p - 1) / (v m).
    chunks = plan(model="llama3-405b", nodes=16, tp=8, pp=16, zero=1, edge_layers=7,
                  virtual_stages=8, micro_batches=16)
    assert (chunks.setup.edge_layers, chunks.setup.middle_layers) == (7, 8)
    assert chunks.time.bubble_share == pytest.approx(15 / (8 * 16 + 15))
    assert llama.memory.parameters < even.memory.parameters
    hybrid = plan(**base, zero=3, shard=4).memory  # sharded over 4, replicated 4 times
    assert hybrid.parameters == 4e9
    offload = plan(**base, zero=2, offload=True).memory
    assert offload.optimizer == 0 and offload.host == 96e9 / 16
    fp32 = plan(**base, precision="fp32", optimizer="sgd").memory
    assert (fp32.parameters, fp32.gradients, fp32.optimizer) == (32e9, 32e9, 0)


def test_activations_follow_korthikanti_with_sequence_parallelism_and_1f1b():
    base = dict(
        model="custom",
        params=8e9,
        layers=32,
        hidden=4096,
        heads=32,
        vocab=32000,
        seq_len=2048,
        global_batch=64,
        micro_batches=8,
        flash_attention=False,
        dropout=True,
    )
    s, b, h, a = 2048, 8, 4096, 32
    per_layer = s * b * h * 34 + 5 * a * s * s * b  # the paper's 16-bit figure
    one = plan(**base, gpus_per_node=1).memory
    assert one.activations == 32 * per_layer + b * s * 32000 * 4
    split = plan(**{**base, "global_batch": 8}, gpus_per_node=8, tp=2, pp=4).memory
    # micro-batch of 1; the first of 4 stages keeps 4 micro-batches of 8 layers, split 2
    # ways
    assert split.activations == 4 * 8 * (s * h * 34 + 5 * a * s * s) / 2
    ckpt = plan(
        **{**base, "flash_attention": True, "dropout": False},
        gpus_per_node=1,
        checkpointing=True,
    ).memory
    assert ckpt.activations == 32 * s * b * h * 2 + s * b * h * 32 + b * s * 32000 * 4


def test_tensor_parallelism_without_sequence_parallelism_keeps_norms_and_masks_whole():
    """Korthikanti et al. 2022, Table 2: ``s b h (10 + 24 / t + 5 a s / (h t))`` per layer
    without sequence parallelism; with checkpointing each layer's input stays whole."""
    base = dict(model="custom", params=8e9, layers=32, hidden=4096, heads=32, vocab=32000,
                seq_len=2048, global_batch=8, micro_batches=8, flash_attention=False,
                dropout=True, gpus_per_node=8, tp=2, pp=4)
    s, h, a, t = 2048, 4096, 32, 2
    sp, no_sp = plan(**base).memory, plan(**base, sequence_parallel=False).memory
    assert sp.activations == 4 * 8 * (s * h * 34 + 5 * a * s * s) / t
    layer = s * h * 10 + (s * h * 24 + 5 * a * s * s) / t
    assert no_sp.activations == pytest.approx(4 * 8 * layer, rel=1e-12)
    ckpt = dict(base, checkpointing=True)
    kept = plan(**ckpt).memory.activations, plan(**ckpt, sequence_parallel=False)
    recomputed = (s * h * 34 + 5 * a * s * s) / t
    assert kept[0] == pytest.approx(4 * 8 * s * h * 2 / t + recomputed)
    whole = 4 * 8 * s * h * 2 + layer
    assert kept[1].memory.activations == pytest.approx(whole, rel=1e-12)
    # Only activations and their memory-bound work move; the messages do not.
    one, other = plan(**base).time, plan(**base, sequence_parallel=False).time
    assert one.tp == other.tp and one.pp == other.pp and one.dp == other.dp
    assert other.memory_bound > one.memory_bound
    # At t = 1 the input changes nothing.
    single = dict(base, tp=1, gpus_per_node=4)
    assert (plan(**single).as_dict()["memory"]
            == plan(**single, sequence_parallel=False).as_dict()["memory"])
    words = report.sentences(kept[1])
    assert any("tensor 2 (without sequence parallelism) x pipeline 4" in w for w in words)
    assert any("tensor 2 (sequence parallel) x" in w
               for w in report.sentences(plan(**base)))
    assert any("tensor 1 x" in w for w in report.sentences(plan(**single)))


#: Llama layers measured on fake ranks (course_lib.parallel.at_scale): (preset, tp, sequence
#: parallelism), one sequence of LLAMA_SEQ tokens per rank.
LLAMA_SEQ = 512
LLAMA_LAYOUTS = (("llama2-7b", 1, False), ("llama2-70b", 1, False), ("llama2-70b", 8, False),
                 ("llama2-70b", 8, True))


@pytest.fixture(scope="module")
def measured_llama_layers(one_torch_thread: None) -> dict[tuple[str, int, bool], int]:
    """Bytes one real-size Llama layer saves on rank 0 of 8 (Hugging Face's Llama, BF16 mixed
    precision, SDPA, FSDP on a fake process group): the activations after the forward pass of a
    2-layer stage less those of a 1-layer stage."""
    from course_lib.parallel import at_scale

    out = {}
    for name, tp, sp in LLAMA_LAYOUTS:
        acts = [at_scale.measure_rank(name, at_scale.Layout(
            8, "zero3", tp=tp, layers=n, seq_len=LLAMA_SEQ, sequence_parallel=sp),
            isolate=False).after_forward["activations"] for n in (1, 2)]
        out[name, tp, sp] = acts[1] - acts[0]
    return out


def _planned_layer(name: str, tp: int, sp: bool, **wrong: object) -> float:
    """The planner's bytes per layer and micro-batch of one sequence on one GPU; ``wrong``:
    setup values swapped in to make the formula a wrong one."""
    setup = plan(model=name, seq_len=LLAMA_SEQ, gpus_per_node=8, tp=tp,
                 sequence_parallel=sp, global_batch=8 // tp).setup
    assert setup.micro_batch == 1 and setup.flash_attention and not setup.dropout
    return recomputation.saved_per_layer(dataclasses.replace(setup, **wrong))


def _left_out(name: str, tp: int, sp: bool) -> float:
    """What the planner names and leaves out: Hugging Face's FP32 copy of each RMSNorm
    input (8 s b h; split t ways with sequence parallelism), SDPA's log-sum-exp (4 a s b,
    split by the heads) and, with sequence parallelism, the projections' inputs torch's
    plan keeps gathered (2 e s b h (1 - 1/t); Megatron-LM keeps them split)."""
    shape = PRESETS[name].shape
    sbh = LLAMA_SEQ * shape.hidden
    gathered = 2 * 2 * sbh * (1 - 1 / tp) if sp else 0.0
    return 8 * sbh / (tp if sp else 1) + 4 * shape.n_heads * LLAMA_SEQ / tp + gathered


def _agrees(planned: float, measured: int, left_out: float) -> bool:
    return abs(planned / (measured - left_out) - 1) < 0.005


@pytest.mark.slow
def test_a_llama_layer_saves_what_fake_ranks_measure_less_the_named_terms(
        measured_llama_layers):
    """Llama 2 7B and 70B (grouped-query attention, SwiGLU MLP), with and without tensor
    parallelism: the planner's count is the measurement less the named terms, within 0.5 %."""
    for (name, tp, sp), measured in measured_llama_layers.items():
        planned = _planned_layer(name, tp, sp)
        assert _agrees(planned, measured, _left_out(name, tp, sp)), (name, tp, sp,
                                                                      planned, measured)
    # Per s b h (the numbers the docstrings quote): 37.5 planned and 45.5 measured for 7B.
    h = PRESETS["llama2-7b"].shape.hidden
    assert _planned_layer("llama2-7b", 1, False) / (LLAMA_SEQ * h) == 37.5
    assert measured_llama_layers["llama2-7b", 1, False] / (LLAMA_SEQ * h) == pytest.approx(
        45.53, abs=0.01)


@pytest.mark.slow
@pytest.mark.parametrize("wrong, missed", [
    ("GELU's 4h MLP for the gated one", set(LLAMA_LAYOUTS)),
    ("K and V without the key-value ratio", {k for k in LLAMA_LAYOUTS if k[0] == "llama2-70b"}),
])
def test_a_wrong_layer_formula_misses_the_measurement(measured_llama_layers, wrong, missed):
    """The comparison can fail: GELU's count for a gated MLP misses every layout; K and V as
    wide as Q misses Llama 2 70B (8 key-value heads of 64), not 7B (as many as heads)."""
    for key, measured in measured_llama_layers.items():
        swap = {"mlp": 0} if wrong.startswith("GELU") else {
            "kv_heads": PRESETS[key[0]].shape.n_heads}
        agrees = _agrees(_planned_layer(*key, **swap), measured, _left_out(*key))
        assert agrees is (key not in missed), (wrong, key)


def test_a_gpt_block_still_counts_korthikanti_s_activations():
    """Every preset without a gated MLP and one key-value head per head (GPT-3; T5 and
    DeepSeek-V3, whose notes say so) saves Korthikanti's 16 e s b h per layer (fused
    attention, no dropout) and sbh (34 + 5 a s / h) with dropout and the scores, split as
    his Table 2 splits it."""
    for key, preset in PRESETS.items():
        if preset.mlp:
            assert key.startswith("llama")
            continue
        shape = preset.shape
        for tp, sp, flash, dropout in ((1, True, True, False), (8, True, False, True),
                                       (8, False, False, True), (8, False, True, False)):
            setup = plan(model=key, gpus_per_node=8, tp=tp, sequence_parallel=sp,
                         flash_attention=flash, dropout=dropout, global_batch=8 // tp,
                         seq_len=1024).setup
            assert setup.kv_heads == shape.n_heads and setup.mlp == 0
            s, h, a = 1024, shape.hidden, shape.n_heads
            layer = s * h * (34 if dropout else 32) + (
                (5 if dropout else 2) * a * s * s if not flash else 0)
            whole = s * h * (10 if dropout else 8) if not sp else 0
            assert recomputation.saved_per_layer(setup) == pytest.approx(
                whole + (layer - whole) / tp, rel=1e-12), (key, tp, sp, flash, dropout)


def test_the_memory_bound_work_moves_the_model_s_own_activations():
    """A Llama block saves more than its twin with GPT's MLP: more memory, and the step's
    memory-bound work writes and reads those bytes (HBM_PASSES times each); the products
    are the same."""
    gated, gelu = plan(model="llama2-70b", nodes=4), plan(model="llama2-70b", nodes=4, mlp=0)
    assert gated.setup.mlp == 28672 and gelu.setup.mlp == 0
    assert gated.memory.activations > gelu.memory.activations
    # Per layer and token, in units of e h: 12.5 + 28 (gate, up, SiLU, product of 3.5 h)
    # against 12.5 + 16 (GELU's input and output, 4 h each).
    more = recomputation.saved_per_layer(gated.setup) - recomputation.saved_per_layer(gelu.setup)
    assert (recomputation.saved_per_layer(gated.setup) / recomputation.saved_per_layer(gelu.setup)
            == pytest.approx(40.5 / 28.5, rel=1e-12))
    s = gated.setup
    moved = s.micro_batches * model.HBM_PASSES * s.layers * more / s.hbm
    assert gated.time.memory_bound - gelu.time.memory_bound == pytest.approx(moved, rel=1e-9)
    assert gated.time.compute - gated.time.memory_bound == pytest.approx(
        gelu.time.compute - gelu.time.memory_bound, rel=1e-12)


def test_step_time_by_hand():
    r = plan(
        model="llama2-7b",
        nodes=4,
        tp=2,
        pp=2,
        global_batch=64,
        micro_batches=8,
        checkpointing=True,
        mfu=0.5,
    )
    s, t = r.setup, r.time
    tokens = 64 * 4096
    # The memory-bound part: 16 layers of 16-bit activations (18.75 s h elements each:
    # Q, K, V, attention's output and the norms' and projections' inputs, 8 s h, and the
    # SwiGLU MLP's gate, up, SiLU and product, 4 x 11,008 wide, 10.75 s h; split 2 ways),
    # 8 micro-batches, three passes with recomputation, 3.35 TB/s.
    bound = 8 * 3 * 16 * (18.75 * 4096 * 4096 * 2 / 2) / 3.35e12
    # Attention's Q K^T and A V: 4 s h per token, layer and pass (forward, backward
    # twice, recomputed forward), half of it under a causal mask in a fused kernel.
    attention = 4 * (4 * 32 * 4096 * 4096) / 2 * tokens
    assert model.attention_flops(s) == attention
    # The products at half the peak, plus their HBM traffic (chapter 10's roofline,
    # each from its shape: compute_time, checked by hand below).
    dense, fused = compute_time.slowdowns(s)
    roof = 32 * 989.5e12 * 0.5
    traffic = (8 * 6.74e9 * tokens * dense + attention * fused) / roof
    assert 0 < dense < 0.2 and 0 < fused < 0.2
    assert t.memory_bound == pytest.approx(bound + traffic, rel=1e-12)
    assert t.compute == pytest.approx(
        (8 * 6.74e9 * tokens + attention) / roof + traffic + bound, rel=1e-12
    )
    message = 4096 * 1 * 4096 * 2
    nvlink = cost_model.LINKS["NVLink 4 (H100)"]
    assert t.tp == pytest.approx(
        16 * 8 * 6 * cost_model.ring_allreduce_time(message, 2, nvlink)
    )
    assert t.pp == pytest.approx(
        2 * 8 * (nvlink.latency + message / 2 / nvlink.bandwidth)
    )
    assert t.bubble_share == pipeline.theoretical_bubble(2, 8) == 1 / 9
    assert t.bubble == pytest.approx((t.compute + t.tp + t.pp) / 8)
    assert t.step == pytest.approx(
        t.compute + t.tp + t.pp + t.bubble + t.dp_exposed + t.offload
    )
    assert s.dp == 8 and r.steps == pytest.approx(2e12 / tokens)
    assert r.days == pytest.approx(r.steps * t.step / 86400)
    assert r.gpu_hours == pytest.approx(r.days * 24 * 32)
    assert r.achieved_mfu == pytest.approx(
        6 * 6.74e9 * tokens / (t.step * 32 * 989.5e12)
    )
    # One GPU, no parallelism: nothing but compute.
    alone = plan(model="llama2-7b", gpus_per_node=1, global_batch=4).time
    assert alone.step == alone.compute and alone.dp == alone.tp == alone.pp == 0


def test_data_parallel_communication_hides_behind_compute_or_not():
    slow = plan(
        model="llama2-7b",
        nodes=16,
        network_link="eth-100g",
        global_batch=128,
        micro_batches=1,
    ).time
    assert slow.dp > 0 and slow.dp_exposed == pytest.approx(
        max(0, slow.dp - 2 / 3 * slow.compute)
    )
    fast = plan(model="llama2-7b", nodes=16, zero=3, global_batch=128,
                micro_batches=1, seq_len=2048)
    # FSDP: one all-gather per layer in the forward pass, one more and a reduce-scatter
    # in the backward pass; each prefetched behind the compute of its pass but the first.
    cluster = cost_model.Cluster("NVLink 4 (H100)", "InfiniBand NDR", 8)
    one = cost_model.allgather_time(6.74e9 * 2 / 32, 128, cluster)
    t = fast.time
    forward, backward = t.compute / 3, 2 * t.compute / 3
    assert t.dp == pytest.approx(3 * 32 * one, rel=1e-12)
    assert t.dp_exposed == pytest.approx(
        one + 31 * max(0, one - forward / 32) + max(0, 64 * one - backward), rel=1e-12)
    # On a slow network the gathers no longer hide.
    ethernet = plan(model="llama2-7b", nodes=16, zero=3, global_batch=128,
                    micro_batches=1, seq_len=2048, network_link="eth-100g").time
    assert ethernet.dp_exposed > 10 * t.dp_exposed
    offload = plan(model="llama2-7b", zero=2, offload=True).time
    assert offload.offload == pytest.approx(
        6.74e9 / 8 * 4 / 64e9
    )  # bf16 grads out, weights in


def test_exposed_data_parallel_time_is_never_below_0_nor_above_all_of_it():
    """Sweep ZeRO stages, micro-batches, pipelines and links: the part of data
    parallelism compute does not hide lies in [0, dp]. DeepSeek-V3 on 16 stages with
    ZeRO 1 has a micro-batch's forward shorter than one unit's gather."""
    rng = random.Random(12)
    seen = 0
    for _ in range(300):
        spec = dict(model=rng.choice(["llama2-7b", "llama3-405b", "deepseek-v3"]),
                    zero=rng.choice([0, 1, 2, 3]), pp=rng.choice([1, 4, 16]),
                    nodes=rng.choice([4, 64, 256]), gpu="h800",
                    network_link=rng.choice(["ib-ndr", "eth-100g"]),
                    micro_batches=rng.choice([None, 64]),
                    checkpointing=rng.choice([False, True]))
        try:
            t = plan(**spec).time
        except ValueError:
            continue
        seen += 1
        assert 0 <= t.dp_exposed <= t.dp * (1 + 1e-12), (spec, t.dp_exposed, t.dp)
    assert seen >= 150
    deepseek = plan(model="deepseek-v3", gpu="h800", nodes=256, pp=16, zero=1).time
    assert 0 < deepseek.dp_exposed <= deepseek.dp


def test_interleaving_overlap_and_width_move_the_step_as_the_text_says():
    base = dict(model="llama3-405b", nodes=256, tp=8, pp=16, global_batch=512,
                micro_batches=32, checkpointing=True)
    plain, two = plan(**base).time, plan(**base, virtual_stages=2).time
    assert plain.bubble == pytest.approx(
        (plain.compute + plain.tp + plain.pp) * 15 / 32, rel=1e-12)
    assert two.bubble == pytest.approx((two.compute + two.tp + two.pp) * 15 / 64,
                                       rel=1e-12)
    assert two.pp == pytest.approx(2 * plain.pp, rel=1e-12)
    assert plan(**base, virtual_stages=2).setup.virtual_stages == 2
    # Interleaving holds more: 16 micro-batches of the first stage's 8 layers and 15
    # more of its first chunk's 4 (Megatron-LM's penalty 1 + 15 / 32, for 8 x 16).
    assert model.held_layers(plan(**base, virtual_stages=2).setup) == 16 * 8 + 15 * 4
    assert model.held_layers(plan(**base).setup) == 16 * 8
    half = plan(**base, tp_overlap=0.5).time
    assert half.tp == pytest.approx(plain.tp / 2, rel=1e-12)
    # never hidden for longer than the compute: on a slow link, all of it cannot hide
    slow = dict(base, node_link="custom", node_alpha_us=10, node_beta_gbs=1)
    bare, hidden = plan(**slow).time, plan(**slow, tp_overlap=1).time
    assert bare.tp > bare.compute
    assert hidden.tp == pytest.approx(bare.tp - bare.compute, rel=1e-12)
    # The memory-bound share falls as the model widens (chapter 10's roofline), so the
    # per-GPU throughput at one MFU rises with the hidden size.
    shares = [plan(model="custom", params=12 * 24 * h * h, layers=24, hidden=h,
                   heads=h // 128, vocab=51200, seq_len=2048, gpus_per_node=1,
                   global_batch=1).time for h in (2048, 4096, 8192)]
    fractions = [t.memory_bound / t.compute for t in shares]
    assert fractions[0] > fractions[1] > fractions[2] > 0


def test_the_cheapest_change_is_the_first_that_fits():
    # T5-11B with DDP: 16 bytes x 11.3B do not fit in 80 GB; ZeRO stage 1 is enough.
    r = plan(model="t5-11b", gpu="a100-80", global_batch=64)
    assert not r.fits and (r.change.kind, r.change.start, r.change.end) == (
        "zero",
        0,
        1,
    )
    # Activations too large: ZeRO does not help, checkpointing does.
    r = plan(model="llama2-7b", zero=3, global_batch=64, micro_batches=1)
    assert not r.fits and r.change.kind == "checkpointing"
    changed = plan(
        model="llama2-7b", zero=3, global_batch=64, micro_batches=1, checkpointing=True
    )
    assert changed.fits
    # Nothing alone fits Llama 2 70B with DDP on 32 GPUs: say so.
    r = plan(model="llama2-70b", nodes=4)
    assert not r.fits and r.change is None
    assert "no single change fits" in report.report(r)


# --------------------------------------------------------------------------------------
# Bad input: one line, saying what to do, in English and Dutch
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "inputs_, message",
    [
        (
            {"tp": 3},
            "tensor parallelism stays inside a node: the tensor-parallel degree 3 "
            "must divide the 8 GPUs per node; use one of 1, 2, 4, 8",
        ),
        (
            {
                "model": "custom",
                "params": 1e9,
                "layers": 24,
                "hidden": 2048,
                "heads": 24,
                "vocab": 50257,
                "seq_len": 1024,
            },
            "the hidden size 2,048 does not split into 24 attention heads; use a "
            "number of heads that divides 2,048",
        ),
        (
            {
                "tp": 8,
                "model": "custom",
                "params": 1e9,
                "layers": 24,
                "hidden": 2052,
                "heads": 12,
                "vocab": 50257,
                "seq_len": 1024,
            },
            "the tensor-parallel degree 8 must divide the hidden size "
            "2,052 and the 12 attention heads; use one "
            "of 1, 2, 4",
        ),
        (
            {"pp": 40},
            "40 pipeline stages for 32 layers: every stage needs at least one layer; "
            "use at most 32 stages",
        ),
        (
            {"nodes": 3, "tp": 8, "pp": 16, "model": "llama3-405b"},
            "tensor x pipeline degree 8 x 16 = 128 does not divide the 24 GPUs; use "
            "degrees whose product divides 24",
        ),
        (
            {"tp": -2},
            "tensor-parallel degree must be a whole number from 1 to 1,024, got -2",
        ),
        (
            {"nodes": 0},
            "number of nodes must be a whole number from 1 to 1,048,576, got 0",
        ),
        (
            {"nodes": "two"},
            "number of nodes must be a number, got 'two'; write it with a decimal "
            "point, e.g. 0.4, 7B or 2e12",
        ),
        ({"mfu": math.nan},
         "MFU of the matrix products must be a number above 0 and at most 1, got nan"),
        ({"mfu": "1,5"}, "MFU of the matrix products must be a number, got '1,5'"),
        ({"tp_overlap": 1.5}, "share of tensor parallelism's communication hidden "
         "must be a number from 0 to 1, got 1.5"),
        ({"ep_overlap": -0.5}, "share of expert parallelism's all-to-alls hidden must "
         "be a number from 0 to 1, got -0.5"),
        ({"zero3_live": -1}, "number of parameters ZeRO 3 keeps gathered must be a "
         "whole number from 0 to"),
        ({"virtual_stages": 2}, "2 virtual stages interleave a pipeline: use 2 or more "
         "pipeline stages, or 1 virtual stage"),
        ({"virtual_stages": 0}, "number of virtual stages must be a whole number from 1 "
         "to 100,000, got 0"),
        ({"model": "llama3-405b", "nodes": 16, "tp": 8, "pp": 16, "virtual_stages": 8},
         "16 stages x 8 virtual stages need a layer each, and there are 126; use at "
         "most 7 virtual stages"),
        ({"pp": 2, "edge_layers": 3}, "fewer layers on the first and last stage need a "
         "middle stage: use 3 or more pipeline stages (not 2), or leave the edge layers "
         "out"),
        ({"pp": 4, "edge_layers": 2, "virtual_stages": 4}, "2 layers on the first and "
         "on the last stage leave more than one of their 4 virtual stages without a "
         "layer (one may hold the embedding or the head alone); use at least 3 edge "
         "layers, or fewer virtual stages"),
        ({"pp": 4, "edge_layers": 16}, "16 layers on the first and on the last stage "
         "leave too few of the 32 for the other 4 - 2 stages; use at most 15"),
        ({"pp": 4, "edge_layers": 13, "virtual_stages": 4}, "13 layers on the first and "
         "on the last stage leave too few of the 32 for the other 4 - 2 stages; use at "
         "most 12"),
        ({"gpu": "custom", "gpu_memory_gb": 80, "gpu_tflops": 989},
         "a custom GPU needs its GPU memory bandwidth (TB/s): give it, or choose a GPU "
         "type"),
        ({"gpu_hbm_tbs": 0}, "GPU memory bandwidth (TB/s) must be a number above 0 and "
         "at most 1,000, got 0"),
        (
            {"tokens": -1e12},
            "number of tokens to train on must be a number above 0 and at most "
            "1,000,000,000,000,000,000, got -1000000000000",
        ),
        (
            {"gpu": "h200"},
            "unknown GPU type 'h200'; valid values: a100-40, a100-80, h100, h800, "
            "l40s, custom",
        ),
        (
            {"checkpointing": "yes"},
            "activation checkpointing must be one of none, full, selective, attention (false: none, "
            "true: full), got 'yes'",
        ),
        ({"sequence_parallel": 1}, "sequence parallelism must be true or false, got 1"),
        ({"zero": 4}, "ZeRO stage must be a whole number from 0 to 3, got 4"),
        ({"mlp": -1}, "width of the SwiGLU MLP (0: a 4h-wide GELU MLP) must be a whole "
         "number from 0 to 10,000,000, got -1"),
        ({"mlp": "20M"}, "width of the SwiGLU MLP (0: a 4h-wide GELU MLP) must be a whole "
         "number from 0 to 10,000,000, got '20M'"),
        (
            {"shard": 2},
            "a sharding factor needs ZeRO stage 1, 2 or 3; stage 0 (DDP) shards "
            "nothing",
        ),
        (
            {"shard": 3, "zero": 3},
            "the sharding factor 3 must divide the 8 data-parallel replicas; "
            "use one of 1, 2, 4, 8",
        ),
        (
            {"global_batch": 12},
            "a global batch of 12 sequences does not split over the 8 data-parallel "
            "replicas; use a multiple of 8",
        ),
        (
            {"global_batch": 16, "micro_batches": 4},
            "a global batch of 16 sequences does not split into "
            "8 replicas x 4 micro-batches; use a "
            "multiple of 32",
        ),
        (
            {"model": "custom", "params": "7B"},
            "a custom model needs its number of layers: give it, or " "choose a preset",
        ),
        (
            {"gpu": "custom", "gpu_memory_gb": 96},
            "a custom GPU needs its GPU peak (TFLOP/s)",
        ),
        (
            {"network_link": "custom", "net_alpha_us": 5},
            "a custom link needs its bandwidth between " "nodes (GB/s)",
        ),
        (
            {"nodes": 1_000_000, "gpus_per_node": 8},
            "8,000,000 GPUs are more than the planner takes",
        ),
    ],
)
def test_bad_input_is_one_line_saying_what_to_do(inputs_, message):
    with pytest.raises(ValueError) as err:
        plan(**inputs_)
    text = str(err.value)
    assert message in text and "\n" not in text


def test_bad_input_in_dutch():
    with pytest.raises(
        ValueError,
        match="^de tensor-parallelle graad moet een geheel getal van 1 "
        "tot en met 1.024 zijn, niet -2$",
    ):
        plan(tp=-2, language="nl")
    with pytest.raises(
        ValueError,
        match="^de MFU van de matrixproducten moet een getal boven 0 en hoogstens 1 "
        "zijn, niet 1,5$",
    ):
        plan(mfu=1.5, language="nl")
    with pytest.raises(ValueError, match="^het sequentieparallellisme moet waar of onwaar "
                       "zijn \\(true of false\\), niet 'ja'$"):
        plan(sequence_parallel="ja", language="nl")
    with pytest.raises(ValueError, match="^2 virtuele stages verweven een pipeline"):
        plan(virtual_stages=2, language="nl")
    with pytest.raises(ValueError, match="^de breedte van de SwiGLU-MLP \\(0: een 4h brede "
                       "GELU-MLP\\) moet een geheel getal van 0 tot en met 10.000.000 zijn, "
                       "niet 2,5$"):
        plan(mlp=2.5, language="nl")
    with pytest.raises(ValueError, match="^16 lagen op de eerste en op de laatste stage "
                       "laten te weinig van de 32 over voor de andere 4 - 2 stages; "
                       "neem hoogstens 15$"):
        plan(pp=4, edge_layers=16, language="nl")
    with pytest.raises(ValueError, match="valid values: en, nl"):
        plan(language="fr")


def test_numbers_are_read_as_typed():
    assert inputs.read_number("7B") == 7e9 and inputs.read_number(" 2e12 ") == 2e12
    assert inputs.read_number("1.3b") == 1.3e9 and inputs.read_number(".5") == 0.5
    for text in ("1,5", "seven", "", "1_000", "0x10", "inf", "nan", "1 000", "7BB"):
        assert inputs.read_number(text) is None, text
    assert inputs.shown(1e-5) == "1e-05" and inputs.shown(2.5, "nl") == "2,5"
    assert inputs.shown(3.0) == "3" and inputs.shown(1e16) == "1e+16"
    assert plan(params="6.74B", model="llama2-7b").setup.params == 6.74e9


def test_presets_are_the_published_shapes():
    shapes = {
        key: (
            p.params,
            p.shape.n_layers,
            p.shape.hidden,
            p.shape.n_heads,
            p.shape.vocab,
            p.seq_len,
        )
        for key, p in PRESETS.items()
    }
    assert shapes == {
        "gpt3-175b": (175e9, 96, 12288, 96, 50257, 2048),
        "llama2-7b": (6.74e9, 32, 4096, 32, 32000, 4096),
        "llama2-70b": (68.98e9, 80, 8192, 64, 32000, 4096),
        "llama3-405b": (405e9, 126, 16384, 128, 128000, 8192),
        "t5-11b": (11.3e9, 48, 1024, 128, 32000, 512),
        "deepseek-v3": (671e9, 61, 7168, 128, 129280, 4096),
    }
    # DeepSeek-V3: 37B of its 671B parameters active per token (its section 1).
    deepseek = plan(model="deepseek-v3", gpu="h800", nodes=256, pp=16, ep=64, zero=1)
    assert model.active_params(deepseek.setup) == pytest.approx(37e9, rel=0.02)
    assert (PRESETS["llama3-405b"].kv_heads, PRESETS["llama2-70b"].kv_heads) == (8, 8)
    # The SwiGLU MLPs' widths of the released configs; GPT-3, T5 and DeepSeek-V3 as GELU's.
    assert {key: p.mlp for key, p in PRESETS.items()} == {
        "gpt3-175b": 0, "llama2-7b": 11008, "llama2-70b": 28672, "llama3-405b": 53248,
        "t5-11b": 0, "deepseek-v3": 0}
    # The decoders' shapes are memory.py's, not a second table.
    assert PRESETS["gpt3-175b"].shape is memory.MODEL_PRESETS["gpt3-175B"]
    assert PRESETS["llama3-405b"].shape is memory.MODEL_PRESETS["llama3-405B-shape"]
    assert all(
        p.source in ("brown2020gpt3", "touvron2023llama2", "dubey2024llama3",
                     "raffel2020t5", "deepseek2024v3")
        for p in PRESETS.values()
    )


# --------------------------------------------------------------------------------------
# Texts, tables, the world
# --------------------------------------------------------------------------------------


def test_texts_are_in_both_languages_with_the_same_placeholders():
    assert list(texts.PLAN_EN) == list(texts.PLAN_NL)
    for key, english in texts.PLAN_EN.items():
        dutch = texts.PLAN_NL[key]
        assert key.startswith("plan_") and key not in i18n.EN, key
        assert dutch != english and dutch == dutch.strip() and "  " not in dutch, key
        fields = [
            [f for f in string.Formatter().parse(t) if f[1] is not None]
            for t in (english, dutch)
        ]
        assert sorted(f[1] for f in fields[0]) == sorted(f[1] for f in fields[1]), key
        # Plain {name} only: the JavaScript fills them too, and knows no format specs.
        assert all(
            f[1].isidentifier() and not f[2] and f[3] is None for f in fields[0]
        ), key
    for (
        field
    ) in inputs.FIELDS:  # every input has a name for messages and a label for the view
        assert f"plan_what_{field.name}" in texts.PLAN_EN
        assert f"plan_label_{field.name}" in texts.PLAN_EN or field.name.endswith(
            ("_us", "_gbs")
        )
    assert texts.text("plan_fits", "nl", total="1", usable="2", gpu="H100").startswith(
        "past: 1 GB"
    )
    with pytest.raises(ValueError, match="valid values: en, nl"):
        texts.text("plan_fits", "fr")


def test_js_tables_carry_python_s_tables():
    tables = widget.js_tables()
    json.dumps(tables, allow_nan=False)
    assert (
        tables["links"]["nvlink4"]["bandwidth"]
        == cost_model.LINKS["NVLink 4 (H100)"].bandwidth
    )
    assert tables["gpus"]["h100"]["peak"]["bf16-mixed"] == 989.5e12
    assert tables["constants"]["bucket_temporaries"] == 2 * 25e6
    assert tables["texts"]["nl"]["plan_fits"] == texts.PLAN_NL["plan_fits"]


def test_report_says_it_all():
    text = report.report(plan(model="llama2-7b", zero=3))
    for words in (
        "Memory per GPU",
        "optimizer states and master weights",
        "fits:",
        "compute",
        "pipeline bubble",
        "days on 8 GPUs",
        "GPU-hours",
        "achieved MFU",
    ):
        assert words in text, words
    dutch = report.report(plan(model="llama2-70b", nodes=4, language="nl"))
    assert "past niet" in dutch and "geen enkele wijziging alleen past" in dutch
    assert "<table" in report.report_html(plan())


def test_the_view_opens_on_memory_or_on_everything():
    from course_lib.planner.widget import FOCUSES, planner

    assert FOCUSES == ("all", "memory")
    folded = planner(model="llama2-7b", focus="memory")._repr_html_()
    assert '"focus": "memory"' in folded and "plan_more_time" in folded
    assert '"focus": "all"' in planner()._repr_html_()
    with pytest.raises(ValueError, match="focus must be one of all, memory"):
        planner(focus="time")


@pytest.mark.parametrize("language", ["en", "nl"])
def test_less_gpu_memory_than_the_context_takes_is_refused_with_the_least(language):
    with pytest.raises(ValueError, match=r"848 MB.*805 MB.*5 %"):
        plan(Plan(gpu_memory_gb=0.5), language=language)
    assert plan(Plan(gpu_memory_gb=0.9)).memory.usable > 0  # just above: a little is left


def test_tensor_parallelism_splits_the_gathered_layers_of_full_sharding():
    base = dict(model="llama2-70b", nodes=8, zero=3, global_batch=64, micro_batches=1)
    one, eight = plan(**base).memory, plan(**base, tp=8).memory
    layer = (12 * 8192**2 + 13 * 8192) * 2  # chapter 2's gathered layer, BF16
    fsdp = model.fsdp_buffers(plan(**base).setup)
    assert one.buffers == pytest.approx(2 * layer + 50e6 + fsdp, rel=1e-12)
    assert eight.buffers == pytest.approx(2 * layer / 8 + 50e6 + fsdp / 8, rel=1e-12)


def test_deepspeeds_live_parameters_replace_fsdps_whole_layers():
    """zero3_live (DeepSpeed's stage3_max_live_parameters): that many parameters gathered
    and as many gradients reduced stand for FSDP's two gathered layers, root unit and
    FP32 layer gradients, whatever the tensor degree (a GPU's count); it changes
    nothing below stage 3, nor the step's time."""
    base = dict(model="llama2-70b", nodes=8, zero=3, global_batch=64, micro_batches=1)
    for tp in (1, 8):
        fsdp = plan(**base, tp=tp)
        live = plan(**base, tp=tp, zero3_live="1e9")
        assert live.memory.buffers == pytest.approx(50e6 + 1e9 * (2 + 2), rel=1e-12)
        assert (live.memory.buffers < fsdp.memory.buffers) == (tp == 1)  # 70B: 0.85B
        assert live.time == fsdp.time and live.memory.activations == fsdp.memory.activations
    assert "ZeRO 3, at most 1B parameters gathered" in report.report(live)
    assert "parameters gathered" not in report.report(fsdp)
    assert plan(**base, zero3_live=2e10).memory.buffers > plan(**base).memory.buffers
    for zero in (0, 1, 2):
        assert (plan(**{**base, "zero": zero}, zero3_live=1e9).memory
                == plan(**{**base, "zero": zero}).memory)


def _pytorch_peak(p: int, v: int, m: int, chunk_layers: list[int]) -> int:
    """The most layer activations the first stage holds in PyTorch's own interleaved 1F1B:
    its op list for rank 0 (``ScheduleInterleaved1F1B._calculate_single_rank_operations``,
    a private method, called on a schedule built without stages), forward passes adding
    their chunk's layers and backward passes freeing them."""
    from torch.distributed.pipelining import schedules

    schedule = object.__new__(schedules.ScheduleInterleaved1F1B)
    schedule.pp_group_size, schedule.n_local_stages, schedule.rank = p, v, 0
    schedule._n_microbatches = m
    schedule.number_of_rounds = max(1, m // p)
    schedule.microbatches_per_round = m // schedule.number_of_rounds
    kinds = schedules._ComputationType
    held = peak = 0
    for action in schedule._calculate_single_rank_operations(0):
        if action is None:
            continue
        layers = chunk_layers[action.stage_index // p]
        if action.computation_type == kinds.FORWARD:
            held += layers
        elif action.computation_type in (kinds.FULL_BACKWARD, kinds.BACKWARD_INPUT):
            held -= layers
        peak = max(peak, held)
    return peak


@pytest.mark.parametrize("p", [2, 3, 4, 8, 16])
def test_the_first_stage_holds_what_pytorchs_interleaved_schedule_holds(p):
    """model.held_layers against PyTorch's ScheduleInterleaved1F1B, counted op by op: every
    chunk count, micro-batch count it accepts (rounds of m // max(1, m // p)) and end stage,
    equal chunks or a first chunk with fewer layers (none: the embedding alone)."""
    from types import SimpleNamespace

    cases = 0
    for v in (2, 3, 4, 8):
        for m in range(1, 3 * p + 1):
            if m % max(1, m // p):
                continue  # PyTorch refuses these
            for edge, middle in ((v, v), (2 * v, 2 * v), (v - 1, v), (2 * v - 1, 2 * v),
                                 (3 * v, 3 * v + 1)):
                chunk = math.ceil(middle / v)
                first = max(0, edge - (v - 1) * chunk)
                s = SimpleNamespace(pp=p, virtual_stages=v, micro_batches=m,
                                    edge_layers=edge, middle_layers=middle)
                mine = model.held_layers(s)
                assert mine == _pytorch_peak(p, v, m, [first] + [chunk] * (v - 1)), \
                    (p, v, m, edge, middle)
                cases += 1
    assert cases >= 100
    # The check can fail: Megatron-LM's penalty on every layer of a Llama 3 stage (16
    # stages, 8 one-layer chunks, the first the embedding alone) counts 18 x 7, not 16 x 7.
    penalty = math.ceil((1 + 15 / (16 * 8)) * 16) * 7
    llama = SimpleNamespace(pp=16, virtual_stages=8, micro_batches=32, edge_layers=7,
                            middle_layers=8)
    assert model.held_layers(llama) == _pytorch_peak(16, 8, 32, [0] + [1] * 7) == 16 * 7
    assert penalty == 126 != model.held_layers(llama)
