"""Tests for course_lib.hardware.stream: STREAM's kernels and byte counts, the results, the table,
chapter 10's plot of them and the errors (never the speeds, beyond their being positive and finite)."""

import itertools
import math

import matplotlib.pyplot as plt
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.chapters import ch10
from course_lib.hardware import stream as mb

KIB, MIB, GIB = 2**10, 2**20, 2**30
DTYPES = {"fp32": (torch.float32, 4), "fp64": (torch.float64, 8)}
ARRAYS = {"copy": 2, "scale": 2, "add": 3, "triad": 3}


def by_hand(kernel, b, c, s):
    """STREAM's definition, element by element in Python floats."""
    if kernel == "copy":
        return [x for x in b]
    if kernel == "scale":
        return [s * x for x in b]
    if kernel == "add":
        return [x + y for x, y in zip(b, c)]
    return [x + s * y for x, y in zip(b, c)]


def check_one_call(k):
    """Run ``k`` once; its output must be STREAM's result of its (unchanged) inputs."""
    a0, b0 = k.a.clone(), k.b.clone()
    c0 = None if k.c is None else k.c.clone()
    k()
    b = b0.double().tolist()
    c = None if c0 is None else c0.double().tolist()
    want = by_hand(k.kernel, b, c, k.scalar)
    assert k.a.double().tolist() == want  # exact: the seeded values are small integers
    assert not torch.equal(a0, k.a)  # the call did write a
    assert torch.equal(k.b, b0) and (c0 is None or torch.equal(k.c, c0))  # and nothing else
    assert k.verify()


def made_up(kernel, working_set, gb_per_s, device="cpu", times=None, threads=1):
    seconds = working_set / gb_per_s / 1e9
    return mb.BandwidthResult(device, kernel, working_set, working_set, times or (seconds,), 1,
                              threads if device == "cpu" else None)


# --- the kernels compute what STREAM defines -----------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", ARRAYS)
def test_each_kernel_computes_what_stream_defines(kernel, dtype):
    k = mb.StreamKernel(kernel, 1000, "cpu", dtype)
    assert k.a.dtype == DTYPES[dtype][0] and len(k.a) == 1000
    assert (k.c is not None) == (ARRAYS[kernel] == 3)
    assert not k.verify()  # before the call, a holds its own seeded values
    check_one_call(k)
    assert k.scalar == mb.SCALAR == 3.0


@pytest.mark.parametrize("kernel", ARRAYS)
def test_many_passes_in_one_call_still_compute_every_element(kernel):
    for passes, regions in [(36, 1), (12, 2), (7, 1)]:
        k = mb.StreamKernel(kernel, 4000, "cpu", torch.float32, passes=passes, regions=regions)
        check_one_call(k)
        part = 4000 // regions
        assert part / 2 <= k.window < part
        assert k.bytes_moved == ARRAYS[kernel] * regions * passes * k.window * 4
        assert k.working_set == ARRAYS[kernel] * 4000 * 4


def test_fp16_and_bf16_results_are_exact_too():
    for dtype in (torch.float16, "bf16"):
        check_one_call(mb.StreamKernel("triad", 300, "cpu", dtype))


# --- STREAM's byte counts ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", ARRAYS)
def test_bytes_moved_is_arrays_times_elements_times_element_size(kernel, dtype):
    assert mb.KERNELS[kernel] == ARRAYS[kernel]
    k = mb.StreamKernel(kernel, 1234, "cpu", DTYPES[dtype][0])
    assert k.bytes_moved == k.working_set == ARRAYS[kernel] * 1234 * DTYPES[dtype][1]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 5000), kernel=st.sampled_from(sorted(ARRAYS)), dtype=st.sampled_from(sorted(DTYPES)))
def test_bytes_moved_formula_holds_for_any_size(n, kernel, dtype):
    k = mb.StreamKernel(kernel, n, "cpu", dtype)
    assert k.bytes_moved == ARRAYS[kernel] * n * DTYPES[dtype][1]


@settings(max_examples=200, deadline=None)
@given(part=st.integers(1, 100_000), data=st.data())
def test_the_windows_of_many_passes_cover_the_arrays_exactly(part, data):
    most = mb._max_square(part, mb._MIN_SHIFT)  # the most passes, a square, that always fit
    passes = data.draw(st.integers(1, 2 * most))
    element_size = data.draw(st.sampled_from([2, 4, 8]))
    try:
        rows, columns, shift, window = mb._layout(part, passes, element_size, 64)
    except ValueError as err:
        assert math.isqrt(passes) ** 2 != passes or passes > most  # a square up to ``most`` never fails
        assert "too many" in str(err)
        return
    assert rows * columns == passes
    assert shift * (rows + columns - 2) + window == part  # the last window ends at the last element
    assert 2 * window >= part  # each window covers at least half
    if passes > 1:
        assert 2 <= shift <= 64 // element_size or shift == 2


# --- measure_bandwidth ------------------------------------------------------------------------------


def test_results_come_one_per_kernel_and_working_set_in_order():
    threads = torch.get_num_threads()
    results = mb.measure_bandwidth(["copy", "triad"], [4 * KIB, 64 * KIB], "cpu", repeats=3, min_seconds=0)
    assert torch.get_num_threads() == threads  # restored
    assert [(r.kernel, r.working_set) for r in results] == [
        ("copy", 4096), ("copy", 65536), ("triad", 4092), ("triad", 65532)]  # whole elements of 3 arrays
    for r in results:
        assert (r.device, r.dtype, r.threads, r.repeats, r.number) == ("cpu", "fp32", 1, 3, 1)
        assert all(t > 0 and math.isfinite(t) for t in r.times)
        assert r.gb_per_s > 0 and math.isfinite(r.gb_per_s) and r.median_gb_per_s <= r.gb_per_s
        assert r.passes > 1 and r.bytes_moved >= r.passes * r.working_set / 2  # small: many passes a call


def test_one_kernel_by_name_in_fp64_and_a_large_set_in_one_pass():
    (r,) = mb.measure_bandwidth("triad", [24 * MIB], "cpu", repeats=1, min_seconds=0, dtype="fp64")
    assert (r.kernel, r.dtype, r.passes, r.repeats) == ("triad", "fp64", 1, 1)
    assert r.working_set == r.bytes_moved == 24 * MIB  # 3 arrays of 1 Mi fp64 elements


def test_default_working_sets_span_the_caches():
    cpu = mb._default_working_sets(torch.device("cpu"))
    assert cpu[0] == 16 * KIB and cpu[-1] == 256 * MIB and len(cpu) == 8
    assert all(b == 4 * a for a, b in itertools.pairwise(cpu))


# --- results, table, peak ---------------------------------------------------------------------------


def test_fastest_median_and_spread_of_a_made_up_result():
    r = mb.BandwidthResult("cpu", "triad", 3000, 6000, (2.0, 1.0, 4.0), 7)
    assert (r.seconds, r.median_seconds, r.spread, r.repeats, r.number) == (1.0, 2.0, 1.0, 3, 7)
    assert r.gb_per_s == pytest.approx(6000 / 1.0 / 1e9)
    assert r.median_gb_per_s == pytest.approx(6000 / 2.0 / 1e9)
    with pytest.raises(AttributeError):
        r.kernel = "copy"  # frozen


def test_table_rows_and_headers():
    results = [made_up("copy", 16 * KIB, 300.0, times=None), made_up("triad", 256 * MIB, 40.0),
               mb.BandwidthResult("cuda", "triad", GIB, GIB, (1e-3, 2e-3, 3e-3), 2)]
    table = mb.bandwidth_table(results)
    assert table.headers == ["device", "kernel", "dtype", "working set", "GB/s (fastest)", "GB/s (median)",
                             "median run"]
    assert table.rows[0] == ["cpu, 1 thread", "copy", "fp32", "16 KiB", "300.0", "300.0", "+0%"]
    assert table.rows[1][3] == "256 MiB" and table.rows[1][4] == "40.0"
    assert table.rows[2][:4] == ["cuda", "triad", "fp32", "1 GiB"]
    assert table.rows[2][4] == f"{GIB / 1e-3 / 1e9:,.1f}" and table.rows[2][-1] == "+100%"
    assert "interleaved" in table.title and "noisy" in table.title and "fastest" in table.title
    with pytest.raises(ValueError, match="needs a list of results"):
        mb.bandwidth_table([])


def test_peak_is_the_fastest_working_set_well_beyond_the_last_cache(monkeypatch):
    results = [made_up("triad", MIB, 300.0), made_up("triad", 16 * MIB, 100.0),
               made_up("triad", 64 * MIB, 60.0), made_up("triad", 256 * MIB, 40.0),
               made_up("triad", GIB, 42.0), made_up("copy", GIB, 50.0)]
    monkeypatch.setattr(mb, "cache_sizes", lambda: {"L1d": 48 * KIB, "L2": MIB, "L3": 32 * MIB})
    peak = mb.peak_bandwidth(results)
    assert (peak.kernel, peak.working_set) == ("triad", GIB)  # 64 MiB is only twice L3: still partly cached
    assert mb.peak_bandwidth(results, "copy").gb_per_s == pytest.approx(50.0)
    monkeypatch.setattr(mb, "cache_sizes", lambda: {"L1d": 48 * KIB, "L2": MIB, "L3": 16 * MIB})
    assert mb.peak_bandwidth(results).working_set == 64 * MIB  # 4 x L3 counts now, and reads fastest
    monkeypatch.setattr(mb, "cache_sizes", dict)  # unknown caches: the largest working set
    assert mb.peak_bandwidth(results).working_set == GIB
    monkeypatch.setattr(mb, "cache_sizes", lambda: {"L3": 512 * MIB})  # none beyond: the largest
    assert mb.peak_bandwidth(results).working_set == GIB


def test_peak_errors():
    results = [made_up("triad", MIB, 300.0)]
    with pytest.raises(ValueError, match=r"no 'scale' result among the results \(kernels: triad\)"):
        mb.peak_bandwidth(results, "scale")
    with pytest.raises(ValueError, match="unknown kernel 'tria'; valid values: copy, scale, add, triad"):
        mb.peak_bandwidth(results, "tria")
    with pytest.raises(ValueError, match="several devices"):
        mb.peak_bandwidth(results + [made_up("triad", GIB, 3000.0, device="cuda")])


# --- caches -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, size", [("48K", 48 * KIB), ("2048K", 2 * MIB), ("32M", 32 * MIB), ("1G", GIB),
                                        ("48K\n", 48 * KIB), ("512", 512), ("64KB", 64 * KIB)])
def test_cache_size_strings(text, size):
    assert mb._parse_size(text) == size


def test_a_malformed_cache_size_is_refused():
    with pytest.raises(ValueError, match="cannot read a cache size"):
        mb._parse_size("lots")


def fake_sysfs(root, caches):
    for i, (level, kind, size) in enumerate(caches):
        index = root / f"index{i}"
        index.mkdir(parents=True)
        (index / "level").write_text(f"{level}\n")
        (index / "type").write_text(f"{kind}\n")
        (index / "size").write_text(f"{size}\n")
    return root


def test_cache_sizes_read_from_sysfs(tmp_path):
    root = fake_sysfs(tmp_path / "cache", [(1, "Data", "48K"), (1, "Instruction", "32K"),
                                           (2, "Unified", "2048K"), (3, "Unified", "32M")])
    assert mb.cache_sizes(root) == {"L1d": 48 * KIB, "L2": 2 * MIB, "L3": 32 * MIB}
    assert mb.cache_sizes(tmp_path / "nowhere") == {}
    broken = fake_sysfs(tmp_path / "broken", [(1, "Data", "48 kilobytes")])
    assert mb.cache_sizes(broken) == {}
    here = mb.cache_sizes()  # this machine: {} where Linux does not say
    assert all(isinstance(v, int) and v > 0 for v in here.values())


# --- the plot ---------------------------------------------------------------------------------------


def test_plot_has_labelled_axes_one_line_per_kernel_and_the_caches():
    results = [made_up(k, ws, gb) for k in ("copy", "triad")
               for ws, gb in [(16 * KIB, 300.0), (MIB, 150.0), (256 * MIB, 40.0)]]
    fig = ch10.plot_bandwidth(results, caches={"L1d": 48 * KIB, "L2": MIB, "L3": 32 * MIB})
    try:
        ax = fig.axes[0]
        assert "working set" in ax.get_xlabel() and "bytes" in ax.get_xlabel()
        assert "GB/s" in ax.get_ylabel()
        assert "STREAM" in ax.get_title() and "cpu" in ax.get_title()
        assert ax.get_xscale() == "log"
        kernels = [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]
        assert kernels == ["copy", "triad"]
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["copy", "triad"]
        assert list(ax.get_lines()[0].get_xdata()) == [16 * KIB, MIB, 256 * MIB]
        dashed = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
        assert sorted(line.get_xdata()[0] for line in dashed) == [48 * KIB, MIB, 32 * MIB]
        texts = [t.get_text() for t in ax.texts]
        assert any("L1d 48 KiB" in t for t in texts) and any("L3 32 MiB" in t for t in texts)
        ticks = [t.get_text() for t in ax.get_xticklabels()]
        assert "16 KiB" in ticks and "1 MiB" in ticks and "256 MiB" in ticks
    finally:
        plt.close(fig)
    fig = ch10.plot_bandwidth(results)  # this machine's caches, whatever they are
    plt.close(fig)
    with pytest.raises(ValueError, match="cache size of L2 must be a whole number"):
        ch10.plot_bandwidth(results, caches={"L2": 0})


# --- errors that say what to do ---------------------------------------------------------------------


def test_unknown_kernel():
    with pytest.raises(ValueError, match="unknown kernel 'foo'; valid values: copy, scale, add, triad"):
        mb.measure_bandwidth(["copy", "foo"], [MIB])
    with pytest.raises(ValueError, match="unknown kernel 'foo'"):
        mb.StreamKernel("foo", 10)
    with pytest.raises(ValueError, match="non-empty list"):
        mb.measure_bandwidth([], [MIB])


@pytest.mark.parametrize("bad", [0, -5, 1.5, True])
def test_working_set_must_be_a_positive_whole_number(bad):
    with pytest.raises(ValueError, match="working set must be a whole number >= 1"):
        mb.measure_bandwidth("copy", [MIB, bad])


def test_working_sets_must_be_a_list():
    for bad in ([], 1024, "1M"):
        with pytest.raises(ValueError, match="working sets must be a non-empty list"):
            mb.measure_bandwidth("copy", bad)


def test_working_set_too_small_for_one_element_per_array():
    with pytest.raises(ValueError, match=r"too small for triad: .* at least 12 bytes in fp32; pass a larger"):
        mb.measure_bandwidth("triad", [8])
    with pytest.raises(ValueError, match="at least 16 bytes in fp64"):
        mb.measure_bandwidth("copy", [15], dtype="fp64")


def test_working_set_over_half_the_free_memory(monkeypatch):
    monkeypatch.setattr(mb, "_available_memory", lambda dev: 10 * MIB)
    with pytest.raises(ValueError, match=r"working set of 6 MiB is over half of the free RAM .*at most 5 MiB"):
        mb.measure_bandwidth("copy", [6 * MIB], device="cpu")  # the default is a GPU where there is one
    # Each fits, but copy's and triad's arrays of 4 MiB together (3 arrays of 2 MiB) do not.
    with pytest.raises(ValueError, match=r"the arrays take 6 MiB together .* pass fewer or smaller"):
        mb.measure_bandwidth(["copy", "triad"], [4 * MIB], device="cpu")


def test_memory_unknown_is_no_obstacle(monkeypatch):
    monkeypatch.setattr(mb, "_available_memory", lambda dev: None)
    assert len(mb.measure_bandwidth("copy", [KIB], repeats=1, min_seconds=0)) == 1


def test_free_ram_is_read_from_meminfo():
    free = mb._available_memory(torch.device("cpu"))
    assert free is None or free > 0


@pytest.mark.parametrize("bad", ["int3", torch.int32, 5])
def test_unknown_dtype(bad):
    with pytest.raises(ValueError, match=r"unknown dtype .*valid values: fp32, fp64, fp16, bf16"):
        mb.measure_bandwidth("copy", [MIB], dtype=bad)
    with pytest.raises(ValueError, match="unknown dtype"):
        mb.StreamKernel("copy", 10, dtype=bad)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_bad_repeats(bad):
    with pytest.raises(ValueError, match="repeats must be a whole number >= 1"):
        mb.measure_bandwidth("copy", [MIB], repeats=bad)


def test_other_bad_arguments():
    with pytest.raises(ValueError, match="threads must be a whole number >= 1"):
        mb.measure_bandwidth("copy", [MIB], threads=0)
    with pytest.raises(ValueError, match="min_seconds must be a number >= 0"):
        mb.measure_bandwidth("copy", [MIB], min_seconds=-1)
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        mb.measure_bandwidth("copy", [MIB], device="tpu")
    with pytest.raises(ValueError, match="passes=1000000 is too many for 100 elements"):
        mb.StreamKernel("copy", 100, passes=10**6)
    with pytest.raises(ValueError, match="must split evenly into 2 regions"):
        mb.StreamKernel("copy", 101, passes=4, regions=2)
    with pytest.raises(ValueError, match="n_elements must be a whole number >= 1"):
        mb.StreamKernel("copy", 0)
    with pytest.raises(ValueError, match="triad needs 3 buffers"):
        mb.StreamKernel("triad", 10, buffers=[torch.zeros(10), torch.zeros(10)])


# --- the GPU ----------------------------------------------------------------------------------------


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without a GPU")
def test_host_to_device_without_a_gpu_says_how_to_get_one():
    with pytest.raises(ValueError, match=r"needs a CUDA GPU; on Colab choose Runtime > Change runtime type > GPU"):
        mb.host_to_device()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_kernels_compute_stream_and_copies_are_timed():
    for kernel in ARRAYS:
        check_one_call(mb.StreamKernel(kernel, 100_000, "cuda", torch.float32, passes=64))
    results = mb.measure_bandwidth(working_sets=[MIB, 64 * MIB], device="cuda", repeats=2, min_seconds=0)
    assert [r.device for r in results] == ["cuda"] * 8 and all(r.threads is None for r in results)
    assert all(r.gb_per_s > 0 and math.isfinite(r.gb_per_s) for r in results)
    assert mb._default_working_sets(torch.device("cuda")) == tuple(MIB * 4**k for k in range(6))
    assert mb.last_level_cache("cuda") > 0
    for pinned in (True, False):
        (r,) = mb.host_to_device([16 * MIB], repeats=2, pinned=pinned)
        assert r.kernel == f"host-to-device {'pinned' if pinned else 'pageable'}"
        assert r.bytes_moved == r.working_set == 16 * MIB and r.gb_per_s > 0
    plt.close(ch10.plot_bandwidth(results))
