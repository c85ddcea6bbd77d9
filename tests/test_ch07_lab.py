"""Chapter 7's lab: wrong answers, written as a learner might, that its checkers must recognise;
the references against the library's whole GPTQ layer and worked by hand."""

import math

import torch

from course_lib.chapters import ch07_lab
from course_lib.compression import gptq


def no_factor_two(x, percdamp):
    H = x.T @ x / x.shape[0]
    return H + percdamp * torch.diag(H).mean() * torch.eye(H.shape[0], dtype=H.dtype)


def no_dampening(x, percdamp):
    return 2 * x.T @ x / x.shape[0]


def sum_over_tokens(x, percdamp):
    H = 2 * x.T @ x
    return H + percdamp * torch.diag(H).mean() * torch.eye(H.shape[0], dtype=H.dtype)


def absolute_dampening(x, percdamp):
    H = 2 * x.T @ x / x.shape[0]
    return H + percdamp * torch.eye(H.shape[0], dtype=H.dtype)


def tokens_as_features(x, percdamp):
    H = 2 * x @ x.T / x.shape[0]
    return H + percdamp * torch.diag(H).mean() * torch.eye(H.shape[0], dtype=H.dtype)


def _loop(w, U, scale, zero, bits, step):
    """A learner's loop; ``step(error, U, j)`` is what they add to the columns from j on."""
    W = w.clone()
    codes = torch.zeros(W.shape, dtype=torch.uint8)
    for j in range(W.shape[1]):
        q = torch.clamp(torch.round(W[:, j] / scale) + zero, 0, 2**bits - 1)
        codes[:, j] = q.to(torch.uint8)
        error = W[:, j] - (q - zero) * scale
        W[:, j:] -= step(error, U, j)
    return codes


def no_error_feedback(w, U, scale, zero, bits):
    q = torch.clamp(torch.round(w / scale[:, None]) + zero[:, None], 0, 2**bits - 1)
    return q.to(torch.uint8)


def wrong_diagonal(w, U, scale, zero, bits):
    return _loop(w, U, scale, zero, bits, lambda e, U, j: torch.outer(e / U[j, j] ** 2, U[j, j:]))


def no_division(w, U, scale, zero, bits):
    return _loop(w, U, scale, zero, bits, lambda e, U, j: torch.outer(e, U[j, j:]))


def round_half_away(w, U, scale, zero, bits):
    W = w.clone()
    codes = torch.zeros(W.shape, dtype=torch.uint8)
    for j in range(W.shape[1]):
        t = W[:, j] / scale
        q = torch.clamp(torch.where(t >= 0, torch.floor(t + 0.5), torch.ceil(t - 0.5)) + zero, 0, 2**bits - 1)
        codes[:, j] = q.to(torch.uint8)
        W[:, j:] -= torch.outer((W[:, j] - (q - zero) * scale) / U[j, j], U[j, j:])
    return codes


WRONG = {
    "damped_hessian": {"no factor 2": no_factor_two, "no dampening": no_dampening,
                       "sum over tokens": sum_over_tokens, "absolute dampening": absolute_dampening,
                       "tokens as features": tokens_as_features},
    "gptq_columns": {"no error feedback": no_error_feedback, "wrong diagonal": wrong_diagonal,
                     "no division": no_division, "round half away": round_half_away},
}


def test_the_two_references_give_the_codes_of_the_librarys_whole_gptq_layer():
    g = torch.Generator().manual_seed(5)
    w = torch.randn(16, 32, generator=g, dtype=torch.float64)
    x = torch.randn(200, 32, generator=g, dtype=torch.float64) @ torch.randn(32, 32, generator=g, dtype=torch.float64)
    config = gptq.GPTQConfig(4, group_size=None)
    library = gptq.gptq_quantize_layer(w, x, config)
    H = ch07_lab.damped_hessian.reference(x, config.percdamp)
    U = torch.linalg.cholesky(torch.linalg.inv(H), upper=True)
    codes = ch07_lab.gptq_columns.reference(w, U, library.scale[:, 0], library.zero[:, 0].float(), 4)
    assert torch.equal(codes, library.codes)


def test_the_hessian_worked_by_hand():
    x = torch.tensor([[1.0, 0.0], [1.0, 2.0]], dtype=torch.float64)  # two tokens
    # 2 X^T X / n = [[2, 2], [2, 4]]; mean diagonal 3; dampening 0.1 x 3 on the diagonal
    H = ch07_lab.damped_hessian.reference(x, 0.1)
    assert torch.allclose(H, torch.tensor([[2.3, 2.0], [2.0, 4.3]], dtype=torch.float64))


def test_with_nothing_to_feed_back_the_codes_are_round_to_nearest():
    w = torch.randn(4, 8, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    config = gptq.GPTQConfig(4, group_size=None, sym=False)
    scale, zero = gptq.gptq_grid(w, config)
    codes = ch07_lab.gptq_columns.reference(w, torch.eye(8, dtype=torch.float64), scale[:, 0], zero[:, 0].float(), 4)
    decoded = (codes.float() - zero.float()) * scale
    assert torch.equal(decoded, gptq.rtn_quantize_layer(w, config))


def test_the_layer_bytes_are_what_chapter_5s_storage_counts():
    measured = ch07_lab.gptq_layer_bytes.measure()
    out, cols = ch07_lab.LAYER_SHAPE
    groups = out * cols // 32
    assert measured == {"codes": out * cols // 2, "scales": 2 * groups, "zero points": groups // 2}
    assert math.isclose(8 * sum(measured.values()) / (out * cols), 4.625)  # bits a weight, all in
