"""The planner's context and expert parallelism (course_lib.planner.model) against
chapter 12's library (course_lib.parallel.context_parallel and experts).

* Context parallelism: the bytes a GPU sends are chapter 12's formula, and what its
  all-gather of K and V counts on two real ranks; activations shrink as 1 / cp; ZeRO
  shards over d c GPUs; the K/V collectives are in the step (dropping them is caught).
* A mixture of experts: 6 N_active T, the experts' states split over ep GPUs, the
  all-to-all bytes equal to what the layer sends on two real ranks.
* Bad degrees: one line, in English and in Dutch, the same in the JavaScript.
"""

from __future__ import annotations

import json
import math
import subprocess

import pytest

from course_lib.hardware import roofline
from course_lib.parallel import context_parallel, cost_model, experts
from course_lib.planner import model, widget
from course_lib.planner.model import plan
from test_planner import NODE, PLANNER_JS, _RUNNER

#: A small custom model: 4 heads of 8 (2 key-value heads), as chapter 12's checks run.
SMALL = dict(model="custom", params=1_000_000, layers=4, hidden=32, heads=4, kv_heads=2,
             vocab=1000, precision="fp32", gpus_per_node=2, nodes=1, global_batch=1)
#: Llama 3 405B's 128K stage (Dubey et al. 2024, Table 4, row 3).
LONG = dict(model="llama3-405b", nodes=2048, tp=8, cp=16, pp=16, seq_len=131072,
            global_batch=128, micro_batches=16, zero=2, edge_layers=7)
DEEPSEEK = dict(model="deepseek-v3", gpu="h800", nodes=256, pp=16, ep=64, zero=1)


# --------------------------------------------------------------------------------------
# Context parallelism
# --------------------------------------------------------------------------------------


def test_context_parallel_bytes_are_chapter_12s_formula():
    s = plan(**LONG).setup
    kv_here, d_head, e = 8 // 8, 16384 // 128, 2
    by_hand = (16 - 1) * 2 * (131072 // 16) * 1 * kv_here * d_head * e
    assert model.context_parallel_bytes(s) == by_hand == 62_914_560
    assert by_hand == context_parallel.kv_bytes_per_rank(131072, 16, kv_here, d_head, e)
    # Tensor parallelism beyond the key-value heads copies a head: at least one each.
    copied = plan(**{**SMALL, "nodes": 2}, seq_len=32, cp=2, tp=2).setup
    assert model.context_parallel_bytes(copied) == context_parallel.kv_bytes_per_rank(
        32, 2, 1, 8, 4)
    assert model.context_parallel_bytes(plan(**{**SMALL, "gpus_per_node": 1},
                                             seq_len=32).setup) == 0


@pytest.mark.slow
def test_context_parallel_bytes_are_what_two_real_ranks_send():
    """Chapter 12's all-gather of K and V, float32 on two gloo ranks: the bytes it counts
    in the forward pass are the planner's for the same shape."""
    runs = [{"seq_len": 32, "heads": 4, "kv_heads": 2, "head_dim": 8, "batch": b,
             "dtype": "float32"} for b in (1, 2)]
    per_rank = context_parallel.launch_cp_check(2, runs, timeout=120)
    for b, run in zip((1, 2), zip(*per_rank)):
        s = plan(**{**SMALL, "global_batch": b}, seq_len=32, cp=2,
                 micro_batches=1).setup
        assert (s.cp, s.micro_batch, s.hidden // s.heads) == (2, b, 8)
        for rank in run:
            counted = rank.traffic["all-gather"].forward_bytes
            assert counted == rank.bytes_formula == model.context_parallel_bytes(s)


@pytest.mark.parametrize("flash", [True, False])
@pytest.mark.parametrize("checkpointing", [False, True])
def test_activations_shrink_as_one_over_cp(flash, checkpointing):
    """Each GPU keeps its s / cp positions (their queries' scores against all s keys
    without fused attention): the same data-parallel batch on 4 times the GPUs."""
    base = dict(model="llama2-7b", global_batch=8, micro_batches=1, zero=3,
                flash_attention=flash, checkpointing=checkpointing)
    one = plan(**base, nodes=1).memory
    four = plan(**base, nodes=4, cp=4).memory
    assert four.activations == pytest.approx(one.activations / 4, rel=1e-12)
    # ZeRO shards over the d c GPUs: 8 x 4 = 32 here.
    assert four.parameters == pytest.approx(one.parameters / 4, rel=1e-12)
    assert plan(**base, nodes=4, cp=4).setup.shard == 32


def test_context_parallel_collectives_are_in_the_step():
    """Per layer and micro-batch, an all-gather forward and a reduce-scatter backward of
    the same size on the network (t c = 128 GPUs span 16 nodes); compute is 6 N T and
    causal attention's 6 l h s per token, all of it divided over the c GPUs (balanced)."""
    r = plan(**LONG)
    s, t = r.setup, r.time
    gathered = model.context_parallel_bytes(s) * 16 / 15
    one = cost_model.ring_time("all-gather", gathered, 16, s.network_link)
    assert t.cp == pytest.approx(8 * 16 * 2 * one, rel=1e-12) and t.cp > 0
    assert t.step == pytest.approx(t.compute + t.tp + t.pp + t.cp + t.ep + t.bubble
                                   + t.dp_exposed + t.offload, rel=1e-12)
    assert t.bubble == pytest.approx((t.compute + t.tp + t.pp + t.cp) * 15 / 16,
                                     rel=1e-12)
    tokens = 128 * 131072
    attention = 6 * 126 * 16384 * 131072 * tokens
    assert model.attention_flops(s) == attention
    matmul = ((roofline.training_flops(405e9, tokens) + attention)
              / (16384 * 989.5e12 * 0.4) * 8 * 16 / 126)
    assert t.compute - t.memory_bound == pytest.approx(matmul, rel=1e-12)
    # Inside a node (t c <= 8) the collectives take NVLink; recomputation repeats the
    # forward all-gather.
    near = plan(model="llama2-7b", nodes=1, tp=2, cp=4, global_batch=4, micro_batches=4,
                checkpointing=True)
    each = cost_model.ring_time("all-gather", model.context_parallel_bytes(near.setup)
                                * 4 / 3, 4, near.setup.node_link)
    assert near.time.cp == pytest.approx(32 * 4 * 3 * each, rel=1e-12)


# --------------------------------------------------------------------------------------
# A mixture of experts and expert parallelism
# --------------------------------------------------------------------------------------


def test_a_mixture_computes_its_active_parameters_and_splits_its_experts():
    r = plan(**DEEPSEEK)
    s = r.setup
    active = s.params - s.expert_params + s.expert_params * 8 / 256
    assert model.active_params(s) == active and 36e9 < active < 38e9
    assert r.flops == roofline.training_flops(active, 14.8e12)
    # The experts' states are split 64 ways; ZeRO 1 shards their optimizer states over
    # the 128 / 64 = 2 copies of each, the dense ones' over all 128.
    dense = plan(**{**DEEPSEEK, "ep": 1}).memory
    assert r.memory.parameters < dense.parameters / 10
    moe = dict(model="custom", params=10_000_000_000, layers=8, hidden=4096, heads=32,
               vocab=32000, experts=8, top_k=2, expert_params=8_000_000_000,
               seq_len=2048, nodes=2, global_batch=16, zero=1)
    for ep in (1, 2, 8):
        m = plan(**moe, ep=ep).memory
        assert m.parameters == pytest.approx(2e9 * 2 + 8e9 * 2 / ep, rel=1e-12)
        assert m.optimizer == pytest.approx(12 * (2e9 / 16 + 8e9 / ep / (16 // ep)),
                                            rel=1e-12)


def test_expert_parallel_all_to_alls_carry_k_h_e_per_token():
    """Chapter 12's bound, k h e bytes per token in dispatch (and in combine), of which
    (ep - 1) / ep leave the GPU when the tokens spread evenly; four per layer and
    micro-batch, on the network when t ep GPUs span nodes."""
    r = plan(**DEEPSEEK)
    s, t = r.setup, r.time
    assert model.expert_parallel_bytes(s) == 63 / 64 * 8 * 4096 * 7168 * 2
    one = cost_model.ring_time("all-gather", 8 * 4096 * 7168 * 2, 64, s.network_link)
    assert t.ep == pytest.approx(4 * 120 * 4 * one, rel=1e-12)
    assert t.ep == pytest.approx(4 * 120 * 4 * (63 * s.network_link.latency
                                                + model.expert_parallel_bytes(s)
                                                / s.network_link.bandwidth), rel=1e-12)


@pytest.mark.slow
def test_expert_parallel_bytes_are_what_two_real_ranks_send():
    """Chapter 12's layer on two gloo ranks, float32, nothing dropped: each rank
    dispatches its tokens' k rows of h elements, the bound T k h e; the planner's bytes
    are (ep - 1) / ep of it, about what reaches the other rank."""
    tokens, hidden, k = 64, 8, 2
    run = {"tokens": tokens, "hidden": hidden, "experts": 4, "k": k,
           "capacity_factor": 4.0, "dtype": "float32"}
    ranks = [rank[0] for rank in experts.launch_ep_check(2, [run], timeout=120)]
    s = plan(model="custom", params=1_000_000, layers=2, hidden=hidden, heads=2,
             vocab=100, experts=4, top_k=k, expert_params=500_000, seq_len=tokens,
             precision="fp32", gpus_per_node=2, global_batch=2, ep=2).setup
    planned = model.expert_parallel_bytes(s)
    for rank in ranks:
        assert rank.traffic.dropped == 0
        assert rank.traffic.dispatch_bytes == rank.bytes_bound == planned * 2 / (2 - 1)
        assert rank.traffic.dispatch_bytes_to_others == pytest.approx(planned, rel=0.3)
    sent = sum(rank.traffic.dispatch_bytes_to_others for rank in ranks)
    assert sent / len(ranks) == pytest.approx(planned, rel=0.2)


# --------------------------------------------------------------------------------------
# Bad degrees: one line, in English and Dutch, the same in the JavaScript
# --------------------------------------------------------------------------------------

_MOE = dict(model="custom", params=1_000_000_000, layers=8, hidden=1024, heads=8,
            vocab=32000, seq_len=2048, experts=8, top_k=2, expert_params=500_000_000)
REFUSED = [
    ({**_MOE, "ep": 3},
     "the expert-parallel degree 3 must divide the 8 experts and the 8 GPUs of the data "
     "and context dimensions it is carved from; use one of 1, 2, 4, 8",
     "de expert-parallelle graad 3 moet een deler zijn van de 8 experts en van de 8 "
     "GPU's van de data- en contextdimensie waaruit hij komt; kies een van 1, 2, 4, 8"),
    ({**_MOE, "ep": 8, "tp": 2},
     "the expert-parallel degree 8 must divide the 8 experts and the 4 GPUs of the data "
     "and context dimensions it is carved from; use one of 1, 2, 4",
     "de expert-parallelle graad 8 moet een deler zijn van de 8 experts en van de 4 "
     "GPU's van de data- en contextdimensie waaruit hij komt; kies een van 1, 2, 4"),
    ({**_MOE, "top_k": 9},
     "each token goes to 9 experts, more than the 8 there are; use a top-k from 1 to 8",
     "elk token gaat naar 9 experts, meer dan de 8 die er zijn; kies een top-k van 1 tot "
     "en met 8"),
    ({"ep": 2},
     "expert parallelism spreads experts, and a dense model (1 expert) has none: give "
     "the number of experts, or use expert-parallel degree 1 (not 2)",
     "expertparallellisme verdeelt experts, en een dicht model (1 expert) heeft er "
     "geen: geef het aantal experts, of neem expert-parallelle graad 1 (niet 2)"),
    ({**_MOE, "expert_params": 0},
     "a mixture of 8 experts needs the parameters inside its experts: above 0 and below "
     "the 1,000,000,000 parameters of the whole model",
     "een mixture van 8 experts heeft de parameters in zijn experts nodig: boven 0 en "
     "onder de 1.000.000.000 parameters van het hele model"),
    ({"expert_params": 1000},
     "a dense model (1 expert) has no parameters inside experts: give 0, or give the "
     "number of experts",
     "een dicht model (1 expert) heeft geen parameters in experts: geef 0, of geef het "
     "aantal experts"),
    ({"seq_len": 1000, "cp": 8},
     "context parallelism cuts each sequence into 2 x 8 = 16 mirrored chunks (causal "
     "load balancing), and 1,000 tokens are no multiple of 16; use a context-parallel "
     "degree from 1, 2, 4, 5, 10, 20, 25, 50, 100, 125, 250, 500",
     "contextparallellisme snijdt elke sequentie in 2 x 8 = 16 gespiegelde stukken "
     "(causale lastverdeling), en 1.000 tokens zijn geen veelvoud van 16; kies een "
     "context-parallelle graad uit 1, 2, 4, 5, 10, 20, 25, 50, 100, 125, 250, 500"),
    ({"cp": 16},
     "tensor x context x pipeline degree 1 x 16 x 1 = 16 does not divide the 8 GPUs; "
     "use degrees whose product divides 8",
     "tensor- x context- x pipelinegraad 1 x 16 x 1 = 16 is geen deler van de 8 GPU's; "
     "kies graden waarvan het product een deler is van 8"),
    ({"kv_heads": 5},
     "5 key-value heads do not split the 32 attention heads into equal groups; use one "
     "of 1, 2, 4, 8, 16, 32",
     "5 key-value-heads verdelen de 32 attention-heads niet in gelijke groepen; kies een "
     "van 1, 2, 4, 8, 16, 32"),
    ({"cp": 0}, "context-parallel degree must be a whole number from 1 to 1,024, got 0",
     "de context-parallelle graad moet een geheel getal van 1 tot en met 1.024 zijn, "
     "niet 0"),
]


@pytest.mark.parametrize("inputs, english, dutch", REFUSED)
def test_bad_degrees_are_refused_in_one_line_in_both_languages(inputs, english, dutch):
    for language, message in (("en", english), ("nl", dutch)):
        with pytest.raises(ValueError) as err:
            plan(**inputs, language=language)
        assert str(err.value) == message


@pytest.mark.skipif(NODE is None, reason="node (Node.js) is not installed")
def test_the_javascript_refuses_the_same_degrees_with_the_same_words():
    cases = [[inputs, language] for inputs, *_ in REFUSED for language in ("en", "nl")]
    done = subprocess.run([NODE, "-e", _RUNNER, str(PLANNER_JS)], capture_output=True,
                          input=json.dumps({"tables": widget.js_tables(),
                                            "cases": cases}),
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    got = [case.get("error") for case in json.loads(done.stdout)]
    want = [message for _, english, dutch in REFUSED for message in (english, dutch)]
    assert got == want


def test_hidden_all_to_alls_never_exceed_the_compute_they_hide_behind():
    """``ep_overlap`` hides that share of the all-to-alls behind the busiest GPU's
    compute, never more than the compute's own time: DeepSeek-V3's all-to-alls, across
    8 nodes in BF16, outlast its compute, so even all of them hidden leave the rest
    exposed (at about the fitted efficiency); inside a node they are short, and all of
    them disappear."""
    none, half, every = (plan(**DEEPSEEK, mfu=0.6, ep_overlap=x).time for x in (0, 0.5, 1))
    assert none.ep > none.compute > none.ep / 2
    assert half.ep == pytest.approx(none.ep / 2, rel=1e-12)
    assert every.ep == pytest.approx(none.ep - none.compute, rel=1e-12) and every.ep > 0
    share = none.bubble_share
    for t in (none, every):  # the bubble idles for the busy time that is left
        busy = t.compute + t.tp + t.pp + t.cp + t.ep
        assert t.bubble == pytest.approx(busy * share / (1 - share), rel=1e-12)
    small = dict(model="custom", params=2e9, layers=8, hidden=2048, heads=16,
                 vocab=32000, seq_len=4096, experts=8, top_k=2, expert_params=1.5e9,
                 gpus_per_node=8, ep=8)
    inside, hidden = plan(**small).time, plan(**small, ep_overlap=1).time
    assert 0 < inside.ep < inside.compute and hidden.ep == 0
    assert hidden.step == pytest.approx(inside.step - inside.ep, rel=1e-12)


def test_the_report_says_what_context_and_expert_parallelism_send():
    from course_lib.planner import report

    text = report.report(plan(**LONG))
    assert "tensor 8 (sequence parallel) x context 16 x pipeline 16 x data 8" in text
    assert "each sends 62.9 MB of keys and values" in text
    assert "context-parallel K/V all-gathers" in text
    dutch = report.report(plan(**DEEPSEEK, language="nl"))
    assert "expertparallellisme over 64 GPU's: 4 all-to-alls" in dutch
    assert "37,5B van de 671B parameters actief per token" in dutch
    assert math.isclose(plan(**DEEPSEEK).time.ep_bytes, 462_422_016)
