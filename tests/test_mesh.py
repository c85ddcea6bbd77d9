"""Chapter 11 on 4 ranks and under torchrun (course_lib.parallel.mesh): the mesh's
checks and their messages; and, marked slow, one launch of 4 gloo ranks for the whole
chapter (the course's GPT-2 trained on a 2 x 2 (dp, tp) mesh equal to one process in
float64, its first gradient's shards too, a 4-stage pipeline with GPipe and 1F1B, a
block split 4 ways), the two-"node" torchrun pair on this machine running the mesh's
entry point on 2 ranks each (tensor parallel inside a node, data parallel across;
stopped and cleaned up when its time is up; a busy port refused), and the
tensor-parallel and pipeline entry points on 2 ranks."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from course_lib.parallel import launch, mesh, pipeline

from conftest import TORCHRUN_VARIABLES, refusal

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROOT = Path(__file__).resolve().parents[1]


# --- checks ---------------------------------------------------------------------------

def test_a_tensor_degree_that_does_not_divide_the_ranks_is_refused():
    with pytest.raises(ValueError, match=r"tensor degree 3 does not divide the 4 ranks "
                                         r"into groups; use one of 1, 2, 4\."):
        mesh.check_mesh(4, 3, 128, 4, 8)
    with pytest.raises(ValueError, match=r"a global batch of 3 rows does not split "
                                         r"across the 2 data-parallel replicas .* "
                                         r"multiple of 2"):
        mesh.check_mesh(4, 2, 128, 4, 3)
    assert mesh.check_mesh(4, 2, 128, 4, 4) == 2


def test_run_many_names_the_functions_it_runs():
    with pytest.raises(ValueError, match="one of mesh, pipeline, tensor; got 'zero'"):
        mesh.run_many([{"run": "zero"}])


@pytest.mark.parametrize(("world", "argv", "message"), [
    (4, ["--tp", "3"], "--tp 3, --global-batch 4 on 4 ranks: tensor degree 3 does not "
                       "divide the 4 ranks into groups; use one of 1, 2, 4."),
    (8, ["--tp", "8"], "the 4 attention heads (hidden size 128) do not split across "
                       "tensor degree 8"),
    (4, ["--global-batch", "3"], "does not split across the 2 data-parallel replicas"),
    (4, ["--seq-len", "500"], "--seq-len 500 is longer than the model's context"),
    (4, ["--tp", "0"], "argument --tp: must be a whole number >= 1, got '0'"),
])
def test_a_mesh_that_does_not_fit_is_refused_once(ranks, capsys, world, argv, message):
    ranks(world)
    err = refusal(mesh.main, argv, capsys)
    assert err.count(message) == 1, err
    assert "Traceback" not in err


def test_two_nodes_refuse_a_busy_port_before_starting():
    with socket.socket() as held:
        held.bind((launch.HOST, 0))
        held.listen()
        port = held.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(launch.LaunchError, match=rf"port {port} on .* is busy"):
            mesh.two_nodes(port=port)
        assert time.monotonic() - start < 1


# --- the chapter on 4 gloo ranks ------------------------------------------------------

RUNS = {
    "mesh": {"run": "mesh", "tp": 2, "steps": 2, "global_batch": 4, "seq_len": 32,
             "dtype": "float64"},
    "gpipe": {"run": "pipeline", "schedule": "gpipe", "micro_batches": 4,
              "global_batch": 8, "seq_len": 16},
    "1f1b": {"run": "pipeline", "schedule": "1f1b", "micro_batches": 4,
             "global_batch": 8, "seq_len": 16},
    "tensor": {"run": "tensor", "dtype": "float64"},
}


@pytest.fixture(scope="module")
def four():
    """Every run on 4 ranks, in one launch: name -> the 4 ranks' results."""
    per_rank = launch.launch("course_lib.parallel.mesh:run_many", 4,
                             {"runs": list(RUNS.values())}, timeout=400, echo=False)
    return dict(zip(RUNS, zip(*per_rank)))


@pytest.mark.slow
def test_a_2_by_2_mesh_trains_like_one_process(four):
    """Measured: 3.4e-14 after 3 steps in float64 (1.5e-5 in float32)."""
    ranks = four["mesh"]
    assert [r.tp_group for r in ranks] == [(0, 1), (0, 1), (2, 3), (2, 3)]
    assert [r.dp_group for r in ranks] == [(0, 2), (1, 3), (0, 2), (1, 3)]
    assert all(r.parameter_gap < 1e-12 for r in ranks)
    for replica in ((0, 1), (2, 3)):  # a replica's ranks read the same rows
        assert ranks[replica[0]].history == ranks[replica[1]].history
    mean = [(a + b) / 2 for a, b in zip(ranks[0].history, ranks[2].history)]
    assert mean == pytest.approx(ranks[0].reference_history, rel=1e-6)


@pytest.mark.slow
def test_a_2_by_2_mesh_computes_the_gradient_shards_of_one_process(four):
    """The first step's gradient shards, after DDP's all-reduce and before the clipping.
    Measured: 2.8e-16 at most in float64 (8.0e-8 in float32); the norms' ratio over all
    ranks 1.0 (1 + 3e-10 in float32)."""
    gaps = [r.gradient_gap for r in four["mesh"]]
    assert all(g == gaps[0] for g in gaps)  # all-reduced: every rank knows the largest
    assert gaps[0].max_difference < 1e-14, gaps[0]
    assert gaps[0].norm_ratio == pytest.approx(1, abs=1e-12), gaps[0]


@pytest.mark.slow
def test_a_mesh_step_all_reduces_inside_its_tensor_group(four):
    """Two all-reduces forward and two backward per block (4 blocks), and one of the
    gradient's norm; DDP's all-reduce across replicas runs in C++, not counted here."""
    for r in four["mesh"]:
        assert r.collectives == {"all-reduce": 4 * 4 + 1}


@pytest.mark.slow
def test_each_rank_holds_the_blocks_share_and_the_whole_embeddings(four):
    """939,008 of the 1,334,016 parameters per rank, in float64."""
    from course_lib.parallel import tensor_parallel

    blocks = 4 * tensor_parallel.block_parameters(128, 2)
    embeddings = 4096 * 128 + 128 * 128 + 2 * 128  # wte, wpe, ln_f (lm_head is wte)
    for r in four["mesh"]:
        assert r.state_bytes["parameters"] == 8 * (blocks + embeddings)
        assert r.state_bytes["optimizer states"] == 2 * r.state_bytes["parameters"]


@pytest.mark.slow
def test_four_stages_compute_one_process_and_hold_what_their_schedule_says(four):
    for kind in ("gpipe", "1f1b"):
        stages = four[kind]
        assert [r.layers for r in stages] == [(0,), (1,), (2,), (3,)]
        assert max(r.grad_gap for r in stages) < 1e-12
        assert stages[-1].loss == pytest.approx(stages[-1].reference_loss, rel=1e-12)
        held = [r.peak_held for r in stages]
        assert held == ([4, 4, 4, 4] if kind == "gpipe" else [4, 3, 2, 1])
        b = pipeline.bubble(stages)
        assert b.theory == pytest.approx(3 / 7) and 0 < b.measured < 1


@pytest.mark.slow
def test_a_block_split_four_ways_is_one_process_and_pytorchs(four):
    for r in four["tensor"]:
        assert r.degree == 4
        gaps = (r.output_gap, r.grad_gap, r.torch_output_gap, r.torch_grad_gap)
        assert max(gaps) < 1e-12
        assert r.forward == r.backward == {"all-reduce": 2}
        assert r.parameter_bytes == r.parameter_bytes_formula


# --- torchrun -------------------------------------------------------------------------

def torchrun_environment() -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if k not in TORCHRUN_VARIABLES}
    return dict(environ, OMP_NUM_THREADS="1", PYTHONHASHSEED="0")


def processes_with(text: str) -> list[int]:
    """The processes whose command line holds ``text`` (Linux: /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in line:
                found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_two_torchrun_nodes_keep_tensor_parallelism_inside_a_node():
    done = mesh.two_nodes(["--tp", "2", "--steps", "2", "--check"], timeout=300)
    text = "\n".join(done.outputs)
    assert done.returncodes == (0, 0), text[-3000:]
    lines = re.findall(r"rank (\d)/4 \(node (\d), replica \d/2, tensor rank \d/2, "
                       r"tp group \[(\d), (\d)\], dp group \[(\d), (\d)\]\): final "
                       r"loss \d+\.\d+, 17 tensor-parallel all-reduces a step", text)
    assert sorted(int(line[0]) for line in lines) == [0, 1, 2, 3], text[-3000:]
    node = {int(line[0]): int(line[1]) for line in lines}
    assert node[0] == node[1] != node[2] == node[3]  # a tensor group is one node
    for rank, _, *groups in lines:
        tp, dp = groups[:2], groups[2:]
        assert rank in tp and rank in dp and set(tp) & set(dp) == {rank}
    gap = re.search(r"max \|difference\| of the parameters (\S+) and of the first "
                    r"gradient (\S+); gradient norm ratio (\S+)", text)
    assert gap is not None, text[-3000:]
    assert float(gap.group(1)) < 1e-4 and float(gap.group(2)) < 1e-4, text[-3000:]
    assert abs(float(gap.group(3)) - 1) < 1e-4, text[-3000:]


@pytest.mark.slow
def test_two_torchrun_nodes_past_their_time_are_stopped_with_their_workers():
    port = launch.free_port()
    with pytest.raises(launch.LaunchError, match="did not finish within 2 s and were "
                                                 "stopped"):
        mesh.two_nodes(["--steps", "50"], port=port, timeout=2)
    deadline = time.monotonic() + 10
    while processes_with(f"127.0.0.1:{port}") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with(f"127.0.0.1:{port}") == []


@pytest.mark.slow
@pytest.mark.parametrize(("module", "argv", "pattern"), [
    ("tensor_parallel", [], r"rank [01]/2 \(float64\): max \|difference\| from one "
                            r"process: output (\S+), gradients (\S+);"),
    ("pipeline", ["--schedule", "1f1b", "--micro-batches", "2", "--steps", "1"],
     r"rank [01]/2 \(1f1b\): blocks \[\d, \d\], held at most \d micro-batches \([\d,]+ "
     r"bytes\), max \|gradient - one process\| (\S+)"),
])
def test_the_other_torchrun_entry_points_run_on_two_ranks(module, argv, pattern):
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2",
               "-m", f"course_lib.parallel.{module}", *argv]
    done = subprocess.run(command, cwd=ROOT, env=torchrun_environment(),
                          capture_output=True, text=True, timeout=240)
    text = done.stdout + done.stderr
    assert done.returncode == 0, text[-3000:]
    gaps = re.findall(pattern, done.stdout)
    assert gaps, text[-3000:]
    values = [float(v) for found in gaps
              for v in (found if isinstance(found, tuple) else (found,))]
    assert max(values) < 1e-4


# --- a node missing, a bad node count (issue 40) ----------------------------------------------

@pytest.mark.parametrize("nproc_per_node", [0, -1, True, 2.0])
def test_two_nodes_refuse_a_node_size_that_is_not_a_whole_number_of_ranks(nproc_per_node):
    with pytest.raises(ValueError, match=r"^nproc_per_node must be a whole number >= 1 \(the "
                                         r"ranks each node starts, torchrun's --nproc-per-node\), "
                                         rf"got {nproc_per_node!r}\.$"):
        mesh.two_nodes(nproc_per_node=nproc_per_node)


@pytest.mark.parametrize("kwargs", [{"nodes": (2,)}, {"nodes": ()}, {"nodes": (0, 0)},
                                    {"join_timeout": 0}, {"join_timeout": float("nan")}])
def test_two_nodes_refuse_bad_nodes_and_join_timeouts(kwargs):
    with pytest.raises(ValueError, match="nodes must name|join_timeout must be"):
        mesh.two_nodes(**kwargs)


@pytest.mark.slow
def test_one_node_alone_stops_after_its_join_timeout_naming_the_missing_node():
    """The README's two-node command run in one shell only: no hang, one message."""
    port = launch.free_port()
    start = time.monotonic()
    with pytest.raises(launch.LaunchError) as info:
        mesh.two_nodes(["--tp", "1", "--steps", "1"], nproc_per_node=1, port=port,
                       nodes=(0,), join_timeout=5, timeout=120)
    assert time.monotonic() - start < 5 + 30
    assert str(info.value) == (
        f"node 1 did not join the rendezvous at 127.0.0.1:{port} within 5 s: only node 0 was "
        "started here, and it stopped waiting. Start node 1 too (the same torchrun command "
        "with --node-rank=1, in another shell or on the other machine) within 5 s of node 0, "
        "or pass a larger join_timeout=.")
    deadline = time.monotonic() + 10
    while processes_with(f"127.0.0.1:{port}") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with(f"127.0.0.1:{port}") == []
