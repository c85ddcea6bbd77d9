"""Tests for the environment check and its command line."""

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
