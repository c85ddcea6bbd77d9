"""How fast the disk under a directory reads, measured so that the page cache does not lie.

Chapter 10, *Hardware for LLM training*, asks how long a node waits for a checkpoint or a
tokenised dataset to come off its disk. Timing a read of a file that was just written measures
memory, not the disk: the operating system keeps recently used file pages in RAM (the *page
cache*) and serves a second read from there, often ten to a hundred times faster than the
device. :func:`read_speed` therefore writes a file of seeded random bytes (not zeros, which some
filesystems compress or skip), flushes it to the device with ``fsync``, and keeps the cache out
of every timed read in the first of these ways that the platform and filesystem allow:

* ``O_DIRECT`` (Linux): reads go from the device straight into a page-aligned buffer and
  bypass the cache. Some filesystems refuse it with EINVAL (tmpfs before Linux 6.6, some
  overlay set-ups and network filesystems).
* ``posix_fadvise(DONTNEED)``: before every timed run the file's cached pages are dropped, so
  the run has to fetch them from the device again.
* neither (macOS, Windows): a plain read, reported as such, whose numbers may be the cache's.

The ``"cached"`` pattern does the opposite on purpose: it reads the file once and then times
reads served by the warm cache, to show how large the lie is. A file on tmpfs lives in RAM, so
no method gives a disk's speed there (newer kernels accept ``O_DIRECT`` on tmpfs and still read
RAM); :attr:`ReadResult.in_ram` says so. Some filesystems accept ``O_DIRECT`` but still go through a
cache of their own (ZFS, some network filesystems), and a virtual machine's disk may be cached
by its host: compare with the ``"cached"`` row before trusting a number that looks like memory.

Units: the test file's size is given in MiB (2**20 bytes) and its blocks in KiB (1024 bytes),
so that blocks align with 4 KiB pages; speeds are in MB/s (10**6 bytes per second), the unit of
drive datasheets. :func:`checkpoint_load_seconds` and :func:`stream_seconds` turn a speed into
the seconds to read a checkpoint or to stream a dataset once. The machine may be shared: runs
differ, so every result keeps all its runs and reports the fastest (the least disturbed) and
the median.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import random
import re
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from course_lib.base.checks import choice, positive
from course_lib.base.timing import TimedRuns

__all__ = ["FADVISE", "NO_CACHE_CONTROL", "O_DIRECT", "WARM_CACHE", "ReadResult", "checkpoint_load_seconds",
           "read_speed", "stream_seconds"]

#: How :func:`read_speed` reads the file: whole file in order, blocks at random offsets, or warm cache.
_PATTERNS: tuple[str, ...] = ("sequential", "random", "cached")

#: The ways of keeping the page cache out of a timed read, as :attr:`ReadResult.method` records them.
O_DIRECT = "O_DIRECT"
FADVISE = "posix_fadvise(DONTNEED)"
WARM_CACHE = "page cache (warm)"
NO_CACHE_CONTROL = "no cache control (numbers may be the page cache)"

_MIB = 2**20
_KIB = 1024
_CHUNK = 4 * _MIB  # bytes generated and written at a time
_RAM_FILESYSTEMS = ("tmpfs", "ramfs")
#: What a filesystem that refuses O_DIRECT answers (e.g. tmpfs before Linux 6.6: EINVAL on open).
_NOT_SUPPORTED = {getattr(errno, name) for name in ("EINVAL", "EOPNOTSUPP", "ENOTSUP") if hasattr(errno, name)}


@dataclass(frozen=True)
class ReadResult(TimedRuns):
    """One timed read of a test file: its pattern, how the cache was avoided, the sizes, every run's seconds.

    ``times`` holds the seconds of each run, each reading ``bytes_read`` bytes in blocks of
    ``block_bytes``; ``filesystem`` is the type of the filesystem that held the file
    (``"ext4"``, ``"overlay"``, ``"tmpfs"``, ... or ``"unknown"``).

    Chapter 10, *Hardware for LLM training*.
    """

    pattern: str  # "sequential", "random" or "cached"
    method: str  # O_DIRECT, FADVISE, WARM_CACHE or NO_CACHE_CONTROL
    file_bytes: int
    block_bytes: int
    times: tuple[float, ...]  # seconds of each run
    bytes_read: int  # bytes read by each run
    filesystem: str

    @property
    def mb_per_s(self) -> float:
        """Speed of the fastest run in MB/s (10**6 bytes per second)."""
        return self.bytes_read / self.seconds / 1e6

    @property
    def median_mb_per_s(self) -> float:
        """Speed of the median run in MB/s."""
        return self.bytes_read / self.median_seconds / 1e6

    @property
    def reads(self) -> int:
        """Block reads per run."""
        return self.bytes_read // self.block_bytes

    @property
    def iops(self) -> float:
        """Block reads per second in the fastest run (I/O operations per second)."""
        return self.reads / self.seconds

    @property
    def in_ram(self) -> bool:
        """Whether the file lay on a filesystem kept in RAM (tmpfs, ramfs): then it measured memory."""
        return self.filesystem in _RAM_FILESYSTEMS


def _filesystem(directory: Path) -> str:
    """The type of the filesystem holding ``directory``, from /proc/mounts; "unknown" where it cannot be read."""
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return "unknown"
    path = os.path.realpath(directory)
    best, found = -1, "unknown"
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        # /proc/mounts writes a space in a mount point as \040, a tab as \011, and so on.
        mount = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1])
        inside = path == mount or path.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= best:  # the longest mount point wins; of equals, the last mounted
            best, found = len(mount), fields[2]
    return found


def _writable(directory: Path) -> bool:
    """Whether this process may create files in ``directory``."""
    return os.access(directory, os.W_OK | os.X_OK)


def _directory(directory: str | os.PathLike[str] | None) -> Path:
    """The directory to test, checked: it exists, is a directory and is writable."""
    if directory is None:
        from course_lib.base.env import cache_dir

        path = cache_dir()
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ValueError(f"cannot create the cache directory {str(path)!r} ({err.strerror}); "
                             "pass a writable directory with directory=...") from None
    else:
        if not isinstance(directory, (str, os.PathLike)):
            raise ValueError(f"directory must be a path (str or pathlib.Path) or None, got {directory!r}")
        path = Path(directory).expanduser()
        if not path.exists():
            raise ValueError(f"directory {str(path)!r} does not exist; create it first "
                             f"(os.makedirs({str(path)!r})) or pass another with directory=...")
        if not path.is_dir():
            raise ValueError(f"{str(path)!r} is not a directory; pass a directory with directory=...")
    if not _writable(path):
        raise ValueError(f"directory {str(path)!r} is not writable; pass one that is with directory=... "
                         "(for example tempfile.gettempdir())")
    return path


def _file_bytes(file_mb: Any, block_bytes: int, directory: Path) -> int:
    """The test file's size: ``file_mb`` MiB rounded down to whole blocks, checked against the free space."""
    wanted = file_mb * _MIB
    if block_bytes > wanted:
        raise ValueError(f"a block of {block_bytes // _KIB} KiB is larger than the {file_mb:g} MiB file; "
                         "pass a smaller block_kb or a larger file_mb")
    size = int(wanted) // block_bytes * block_bytes
    free = shutil.disk_usage(directory).free
    if size > free / 2:
        limit = max(1, int(free / 4 / _MIB))
        free_text = f"{free / 2**30:.1f} GiB" if free >= 2**30 else f"{free / _MIB:.0f} MiB"
        raise ValueError(f"a {file_mb:g} MiB test file would take more than half of the "
                         f"{free_text} free under {str(directory)!r}; pass a smaller file_mb "
                         f"(say {limit} or less) or another directory with directory=...")
    return size


def _write_file(fd: int, size: int, seed: int) -> None:
    """Fill ``fd`` with ``size`` seeded random bytes and flush them to the device."""
    rng = random.Random(seed)
    left = size
    while left:
        chunk = rng.randbytes(min(_CHUNK, left))
        view = memoryview(chunk)
        while view:  # os.write may write less than asked
            view = view[os.write(fd, view):]
        left -= len(chunk)
    os.fsync(fd)


def _offsets(pattern: str, n_blocks: int, block_bytes: int, random_reads: int, seed: int) -> list[int]:
    """Byte offsets of the blocks that one run reads: all in order, or seeded random block-aligned ones.

    Random reads visit distinct blocks while there are enough of them (seeded permutations
    follow each other when ``random_reads`` exceeds the number of blocks).
    """
    if pattern != "random":
        return [i * block_bytes for i in range(n_blocks)]
    rng = random.Random(seed)
    blocks: list[int] = []
    while len(blocks) < random_reads:
        blocks += rng.sample(range(n_blocks), n_blocks)
    return [b * block_bytes for b in blocks[:random_reads]]


def _open(path: str, direct: bool) -> int:
    """A read-only descriptor of ``path``, with ``O_DIRECT`` when asked (OSError where refused)."""
    flags = os.O_RDONLY | getattr(os, "O_BINARY", 0) | (os.O_DIRECT if direct else 0)
    return os.open(path, flags)


def _read_blocks(fd: int, offsets: Sequence[int], buf: mmap.mmap, drop_each: bool = False) -> int:
    """Read one block into ``buf`` at each offset; the bytes read (after ``drop_each``, each block's pages dropped)."""
    size = len(buf)
    total = 0
    for offset in offsets:
        if hasattr(os, "preadv"):
            n = os.preadv(fd, [buf], offset)
        else:  # Windows: no preadv
            os.lseek(fd, offset, os.SEEK_SET)
            n = len(os.read(fd, size))
        if n != size:
            raise OSError(f"short read: {n} of {size} bytes at offset {offset}")
        if drop_each:
            os.posix_fadvise(fd, offset, size, os.POSIX_FADV_DONTNEED)
        total += n
    return total


def _time_runs(
    path: str, method: str, offsets: Sequence[int], block_bytes: int, repeats: int
) -> list[tuple[float, int]]:
    """(seconds, bytes read) of each of ``repeats`` runs over ``offsets``, the cache kept out as ``method`` says."""
    fd = _open(path, method == O_DIRECT)
    buf = mmap.mmap(-1, block_bytes)  # anonymous maps are page-aligned, as O_DIRECT needs
    try:
        # A block read twice in one run would come from the cache: drop each block after reading it.
        drop_each = method == FADVISE and len(set(offsets)) < len(offsets)
        if method == FADVISE and list(offsets) != sorted(offsets):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no read-ahead of pages a random read skips
        if method == WARM_CACHE:
            _read_blocks(fd, offsets, buf)  # the first read fills the cache; the timed ones hit it
        runs = []
        for _ in range(repeats):
            if method == FADVISE:
                os.fsync(fd)  # dirty pages cannot be dropped (the file was flushed already: cheap)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            start = time.perf_counter()
            n = _read_blocks(fd, offsets, buf, drop_each)
            runs.append((time.perf_counter() - start, n))
        return runs
    finally:
        buf.close()
        os.close(fd)


def read_speed(
    directory: str | os.PathLike[str] | None = None,
    file_mb: float = 64,
    block_kb: int = 1024,
    pattern: str = "sequential",
    repeats: int = 3,
    random_reads: int = 256,
    seed: int = 0,
) -> ReadResult:
    """Time reads of a fresh test file in ``directory`` with the page cache kept out, ``repeats`` runs.

    The file (``file_mb`` MiB of seeded random bytes, rounded down to whole blocks of ``block_kb``
    KiB; a multiple of 4 KiB) is written to a temporary file in ``directory`` (default: the
    course's cache directory, created if missing), flushed to the device, read, and deleted even
    when reading fails or is interrupted. ``pattern="sequential"`` reads the whole file block by
    block, ``"random"`` reads ``random_reads`` blocks at seeded random block-aligned offsets, and
    ``"cached"`` reads the whole file once and then times reads from the warm page cache. The
    cache is kept out with ``O_DIRECT`` where the filesystem allows it, else by dropping the
    file's pages with ``posix_fadvise`` before every run; ``method`` of the result says which
    (or that neither was available). The defaults take well under two seconds on a laptop's SSD.

    Chapter 10, *Hardware for LLM training*.
    """
    pattern = choice(pattern, _PATTERNS, "pattern")
    file_mb = positive(file_mb, "file_mb")
    block_kb = positive(block_kb, "block_kb", integer=True)
    if block_kb % 4:
        raise ValueError(f"block_kb must be a multiple of 4 (blocks of whole 4 KiB pages, as O_DIRECT "
                         f"needs), got {block_kb}; try {max(4, block_kb // 4 * 4)}")
    repeats = positive(repeats, "repeats", integer=True)
    random_reads = positive(random_reads, "random_reads", integer=True)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a whole number >= 0, got {seed!r}")
    block_bytes = int(block_kb) * _KIB
    folder = _directory(directory)
    file_bytes = _file_bytes(file_mb, block_bytes, folder)
    offsets = _offsets(pattern, file_bytes // block_bytes, block_bytes, int(random_reads), seed)

    try:
        fd, path = tempfile.mkstemp(prefix="course_lib_read_speed_", suffix=".bin", dir=folder)
    except PermissionError:
        raise ValueError(f"directory {str(folder)!r} is not writable; pass one that is with directory=... "
                         "(for example tempfile.gettempdir())") from None
    try:
        try:
            _write_file(fd, file_bytes, seed)
        finally:
            os.close(fd)
        if pattern == "cached":
            methods = [WARM_CACHE]
        else:
            methods = [O_DIRECT] * hasattr(os, "O_DIRECT") + [FADVISE] * hasattr(os, "posix_fadvise")
            methods = methods or [NO_CACHE_CONTROL]
        for i, method in enumerate(methods):
            try:
                runs = _time_runs(path, method, offsets, block_bytes, int(repeats))
                break
            except OSError as err:
                # tmpfs and others refuse O_DIRECT with EINVAL (on open or on the first read): fall back.
                if method != O_DIRECT or err.errno not in _NOT_SUPPORTED or i == len(methods) - 1:
                    raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    return ReadResult(pattern, method, file_bytes, block_bytes, tuple(t for t, _ in runs), runs[0][1],
                      _filesystem(folder))  # fmt: skip


def checkpoint_load_seconds(n_params: float, bytes_per_param: float, mb_per_s: float) -> float:
    """Seconds to read a checkpoint of ``n_params`` parameters at ``bytes_per_param`` each, at ``mb_per_s`` MB/s.

    ``n_params * bytes_per_param / (mb_per_s * 10**6)``: a 7B model in BF16 (2 bytes per
    parameter, 14 GB) takes 14 s at 1000 MB/s. Optimizer state, when the checkpoint holds it,
    is more bytes per parameter (chapter 2).

    Chapter 10, *Hardware for LLM training*.
    """
    n_params = positive(n_params, "n_params")
    bytes_per_param = positive(bytes_per_param, "bytes_per_param")
    mb_per_s = positive(mb_per_s, "mb_per_s")
    return float(n_params) * float(bytes_per_param) / (float(mb_per_s) * 1e6)


def stream_seconds(tokens: float, bytes_per_token: float, mb_per_s: float) -> float:
    """Seconds to read a tokenised dataset of ``tokens`` tokens at ``bytes_per_token`` each, at ``mb_per_s`` MB/s.

    Token ids below 65,536 fit in 2 bytes (uint16): a trillion tokens are 2 TB, which take
    2000 s at 1000 MB/s.

    Chapter 10, *Hardware for LLM training*.
    """
    tokens = positive(tokens, "tokens")
    bytes_per_token = positive(bytes_per_token, "bytes_per_token")
    mb_per_s = positive(mb_per_s, "mb_per_s")
    return float(tokens) * float(bytes_per_token) / (float(mb_per_s) * 1e6)
