"""Tests for course_lib.hardware.disk: disk-read results, their cleanup and errors, the load-time arithmetic,
and chapter 10's tables of them.

Timings are only checked for sanity (positive, finite): the machine is shared and its disk varies.
"""

import errno
import math
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from course_lib.chapters import ch10
from course_lib.hardware import disk
from course_lib.hardware.disk import ReadResult

SMALL = {"file_mb": 1, "block_kb": 64, "repeats": 2}  # 16 blocks of 64 KiB: milliseconds per run
PROC_MOUNTS = Path("/proc/mounts").exists()


def made_up(pattern="sequential", method=disk.O_DIRECT, times=(2.0, 1.0, 4.0), block=2**20,
            read=100 * 2**20, filesystem="ext4"):
    return ReadResult(pattern, method, 100 * 2**20, block, tuple(times), read, filesystem)


def leftovers(directory):
    return sorted(p.name for p in Path(directory).iterdir())


@pytest.mark.parametrize("pattern", disk._PATTERNS)
def test_each_pattern_gives_a_complete_result_and_leaves_no_file(tmp_path, pattern):
    (tmp_path / "keep.txt").write_text("not ours")
    before = leftovers(tmp_path)
    r = disk.read_speed(tmp_path, pattern=pattern, random_reads=10, **SMALL)
    assert leftovers(tmp_path) == before
    assert r.pattern == pattern and r.method in (disk.O_DIRECT, disk.FADVISE, disk.WARM_CACHE)
    assert (r.method == disk.WARM_CACHE) == (pattern == "cached")
    assert r.file_bytes == 2**20 and r.block_bytes == 64 * 1024
    assert r.bytes_read == (10 * 64 * 1024 if pattern == "random" else 2**20)
    assert r.repeats == len(r.times) == 2
    assert all(t > 0 and math.isfinite(t) for t in r.times)
    assert isinstance(r.filesystem, str) and r.filesystem
    for value in (r.seconds, r.median_seconds, r.mb_per_s, r.median_mb_per_s, r.iops):
        assert value > 0 and math.isfinite(value)
    assert r.reads == r.bytes_read // r.block_bytes


def test_more_random_reads_than_blocks_reread_blocks(tmp_path):
    r = disk.read_speed(tmp_path, pattern="random", random_reads=40, **SMALL)  # 16 blocks in the file
    assert r.bytes_read == 40 * 64 * 1024 and leftovers(tmp_path) == []


def test_random_offsets_are_seeded_block_aligned_and_distinct_while_they_can_be():
    offsets = disk._offsets("random", 16, 4096, 10, seed=3)
    assert offsets == disk._offsets("random", 16, 4096, 10, seed=3) != disk._offsets("random", 16, 4096, 10, 4)
    assert len(set(offsets)) == 10 and all(o % 4096 == 0 and 0 <= o < 16 * 4096 for o in offsets)
    assert sorted(disk._offsets("random", 4, 4096, 8, 0)) == sorted(2 * [0, 4096, 8192, 12288])
    assert disk._offsets("sequential", 3, 4096, 99, 0) == [0, 4096, 8192]


def test_the_file_size_is_rounded_down_to_whole_blocks(tmp_path):
    r = disk.read_speed(tmp_path, file_mb=0.5, block_kb=96, repeats=1)  # 524288 B = 5 blocks + a bit
    assert r.file_bytes == r.bytes_read == 5 * 96 * 1024


def test_the_default_directory_is_the_cache_dir_and_is_created(tmp_path, monkeypatch):
    cache = tmp_path / "not" / "yet"
    monkeypatch.setenv("COURSE_LIB_CACHE", str(cache))
    r = disk.read_speed(file_mb=1, block_kb=256, repeats=1)
    assert cache.is_dir() and leftovers(cache) == [] and r.bytes_read == 2**20


def test_the_file_is_removed_when_reading_fails(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(disk, "_read_blocks", broken)
    with pytest.raises(RuntimeError, match="disk on fire"):
        disk.read_speed(tmp_path, **SMALL)
    assert leftovers(tmp_path) == []


def test_the_file_is_removed_on_keyboard_interrupt(tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(disk, "_read_blocks", interrupted)
    with pytest.raises(KeyboardInterrupt):
        disk.read_speed(tmp_path, pattern="cached", **SMALL)
    assert leftovers(tmp_path) == []


@pytest.mark.skipif(not (hasattr(os, "O_DIRECT") and hasattr(os, "posix_fadvise")), reason="Linux only")
def test_a_filesystem_that_refuses_o_direct_falls_back_to_fadvise(tmp_path, monkeypatch):
    real_open = disk._open

    def refuse_direct(path, direct):
        if direct:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, direct)

    monkeypatch.setattr(disk, "_open", refuse_direct)
    for pattern, reads in (("sequential", 16), ("random", 40)):  # 40 > 16 blocks: dropped after each read
        r = disk.read_speed(tmp_path, pattern=pattern, random_reads=40, **SMALL)
        assert r.method == disk.FADVISE and r.bytes_read == reads * 64 * 1024
    assert leftovers(tmp_path) == []


@pytest.mark.skipif(not hasattr(os, "O_DIRECT"), reason="no O_DIRECT on this platform")
def test_other_errors_under_o_direct_are_not_hidden_by_the_fallback(tmp_path, monkeypatch):
    def io_error(path, direct):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(disk, "_open", io_error)
    with pytest.raises(OSError, match="Input/output"):
        disk.read_speed(tmp_path, **SMALL)
    assert leftovers(tmp_path) == []


def test_without_o_direct_or_fadvise_the_result_says_so(tmp_path, monkeypatch):
    monkeypatch.delattr(os, "O_DIRECT", raising=False)
    monkeypatch.delattr(os, "posix_fadvise", raising=False)
    r = disk.read_speed(tmp_path, **SMALL)
    assert r.method == disk.NO_CACHE_CONTROL and "page cache" in r.method
    assert "may be the page cache" in ch10.read_table([r]).title


@pytest.mark.skipif(not PROC_MOUNTS, reason="no /proc/mounts")
def test_the_filesystem_is_read_from_proc_mounts(tmp_path):
    assert disk._filesystem(Path("/")) != "unknown"
    assert disk._filesystem(tmp_path) != "unknown"
    if Path("/dev/shm").is_dir() and disk._filesystem(Path("/dev/shm")) == "tmpfs":
        r = disk.read_speed("/dev/shm", **SMALL)
        assert r.filesystem == "tmpfs" and r.in_ram and "RAM" in ch10.read_table([r]).title


def test_the_filesystem_is_unknown_without_proc_mounts(tmp_path, monkeypatch):
    def no_file(*args, **kwargs):
        raise FileNotFoundError("/proc/mounts")

    monkeypatch.setattr(disk, "open", no_file, raising=False)
    assert disk._filesystem(tmp_path) == "unknown"


def test_fastest_median_speed_and_iops_of_a_made_up_result():
    r = made_up(times=(2.0, 1.0, 4.0))
    assert (r.seconds, r.median_seconds, r.repeats) == (1.0, 2.0, 3)
    assert r.mb_per_s == pytest.approx(100 * 2**20 / 1e6)
    assert r.median_mb_per_s == pytest.approx(r.mb_per_s / 2)
    assert r.reads == 100 and r.iops == pytest.approx(100.0)
    assert not r.in_ram and made_up(filesystem="tmpfs").in_ram


def test_checkpoint_load_seconds_by_hand():
    assert disk.checkpoint_load_seconds(7e9, 2, 1000) == pytest.approx(14.0)  # 14 GB at 1 GB/s
    assert disk.checkpoint_load_seconds(70e9, 2, 500) == pytest.approx(280.0)
    assert disk.checkpoint_load_seconds(1e9, 16, 2000) == pytest.approx(8.0)  # weights + Adam state


def test_stream_seconds_by_hand():
    assert disk.stream_seconds(1e12, 2, 1000) == pytest.approx(2000.0)  # 2 TB of uint16 ids at 1 GB/s
    assert disk.stream_seconds(5e6, 4, 20) == pytest.approx(1.0)


@given(n=st.floats(1e3, 1e13), k=st.floats(0.01, 100), b=st.floats(0.5, 16), mb=st.floats(1, 1e5))
def test_load_time_is_linear_in_size_and_inverse_in_speed(n, k, b, mb):
    t = disk.checkpoint_load_seconds(n, b, mb)
    assert disk.checkpoint_load_seconds(k * n, b, mb) == pytest.approx(k * t)
    assert disk.checkpoint_load_seconds(n, b, k * mb) == pytest.approx(t / k)
    assert disk.stream_seconds(n, b, mb) == pytest.approx(t)


def test_read_table_has_one_row_per_result():
    results = [made_up(), made_up("random", disk.FADVISE, block=4096, read=400 * 4096)]
    table = ch10.read_table(results)
    assert table.headers == ["pattern", "method", "filesystem", "file MiB", "block KiB",
                             "MB/s fastest", "MB/s median", "IOPS"]
    assert table.rows[0] == ["sequential", "O_DIRECT", "ext4", "100", "1024", "105", "52", "-"]
    assert table.rows[1][:5] == ["random", disk.FADVISE, "ext4", "100", "4"] and table.rows[1][-1] == "400"
    assert "shared" in table.title and "3 run(s)" in table.title and "RAM" not in table.title


def test_checkpoint_table_rows_are_models_and_columns_are_speeds():
    r = made_up(times=(1.0,), read=1000 * 10**6 // 1)  # 1000 MB/s
    table = ch10.checkpoint_table([r], references={"NVMe [cite]": 3500, "HDD [cite]": 200})
    assert table.headers == ["model", "checkpoint GB", "s, sequential O_DIRECT (1,000 MB/s)",
                             "s, NVMe [cite] (3,500 MB/s)", "s, HDD [cite] (200 MB/s)"]
    assert [row[0] for row in table.rows] == ["1B", "7B", "70B"]
    assert table.rows[1][:3] == ["7B", "14.0", "14.0"] and table.rows[2][-1] == "700"
    assert "2 bytes per parameter" in table.title
    only_refs = ch10.checkpoint_table([], n_params=[125e6, 1.5e9], bytes_per_param=4, references={"x": 100})
    assert [row[:2] for row in only_refs.rows] == [["125M", "0.5"], ["1.5B", "6.0"]]
    assert only_refs.rows[0][2] == "5.00"


@pytest.mark.parametrize("kwargs, message", [
    ({"pattern": "diagonal"}, "unknown pattern 'diagonal'; valid values: sequential, random, cached"),
    ({"file_mb": 0}, "file_mb must be a positive number"),
    ({"file_mb": float("nan")}, "file_mb must be a positive number"),
    ({"file_mb": -1}, "file_mb must be a positive number"),
    ({"block_kb": 0}, "block_kb must be a whole number"),
    ({"block_kb": 6}, "multiple of 4 .* try 4"),
    ({"block_kb": 2048}, "2048 KiB is larger than the 1 MiB file; pass a smaller block_kb or a larger file_mb"),
    ({"repeats": 0}, "repeats must be a whole number"),
    ({"random_reads": 1.5}, "random_reads must be a whole number"),
    ({"seed": -1}, "seed must be a whole number >= 0"),
])  # fmt: skip
def test_bad_arguments_say_what_to_do(tmp_path, kwargs, message):
    args = {"file_mb": 1, "block_kb": 64} | kwargs
    with pytest.raises(ValueError, match=message):
        disk.read_speed(tmp_path, **args)
    assert leftovers(tmp_path) == []


def test_a_missing_directory_is_named_and_creating_it_suggested(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(ValueError, match="does not exist; create it first"):
        disk.read_speed(missing, **SMALL)
    assert not missing.exists()
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(ValueError, match="is not a directory"):
        disk.read_speed(tmp_path / "a_file", **SMALL)
    with pytest.raises(ValueError, match="directory must be a path"):
        disk.read_speed(42, **SMALL)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root may write anywhere")
def test_a_read_only_directory_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(ValueError, match="is not writable; pass one that is with directory="):
            disk.read_speed(locked, **SMALL)
    finally:
        locked.chmod(0o700)


def test_an_unwritable_directory_is_refused_whoever_runs_the_tests(tmp_path, monkeypatch):
    monkeypatch.setattr(disk, "_writable", lambda directory: False)
    with pytest.raises(ValueError, match=f"{tmp_path.name}.* is not writable; pass one that is with directory="):
        disk.read_speed(tmp_path, **SMALL)


def test_permission_denied_on_creating_the_file_is_explained(tmp_path, monkeypatch):
    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(disk.tempfile, "mkstemp", denied)
    with pytest.raises(ValueError, match="is not writable; pass one that is with directory="):
        disk.read_speed(tmp_path, **SMALL)


def test_a_file_too_large_for_the_free_space_is_refused(tmp_path, monkeypatch):
    class Usage:
        total, used, free = 10 * 2**30, 10 * 2**30 - 8 * 2**20, 8 * 2**20  # 8 MiB free

    monkeypatch.setattr(disk.shutil, "disk_usage", lambda path: Usage)
    with pytest.raises(ValueError, match=r"more than half of the 8 MiB free .* smaller file_mb \(say 2 or less\)"):
        disk.read_speed(tmp_path, file_mb=64, block_kb=64)
    assert leftovers(tmp_path) == []


def test_tables_and_load_times_reject_bad_input():
    with pytest.raises(ValueError, match="needs at least one result"):
        ch10.read_table([])
    with pytest.raises(ValueError, match="list of ReadResult"):
        ch10.read_table([{"pattern": "sequential"}])
    with pytest.raises(ValueError, match="at least one result .* or a reference speed"):
        ch10.checkpoint_table([])
    with pytest.raises(ValueError, match="reference speed of 'HDD'"):
        ch10.checkpoint_table([made_up()], references={"HDD": float("nan")})
    with pytest.raises(ValueError, match="n_params must be a non-empty list"):
        ch10.checkpoint_table([made_up()], n_params=7e9)
    with pytest.raises(ValueError, match="mb_per_s must be a positive number"):
        disk.checkpoint_load_seconds(7e9, 2, 0)
    with pytest.raises(ValueError, match="tokens must be a positive number"):
        disk.stream_seconds(float("nan"), 2, 1000)
