"""SparseGPT (course_lib.compression.sparsegpt): equals a plain column-by-column loop, is magnitude pruning when
H is a multiple of I, gives the exact sparsity or 2:4 pattern asked for, beats Wanda and magnitude on the
layer-wise error with correlated inputs, prunes a tiny GPT-2, and refuses bad input."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_gpt2

from course_lib.compression import gptq, prune, sparsegpt

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def correlated(n: int, d: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Inputs X = Z A with a random mixing A, and feature scales that differ, so that H is far from diagonal."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, d, generator=g, dtype=torch.float64)
    a = torch.eye(d, dtype=torch.float64) + torch.randn(d, d, generator=g, dtype=torch.float64) / d ** 0.5
    scales = torch.rand(d, generator=g, dtype=torch.float64) * 2 + 0.2
    return (z @ a * scales).to(dtype)


def weight(rows: int, cols: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def plain_sparsegpt(w: torch.Tensor, x: torch.Tensor, sparsity: float, n_m, block: int,
                    percdamp: float = 0.01) -> tuple[torch.Tensor, torch.Tensor]:
    """SparseGPT as plainly as possible, in float64: every remaining column updated at every step."""
    W, X = w.double().clone(), x.double()
    H = 2 * X.T @ X / len(X)
    H += percdamp * H.diag().mean() * torch.eye(len(H), dtype=H.dtype)
    U = torch.linalg.cholesky(torch.linalg.inv(H), upper=True)
    d = U.diag()
    keep = torch.ones(W.shape, dtype=torch.bool)
    for j in range(W.shape[1]):
        if n_m is None and j % block == 0:
            score = W[:, j:j + block] ** 2 / d[j:j + block] ** 2
            flat = torch.ones(score.numel(), dtype=torch.bool)
            flat[torch.topk(score.flatten(), round(sparsity * score.numel()), largest=False).indices] = False
            keep[:, j:j + block] = flat.view_as(score)
        if n_m is not None and j % n_m[1] == 0:
            score = W[:, j:j + n_m[1]] ** 2 / d[j:j + n_m[1]] ** 2
            top = torch.topk(score, n_m[0], dim=1).indices
            keep[:, j:j + n_m[1]] = torch.zeros_like(score, dtype=torch.bool).scatter_(1, top, True)
        q = W[:, j] * keep[:, j]
        error = (W[:, j] - q) / U[j, j]
        W[:, j:] -= torch.outer(error, U[j, j:])
        W[:, j] = q
    return W, keep


@pytest.mark.parametrize("n_m,block", [(None, 16), (None, 64), ((2, 4), 16), ((1, 4), 8)])
def test_equals_a_plain_column_by_column_loop(n_m, block):
    w, x = weight(12, 48, 1, torch.float64), correlated(200, 48, 2, torch.float64)
    result = sparsegpt.sparsegpt_prune_layer(w, x, sparsity=0.5, n_m=n_m, block_size=block)
    ref_w, ref_keep = plain_sparsegpt(w, x, 0.5, n_m, block)
    assert torch.equal(result.mask, ref_keep)
    torch.testing.assert_close(result.weight, ref_w, rtol=0, atol=1e-10)
    assert (result.weight[~result.mask] == 0).all()


@pytest.mark.parametrize("sparsity", [0.25, 0.5, 0.7])
def test_with_h_a_multiple_of_the_identity_it_is_magnitude_pruning(sparsity):
    """H = c I: no error is worth spreading and every [H⁻¹]_jj is the same, so the saliency is |w|."""
    w = weight(8, 32, 3)
    result = sparsegpt.sparsegpt_prune_layer(w, 3.0 * torch.eye(32), sparsity=sparsity, block_size=32)
    assert torch.equal(result.mask, prune.magnitude_mask(w, sparsity))
    assert torch.equal(result.weight, w * result.mask)
    two_four = sparsegpt.sparsegpt_prune_layer(w, 3.0 * torch.eye(32), n_m=(2, 4))
    assert torch.equal(two_four.mask, prune.n_m_mask(w.abs(), 2, 4))


def test_the_sparsity_and_the_pattern_are_exact():
    w, x = weight(16, 96, 4), correlated(300, 96, 5)
    result = sparsegpt.sparsegpt_prune_layer(w, x, sparsity=0.6, block_size=32)
    for i in range(0, 96, 32):  # each block of columns holds exactly its share of zeros
        assert int((~result.mask[:, i:i + 32]).sum()) == round(0.6 * 16 * 32)
    assert result.sparsity == pytest.approx(0.6, abs=1e-3)
    two_four = sparsegpt.sparsegpt_prune_layer(w, x, n_m=(2, 4))
    assert ((two_four.weight != 0).reshape(-1, 4).sum(dim=1) == 2).all()
    assert torch.equal(two_four.mask, two_four.weight != 0)


@pytest.mark.parametrize("n_m", [None, (2, 4)])
def test_beats_wanda_and_magnitude_on_the_layer_error(n_m):
    """On correlated inputs of unequal scales SparseGPT's layer error is below Wanda's, which is far below plain
    magnitude's; without its updates SparseGPT's own mask does worse."""
    w, inputs = weight(32, 128, 6), correlated(1500, 128, 7)
    x, held_out = inputs[:1000], inputs[1000:]  # calibration and held-out tokens of one distribution
    norms = x.norm(dim=0)
    if n_m is None:
        magnitude, wanda = prune.row_mask(w.abs(), 0.5), prune.row_mask(w.abs() * norms, 0.5)
    else:
        magnitude, wanda = prune.n_m_mask(w.abs(), *n_m), prune.n_m_mask(w.abs() * norms, *n_m)
    result = sparsegpt.sparsegpt_prune_layer(w, x, sparsity=0.5, n_m=n_m)
    errors = [gptq.layer_error(w, w * magnitude, held_out), gptq.layer_error(w, w * wanda, held_out),
              gptq.layer_error(w, result.weight, held_out)]
    assert errors[2] < 0.95 * errors[1] and errors[1] < 0.6 * errors[0]
    mask_only = gptq.layer_error(w, w * result.mask, held_out)  # SparseGPT's mask without its updates
    assert errors[2] < 0.9 * mask_only


def test_prunes_every_block_matrix_of_a_model():
    model = tiny_gpt2(hidden=32, vocab=64, layers=2, positions=32, seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    g = torch.Generator().manual_seed(1)
    calibration = [{"input_ids": torch.randint(0, 64, (4, 32), generator=g)} for _ in range(2)]
    pruned = sparsegpt.sparsegpt_prune_model(model, calibration, 0.5)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # the original is untouched
    assert prune.sparsity_of(pruned) == pytest.approx(0.5)
    two_four = sparsegpt.sparsegpt_prune_model(model, calibration, n_m=(2, 4))
    for name, w in prune.prunable_weights(two_four).items():
        w_out_in = w.detach().t()  # Conv1D stores [in, out]
        assert ((w_out_in != 0).reshape(-1, 4).sum(dim=1) == 2).all(), name
    held_out = torch.randint(0, 64, (4, 32), generator=g)
    masks = prune.wanda_masks(model, 0.5, {n: torch.ones(w.shape[0]) for n, w in prune.prunable_weights(model).items()})
    magnitude = prune.apply_masks(tiny_gpt2(hidden=32, vocab=64, layers=2, positions=32, seed=0), masks)
    with torch.no_grad():
        reference = model(held_out).logits
        err_sparsegpt = (pruned(held_out).logits - reference).pow(2).mean()
        err_magnitude = (magnitude(held_out).logits - reference).pow(2).mean()
    assert err_sparsegpt < err_magnitude


def test_bad_input_is_refused():
    w, x = weight(8, 32, 9), correlated(64, 32, 10)
    with pytest.raises(ValueError, match="sparsity"):
        sparsegpt.sparsegpt_prune_layer(w, x, sparsity=1.5)
    with pytest.raises(ValueError, match="n_m must be"):
        sparsegpt.sparsegpt_prune_layer(w, x, n_m=(4, 2))
    with pytest.raises(ValueError, match="n_m must be"):
        sparsegpt.sparsegpt_prune_layer(w, x, n_m=(2, 3), block_size=128)
    with pytest.raises(ValueError, match="multiple of 4"):
        sparsegpt.sparsegpt_prune_layer(weight(8, 30, 9), correlated(64, 30, 10), n_m=(2, 4), block_size=4)
    with pytest.raises(ValueError, match="exactly one"):
        sparsegpt.sparsegpt_prune_layer(w)
    with pytest.raises(ValueError, match=r"hessian must be \[32, 32\]"):
        sparsegpt.sparsegpt_prune_layer(w, hessian=torch.eye(8))
    with pytest.raises(ValueError, match="matrix"):
        sparsegpt.sparsegpt_prune_layer(w[0], x)
    bad = w.clone()
    bad[1, 2] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        sparsegpt.sparsegpt_prune_layer(bad, x)
    with pytest.raises(ValueError, match="not positive definite"):
        sparsegpt.sparsegpt_prune_layer(w, hessian=torch.ones(32, 32), percdamp=0)
    model = tiny_gpt2(hidden=16, vocab=40, layers=1, positions=32, seed=0)
    with pytest.raises(ValueError, match="no calibration data"):
        sparsegpt.sparsegpt_prune_model(model, [])
    with pytest.raises(ValueError, match="outside the model's vocabulary"):
        sparsegpt.sparsegpt_prune_model(model, [torch.full((2, 8), 40)])
