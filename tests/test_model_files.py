"""Writing and reading model files never loses a user's data (issue 25).

``train-course-model --output`` replaces only what it wrote itself (a course model, even a damaged
one), checks the place before training, and swaps a new model in with renames; an unwritable cache
is named by ``check`` and ``prepare`` at once, never swallowed; a damaged course model gets one short
message whose advice works. Training is stubbed (instant), so that every test runs in a second or two.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from course_lib import __main__ as cli
from course_lib.base import env
from course_lib.text import course_model, data, models, training

from conftest import tiny_gpt2


@pytest.fixture()
def trainings(monkeypatch, tokenizer, cache):
    """Instant course-model builds: the list records each training that ran."""
    runs: list[int] = []
    monkeypatch.setattr(course_model, "train", lambda *a, **k: runs.append(1) or [1.0])
    monkeypatch.setattr(course_model, "perplexity",
                        lambda *a, **k: SimpleNamespace(mean_nll=1.0, perplexity=math.e))
    monkeypatch.setattr(data, "course_tokenizer", lambda *a, **k: tokenizer)
    return runs


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` with its bytes (None for a folder)."""
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(folder.rglob("*"))}


def leftovers(folder: Path) -> list[str]:
    """Temporary or replaced model folders left anywhere under ``folder``."""
    return [str(p) for p in folder.rglob("*") if ".tmp" in p.name or ".old" in p.name]


def train_course_model(capsys, *args: str) -> tuple[int, str]:
    code = cli.main(["train-course-model", *args])
    return code, capsys.readouterr().err


# --- data loss: train-course-model --output ------------------------------------------------------

@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_a_folder_of_user_files_is_left_in_place(trainings, tmp_path, capsys, overwrite):
    user = tmp_path / "thesis"
    (user / "figures").mkdir(parents=True)
    (user / "thesis.tex").write_text("years of work")
    (user / "config.json").write_text("{}")  # a model's file name does not make it a model
    (user / "figures" / "plot.png").write_bytes(b"\x89PNG")
    before = snapshot(user)
    code, err = train_course_model(capsys, "--output", str(user), *overwrite)
    assert code == 2 and snapshot(user) == before and not trainings
    assert "not part of a model (figures, thesis.tex)" in err and "new or empty directory for --output" in err
    assert err.count("\n") == 1 and not leftovers(tmp_path)


def test_the_cache_its_parents_and_the_current_directory_are_refused(trainings, cache, tmp_path,
                                                                     capsys, monkeypatch):
    course = course_model.build_course_model(verbose=False, progress=False)
    assert course and trainings == [1]
    (cache / "models").mkdir()
    (cache / "models" / "gpt2-abc").mkdir()
    work = tmp_path / "work" / "notebooks"
    work.mkdir(parents=True)
    (work / "notes.txt").write_text("mine")
    monkeypatch.chdir(work)
    before = snapshot(tmp_path)
    cases = {str(cache): "is the course cache", str(tmp_path): "holds the course cache",
             ".": "is the current directory", str(tmp_path / "work"): "the current directory or holds it"}
    for output, message in cases.items():
        for extra in ([], ["--overwrite"]):
            code, err = train_course_model(capsys, "--output", output, *extra)
            assert code == 2 and message in err, (output, err)
    assert snapshot(tmp_path) == before and trainings == [1]


def test_an_empty_folder_or_an_old_course_model_is_replaced_by_renames(trainings, cache, tmp_path,
                                                                      capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert train_course_model(capsys, "--output", str(empty))[0] == 0
    first = models.read_training(empty)
    assert set(first["files"]) == {p.name for p in empty.iterdir()}
    (empty / "model.safetensors").write_bytes(b"damaged")
    assert train_course_model(capsys, "--output", str(empty))[0] == 0
    assert models.read_training(empty)["weights_sha256"] == models.sha256_file(empty / "model.safetensors")
    assert trainings == [1, 1] and not leftovers(tmp_path)
    # beside the test's own cache (token streams land there when this test needs them first)
    assert sorted(p.name for p in tmp_path.iterdir() if p != cache) == ["empty"]


def test_a_model_that_is_not_a_course_model_needs_overwrite(trainings, tmp_path, capsys):
    other = tmp_path / "other-model"
    other.mkdir()
    (other / "config.json").write_text("{}")
    (other / "model.safetensors").write_bytes(b"weights")
    code, err = train_course_model(capsys, "--output", str(other))
    assert code == 2 and "not a course model" in err and "--overwrite" in err and not trainings
    assert train_course_model(capsys, "--output", str(other), "--overwrite")[0] == 0
    assert (other / "training.json").is_file() and not leftovers(tmp_path)


@pytest.mark.parametrize("case", ["file", "under a file", "unwritable parent"])
def test_the_place_is_checked_before_training(trainings, tmp_path, capsys, monkeypatch, case):
    """Tests run as root, where chmod stops no write: unwritable means os.access says so."""
    (tmp_path / "a-file").write_text("x")
    output = {"file": tmp_path / "a-file", "under a file": tmp_path / "a-file" / "model",
              "unwritable parent": tmp_path / "locked" / "model"}[case]
    if case == "unwritable parent":
        (tmp_path / "locked").mkdir()
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **k: Path(p).name != "locked" and real(p, mode, **k))
    before = snapshot(tmp_path)
    code, err = train_course_model(capsys, "--output", str(output))
    message = {"file": "is a file, not a directory", "under a file": "a-file is a file",
               "unwritable parent": "locked is not writable"}[case]
    assert code == 2 and message in err and "--output" in err and err.count("\n") == 1
    assert not trainings and snapshot(tmp_path) == before


@pytest.mark.parametrize("fault", [OSError("disk full"), KeyboardInterrupt()])
def test_a_failed_save_keeps_the_old_model_and_leaves_no_temporary_folder(trainings, tmp_path,
                                                                         monkeypatch, fault):
    target = tmp_path / "model"
    course_model.build_course_model(target, verbose=False, progress=False)
    before = snapshot(target)

    def fail(*args, **kwargs):
        raise fault

    monkeypatch.setattr(type(data.course_tokenizer()), "save_pretrained", fail)
    with pytest.raises(type(fault)):
        course_model.build_course_model(target, verbose=False, progress=False)
    assert snapshot(target) == before and not leftovers(tmp_path)


# --- the cache: check, prepare, the caches of trained models ------------------------------------

@pytest.mark.parametrize("case", ["file", "under a file"])
def test_prepare_fails_at_once_with_the_message_of_check(cache, tmp_path, capsys, monkeypatch, case):
    from course_lib import prepare

    (tmp_path / "a-file").write_text("x")
    monkeypatch.setenv("COURSE_LIB_CACHE", str(tmp_path / "a-file" / ("sub" if case == "under a file" else "")))
    ran = []
    monkeypatch.setattr(prepare, "steps", lambda: [("a step", lambda: ran.append(1))])
    assert cli.main(["prepare"]) == 1 and not ran
    err = capsys.readouterr().err
    problem, fix = env.cache_problem()
    assert problem in err and fix in err and "COURSE_LIB_CACHE" in fix and err.count("\n") == 1


def test_the_caches_of_trained_models_are_checked_before_training(tokenizer, tmp_path, monkeypatch):
    from course_lib.compression import finetuning

    (tmp_path / "a-file").write_text("x")
    monkeypatch.setenv("COURSE_LIB_CACHE", str(tmp_path / "a-file" / "cache"))
    runs: list[int] = []
    monkeypatch.setattr(training, "train", lambda *a, **k: runs.append(1) or [1.0])
    config = models.tiny_config("gpt2", tokenizer, hidden=32, layers=1, heads=2, context=32)
    message = r"COURSE_LIB_CACHE=.*cannot be created: .*a-file is a file; set COURSE_LIB_CACHE to a writable"
    with pytest.raises(env.CacheError, match=message):
        training.train_model("gpt2", config, training.Recipe(steps=1), tokenizer, progress=False)
    model = tiny_gpt2(hidden=16, vocab=len(tokenizer))
    with pytest.raises(env.CacheError, match=message):
        finetuning.finetune(model, "full", training.Recipe(steps=1), tokenizer, progress=False)
    assert not runs and sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_a_failed_write_to_the_cache_is_not_swallowed(tokenizer, cache, monkeypatch):
    from course_lib.compression import finetuning

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(training, "train", lambda *a, **k: [1.0])
    monkeypatch.setattr(type(tokenizer), "save_pretrained", disk_full)
    config = models.tiny_config("gpt2", tokenizer, hidden=32, layers=1, heads=2, context=32)
    message = r"Could not save .* in the course cache \(No space left on device\); free some disk space"
    with pytest.raises(env.CacheError, match=message):
        training.train_model("gpt2", config, training.Recipe(steps=1), tokenizer, progress=False)
    monkeypatch.setattr(finetuning, "save_file", disk_full)
    with pytest.raises(env.CacheError, match=message):
        finetuning.finetune(tiny_gpt2(hidden=16, vocab=len(tokenizer)), "full", training.Recipe(steps=1),
                            tokenizer, progress=False)
    assert not leftovers(cache)


# --- a damaged course model: one message, advice that works ------------------------------------

def _damage(directory: Path, how: str) -> None:
    if how == "garbage training.json":
        (directory / "training.json").write_text("{garbage")
    elif how == "training.json not a record":
        (directory / "training.json").write_text("[1, 2]")
    elif how == "directory replaced by a file":
        shutil.rmtree(directory)
        directory.write_text("not a model")
    elif how == "truncated weights":
        weights = directory / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:1000])
    elif how == "weights missing":
        (directory / "model.safetensors").unlink()


@pytest.mark.parametrize("how", ["garbage training.json", "training.json not a record",
                                 "directory replaced by a file", "truncated weights", "weights missing"])
def test_a_damaged_course_model_names_the_command_that_repairs_it(trainings, cache, capsys, how):
    course_model.build_course_model(verbose=False, progress=False)
    directory = models.course_model_dir()
    _damage(directory, how)
    with pytest.raises(models.CheckpointError) as err:
        course_model.course_model()
    message = str(err.value)
    assert "`python -m course_lib train-course-model`" in message and "course_model(rebuild=True)" in message
    assert "\n" not in message and len(message) < 500
    # The advice works on the damaged model: the command rebuilds it, then it loads.
    assert train_course_model(capsys)[0] == 0
    assert course_model.course_model() is not None
    _damage(directory, how)
    assert course_model.course_model(rebuild=True, progress=False) is not None
    assert trainings == [1, 1, 1] and not leftovers(cache.parent)


def test_truncated_weights_through_transformers_name_the_repair(trainings, tmp_path, capsys):
    target = tmp_path / "course"
    course_model.build_course_model(target, verbose=False, progress=False)
    _damage(target, "truncated weights")
    with pytest.raises(models.CheckpointError, match=r"could not be read.*It is probably damaged") as err:
        models.load_model(target)  # AutoModelForCausalLM.from_pretrained, wrapped
    assert f"`python -m course_lib train-course-model --output {target}`" in str(err.value)
    assert train_course_model(capsys, "--output", str(target))[0] == 0
    assert models.load_model(target) is not None


def test_a_damaged_model_among_user_files_is_not_rebuilt_over_them(trainings, tmp_path, capsys):
    target = tmp_path / "course"
    course_model.build_course_model(target, verbose=False, progress=False)
    (target / "notes.txt").write_text("mine")
    _damage(target, "weights missing")
    with pytest.raises(models.CheckpointError, match=r"Nothing is written over .*--output NEW_DIR") as err:
        course_model.course_model(target)
    assert "course_model('NEW_DIR')" in str(err.value)
    assert train_course_model(capsys, "--output", str(target))[0] == 2
    assert (target / "notes.txt").read_text() == "mine"
    assert train_course_model(capsys, "--output", str(tmp_path / "NEW_DIR"))[0] == 0
    assert course_model.course_model(tmp_path / "NEW_DIR") is not None


# --- a course model is recognised by the course's own record (issue 40) ---------------------------

@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_a_users_readme_and_training_json_are_never_taken_for_a_course_model(
        trainings, tmp_path, capsys, overwrite):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "config.json").write_text("{}")
    (user / "training.json").write_text('{"epochs": 3}')  # the user's, not the course's
    (user / "README.md").write_text("my notes")
    before = snapshot(user)
    code, err = train_course_model(capsys, "--output", str(user), *overwrite)
    assert code == 2 and snapshot(user) == before and not trainings
    assert "not part of a model (README.md, training.json)" in err


def test_a_folder_holding_only_a_users_readme_is_refused_even_with_overwrite(
        trainings, tmp_path, capsys):
    user = tmp_path / "readme-only"
    user.mkdir()
    (user / "README.md").write_text("my notes")
    code, err = train_course_model(capsys, "--output", str(user), "--overwrite")
    assert code == 2 and (user / "README.md").read_text() == "my notes" and not trainings
    assert "not part of a model (README.md)" in err


def test_the_course_marks_its_models_and_still_knows_its_older_ones(trainings, tmp_path, capsys):
    folder = tmp_path / "model"
    assert train_course_model(capsys, "--output", str(folder))[0] == 0
    record = models.course_record(folder)
    assert record and record["written_by"] == models.WRITTEN_BY
    del record["written_by"]  # as written before the mark: the weights' hash and the files
    (folder / "training.json").write_text(__import__("json").dumps(record))
    assert models.course_record(folder) is not None
    assert train_course_model(capsys, "--output", str(folder))[0] == 0  # replaced, no --overwrite
    assert models.course_record(folder)["written_by"] == models.WRITTEN_BY


# --- every saved model loads as a reader loads it; a folder of the cache not writable (issue 40) --

def only_step(monkeypatch, name: str) -> None:
    """Let ``prepare`` run only its step whose description holds ``name``."""
    from course_lib import prepare

    every = getattr(prepare.steps, "every", prepare.steps)
    chosen = [step for step in every() if name in step[0]]
    assert len(chosen) == 1

    def steps() -> list:
        return chosen

    steps.every = every
    monkeypatch.setattr(prepare, "steps", steps)


@pytest.mark.parametrize("how", ["deleted", "garbage"])
def test_a_course_model_whose_tokenizer_does_not_load_is_named_and_prepare_rebuilds_it(
        trainings, cache, capsys, monkeypatch, how):
    from transformers import AutoTokenizer

    course_model.build_course_model(verbose=False, progress=False)
    directory = models.course_model_dir()
    if how == "deleted":
        (directory / "tokenizer.json").unlink()
        said = f"The course model at {directory} is incomplete: tokenizer.json missing"
    else:
        (directory / "tokenizer.json").write_text("{not json")
        said = f"The course model's tokenizer at {directory} does not load with AutoTokenizer"
    with pytest.raises(models.CheckpointError, match="Rebuild it with"):
        course_model.check_course_model()
    capsys.readouterr()
    assert cli.main(["check", "--offline"]) == 1
    out = capsys.readouterr().out
    assert said in out and "fix: run `python -m course_lib prepare`, which rebuilds it" in out
    only_step(monkeypatch, "course model")
    assert cli.main(["prepare"]) == 0
    out = capsys.readouterr().out
    assert said in out and "Rebuilding it" in out and trainings == [1, 1]
    assert AutoTokenizer.from_pretrained(str(directory)) is not None
    assert cli.main(["check", "--offline"]) == 0


def test_prepare_with_a_read_only_models_folder_and_a_model_missing_names_the_folder(
        tokenizer, cache, capsys, monkeypatch):
    """Tests run as root, where chmod stops no write: unwritable means os.access says so."""
    runs: list[int] = []
    monkeypatch.setattr(training, "train", lambda *a, **k: runs.append(1) or [1.0])
    monkeypatch.setattr(data, "course_tokenizer", lambda *a, **k: tokenizer)
    locked = cache / "models"
    locked.mkdir(parents=True)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **k: Path(p) != locked and real(p, mode, **k))
    only_step(monkeypatch, "three tiny models")
    assert cli.main(["prepare"]) == 1
    err = capsys.readouterr().err
    assert err == (f"python -m course_lib prepare: error: The course cache's folder {locked} is "
                   "not writable, so a model missing there cannot be saved; make it writable "
                   f"(chmod -R u+w {locked}), or set COURSE_LIB_CACHE to another, writable "
                   "folder.\n")
    assert not runs and list(locked.iterdir()) == []  # refused before any training
    assert cli.main(["check", "--offline"]) == 1
    assert f"The course cache's folder {locked} is not writable" in capsys.readouterr().out
    only_step(monkeypatch, "course tokenizer")  # nothing to write in models/: no refusal
    assert cli.main(["prepare"]) == 0
