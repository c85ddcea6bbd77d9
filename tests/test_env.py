"""Tests for the environment check and its command line."""

import os
import subprocess
import sys

import pytest

from course_lib.base import env


def test_report_has_versions_and_hardware():
    report = env.check_env(online_probe=False)
    assert report.python.count(".") == 2
    assert report.torch and report.transformers
    assert report.cpu_threads >= 1
    text = str(report)
    for name in ("Python", "torch", "transformers", "course_lib", "CPU threads", "GPU", "network", "Colab"):
        assert name in text
    assert report.ok and "All checks passed." in text


def test_missing_or_old_packages_come_with_a_fix(monkeypatch):
    versions = {"torch": None, "transformers": "4.20.0"}
    monkeypatch.setattr(env, "_version", lambda name: versions.get(name))
    report = env.check_env(online_probe=False)
    problems = dict(report.problems)
    assert "pip install torch==2.13.0" in problems["torch is not installed"]
    assert "transformers>=5.4" in problems["transformers 4.20.0 is too old"]
    assert not report.ok and "fix:" in str(report)


def test_offline_by_environment_variable(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert env.is_online() is False


def test_unreachable_host_is_offline(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert env.is_online(("127.0.0.1", 9), timeout=0.5) is False  # the discard port: nothing listens


def test_colab_detection(monkeypatch):
    monkeypatch.delenv("COLAB_RELEASE_TAG", raising=False)
    assert env.in_colab() is False
    monkeypatch.setenv("COLAB_RELEASE_TAG", "release-colab_20260101")
    assert env.in_colab() is True


def test_device_and_seeding():
    import torch

    assert env.get_device("cpu").type == "cpu"
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA GPU is visible"):
            env.get_device("cuda")
    env.seed_everything(3)
    a = torch.rand(3)
    env.seed_everything(3)
    assert torch.equal(a, torch.rand(3))


def test_check_command_prints_the_report():
    out = subprocess.run([sys.executable, "-m", "course_lib", "check", "--offline"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "torch" in out.stdout and "All checks passed." in out.stdout


def test_check_env_is_available_at_package_level():
    import course_lib

    assert course_lib.check_env is env.check_env


@pytest.mark.parametrize("case", ["file", "under a file"])
def test_check_names_a_cache_that_is_not_a_folder(tmp_path, case):
    (tmp_path / "a-file").write_text("x")
    cache = tmp_path / "a-file" / ("sub" if case == "under a file" else "")
    out = subprocess.run([sys.executable, "-m", "course_lib", "check", "--offline"], capture_output=True,
                         text=True, timeout=120, env=dict(os.environ, COURSE_LIB_CACHE=str(cache)))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "All checks passed" not in out.stdout
    what = "is a file, not a folder" if case == "file" else "cannot be created: " + str(tmp_path / "a-file")
    assert f"COURSE_LIB_CACHE={cache}" in out.stdout and what in out.stdout
    assert "fix: set COURSE_LIB_CACHE to a writable folder, or unset it to use" in out.stdout


def test_check_names_an_unwritable_cache(tmp_path, monkeypatch):
    """Tests run as root, where chmod stops no write: os.access is made to say "not writable"."""
    monkeypatch.setenv("COURSE_LIB_CACHE", str(tmp_path))
    assert env.cache_problem() is None and env.check_cache() == tmp_path
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: False)
    report = env.check_env(online_probe=False)
    problem, fix = env.cache_problem()
    assert not report.ok and (problem, fix) in report.problems and "is not writable" in problem
    with pytest.raises(env.CacheError, match="is not writable; set COURSE_LIB_CACHE to a writable folder"):
        env.check_cache()
    monkeypatch.delenv("COURSE_LIB_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "missing"))
    problem, fix = env.cache_problem()
    assert "cannot be created" in problem and fix.startswith(f"make {tmp_path / 'missing' / 'course_lib'} a writable")
