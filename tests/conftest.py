"""Fixtures shared by the unit tests: one torch thread for small tensors, a seeded tiny GPT-2."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel


@pytest.fixture(scope="module")
def one_torch_thread():
    """Small tensors on a shared 2-core machine: one thread is many times faster than two, and leaves
    the other core to whatever else runs. Modules opt in with ``pytest.mark.usefixtures``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def ranks_import_from(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """Put ``folder`` first on PYTHONPATH for the test, so that the ranks ``launch`` starts
    import modules from it (this process need not)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(folder),
                                                                  os.environ.get("PYTHONPATH")])))


def tiny_gpt2(hidden: int, vocab: int, layers: int = 2, positions: int = 32, seed: int = 0,
              perturb: float = 0.05, norms_only: bool = False) -> GPT2LMHeadModel:
    """A seeded GPT-2 small enough for unit tests, in eval mode, with no dropout.

    Biases and layer-norm parameters get seeded noise of size ``perturb`` (only the layer norms with
    ``norms_only``), so that a layer that drops one, or two places that should differ, would show.
    """
    config = GPT2Config(vocab_size=vocab, n_embd=hidden, n_layer=layers, n_head=2, n_positions=positions,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        bos_token_id=0, eos_token_id=0, pad_token_id=0)
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(config)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln_" in name or (name.endswith("bias") and not norms_only):
                p.add_(perturb * torch.randn(p.shape, generator=g))
    return model.eval()


@pytest.fixture(scope="session")
def tokenizer():
    """The course tokenizer (from the model cache; built there if missing)."""
    from course_lib.text import data

    return data.course_tokenizer()


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    """A private, empty model cache (pass the tokenizer explicitly so that it is not retrained)."""
    monkeypatch.setenv("COURSE_LIB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def refusal(main, argv: list[str], capsys) -> str:
    """What ``main(argv)`` printed refusing its command line: status 2, nothing on stdout."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    captured = capsys.readouterr()
    assert info.value.code == 2 and captured.out == "", captured
    return captured.err


#: The variables torchrun sets for each rank (the torchrun entry points' tests clear them).
TORCHRUN_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture
def ranks(monkeypatch):
    """torchrun's WORLD_SIZE, none of its other variables: flags are checked first."""
    for name in TORCHRUN_VARIABLES:
        monkeypatch.delenv(name, raising=False)

    def world(n: int) -> None:
        monkeypatch.setenv("WORLD_SIZE", str(n))

    return world


def schedule_order(stages: int, micro_batches: int, kind: str) -> list[list[tuple[str, int]]]:
    """Each stage's work, ("F" or "B", micro-batch), in GPipe's or torch's 1F1B order."""
    orders = []
    for i in range(stages):
        if kind == "gpipe":
            order = [("F", m) for m in range(micro_batches)]
            order += [("B", m) for m in range(micro_batches)]
        else:  # chapter 11's exercise's reference, which tests/test_pipeline.py checks on ranks
            from course_lib.chapters import ch11_lab

            order = [(e[0], int(e[1:])) for e in ch11_lab._one_f_one_b(i, stages, micro_batches)]
        orders.append(order)
    return orders


#: Test files that take minutes, started first when workers share the tests (``pytest -n``), so
#: that no worker is left with one of them at the end while the other has nothing to do.
LONGEST_FIRST = ("tests/test_wheel.py",)


def pytest_collection_modifyitems(config, items):
    """Under ``scripts/test.sh`` with a fresh book build (``COURSE_NBVAL=executed``), nbval's items
    are deselected: ``tests/test_executed.py`` checks the notebooks the build executed instead
    (see ``tools/executed.py``). Run anywhere else, nbval executes every notebook as usual.
    With workers (pytest-xdist's ``-n``), the files of :data:`LONGEST_FIRST` go first."""
    import os
    import sys
    from pathlib import Path

    if "PYTEST_XDIST_WORKER" in os.environ:  # a worker (xdist sets its numprocesses to None)
        items.sort(key=lambda item: item.nodeid.split("::")[0] not in LONGEST_FIRST)
    if os.environ.get("COURSE_NBVAL") != "executed":
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    import executed  # tools/executed.py

    if executed.stale():  # the executed copies no longer stand for a run: nbval executes
        return
    notebooks = [item for item in items if item.nodeid.split("::")[0].endswith(".ipynb")]
    if notebooks:
        config.hook.pytest_deselected(items=notebooks)
        items[:] = [item for item in items if item not in notebooks]
