"""Chapter 10's lab: wrong answers, written as a learner might, that its checkers must recognise;
the references against torch's FLOP counter and PaLM's published MFU, and the triad's bytes."""

import math

import torch
from torch.utils.flop_counter import FlopCounterMode

from course_lib.chapters import ch10_lab
from course_lib.hardware import stream


def intensity_macs(m, k, n, bits):
    return m * k * n / ((m * k + k * n + m * n) * bits / 8)  # one per multiply-add


def intensity_bits(m, k, n, bits):
    return 2 * m * k * n / ((m * k + k * n + m * n) * bits)  # bits where bytes belong


def intensity_weights_only(m, k, n, bits):
    return 2 * m * k * n / (k * n * bits / 8)  # as if only the weights were moved


def hfu_model_flops(tokens_per_second, n_params, layers, hidden, seq_len, peak_flops):
    return tokens_per_second * (6 * n_params + 12 * layers * hidden * seq_len) / peak_flops


def hfu_step_twice(tokens_per_second, n_params, layers, hidden, seq_len, peak_flops):
    return 2 * tokens_per_second * (6 * n_params + 12 * layers * hidden * seq_len) / peak_flops


def hfu_macs(tokens_per_second, n_params, layers, hidden, seq_len, peak_flops):
    return tokens_per_second * (4 * n_params + 8 * layers * hidden * seq_len) / peak_flops


def hfu_percent(tokens_per_second, n_params, layers, hidden, seq_len, peak_flops):
    return 100 * tokens_per_second * (8 * n_params + 16 * layers * hidden * seq_len) / peak_flops


def hfu_no_attention(tokens_per_second, n_params, layers, hidden, seq_len, peak_flops):
    return tokens_per_second * 8 * n_params / peak_flops


WRONG = {
    "matmul_intensity": {"FLOPs for MACs": intensity_macs, "bits for bytes": intensity_bits,
                         "only the weights' bytes": intensity_weights_only},
    "hardware_flops_utilisation": {
        "the model's FLOPs": hfu_model_flops, "recomputed the backward too": hfu_step_twice,
        "FLOPs for MACs": hfu_macs, "forgot attention": hfu_no_attention,
        "percent for a fraction": hfu_percent},
}


def test_the_intensity_counts_the_flops_torch_counts_and_every_operand_once():
    for case in ch10_lab.matmul_intensity.cases():
        m, k, n, bits = case.args
        if m * k * n > 2**27:
            continue  # the big products take too long to run here
        a, b = torch.randn(m, k), torch.randn(k, n)
        with FlopCounterMode(display=False) as counter:
            a @ b
        moved = (a.numel() + b.numel() + m * n) * bits / 8
        assert math.isclose(ch10_lab.matmul_intensity.reference(*case.args),
                            counter.get_total_flops() / moved, rel_tol=1e-12), case.label


def test_one_token_through_gpt2s_mlp_moves_about_a_byte_per_flop():
    assert math.isclose(ch10_lab.matmul_intensity.reference(1, 768, 3072, 16),
                        2 * 768 * 3072 / ((768 + 768 * 3072 + 3072) * 2))


def test_the_hfu_reference_gives_megatrons_published_52_percent():
    """Megatron-LM's equation 3 (full recomputation) is 8 N + 16 L d T per token up to its
    vocabulary term: the 1T run's 502 PFLOP/s on 3,072 A100s is its "52 % of peak"."""
    exercise = ch10_lab.hardware_flops_utilisation
    (run,) = [c for c in exercise.cases() if c.label.startswith("Megatron-LM's 1T")]
    assert round(exercise.reference(*run.args), 2) == 0.52
    model = run.args[0] * (6 * run.args[1] + 12 * 128 * 25600 * 2048) / run.args[5]
    assert math.isclose(exercise.reference(*run.args) / model, 4 / 3)  # one forward more


def test_attention_outweighs_the_weights_in_the_long_sequence_case():
    (long,) = [c for c in ch10_lab.hardware_flops_utilisation.cases()
               if c.label.startswith("long sequences")]
    _, n_params, layers, hidden, seq_len, _ = long.args
    assert 16 * layers * hidden * seq_len > 8 * n_params


def test_a_triad_moves_three_arrays_by_streams_count():
    kernel = stream.StreamKernel("triad", 1000)
    assert kernel.bytes_moved == 3 * 1000 * 4


def test_the_triad_is_timed_in_milliseconds():
    measured = ch10_lab.triad_time.measure()
    assert list(measured) == ["triad, one thread"]
    assert 0.1 < measured["triad, one thread"] < 5000  # 201 MB at 40 MB/s .. 2 TB/s
