"""The environment a notebook runs in: versions, CPU and GPU, network, Colab; device, seeding, cache, progress.

Every chapter's setup cell calls :func:`setup_notebook`; the README's `python -m course_lib check`
prints the same check.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import random
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from course_lib._about import __version__

if TYPE_CHECKING:
    import torch

MIN_PYTHON = (3, 10)
MIN_TORCH = (2, 6)  # FSDP2 (torch.distributed.fsdp.fully_shard), chapter 9
MIN_TRANSFORMERS = (5, 4)

#: Host and port probed to decide whether a model hub is reachable.
HUB_HOST = ("huggingface.co", 443)


@dataclass
class EnvReport:
    """What the environment check found, and each problem with its fix.

    Chapter 1, *Pretraining objectives*.
    """

    python: str
    torch: str | None
    transformers: str | None
    course_lib: str
    cpu_threads: int
    cpu_cores: int | None
    gpu: str | None
    gpu_memory_gib: float | None
    online: bool
    colab: bool
    problems: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
        return not self.problems

    def lines(self) -> list[str]:
        """The report as aligned ``name: value`` lines, problems and fixes last."""
        gpu = f"{self.gpu} ({self.gpu_memory_gib:.1f} GiB)" if self.gpu else "none (CPU only)"
        rows = [
            ("Python", self.python),
            ("torch", self.torch or "not installed"),
            ("transformers", self.transformers or "not installed"),
            ("course_lib", self.course_lib),
            ("CPU threads", f"{self.cpu_threads} used by torch, {self.cpu_cores} logical cores"),
            ("GPU", gpu),
            ("network", "online (model hub reachable)" if self.online else "offline (course works without a hub)"),
            ("Colab", "yes" if self.colab else "no"),
        ]
        out = [f"{name:<13} {value}" for name, value in rows]
        if self.problems:
            out.append("Problems found:")
            out += [f"  - {problem}\n    fix: {fix}" for problem, fix in self.problems]
        else:
            out.append("All checks passed.")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _parse(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def in_colab() -> bool:
    """Whether this process runs inside Google Colab.

    Chapter 1, *Pretraining objectives*.
    """
    return "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ


def is_online(host: tuple[str, int] = HUB_HOST, timeout: float = 1.5) -> bool:
    """Whether a model hub can be reached: False when HF_HUB_OFFLINE is set or a connection fails.

    Chapter 1, *Pretraining objectives*.
    """
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0", "false", "False"):
        return False
    try:
        with socket.create_connection(host, timeout=timeout):
            return True
    except OSError:
        return False


def get_device(prefer: str | None = None) -> torch.device:
    """The torch device the course runs on: CUDA when present, else CPU (``prefer`` overrides).

    Chapter 2, *The memory wall*.
    """
    import torch

    if prefer is not None:
        if prefer.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"device {prefer!r} asked for, but no CUDA GPU is visible; use 'cpu' or leave it unset")
        return torch.device(prefer)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def seed_everything(seed: int = 0) -> None:
    """Seed Python, NumPy (if present) and torch so that a notebook's numbers repeat run after run.

    Chapter 1, *Pretraining objectives*.
    """
    import torch

    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:  # pragma: no cover - numpy ships with torch
        pass
    torch.manual_seed(seed)


def check_env(online_probe: bool = True) -> EnvReport:
    """Collect versions, hardware, network and Colab status, with a fix for each problem found.

    Chapter 1, *Pretraining objectives*.
    """
    problems: list[tuple[str, str]] = []
    py = sys.version_info
    if py[:2] < MIN_PYTHON:
        problems.append(
            (
                f"Python {py.major}.{py.minor} is older than {MIN_PYTHON[0]}.{MIN_PYTHON[1]}",
                f"install Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer and recreate the environment",
            )
        )
    torch_version = _version("torch")
    gpu = gpu_mem = None
    threads = os.cpu_count() or 1
    if torch_version is None:
        problems.append(("torch is not installed", "pip install torch==2.13.0 (or run the README's build command)"))
    else:
        if _parse(torch_version) < MIN_TORCH:
            problems.append(
                (f"torch {torch_version} is too old", f"pip install 'torch>={MIN_TORCH[0]}.{MIN_TORCH[1]}'")
            )
        import torch

        threads = torch.get_num_threads()
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            gpu, gpu_mem = props.name, props.total_memory / 2**30
    tf_version = _version("transformers")
    if tf_version is None:
        problems.append(("transformers is not installed", "pip install 'transformers>=4.40'"))
    elif _parse(tf_version) < MIN_TRANSFORMERS:
        problems.append(
            (f"transformers {tf_version} is too old", f"pip install -U 'transformers>={MIN_TRANSFORMERS[0]}.{MIN_TRANSFORMERS[1]}'")
        )
    cache = cache_problem()
    if cache is not None:
        problems.append(cache)
    return EnvReport(
        python=platform.python_version(),
        torch=torch_version,
        transformers=tf_version,
        course_lib=__version__,
        cpu_threads=threads,
        cpu_cores=os.cpu_count(),
        gpu=gpu,
        gpu_memory_gib=gpu_mem,
        online=is_online() if online_probe else False,
        colab=in_colab(),
        problems=problems,
    )


def setup_notebook(seed: int = 0) -> EnvReport:
    """Prepare a notebook: Colab's widget manager when on Colab, seeds, then print the environment check.

    Chapter 1, *Pretraining objectives*.
    """
    if in_colab():  # pragma: no cover - only on Colab
        from google.colab import output  # type: ignore[import-not-found]

        output.enable_custom_widget_manager()
    seed_everything(seed)
    report = check_env()
    print(report)
    return report


def cache_dir() -> Path:
    """The directory for cached files: ``$COURSE_LIB_CACHE``, else ``~/.cache/course_lib``.

    Chapter 1, *Pretraining objectives*.
    """
    override = os.environ.get("COURSE_LIB_CACHE")
    if override:
        return Path(override).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "course_lib"


class CacheError(OSError):
    """The course cache cannot be written; the message names the problem and the fix.

    Chapter 1, *Pretraining objectives*.
    """


#: The cache's folders of trained models (chapter 1's, the fine-tunes): a model missing there
#: is trained, then written into them.
CACHE_FOLDERS = ("models", "finetunes")


def cache_problem(folders: bool = True) -> tuple[str, str] | None:
    """(problem, fix) when :func:`cache_dir` is not a writable folder, nor one that can be created.

    Creates nothing: an existing cache must be a folder this process may write in; a missing one
    needs its nearest existing parent to be such a folder. With ``folders``, the folders of
    :data:`CACHE_FOLDERS` that exist must be writable folders too.

    Chapter 1, *Pretraining objectives*.
    """
    path = cache_dir()
    override = bool(os.environ.get("COURSE_LIB_CACHE"))
    where = f"COURSE_LIB_CACHE={path}" if override else str(path)
    if override:
        default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "course_lib"
        fix = f"set COURSE_LIB_CACHE to a writable folder, or unset it to use {default}"
    else:
        fix = f"make {path} a writable folder, or set COURSE_LIB_CACHE to one"
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing == path and not path.is_dir():
        return f"The course cache {where} is a file, not a folder", fix
    if not existing.is_dir():
        return f"The course cache {where} cannot be created: {existing} is a file", fix
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "is not writable" if existing == path else f"cannot be created: {existing} is not writable"
        return f"The course cache {where} {what}", fix
    other = "set COURSE_LIB_CACHE to another, writable folder"
    for name in CACHE_FOLDERS if folders and existing == path else ():
        sub = path / name
        if sub.exists() and not sub.is_dir():
            return (f"The course cache's folder {sub} is a file",
                    f"remove that file (the course makes the folder), or {other}")
        if sub.is_dir() and not os.access(sub, os.W_OK | os.X_OK):
            return (f"The course cache's folder {sub} is not writable, so a model missing there "
                    "cannot be saved", f"make it writable (chmod -R u+w {sub}), or {other}")
    return None


def check_cache(folders: bool = True) -> Path:
    """:func:`cache_dir`, after checking that it can be written; else :class:`CacheError` with the fix.

    ``folders`` as in :func:`cache_problem`: checked before a model is trained into the cache.

    Chapter 1, *Pretraining objectives*.
    """
    problem = cache_problem(folders)
    if problem is not None:
        raise CacheError(f"{problem[0]}; {problem[1]}.")
    return cache_dir()


def cache_write_error(path: Path, err: Exception) -> CacheError:
    """The :class:`CacheError` for a failed write of ``path`` in the cache: what failed and the fix.

    Chapter 1, *Pretraining objectives*.
    """
    problem = cache_problem()
    fix = problem[1] if problem else "free some disk space, or set COURSE_LIB_CACHE to a writable folder"
    return CacheError(f"Could not save {path} in the course cache ({getattr(err, 'strerror', None) or err}); {fix}.")


def progress_bar(iterable: Any, total: int, desc: str, progress: bool) -> Any:
    """A plain-text tqdm bar over ``iterable`` (nothing drawn when ``progress`` is False).

    Text, not a widget: a saved notebook then holds no widget state that GitHub's or Colab's
    preview would show as a frozen "0%" bar, and the bar is cleared when the loop ends. In a
    terminal the bar is drawn only on a real terminal (not in CI logs); in a notebook, always.

    Chapter 1, *Pretraining objectives*.
    """
    from tqdm.std import tqdm

    in_notebook = "ipykernel" in sys.modules
    disable = True if not progress else (False if in_notebook else None)
    return tqdm(iterable, total=total, desc=desc, disable=disable, leave=False, mininterval=0.5,
                file=sys.stderr)
