"""Warm ranks (course_lib.parallel.warm_ranks): a rank forked from the warm server is the rank
``launch`` starts cold, in everything the rank can see; the server is reused, replaced when the
environment changes, and never outlives its launcher."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from course_lib.parallel import launch, lifetime, warm_ranks
from conftest import ranks_import_from

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="warm ranks are Linux only")

FACTS = '''
import os, random, sys, tempfile
import torch

def facts():
    return {"pid": os.getpid(), "leader": os.getpgrp() == os.getpid() == os.getsid(0),
            "rank": os.environ["RANK"], "world": os.environ["WORLD_SIZE"],
            "launcher": os.environ["COURSE_LIB_LAUNCHER"], "threads": torch.get_num_threads(),
            "path0": sys.path[0], "on_path": os.environ["PYTHONPATH"].split(os.pathsep)[0]
            in sys.path, "tmp": tempfile.gettempdir(), "torch_rand": torch.rand(1).item(),
            "random": random.random(), "stdin": sys.stdin.read(), "cwd": os.getcwd(),
            "flag": os.environ.get("COURSE_TEST_FLAG"), "parent": os.getppid(),
            "inductor": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
            "gpt2": "transformers.models.gpt2.modeling_gpt2" in sys.modules}
'''


@pytest.fixture
def rank_module(tmp_path, monkeypatch):
    folder = tmp_path / "modules"
    folder.mkdir()
    (folder / "warm_facts.py").write_text(FACTS)
    ranks_import_from(monkeypatch, folder)
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.chdir(tmp_path)
    return "warm_facts:facts"


def run(target: str, warm: bool, monkeypatch) -> list[dict]:
    monkeypatch.setenv("COURSE_LIB_WARM_RANKS", "1" if warm else "0")
    return launch.launch(target, 2, threads=1, timeout=60, echo=False)


@pytest.mark.slow
def test_a_warm_rank_sees_what_a_cold_rank_sees(rank_module, monkeypatch, tmp_path):
    cold = run(rank_module, False, monkeypatch)
    warm = run(rank_module, True, monkeypatch)
    assert warm_ranks._current is not None, "the warm launch did not use the server"
    for c, w in zip(cold, warm):
        assert w["leader"] and c["leader"], "each rank leads its own session and group"
        for key in ("rank", "world", "launcher", "threads", "path0", "on_path", "tmp",
                    "stdin", "cwd", "flag"):
            assert w[key] == c[key], (key, w[key], c[key])
    assert warm[0]["tmp"] == str(tmp_path / "tmp") and warm[0]["path0"] == str(tmp_path)
    for key in ("random", "torch_rand"):  # seeded anew in every new process, torch's too
        assert warm[0][key] != warm[1][key] and cold[0][key] != cold[1][key], key
    assert {w["pid"] for w in warm}.isdisjoint(c["pid"] for c in cold)


@pytest.mark.slow
def test_the_server_is_reused_and_replaced_when_the_environment_changes(rank_module,
                                                                      monkeypatch):
    run(rank_module, True, monkeypatch)
    first = warm_ranks._current.process.pid
    again = run(rank_module, True, monkeypatch)
    assert warm_ranks._current.process.pid == first
    assert again[0]["flag"] is None
    monkeypatch.setenv("COURSE_TEST_FLAG", "on")  # read at import time by some library?
    changed = run(rank_module, True, monkeypatch)
    assert changed[0]["flag"] == "on"
    assert warm_ranks._current.process.pid != first
    deadline = time.monotonic() + 5
    while lifetime.alive(first) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not lifetime.alive(first), "the replaced server was left running"


@pytest.mark.slow
def test_the_cache_folder_torch_writes_keeps_the_server(rank_module, monkeypatch, tmp_path):
    """``import torch._dynamo`` writes its default TORCHINDUCTOR_CACHE_DIR into the launcher's
    environment (transformers imports it with a model's code): the server stays, the ranks see
    the variable; a folder of the user's own starts a new server."""
    from torch._inductor.runtime import cache_dir_utils

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "")  # so that the original comes back
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    before = run(rank_module, True, monkeypatch)
    first = warm_ranks._current.process.pid
    written = cache_dir_utils.cache_dir()  # what torch's import does: it sets the variable
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == written
    after = run(rank_module, True, monkeypatch)
    assert warm_ranks._current.process.pid == first, "torch's own default replaced the server"
    assert before[0]["inductor"] is None and after[0]["inductor"] == written
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    own = run(rank_module, True, monkeypatch)
    assert warm_ranks._current.process.pid != first
    assert own[0]["inductor"] == str(tmp_path / "inductor")


@pytest.mark.slow
def test_the_default_cache_folder_inherited_keeps_the_server(rank_module, monkeypatch):
    """A kernel can inherit torch's default TORCHINDUCTOR_CACHE_DIR from its parent before it
    imports torch._dynamo itself (the book build's Sphinx process imports it with a quiz): the
    server started then stays when the kernel's own import loads torch's cache_dir_utils."""
    from torch._inductor.runtime import cache_dir_utils

    name = "torch._inductor.runtime.cache_dir_utils"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR",
                       os.path.abspath(cache_dir_utils.default_cache_dir()))
    monkeypatch.delitem(sys.modules, name)  # not imported by this process yet
    run(rank_module, True, monkeypatch)
    first = warm_ranks._current.process.pid
    assert name not in sys.modules, "the check imported torch._inductor"
    monkeypatch.setitem(sys.modules, name, cache_dir_utils)  # now it is
    run(rank_module, True, monkeypatch)
    assert warm_ranks._current.process.pid == first, "the server was replaced"


@pytest.mark.slow
def test_a_one_rank_launch_leaves_the_server_warm(rank_module, monkeypatch):
    """A launch of one rank gives it every core (OMP_NUM_THREADS=2 here); had the server it
    starts imported torch with as many OpenMP threads, it would hold two threads, refuse to
    fork, and start every later rank cold (a launch 10 to 40 times slower)."""
    monkeypatch.setenv("COURSE_LIB_WARM_RANKS", "1")
    warm_ranks.stop_server()  # the one-rank launch starts the server
    alone = launch.launch(rank_module, 1, threads=2, timeout=60, echo=False)
    server = warm_ranks._current.process.pid
    pair = run(rank_module, True, monkeypatch)
    assert warm_ranks._current.process.pid == server
    assert [r["parent"] for r in alone + pair] == [server] * 3, "a rank was started cold"
    assert [r["threads"] for r in alone + pair] == [2, 1, 1]


@pytest.mark.slow
def test_a_target_that_uses_the_course_models_has_the_server_import_gpt2(rank_module,
                                                                         monkeypatch):
    """transformers' GPT-2 class is imported by the server (once, before it forks) for the
    ranks of a target whose module uses the course's models, and only then: a rank forked
    afterwards finds it imported; one forked before does not."""
    monkeypatch.setenv("COURSE_LIB_WARM_RANKS", "1")
    warm_ranks.stop_server()
    before = run(rank_module, True, monkeypatch)
    rows = launch.launch("course_lib.parallel.ddp:shard", 2, threads=1, timeout=60,
                         echo=False, kwargs={"n_rows": 4, "world_size": 2, "rank": 1})
    after = run(rank_module, True, monkeypatch)
    server = warm_ranks._current.process.pid
    assert rows == [[1, 3]] * 2  # DistributedSampler deals the rows out in turn
    assert [r["parent"] for r in before + after] == [server] * 4, "a rank was started cold"
    assert [r["gpt2"] for r in before + after] == [False, False, True, True]


@pytest.mark.slow
def test_a_dead_server_is_replaced_and_the_launch_still_runs(rank_module, monkeypatch):
    run(rank_module, True, monkeypatch)
    server = warm_ranks._current.process
    server.kill()
    server.wait(timeout=10)
    results = run(rank_module, True, monkeypatch)
    assert [r["rank"] for r in results] == ["0", "1"]
    assert warm_ranks._current.process.pid != server.pid


LAUNCHER = """
import sys, time
from course_lib.parallel import launch, warm_ranks
launch.launch("course_lib.parallel.launch:hello", 2, timeout=60, echo=False)
print(warm_ranks._current.process.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_the_server_ends_with_its_launcher(sig):
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root), COURSE_LIB_WARM_RANKS="1")
    kernel = subprocess.Popen([sys.executable, "-c", textwrap.dedent(LAUNCHER)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = kernel.stdout.readline()
        assert line.strip().isdigit(), line + kernel.stdout.read()
        server = int(line)
        assert lifetime.alive(server)
        kernel.send_signal(sig)
        kernel.wait(timeout=10)
        deadline = time.monotonic() + 10
        while lifetime.alive(server) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not lifetime.alive(server), f"the server outlived a launcher ended by {sig.name}"
    finally:
        kernel.kill()
        kernel.wait(timeout=10)
        kernel.stdout.close()


def test_switched_off_or_not_linux_means_cold(monkeypatch):
    monkeypatch.setenv("COURSE_LIB_WARM_RANKS", "0")
    assert not warm_ranks.enabled() and warm_ranks.start(dict(os.environ), [], 1) is None
    monkeypatch.setenv("COURSE_LIB_WARM_RANKS", "1")
    monkeypatch.setattr(sys, "platform", "darwin")
    assert not warm_ranks.enabled()


ENDS = """
import atexit, pathlib, sys, time
from course_lib.parallel import lifetime
lifetime.end_with_parent(3)
atexit.register(pathlib.Path(sys.argv[1]).write_text, "exit handlers ran")
print("ready", flush=True)
time.sleep(60)
"""


def test_a_sigterm_ends_a_process_as_sys_exit_does(tmp_path):
    """lifetime.end_with_parent (the warm server, prepare's processes): a SIGTERM runs the exit
    handlers and gives the code asked for, where by default it kills at once (-15)."""
    root = Path(__file__).resolve().parents[1]
    done = tmp_path / "done"
    child = subprocess.Popen([sys.executable, "-c", ENDS, str(done)], stdout=subprocess.PIPE,
                             text=True, env=dict(os.environ, PYTHONPATH=str(root)))
    try:
        assert child.stdout.readline().strip() == "ready"
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=30) == 3
        assert done.read_text() == "exit handlers ran"
    finally:
        child.kill()
        child.wait(timeout=10)
        child.stdout.close()
