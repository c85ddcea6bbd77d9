"""Every public function of course_lib is typed, documented, and points back to its chapter."""

import importlib
import inspect
import pkgutil
import re
import sys
from pathlib import Path

import pytest

import course_lib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import chapter_refs  # noqa: E402

MODULES = sorted(m.name.removeprefix("course_lib.")  # subpackages too: "distributed.ddp"
                 for m in pkgutil.walk_packages(course_lib.__path__, "course_lib.")
                 if not m.name.rpartition(".")[2].startswith("_"))


def public_functions(module):
    """The module's own public functions."""
    return [(n, f) for n, f in vars(module).items()
            if not n.startswith("_") and inspect.isfunction(f) and f.__module__ == module.__name__]


@pytest.mark.parametrize("name", MODULES)
def test_module_docstring_names_its_chapter(name):
    doc = importlib.import_module(f"course_lib.{name}").__doc__ or ""
    assert re.search(r"[Cc]hapters? \d|[Ee]very chapter", doc), f"course_lib.{name}: say which chapter teaches it"


@pytest.mark.parametrize("name", MODULES)
def test_public_functions_are_typed_and_documented(name):
    module = importlib.import_module(f"course_lib.{name}")
    for fname, f in public_functions(module):
        sig = inspect.signature(f)
        untyped = [p for p, v in sig.parameters.items()
                   if v.annotation is inspect.Parameter.empty and v.kind not in (v.VAR_POSITIONAL, v.VAR_KEYWORD)]
        assert not untyped, f"{name}.{fname}: parameters without a type: {untyped}"
        assert sig.return_annotation is not inspect.Signature.empty, f"{name}.{fname}: no return type"
        assert inspect.getdoc(f), f"{name}.{fname}: no docstring"


def test_every_public_docstring_names_its_chapter(capsys):
    assert chapter_refs.main(["--check"]) == 0, capsys.readouterr().out


def test_the_chapter_line_follows_the_notebooks(tmp_path, monkeypatch):
    source = tmp_path / "demo.py"
    source.write_text('def shown():\n    """Do it."""\n\n\ndef hidden():\n    """Do it.\n\n    Chapter 9, *Nowhere*.\n    """\n')
    book = {1: ("First", "demo.shown(1)"), 2: ("Second", "from course_lib import demo")}
    text, stale = chapter_refs.rewrite(source, book)
    assert stale == ["demo.hidden", "demo.shown"]
    assert '"""Do it.\n\n    Chapter 1, *First*.\n    """' in text  # used by name in chapter 1
    assert "Chapter 2, *Second*." in text  # hidden: only its module is imported, in chapter 2
    assert "Chapter 9" not in text
    source.write_text(text)
    assert chapter_refs.rewrite(source, book)[1] == []  # a second run changes nothing
