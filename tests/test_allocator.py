"""course_lib.base.allocator: ``import course_lib`` keeps freed memory in glibc's heap, changes no
number, and ``COURSE_LIB_MALLOC=0`` leaves glibc's defaults."""

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import course_lib  # noqa: F401  (sets the allocator, as every notebook's import does)
from course_lib.base import allocator

glibc = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator: Linux")

def in_heap() -> bool:
    """Whether a fresh 40 MiB block of ``malloc`` lands in the heap (not a mapping of its own)."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    address = libc.malloc(40 << 20)
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            low, high = (int(x, 16) for x in line.split()[0].split("-"))
            if low <= address < high:
                return line.split()[-1] == "[heap]"
        raise AssertionError(f"{address:#x} is in no mapping of /proc/self/maps")
    finally:
        libc.free(address)


def losses() -> list[str]:
    """Four AdamW steps of a model with a 4,096-token vocabulary on one thread: losses in hex."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same reductions here and in a fresh Python
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Embedding(4096, 64), torch.nn.Linear(64, 4096))
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        out = []
        for step in range(4):
            x = torch.randint(0, 4096, (8, 128), generator=torch.Generator().manual_seed(step))
            loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), x.flatten())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            out.append(loss.item().hex())
        return out
    finally:
        torch.set_num_threads(threads)


def probe(malloc: str | None) -> dict:
    """:func:`in_heap` and :func:`losses` in a fresh Python that imports this module (and so
    course_lib), with ``COURSE_LIB_MALLOC=malloc`` (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k != "COURSE_LIB_MALLOC"}
    if malloc is not None:
        env["COURSE_LIB_MALLOC"] = malloc
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import test_allocator as t; "
            "print(json.dumps({'in_heap': t.in_heap(), 'losses': t.losses()}))")
    out = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@glibc
def test_the_course_keeps_large_blocks_in_the_heap_and_computes_the_same_bits():
    if os.environ.get("COURSE_LIB_MALLOC") == "0":
        pytest.skip("COURSE_LIB_MALLOC=0: this process keeps glibc's defaults")
    # this process imported course_lib as a notebook does; a fresh Python keeps the defaults
    kept, default = {"in_heap": in_heap(), "losses": losses()}, probe("0")
    assert kept["in_heap"] is True, "import course_lib should keep a 40 MiB block in the heap"
    assert default["in_heap"] is False, "glibc's default maps a 40 MiB block of its own"
    assert kept["losses"] == default["losses"]
    assert len(set(kept["losses"])) == 4  # the losses moved: a training, not one number repeated


@glibc
def test_glibcs_thresholds_are_set_here_and_0_sets_nothing(monkeypatch):
    monkeypatch.delenv("COURSE_LIB_MALLOC", raising=False)
    assert allocator.keep_freed_memory() is True  # glibc here: the import's call succeeded too
    monkeypatch.setenv("COURSE_LIB_MALLOC", "0")
    assert allocator.keep_freed_memory() is False


@pytest.mark.parametrize("bad", [0, -1, 2**31, 1.5, True, "256"])
def test_a_threshold_that_is_not_a_positive_int_is_named(bad):
    with pytest.raises(ValueError, match="whole number of bytes"):
        allocator.keep_freed_memory(bad)


def test_the_threshold_is_above_the_course_models_largest_tensor():
    from course_lib.text import course_model

    recipe, vocab = course_model.COURSE_RECIPE, course_model.course_model_reference()["vocab_size"]
    logits = recipe.batch_size * recipe.seq_len * vocab * 4  # a step's FP32 logits, in bytes
    assert 2**25 <= logits < allocator.THRESHOLD  # above glibc's largest dynamic threshold
