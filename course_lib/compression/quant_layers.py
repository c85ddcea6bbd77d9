"""Quantized layers and models: packed weights that are decoded in the forward pass.

Chapter 5 (*Quantization*) teaches it.

:class:`QuantLinear` replaces an ``nn.Linear`` or a transformers GPT-2 ``Conv1D`` (same maths,
weight stored transposed); :class:`QuantEmbedding` replaces the token embedding. Both keep a
:class:`QuantizedWeight`, a module whose buffers are exactly the tensors of a
:class:`course_lib.compression.quant.QTensor` (packed codes, scales, zero points), and decode the weight on
every call: the memory saving is real, the arithmetic still runs in float32 (weight-only
quantization; kernels that multiply packed integers directly are what make this fast on a GPU).

:func:`quantize_model` quantizes every linear layer and, by default, the token embedding (which a
GPT-2 shares with its output layer, so both point at one quantized copy). Biases, layer norms
and position embeddings stay in float32: they are a small part of the bytes and sensitive.
:func:`prepare_qat` / :func:`finish_qat` do the same with fake quantization for training.
"""

from __future__ import annotations

import copy
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Iterator

import torch
from torch import nn
from torch.nn.utils import parametrize
from transformers.pytorch_utils import Conv1D

from course_lib.base import dtypes
from course_lib.base.checks import choice
from course_lib.compression import quant
from course_lib.compression.quant import QTensor, QuantConfig
from course_lib.numbers.memory import tensor_bytes

#: Whole-model casts that quantize_model also accepts, by name.
FLOAT_DTYPES: tuple[str, ...] = dtypes.FLOAT_NAMES

_WEIGHTS_FILE = "model.safetensors"
_META_KEY = "course_lib.quantization"


class QuantizedWeight(nn.Module):
    """A weight matrix kept as a :class:`QTensor`'s tensors (registered as buffers) and decoded on demand.

    Chapter 5, *Quantization*.
    """

    def __init__(self, q: QTensor) -> None:
        super().__init__()
        self.shape = tuple(q.shape)
        self.config = q.config
        for name, t in q.tensors().items():
            self.register_buffer(name, t)

    def qtensor(self) -> QTensor:
        """The stored tensors viewed as a :class:`QTensor` again."""
        get = self._buffers.get
        return QTensor(get("packed"), get("scale"), get("zero"), get("dq_scale"), get("dq_mean"),
                       self.shape, self.config)

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The weight the codes stand for, shaped (out features, in features)."""
        return self.qtensor().dequantize(dtype)

    @property
    def nbytes(self) -> int:
        """Bytes of the stored tensors."""
        return self.qtensor().nbytes

    def extra_repr(self) -> str:
        return f"{self.config.label}, shape={self.shape}, {self.qtensor().bits_per_value:.3f} bits/value"


def weight_matrix(module: nn.Module) -> torch.Tensor:
    """A layer's weight with one row per output (a linear layer's out features, an embedding's tokens);
    GPT-2's Conv1D stores it transposed.

    Chapter 5, *Quantization*.
    """
    return module.weight.t() if isinstance(module, Conv1D) else module.weight


class QuantLinear(nn.Module):
    """A drop-in for ``nn.Linear`` / ``Conv1D`` whose weight is packed and decoded in ``forward``.

    ``act_bits`` (optional) also rounds the input activations per token to that many bits on the
    way in (dynamic absmax quantization, as in W8A8 schemes), to study activation quantization.

    Chapter 5, *Quantization*.
    """

    def __init__(self, qweight: QuantizedWeight, bias: torch.Tensor | None, act_bits: int | None = None) -> None:
        super().__init__()
        self.qweight = qweight
        self.out_features, self.in_features = qweight.shape
        self.bias = nn.Parameter(bias.detach().clone(), requires_grad=False) if bias is not None else None
        self.act_config = (quant.QuantConfig(act_bits, "absmax", "channel", scale_dtype="fp32")
                           if act_bits is not None else None)

    @property
    def weight(self) -> torch.Tensor:
        """The decoded weight (out, in), for code that reads ``layer.weight``."""
        return self.qweight.dequantize()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.act_config is not None:
            flat = x.reshape(-1, x.shape[-1])
            x = quant.quantize_dequantize(flat, self.act_config).reshape(x.shape)
        w = self.qweight.dequantize(x.dtype)
        bias = self.bias.to(x.dtype) if self.bias is not None else None
        return nn.functional.linear(x, w, bias)

    def extra_repr(self) -> str:
        act = f", activations INT{self.act_config.bits} per token" if self.act_config else ""
        return f"in_features={self.in_features}, out_features={self.out_features}{act}"


class QuantEmbedding(nn.Module):
    """A drop-in for ``nn.Embedding`` whose table is packed; looked-up rows are decoded.

    Chapter 5, *Quantization*.
    """

    def __init__(self, qweight: QuantizedWeight, padding_idx: int | None = None) -> None:
        super().__init__()
        self.qweight = qweight
        self.num_embeddings, self.embedding_dim = qweight.shape
        self.padding_idx = padding_idx

    @property
    def weight(self) -> torch.Tensor:
        return self.qweight.dequantize()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return nn.functional.embedding(ids, self.qweight.dequantize(), self.padding_idx)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"


def _quantize_named(w: torch.Tensor, config: QuantConfig | str, name: str) -> QTensor:
    """quantize() with the parameter's name in any error message."""
    try:
        return quant.quantize(w.detach(), config)
    except ValueError as err:
        raise ValueError(f"cannot quantize {name}: {err}") from None


def _set_module(root: nn.Module, name: str, new: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    setattr(root.get_submodule(parent_name) if parent_name else root, child, new)


def _targets(model: nn.Module, embeddings: bool) -> Iterator[tuple[str, nn.Module]]:
    """The layers quantize_model replaces, input embedding first so that a tied output layer can share it."""
    get_input = getattr(model, "get_input_embeddings", None)
    emb = get_input() if callable(get_input) else None
    found = [(n, m) for n, m in model.named_modules() if isinstance(m, (nn.Linear, Conv1D))]
    if embeddings and isinstance(emb, nn.Embedding):
        name = next(n for n, m in model.named_modules() if m is emb)
        found.insert(0, (name, emb))
    return iter(found)


def _check_model(model: nn.Module) -> None:
    if not isinstance(model, nn.Module):
        raise ValueError(f"expected a torch model (nn.Module), got {type(model).__name__}")
    if not any(isinstance(m, (nn.Linear, Conv1D)) for m in model.modules()):
        raise ValueError(f"{type(model).__name__} has no nn.Linear or Conv1D layer: there is nothing "
                         "to quantize (quantize_model replaces linear layers and the token embedding)")


def quantize_model(model: nn.Module, config: QuantConfig | str, *, embeddings: bool = True,
                   act_bits: int | None = None) -> nn.Module:
    """A copy of ``model`` with its linear layers (and token embedding) stored quantized.

    ``config`` is a :class:`QuantConfig`, a preset name (``"int4-g128"``, ``"nf4-dq"``, see
    :data:`course_lib.compression.quant.PRESETS`) or ``"fp32"`` / ``"fp16"`` / ``"bf16"`` for a plain cast of
    the whole model. An output layer tied to the input embedding (GPT-2's ``lm_head``) shares one
    quantized copy with it; with ``embeddings=False`` both stay in float32. The original model is
    not modified.

    Chapter 5, *Quantization*.
    """
    _check_model(model)
    if isinstance(config, str) and config.strip().lower() in FLOAT_DTYPES:
        return copy.deepcopy(model).to(dtypes.torch_dtype(config, FLOAT_DTYPES))
    config = quant.get_config(config)
    model = copy.deepcopy(model)
    shared: dict[int, QuantizedWeight] = {}
    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    tied_to_input = emb.weight if isinstance(emb, nn.Embedding) else None
    for name, module in list(_targets(model, embeddings)):
        weight = module.weight
        if weight is tied_to_input and not embeddings:
            continue  # tied to an embedding that stays in float32: keep the tie
        qweight = shared.get(id(weight))
        if qweight is None:
            qweight = QuantizedWeight(_quantize_named(weight_matrix(module), config, f"{name}.weight"))
            shared[id(weight)] = qweight
        if isinstance(module, nn.Embedding):
            new: nn.Module = QuantEmbedding(qweight, module.padding_idx)
        else:
            new = QuantLinear(qweight, module.bias, act_bits)
        _set_module(model, name, new)
    model.quantization = config  # type: ignore[attr-defined]
    return model.eval()


def quantized_layers(model: nn.Module) -> list[QuantizedWeight]:
    """The distinct quantized weights of a model (a tied weight once).

    Chapter 7, *GPTQ lab*.
    """
    seen: dict[int, QuantizedWeight] = {}
    for m in model.modules():
        if isinstance(m, QuantizedWeight):
            seen.setdefault(id(m), m)
    return list(seen.values())


def model_bytes(model: nn.Module) -> int:
    """Bytes of the tensors a model stores (its state dict, each storage counted once).

    Chapter 5, *Quantization*.
    """
    return tensor_bytes(model.state_dict(keep_vars=True).values())


def effective_bits(model: nn.Module) -> float:
    """Stored bits per weight over the quantized layers (codes plus scale overhead); 8 x bytes / values.

    Chapter 7, *GPTQ lab*.
    """
    layers = quantized_layers(model)
    if not layers:
        params = {id(p): p for p in model.parameters()}.values()
        return 8.0 * sum(p.element_size() * p.numel() for p in params) / sum(p.numel() for p in params)
    return 8.0 * sum(q.nbytes for q in layers) / sum(math.prod(q.shape) for q in layers)


def save_quantized(model: nn.Module, directory: str | os.PathLike[str]) -> Path:
    """Save a (quantized) transformers model as safetensors plus its config; return the weights file.

    Shared tensors (a tied embedding and output layer) are written once. The quantization settings
    go into the safetensors header, so :func:`load_quantized` can rebuild the layers.

    Chapter 7, *GPTQ lab*.
    """
    from safetensors.torch import save_model

    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    meta: dict[str, str] = {}
    config = getattr(model, "quantization", None)
    if isinstance(config, QuantConfig):
        meta[_META_KEY] = json.dumps({**config.__dict__, "embeddings": any(
            isinstance(m, QuantEmbedding) for m in model.modules())})
    if hasattr(model, "config") and hasattr(model.config, "save_pretrained"):
        model.config.save_pretrained(target)
    path = target / _WEIGHTS_FILE
    save_model(model, str(path), metadata=meta or None)
    return path


def load_quantized(directory: str | os.PathLike[str]) -> nn.Module:
    """Load what :func:`save_quantized` wrote: build the architecture, the quantized layers, then the tensors.

    Chapter 7, *GPTQ lab*.
    """
    from safetensors import safe_open
    from safetensors.torch import load_model
    from transformers import AutoConfig, AutoModelForCausalLM

    source = Path(directory)
    path = source / _WEIGHTS_FILE
    if not path.is_file() or not (source / "config.json").is_file():
        raise ValueError(f"{source} does not hold a saved quantized model ({_WEIGHTS_FILE} and config.json); "
                         "write one with course_lib.compression.quant_layers.save_quantized(model, directory)")
    with safe_open(str(path), framework="pt") as f:
        meta = (f.metadata() or {}).get(_META_KEY)
    with torch.random.fork_rng():
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(source))
    if meta:
        settings = json.loads(meta)
        embeddings = settings.pop("embeddings")
        model = quantize_model(model, QuantConfig(**settings), embeddings=embeddings)
    load_model(model, str(path))
    return model.eval()


def safetensors_bytes(model: nn.Module) -> int:
    """The size in bytes of the model's safetensors file (written to a temporary folder and measured).

    Chapter 7, *GPTQ lab*.
    """
    with tempfile.TemporaryDirectory() as tmp:
        return save_quantized(model, tmp).stat().st_size


# ---------------------------------------------------------------------------------------------
# Quantization-aware training: fake quantization with a straight-through gradient
# ---------------------------------------------------------------------------------------------

class FakeQuantize(nn.Module):
    """A parametrization: the layer computes with its weight rounded to ``config``'s grid (STE backward).

    Chapter 5, *Quantization*.
    """

    def __init__(self, config: QuantConfig, transpose: bool = False) -> None:
        super().__init__()
        self.config = config
        self.transpose = transpose

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        if self.transpose:
            return quant.fake_quantize(weight.t(), self.config).t()
        return quant.fake_quantize(weight, self.config)


def prepare_qat(model: nn.Module, config: QuantConfig | str, *, embeddings: bool = True) -> nn.Module:
    """A copy of ``model`` whose linear layers (and token embedding) compute with fake-quantized weights.

    The float weights stay trainable; the forward pass sees exactly what :func:`quantize_model`
    would store, so after training :func:`finish_qat` + :func:`quantize_model` give the same outputs.

    Chapter 5, *Quantization*.
    """
    _check_model(model)
    config = quant.get_config(config)
    model = copy.deepcopy(model)
    for name, module in list(_targets(model, embeddings)):
        if not embeddings and module.weight is getattr(model.get_input_embeddings(), "weight", None):
            continue
        try:
            quant.geometry(tuple(weight_matrix(module).shape), config)
        except ValueError as err:
            raise ValueError(f"cannot quantize {name}.weight: {err}") from None
        parametrize.register_parametrization(module, "weight", FakeQuantize(config, isinstance(module, Conv1D)))
    model.quantization = config  # type: ignore[attr-defined]
    return model


def finish_qat(model: nn.Module) -> nn.Module:
    """Remove the fake quantization and keep the trained float weights (quantize them next).

    Chapter 5, *Quantization*.
    """
    for module in model.modules():
        if parametrize.is_parametrized(module, "weight"):
            parametrize.remove_parametrizations(module, "weight", leave_parametrized=False)
    return model


def describe(config: QuantConfig | str) -> str:
    """The table label of a configuration or float cast name.

    Chapter 5, *Quantization*.
    """
    if isinstance(config, str) and config.strip().lower() in FLOAT_DTYPES:
        return choice(config, FLOAT_DTYPES, "dtype").upper()
    return quant.get_config(config).label
