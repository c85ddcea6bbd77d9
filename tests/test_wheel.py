"""The course as a learner installs it: the wheel and sdist built from the checkout, installed into a
clean virtual environment outside the checkout, where the package, its command line, chapter 8's
torchrun entry point, the quickest notebook of Parts I and III, the Dutch edition and Part II's
course model (loaded, checked, quantized, scored, with a cached fine-tuning run) run.

CI installs the course editably, which hides a subpackage or data file left out of the wheel; Colab
installs it non-editably (``pip install "course-lib @ git+..."``, the setup cell of every notebook).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib.metadata import requires
from importlib.util import find_spec
from pathlib import Path

import nbformat
import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own dependency
    import tomli as tomllib

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import notebooks  # noqa: E402  (tools/notebooks.py: the setup cell every notebook carries)

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "course_lib"
#: The quickest notebook of Parts I and III, and the Dutch edition. Part II's notebooks (30-40 s
#: in the book, about 100 s on a test worker's one thread) are stood for by PART_II below.
NOTEBOOKS = ("04_quantizing_pi.ipynb", "12_long_sequences_and_experts.ipynb", "nl/kwantisatie.ipynb")


def run(command: Sequence[str | Path], timeout: float, input: str | None = None, **kwargs) -> str:
    """Run a command and return its output (stdout and stderr); the test fails if it fails. Past
    ``timeout`` seconds its whole process group (torchrun's workers, a kernel) is killed."""
    command = [str(c) for c in command]
    with subprocess.Popen(command, stdin=subprocess.PIPE if input else subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, start_new_session=True, **kwargs) as proc:
        try:
            out, _ = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            pytest.fail(f"{' '.join(command)} ran past {timeout} s:\n{out[-3000:]}")
    if proc.returncode:
        pytest.fail(f"{' '.join(command)} failed (exit {proc.returncode}):\n{out[-3000:]}")
    return out


def source_files() -> list[str]:
    """The checkout's files as a commit of it would hold them: tracked, or new and not ignored."""
    out = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], timeout=60, cwd=ROOT)
    return sorted(f for f in set(out.split("\0")) if f and (ROOT / f).is_file())


def left_out(archive: Iterable[str], sources: Iterable[str], prefix: str = "") -> list[str]:
    """The packages (dotted names) and files of the source tree's ``course_lib/`` that an archive lacks.

    ``archive`` lists the archive's paths, each starting with ``prefix`` (an sdist's top folder). A
    package is left out when its ``__init__.py`` is; the files inside it are then not named again.
    """
    have = set(archive)
    wanted = [p for p in sources if p.startswith(f"{PACKAGE}/") and "__pycache__" not in p.split("/")]
    absent = [p for p in wanted if prefix + p not in have]
    folders = [p.removesuffix("/__init__.py") for p in absent if p.endswith("/__init__.py")]
    files = [p for p in absent if not any(p.startswith(f + "/") for f in folders)]
    return [f.replace("/", ".") for f in folders] + files


def test_left_out_names_a_subpackage_the_wheel_lacks():
    sources = ["README.md", "course_lib/__init__.py", "course_lib/prepare.py",
               "course_lib/parallel/__init__.py", "course_lib/parallel/ddp.py",
               "course_lib/numbers/__init__.py", "course_lib/numbers/assets/bit_explorer.js"]
    wheel = [p for p in sources if p.startswith("course_lib/")] + ["course_lib-0.1.0.dist-info/RECORD"]
    assert left_out(wheel, sources) == []
    assert left_out([f"course_lib-0.1.0/{p}" for p in sources], sources, prefix="course_lib-0.1.0/") == []
    assert left_out([p for p in wheel if "/parallel/" not in p], sources) == ["course_lib.parallel"]
    assert left_out([p for p in wheel if not p.endswith(".js")], sources) == [
        "course_lib/numbers/assets/bit_explorer.js"]
    assert left_out([p for p in wheel if not p.endswith("ddp.py")], sources) == ["course_lib/parallel/ddp.py"]


def test_left_out_names_every_subpackage_of_a_top_level_only_wheel():
    """What ``packages = ["course_lib"]`` built: the top folder's modules, no subpackage."""
    sources = source_files()
    top_only = [p for p in sources if re.fullmatch(rf"{PACKAGE}/\w+\.py", p)]
    subpackages = sorted(p.removesuffix("/__init__.py").replace("/", ".") for p in sources
                         if re.fullmatch(rf"{PACKAGE}/.+/__init__\.py", p))
    assert len(subpackages) >= 8
    assert sorted(p for p in left_out(top_only, sources) if "/" not in p) == subpackages


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A folder outside the checkout for the builds, the virtual environment and the notebooks."""
    path = tmp_path_factory.mktemp("wheel")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def dists(work) -> dict[str, Path]:
    """The sdist and the wheel, built by the project's build backend from a copy of the checkout.

    The build hooks are called directly, as ``python -m build --no-isolation`` does: no download,
    and nothing (``build/``, ``*.egg-info``) is written into the checkout.
    """
    copy, out = work / "checkout", work / "dist"
    for name in source_files():
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, copy / name)
    backend = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["build-backend"]
    hooks = ("import importlib, sys; _, name, out = sys.argv  # the hooks rewrite sys.argv\n"
             "b = importlib.import_module(name); b.build_sdist(out); b.build_wheel(out)")
    run([sys.executable, "-c", hooks, backend, out], timeout=300, cwd=copy)
    return {"sdist": next(out.glob("*.tar.gz")), "wheel": next(out.glob("*.whl"))}


def archive_names(path: Path) -> list[str]:
    """The file paths inside a wheel (a zip file) or an sdist (a .tar.gz)."""
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as z:
            return [n for n in z.namelist() if not n.endswith("/")]
    with tarfile.open(path) as t:
        return [m.name for m in t.getmembers() if m.isfile()]


@pytest.mark.wheel
def test_the_wheel_holds_every_package_and_data_file(dists):
    names = archive_names(dists["wheel"])
    missing = left_out(names, source_files())
    assert not missing, f"the wheel lacks {', '.join(missing)}: see [tool.setuptools] in pyproject.toml"
    top = {n.split("/")[0] for n in names}
    assert {t for t in top if not t.startswith(f"{PACKAGE}-")} == {PACKAGE}, f"the wheel installs {top}"


@pytest.mark.wheel
def test_the_sdist_holds_every_package_and_data_file(dists):
    sdist = dists["sdist"]
    missing = left_out(archive_names(sdist), source_files(), prefix=sdist.name.removesuffix(".tar.gz") + "/")
    assert not missing, f"the sdist lacks {', '.join(missing)}: see [tool.setuptools] in pyproject.toml"


@dataclass
class Venv:
    """A virtual environment with the wheel installed; commands run in ``cwd``, outside the checkout."""

    prefix: Path
    cwd: Path
    env: dict[str, str]
    torch_dir: Path

    def python(self, *args: str | Path, timeout: float = 120, env: dict | None = None, **kwargs) -> str:
        return run([self.prefix / "bin" / "python", *args], timeout, cwd=self.cwd, env=env or self.env, **kwargs)


@pytest.fixture(scope="module")
def venv(work, dists) -> Venv:
    """A fresh virtual environment with the wheel and nbclient and ipykernel installed, no dev extras.

    torch comes from this environment through a ``.pth`` file naming a folder of links to torch
    alone (not to the site-packages, which holds the editable course), as Colab's torch is there
    before the course. The rest is installed by :func:`install`, which leaves torch alone. Nothing
    is compiled at install time (half of pip's time went to compiling the thousands of modules of
    transformers and sympy); each module is compiled when first imported and its bytecode kept,
    since the environment's Pythons may write it.
    """
    prefix, cwd, torch_dir = work / "venv", work / "run", work / "torch-only"
    cwd.mkdir()
    torch_dir.mkdir()
    run([sys.executable, "-m", "venv", prefix], timeout=180)
    site = Path(find_spec("torch").origin).parents[1]
    for path in [site / "torch", site / "torchgen", site / "functorch", *site.glob("torch-*.dist-info")]:
        if path.exists():
            (torch_dir / path.name).symlink_to(path)
    hidden = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "JUPYTER_PATH",
              "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in hidden}
    env.update(PATH=f"{prefix / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(prefix),
               PYTHONNOUSERSITE="1", JUPYTER_DATA_DIR=str(work / "jupyter"),
               JUPYTER_CONFIG_DIR=str(work / "jupyter-config"), IPYTHONDIR=str(work / "ipython"))
    v = Venv(prefix, cwd, env, torch_dir)
    purelib = v.python("-c", "import sysconfig; print(sysconfig.get_path('purelib'))").strip()
    Path(purelib, "course-torch.pth").write_text(f"{torch_dir}\n")
    install(v, [dists["wheel"], "nbclient", "ipykernel"])
    return v


def install(venv: Venv, requirements: Sequence[str | Path]) -> None:
    """Install ``requirements`` into ``venv`` at ``constraints.txt``'s versions, torch kept.

    With the uv that ``scripts/setup.sh`` installed beside this Python, which reuses what that
    install downloaded (the environment's setup took 11-12 s instead of pip's 49 s). uv does
    not see a torch found through a ``.pth`` file, so torch is left out of its resolution
    (``--excludes``) and torch's own requirements are named instead. Without uv, pip, which
    finds the linked torch installed and keeps it.
    """
    uv = Path(sys.executable).parent / "uv"
    if not uv.is_file():
        venv.python("-m", "pip", "install", "--disable-pip-version-check", "--no-compile", "-q",
                    "-c", ROOT / "constraints.txt", *requirements, timeout=600)
        return
    no_torch = venv.prefix.parent / "no-torch.txt"
    no_torch.write_text("torch\n")
    needs = [r for r in requires("torch") or [] if "extra ==" not in r]
    run([uv, "pip", "install", "-q", "--python", venv.prefix / "bin" / "python", "-c",
         ROOT / "constraints.txt", "--excludes", no_torch, *requirements, *needs],
        timeout=600, cwd=venv.cwd, env=venv.env)


@pytest.mark.wheel
def test_the_course_is_imported_from_the_wheel_and_torch_is_kept(venv):
    out = venv.python("-c", "import course_lib, torch; print(course_lib.__file__); print(torch.__file__)")
    course, torch = (Path(line) for line in out.split())
    assert course.is_relative_to(venv.prefix) and not course.is_relative_to(ROOT), course
    assert torch.is_relative_to(venv.torch_dir), f"the install put a torch of its own: {torch}"


@pytest.mark.wheel
def test_the_setup_cells_pip_keeps_an_installed_torch_at_the_floor(venv, dists, work):
    """Colab's torch is never replaced: the setup cell's pip command, run on the wheel where torch is
    installed at pyproject's floor, would install no other torch."""
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    floor = next(re.fullmatch(r"torch>=([\d.]+)", d).group(1) for d in dependencies if d.startswith("torch"))
    old = work / "old-torch" / f"torch-{floor}.dist-info"
    old.mkdir(parents=True)
    (old / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {floor}\n")
    env = dict(venv.env, PYTHONPATH=str(old.parent))  # found before the linked torch
    seen = venv.python("-c", "from importlib.metadata import version; print(version('torch'))", env=env)
    assert seen.strip() == floor
    pip = next(line.strip() for line in notebooks.setup_source().splitlines() if line.strip().startswith("!pip "))
    args = [str(dists["wheel"]) if a.startswith("course-lib @") else a for a in shlex.split(pip.removeprefix("!pip "))]
    report = work / "pip-report.json"
    venv.python("-m", "pip", *args, "--dry-run", "--report", report, timeout=300, env=env)
    installs = [item["metadata"]["name"] for item in json.loads(report.read_text())["install"]]
    assert "torch" not in installs, f"{pip} would replace an installed torch {floor}"


@pytest.mark.wheel
def test_every_module_of_the_installed_package_imports(venv):
    code = """\
        import importlib, pkgutil, course_lib
        names = [m.name for m in pkgutil.walk_packages(course_lib.__path__, "course_lib.")]
        for name in names:
            importlib.import_module(name)
        print(len(names))"""
    imported = int(venv.python("-c", textwrap.dedent(code), timeout=300).split()[-1])
    modules = [p for p in source_files() if p.startswith(f"{PACKAGE}/") and p.endswith(".py")]
    assert imported == len(modules) - 1  # every module but course_lib/__init__.py itself


@pytest.mark.wheel
def test_the_check_command_runs(venv):
    assert "All checks passed." in venv.python("-m", PACKAGE, "check")


@pytest.mark.wheel
def test_chapter_8s_torchrun_entry_point_runs(venv):
    env = dict(venv.env, OMP_NUM_THREADS="1")
    out = venv.python("-m", "torch.distributed.run", "--nproc-per-node=2", "-m", "course_lib.parallel.ddp",
                      "--steps", "2", "--check", timeout=300, env=env)
    assert "rank 1/2" in out, out[-3000:]


#: Runs a notebook with nbclient in the virtual environment's own kernel, then prints where that
#: kernel found course_lib.
EXECUTE = """\
import pathlib, sys
import nbformat
from nbclient import NotebookClient

path = pathlib.Path(sys.argv[1])
nb = nbformat.read(path, as_version=4)
nb.cells.insert(0, nbformat.v4.new_code_cell(sys.argv[2]))
nb.cells.append(nbformat.v4.new_code_cell("import course_lib; print(course_lib.__file__)"))
client = NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                        resources={"metadata": {"path": str(path.parent)}})
client.execute()
nbformat.write(nb, path)
"""


def execute(venv: Venv, path: Path, first_cell: str = "", timeout: float = 600) -> list[dict]:
    """Execute a notebook copied outside the checkout in ``venv``'s kernel (``first_cell`` runs
    first); its code cells, with outputs. The cell added last shows which course_lib ran."""
    venv.python("-", path, first_cell, input=EXECUTE, timeout=timeout)
    cells = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    where = "".join(o.get("text", "") for o in cells[-1]["outputs"]).strip()
    assert where and Path(where).is_relative_to(venv.prefix), f"the kernel ran course_lib from {where!r}"
    return cells[1:-1]


def errors(cells: list[dict]) -> list[str]:
    """Each error a cell showed, with the start of the cell."""
    return [f"{o['ename']}: {o['evalue']}\n{c['source'][:300]}" for c in cells for o in c["outputs"]
            if o["output_type"] == "error"]


@pytest.mark.wheel
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_a_notebook_of_each_part_runs_on_the_installed_package(venv, work, name):
    copy = work / "notebooks" / name.replace("/", "-")
    copy.parent.mkdir(exist_ok=True)
    shutil.copy2(ROOT / "notebooks" / name, copy)
    failed = errors(execute(venv, copy))
    assert not failed, f"{name} on the installed package:\n" + "\n\n".join(failed)


#: Part II on the installed package, as chapter 5 starts: the course model loaded from the model
#: cache (checked against its recipe's reference figures, package data), quantized to 4 bits and
#: scored on the test stories, and chapter 5's quantization-aware run loaded from the cache.
PART_II = """\
import math
from course_lib.compression import ptq, qat, quant_layers
from course_lib.text import course_model, data
tokenizer = data.course_tokenizer()
model = course_model.course_model()
course_model.check_course_model()
int4 = quant_layers.quantize_model(model, "int4-g128")
trained = qat.qat(model, "int4-g128", tokenizer=tokenizer, progress=False).model
scores = [ptq.test_perplexity(m, tokenizer) for m in (model, int4, trained)]
assert all(math.isfinite(s) and s > 1 for s in scores) and scores[0] < scores[1], scores
print("perplexity", *(f"{s:.3f}" for s in scores))
"""


@pytest.mark.wheel
def test_part_iis_course_model_is_loaded_quantized_and_scored_on_the_installed_package(venv):
    """Where ``course_lib`` comes from in this environment is the first test's check."""
    out = venv.python("-c", PART_II, timeout=300)
    assert re.search(r"^perplexity( \d+\.\d{3}){3}$", out, re.M), out[-3000:]


@pytest.mark.wheel
def test_the_colab_setup_cell_says_what_to_do_when_pip_fails(venv, work):
    """On Colab (faked), an unreachable repository: the cell stops with its own message, not at the import."""
    source = notebooks.setup_source().replace(notebooks.REPOSITORY, "https://invalid.invalid/course")
    path = work / "colab.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)]), path)
    fake_colab = "import sys, types; sys.modules['google.colab'] = types.ModuleType('google.colab')"
    failed = errors(execute(venv, path, fake_colab, timeout=180))
    assert len(failed) == 1 and "could not be installed" in failed[0], failed
