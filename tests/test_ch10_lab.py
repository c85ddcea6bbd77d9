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


def mfu_forward_only(tokens_per_second, n_params, layers, hidden, seq_len, peak_flops):
    return tokens_per_second * (2 * n_params + 4 * layers * hidden * seq_len) / peak_flops


def mfu_macs(tokens_per_second, n_params, layers, hidden, seq_len, peak_flops):
    return tokens_per_second * (3 * n_params + 6 * layers * hidden * seq_len) / peak_flops


def mfu_percent(tokens_per_second, n_params, layers, hidden, seq_len, peak_flops):
    return 100 * tokens_per_second * (6 * n_params + 12 * layers * hidden * seq_len) / peak_flops


def mfu_no_attention(tokens_per_second, n_params, layers, hidden, seq_len, peak_flops):
    return tokens_per_second * 6 * n_params / peak_flops


WRONG = {
    "matmul_intensity": {"FLOPs for MACs": intensity_macs, "bits for bytes": intensity_bits,
                         "only the weights' bytes": intensity_weights_only},
    "model_flops_utilisation": {"forgot the backward pass": mfu_forward_only, "FLOPs for MACs": mfu_macs,
            "forgot attention": mfu_no_attention, "percent for a fraction": mfu_percent},
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


def test_the_mfu_reference_gives_palms_published_46_2_percent():
    (palm,) = [c for c in ch10_lab.model_flops_utilisation.cases() if c.label == "PaLM 540B"]
    assert round(ch10_lab.model_flops_utilisation.reference(*palm.args), 3) == 0.462


def test_attention_outweighs_the_weights_in_the_long_sequence_case():
    (long,) = [c for c in ch10_lab.model_flops_utilisation.cases() if c.label.startswith("long sequences")]
    _, n_params, layers, hidden, seq_len, _ = long.args
    assert 12 * layers * hidden * seq_len > 6 * n_params


def test_a_triad_moves_three_arrays_by_streams_count():
    kernel = stream.StreamKernel("triad", 1000)
    assert kernel.bytes_moved == 3 * 1000 * 4


def test_the_triad_is_timed_in_milliseconds():
    measured = ch10_lab.triad_time.measure()
    assert list(measured) == ["triad, one thread"]
    assert 0.1 < measured["triad, one thread"] < 5000  # 201 MB at 40 MB/s .. 2 TB/s
