"""What pruning really makes smaller and faster: sparse checkpoints on disk and sparse matrix products.

Chapter 6, "Pruning lab". Zeros save nothing by themselves: a dense checkpoint stores them at full
width and a dense matmul multiplies them like any other number. This module holds the two formats
that shrink a pruned state_dict (:func:`to_csr`, :func:`to_bitmask` and their inverses, written by
:func:`save_checkpoint`), the bytes each holds (:func:`storage_bytes`) and the densities below which
each beats dense (:func:`csr_break_even`, :func:`bitmask_break_even`), :func:`count_zeros` to check
the sparsity a saved file really holds, and the timings of :func:`matmul_latency` (dense with zeros,
CSR, whole rows removed) and :func:`semi_structured_latency` (2:4 sparse tensor cores, NVIDIA A100+).
"""

from __future__ import annotations

import functools
import math
import numbers
import os
import statistics
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import save_file

from course_lib.base.checks import choice, positive
from course_lib.base.tables import Table
from course_lib.base.timing import check_device, interleaved_times
from course_lib.compression.prune import check_sparsity, magnitude_mask, n_m_mask
from course_lib.compression.quant import pack_bits, unpack_bits

__all__ = [
    "FORMATS", "DENSE", "CSR", "FEWER_ROWS", "DENSE_FP16", "SEMI_STRUCTURED", "to_csr", "from_csr",
    "to_bitmask", "from_bitmask", "save_checkpoint", "load_checkpoint", "storage_bytes", "csr_break_even",
    "bitmask_break_even", "count_zeros", "LatencyRow", "matmul_latency", "latency_table",
    "semi_structured_available", "semi_structured_latency",
]  # fmt: skip

#: The checkpoint formats of :func:`save_checkpoint`.
FORMATS: tuple[str, ...] = ("dense", "csr", "bitmask")
#: Method labels of :class:`LatencyRow`.
DENSE, CSR, FEWER_ROWS = "dense x @ W.T, zeros kept", "CSR torch.sparse.mm", "dense, pruned rows removed"
DENSE_FP16, SEMI_STRUCTURED = "dense fp16", "2:4 semi-structured fp16"

_CSR_PARTS = (".csr_values", ".csr_col_indices", ".csr_crow_indices", ".shape")
_BITMASK_PARTS = (".bitmask", ".values", ".shape")
_FORMAT_KEY = "course_lib.sparse_format"  # safetensors metadata; HF files already use "format"
_NO_GPU = "needs an NVIDIA GPU with sparse tensor cores (compute capability 8.0+, e.g. A100, H100)"


def _checked(state: Any) -> dict[str, torch.Tensor]:
    if not isinstance(state, Mapping) or not state:
        raise ValueError("state must be a non-empty dict name -> tensor, e.g. model.state_dict()")
    bad = [k for k, v in state.items() if not isinstance(k, str) or not isinstance(v, torch.Tensor)]
    if bad:
        raise ValueError(f"state must map names (str) to tensors; not so for {bad[:3]}")
    return {k: v.detach().cpu() for k, v in state.items()}


def _to_sparse_csr(t: torch.Tensor) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return t.to_sparse_csr()


def _is_matrix(t: torch.Tensor) -> bool:
    return t.ndim == 2 and t.is_floating_point()


def _encode(state: Any, parts: Sequence[str], one: Callable[..., tuple]) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for name, t in _checked(state).items():
        new = dict(zip([name + p for p in parts], one(t))) if _is_matrix(t) else {name: t}
        clash = [k for k in new if k in out or (k != name and k in state)]
        if clash:
            raise ValueError(f"tensor names {clash} clash with the names the encoding derives; rename them")
        out.update(new)
    return out


def _decode(encoded: Any, parts: Sequence[str], one: Callable[..., torch.Tensor]) -> dict[str, torch.Tensor]:
    enc = _checked(encoded)
    bases = {k[: -len(parts[0])] for k in enc if k.endswith(parts[0])}
    derived = {b + p: b for b in bases for p in parts}
    missing = [k for k in derived if k not in enc]
    if missing:
        raise ValueError(f"{missing[:3]} missing: pass the whole dict that the encoder made")
    out = {}
    for key, t in enc.items():  # a matrix takes the place of its first part, so the order is kept
        if key not in derived:
            out[key] = t
        elif key.endswith(parts[0]):
            out[derived[key]] = one(*(enc[derived[key] + p] for p in parts))
    return out


def _csr_parts(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
    csr = _to_sparse_csr(t)
    fits = max(csr.values().numel(), t.shape[1]) <= torch.iinfo(torch.int32).max
    index = torch.int32 if fits else torch.int64
    shape = torch.tensor(t.shape, dtype=torch.int64)
    return csr.values(), csr.col_indices().to(index), csr.crow_indices().to(index), shape


def _from_csr_parts(values: torch.Tensor, cols: torch.Tensor, crow: torch.Tensor, shape: torch.Tensor
                    ) -> torch.Tensor:  # fmt: skip
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        csr = torch.sparse_csr_tensor(crow.long(), cols.long(), values, size=tuple(shape.tolist()))
        return csr.to_dense()


def _bitmask_parts(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
    mask = (t != 0).flatten()
    return pack_bits(mask.to(torch.uint8), 1), t.flatten()[mask], torch.tensor(t.shape, dtype=torch.int64)


def _from_bitmask_parts(bits: torch.Tensor, values: torch.Tensor, shape: torch.Tensor) -> torch.Tensor:
    numel = math.prod(shape.tolist())
    mask = unpack_bits(bits, 1, numel).bool()
    if int(mask.sum()) != values.numel():
        raise ValueError(f"the bitmask marks {int(mask.sum())} nonzeros but holds {values.numel()} values")
    out = torch.zeros(numel, dtype=values.dtype)
    out[mask] = values
    return out.view(shape.tolist())


def to_csr(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Every 2-D floating tensor of ``state`` in CSR as flat tensors; the others kept as they are.

    ``name`` becomes ``name.csr_values`` (the nonzeros, row by row), ``name.csr_col_indices`` (each
    one's column), ``name.csr_crow_indices`` (where each row starts in the values, plus the total)
    and ``name.shape`` (int64; the columns cannot be told from the indices). torch's
    ``to_sparse_csr()`` builds them with int64 indices; they are stored as int32 when they fit.
    Zeros are tested with ``!= 0``, so -0.0 counts as a zero and :func:`from_csr` gives it back
    as +0.0; NaN is kept as a value.

    Chapter 6, *Pruning lab*.
    """
    return _encode(state, _CSR_PARTS, _csr_parts)


def from_csr(encoded: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The dense state that :func:`to_csr` encoded, bit for bit (-0.0 comes back as +0.0), on the CPU.

    Chapter 6, *Pruning lab*.
    """
    return _decode(encoded, _CSR_PARTS, _from_csr_parts)


def to_bitmask(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Every 2-D floating tensor of ``state`` as a bitmask and its nonzeros; the others kept as they are.

    ``name`` becomes ``name.bitmask`` (uint8, one bit per element, 8 to a byte, element i in bit
    i % 8 of byte i // 8: chapter 5's ``quant.pack_bits(..., 1)``, the layout of
    ``numpy.packbits(..., bitorder="little")``), ``name.values`` (the
    nonzeros in row-major order) and ``name.shape`` (int64). -0.0 counts as a zero and
    :func:`from_bitmask` gives it back as +0.0; NaN is kept as a value.

    Chapter 6, *Pruning lab*.
    """
    return _encode(state, _BITMASK_PARTS, _bitmask_parts)


def from_bitmask(encoded: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The dense state that :func:`to_bitmask` encoded, bit for bit (-0.0 comes back as +0.0), on CPU.

    Chapter 6, *Pruning lab*.
    """
    return _decode(encoded, _BITMASK_PARTS, _from_bitmask_parts)


_ENCODERS = {"dense": _checked, "csr": to_csr, "bitmask": to_bitmask}
_DECODERS = {"dense": _checked, "csr": from_csr, "bitmask": from_bitmask}


def save_checkpoint(state: Mapping[str, torch.Tensor], path: str | os.PathLike, fmt: str = "dense") -> int:
    """Write ``state`` as a safetensors file in ``fmt`` (one of :data:`FORMATS`); the bytes on disk.

    Chapter 6, *Pruning lab*.
    """
    fmt = choice(fmt, FORMATS, "fmt")
    # safetensors wants contiguous tensors that share no memory (tied weights do): save copies.
    tensors = {k: v.clone(memory_format=torch.contiguous_format) for k, v in _ENCODERS[fmt](state).items()}
    save_file(tensors, os.fspath(path), metadata={_FORMAT_KEY: fmt})
    return os.path.getsize(path)


def load_checkpoint(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The dense state in a file of :func:`save_checkpoint`, whichever format it holds (no mark: dense).

    Chapter 6, *Pruning lab*.
    """
    with safe_open(os.fspath(path), framework="pt") as f:
        fmt = (f.metadata() or {}).get(_FORMAT_KEY, "dense")
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    return _DECODERS[choice(fmt, FORMATS, "format in the file's metadata")](tensors)


def storage_bytes(state: Mapping[str, torch.Tensor], fmt: str = "dense") -> int:
    """Bytes the tensors of ``state`` hold in ``fmt`` (numel x element size; a file adds its header).

    Chapter 6, *Pruning lab*.
    """
    fmt = choice(fmt, FORMATS, "fmt")
    return sum(t.numel() * t.element_size() for t in _ENCODERS[fmt](state).values())


def csr_break_even(value_bytes: int = 4, index_bytes: int = 4) -> float:
    """The density below which CSR is smaller than dense, row pointers ignored: ``v / (v + i)``.

    Dense costs ``v`` bytes an element; CSR ``v + i`` bytes a nonzero (its value and its column).

    Chapter 6, *Pruning lab*.
    """
    v = positive(value_bytes, "value_bytes", integer=True)
    return v / (v + positive(index_bytes, "index_bytes", integer=True))


def bitmask_break_even(value_bytes: int = 4) -> float:
    """The density below which a bitmask plus the nonzeros is smaller than dense: ``1 - 1 / (8 v)``.

    Dense costs ``v`` bytes an element; the bitmask 1/8 byte an element plus ``v`` bytes a nonzero.

    Chapter 6, *Pruning lab*.
    """
    return 1 - 1 / (8 * positive(value_bytes, "value_bytes", integer=True))


def count_zeros(state: Mapping[str, torch.Tensor]) -> tuple[int, int]:
    """(zeros, elements) over the 2-D floating tensors of ``state``, the ones the formats encode.

    Chapter 6, *Pruning lab*.
    """
    mats = [t for t in _checked(state).values() if _is_matrix(t)]
    return sum(int((t == 0).sum()) for t in mats), sum(t.numel() for t in mats)


@dataclass(frozen=True)
class LatencyRow:
    """One timed product: method, the weight's sparsity, best and median ms, speed-up vs the dense one.

    ``speedup`` is the best time of the first row (the dense product, nothing pruned) divided by
    this row's best time.

    Chapter 6, *Pruning lab*.
    """

    method: str
    sparsity: float
    best_ms: float
    median_ms: float
    speedup: float


def _time(cases: list[tuple[str, float, Callable[[], object]]], repeats: int, dev: torch.device
          ) -> list[LatencyRow]:  # fmt: skip
    with torch.no_grad():
        for *_, call in cases:
            call()  # warm-up: the first call picks kernels and allocates
        times = interleaved_times([call for *_, call in cases], repeats, dev)
    base = min(times[0])
    return [LatencyRow(method, s, min(t) * 1e3, statistics.median(t) * 1e3, base / min(t))
            for (method, s, _), t in zip(cases, times)]  # fmt: skip


def _sizes(*values: Any) -> list[int]:
    names = ("out_features", "in_features", "tokens", "repeats")
    return [positive(v, name, integer=True) for v, name in zip(values, names)]


def matmul_latency(
    out_features: int,
    in_features: int,
    tokens: int,
    sparsities: Sequence[float],
    repeats: int = 7,
    seed: int = 0,
    device: str | torch.device | None = None,
) -> list[LatencyRow]:
    """Time a layer's product ``x @ W.T`` with ``W`` pruned to each sparsity, three ways, interleaved.

    Per sparsity: :data:`DENSE`, the dense product with ``W`` magnitude-pruned
    (:func:`course_lib.compression.prune.magnitude_mask`; a dense matmul multiplies zeros too); :data:`CSR`,
    ``torch.sparse.mm(W_csr, x.T)``; :data:`FEWER_ROWS`, the dense product with only
    ``round((1 - s) * out_features)`` rows (at least 1) of ``W``: what removing whole neurons
    gives. Sparsity 0 always comes first, the baseline of ``speedup``. ``x`` is
    ``[tokens, in_features]``, float32, on ``device`` (default the CPU); seeded by ``seed``.

    Chapter 6, *Pruning lab*.
    """
    out_f, in_f, tokens, repeats = _sizes(out_features, in_features, tokens, repeats)
    if isinstance(sparsities, (str, numbers.Real)) or not sparsities:
        raise ValueError(f"sparsities must be a non-empty list of numbers in [0, 1), got {sparsities!r}")
    levels = [0.0] + [s for s in dict.fromkeys(map(check_sparsity, sparsities)) if s != 0.0]
    dev = check_device("cpu" if device is None else device)
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(out_f, in_f, generator=g).to(dev)
    x = torch.randn(tokens, in_f, generator=g).to(dev)
    cases = []
    for s in levels:
        pruned = w.masked_fill(~magnitude_mask(w, s), 0)
        kept = w[: max(1, round((1 - s) * out_f))]  # which rows go does not change the time
        cases += [(DENSE, s, functools.partial(torch.matmul, x, pruned.t())),
                  (CSR, s, functools.partial(torch.sparse.mm, _to_sparse_csr(pruned), x.t())),
                  (FEWER_ROWS, s, functools.partial(torch.matmul, x, kept.t()))]  # fmt: skip
    return _time(cases, repeats, dev)


def latency_table(rows: Sequence[LatencyRow]) -> Table:
    """The rows of :func:`matmul_latency` or :func:`semi_structured_latency` as a table.

    Chapter 6, *Pruning lab*.
    """
    if not rows:
        raise ValueError("latency_table() needs at least one row (from matmul_latency())")
    body = [[r.method, f"{r.sparsity:.0%}", f"{r.best_ms:.3f}", f"{r.median_ms:.3f}", f"{r.speedup:.2f}x"]
            for r in rows]  # fmt: skip
    title = "best and median of interleaved runs; speed-up = the dense product's best time / the row's"
    return Table(["method", "sparsity", "best ms", "median ms", "speed-up vs dense"], body, title=title)


def semi_structured_available(device: str | torch.device = "cuda") -> tuple[bool, str]:
    """Whether 2:4 semi-structured sparse products run on ``device``, and a sentence saying why (not).

    Chapter 6, *Pruning lab*.
    """
    try:
        from torch.sparse import to_sparse_semi_structured  # noqa: F401
    except ImportError:
        return False, f"needs torch.sparse.to_sparse_semi_structured (torch 2.1+), not in {torch.__version__}"
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"unknown device {device!r}; use 'cuda' or 'cpu'") from None
    if dev.type != "cuda":
        return False, f"{_NO_GPU}; the device asked for, {dev}, is not one"
    if not torch.cuda.is_available() or torch.version.hip:
        return False, f"{_NO_GPU}; this machine has none"
    name, (major, minor) = torch.cuda.get_device_name(dev), torch.cuda.get_device_capability(dev)
    if (major, minor) < (8, 0):
        return False, f"{_NO_GPU}; this GPU ({name}) has compute capability {major}.{minor}"
    return True, f"{name} (compute capability {major}.{minor}) has sparse tensor cores"


def semi_structured_latency(
    out_features: int, in_features: int, tokens: int, repeats: int = 7, device: str | torch.device = "cuda"
) -> list[LatencyRow]:
    """Time a 2:4-pruned fp16 layer on sparse tensor cores against the dense fp16 product, interleaved.

    Rows: :data:`DENSE_FP16` with nothing pruned (the baseline), :data:`DENSE_FP16` with the 2:4
    weight of :func:`course_lib.compression.prune.n_m_mask` (zeros kept) and :data:`SEMI_STRUCTURED`: that
    weight converted by ``torch.sparse.to_sparse_semi_structured`` and applied as
    ``F.linear(x, W)``, torch's documented pattern. Both sizes must be multiples of 64 (the
    largest of torch's smallest fp16 sparse tiles, CUTLASS's 32 x 64 and cuSPARSELt's 16 x 16);
    torch pads ``tokens``. Where :func:`semi_structured_available` says no: a RuntimeError.

    Chapter 6, *Pruning lab*.
    """
    out_f, in_f, tokens, repeats = _sizes(out_features, in_features, tokens, repeats)
    if out_f % 64 or in_f % 64:
        raise ValueError(f"2:4 sparse kernels need out_features and in_features multiples of 64, "
                         f"got {out_f} and {in_f}")  # fmt: skip
    ok, reason = semi_structured_available(device)
    if not ok:
        raise RuntimeError(f"2:4 semi-structured sparsity cannot run here: it {reason}")
    from torch.sparse import to_sparse_semi_structured

    dev = torch.device(device)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(out_f, in_f, generator=g).to(dev, torch.float16)
    x = torch.randn(tokens, in_f, generator=g).to(dev, torch.float16)
    w24 = w.masked_fill(~n_m_mask(w.abs(), 2, 4), 0)  # the 2 largest magnitudes of every 4 inputs
    sparse = to_sparse_semi_structured(w24)
    cases = [(DENSE_FP16, 0.0, functools.partial(F.linear, x, w)),
             (DENSE_FP16, 0.5, functools.partial(F.linear, x, w24)),
             (SEMI_STRUCTURED, 0.5, functools.partial(F.linear, x, sparse))]  # fmt: skip
    return _time(cases, repeats, dev)
