"""The machine profile of chapter 10 (course_lib.hardware.profile): the JSON cache's round trip, a
cache of another machine or thread count measured again, a bad cache file named in a clear message
(load_profile) or measured again with a warning (machine_profile), the link it hands chapter 8's cost
model; and, marked slow, one real measurement."""

from __future__ import annotations

import json
import math

import pytest
import torch

from course_lib.hardware import profile as hp
from course_lib.hardware.profile import MachineProfile
from course_lib.parallel import cost_model


def made_up(**changes) -> MachineProfile:
    key = hp.profile_key()
    values = dict(cpu=key["cpu"], threads=key["threads"], torch_version=key["torch_version"],
                  matmul_flops=3.5e11, memory_bandwidth=1.5e10, allreduce_alpha=7.5e-5,
                  allreduce_beta=2.4e9, measured_at="2026-01-01 00:00 UTC", seconds=4.2)
    values.update(changes)
    return MachineProfile(**values)


@pytest.fixture()
def counted(monkeypatch):
    """measure_profile replaced by a made-up profile; the list counts the calls."""
    calls = []

    def fake() -> MachineProfile:
        calls.append(1)
        return made_up(matmul_flops=1e11 * (len(calls) + 1))

    monkeypatch.setattr(hp, "measure_profile", fake)
    return calls


def test_cache_round_trip(tmp_path):
    p = made_up()
    path = hp.save_profile(p, tmp_path / "sub" / "profile.json")
    assert path.exists() and json.loads(path.read_text())["layout"] == 1
    assert hp.load_profile(path) == p
    assert hp.load_profile(tmp_path / "absent.json") is None


def test_default_path_is_in_the_course_cache(cache):
    assert hp.profile_path() == cache / hp.PROFILE_FILE


def test_machine_profile_measures_once_then_reads_the_cache(cache, counted):
    first = hp.machine_profile()
    assert len(counted) == 1 and (cache / hp.PROFILE_FILE).exists()
    assert hp.machine_profile() == first and len(counted) == 1
    again = hp.machine_profile(refresh=True)
    assert len(counted) == 2 and again != first
    assert hp.machine_profile() == again


@pytest.mark.parametrize("change", [{"cpu": "another CPU"}, {"torch_version": "1.0.0"},
                                    {"threads": 97}])
def test_cache_of_another_key_is_measured_again(cache, counted, change):
    hp.save_profile(made_up(**change))
    got = hp.machine_profile()
    assert len(counted) == 1 and got.key == hp.profile_key()
    assert hp.load_profile() == got  # rewritten


def test_thread_count_is_part_of_the_key(cache, counted):
    before = torch.get_num_threads()
    hp.machine_profile()
    torch.set_num_threads(1 if before > 1 else 2)
    try:
        assert hp.profile_key()["threads"] != before
        hp.machine_profile()
    finally:
        torch.set_num_threads(before)
    assert len(counted) == 2


@pytest.mark.parametrize("text, says", [
    ("{not json", "cannot be read"),
    ("[1, 2]", "JSON object"),
    ('{"layout": 0}', "layout 0"),
    ('{"layout": 1, "cpu": "x"}', "missing fields"),
    ('{"layout": 1, "cpu": "x", "threads": 2, "torch_version": "2", "matmul_flops": -1, '
     '"memory_bandwidth": 1, "allreduce_alpha": 0, "allreduce_beta": 1}', "matmul_flops"),
])
def test_bad_cache_file_gets_a_clear_message(tmp_path, text, says):
    path = tmp_path / "profile.json"
    path.write_text(text)
    with pytest.raises(ValueError, match="refresh=True") as info:
        hp.load_profile(path)
    assert says in str(info.value) and str(path) in str(info.value)


def test_bad_cache_file_is_measured_again_with_a_warning(cache, counted):
    cache.mkdir(parents=True)
    (cache / hp.PROFILE_FILE).write_text('{"layout": 1, "cpu": ')  # truncated
    with pytest.warns(UserWarning, match="measuring again"):
        got = hp.machine_profile()
    assert len(counted) == 1 and hp.load_profile() == got


@pytest.mark.parametrize("change", [{"matmul_flops": 0}, {"memory_bandwidth": math.nan},
                                    {"allreduce_alpha": -1e-6}, {"allreduce_beta": "fast"},
                                    {"threads": 0}, {"ranks": 1}])
def test_profile_refuses_impossible_values(change):
    with pytest.raises(ValueError, match=next(iter(change))):
        made_up(**change)


def test_bad_arguments_are_refused(cache):
    with pytest.raises(ValueError, match="True or False"):
        hp.machine_profile(refresh="yes")
    with pytest.raises(ValueError, match="MachineProfile"):
        hp.save_profile({"cpu": "x"})
    with pytest.raises(ValueError, match="MachineProfile"):
        hp.profile_table(None)


def test_link_feeds_the_cost_model():
    p = made_up()
    link = p.link()
    assert (link.latency, link.bandwidth) == (p.allreduce_alpha, p.allreduce_beta)
    # 2 ranks: t = 2 alpha + S / beta
    t = cost_model.ring_allreduce_time(1e6, 2, link)
    assert t == pytest.approx(2 * 7.5e-5 + 1e6 / 2.4e9)
    assert p.ridge == pytest.approx(3.5e11 / 1.5e10)


def test_table_shows_every_figure():
    text = str(hp.profile_table(made_up()))
    for want in ("350.0 GFLOP/s", "15.0 GB/s", "75.0 us", "2.40 GB/s", "4.2 s"):
        assert want in text


@pytest.mark.slow
def test_a_real_measurement(cache):
    p = hp.machine_profile()
    assert p.key == hp.profile_key() and 2 <= p.seconds < 60
    assert 1e8 < p.matmul_flops < 1e15 and 1e8 < p.memory_bandwidth < 1e13
    assert 0 <= p.allreduce_alpha < 0.01 and 1e7 < p.allreduce_beta < 1e12
    assert hp.machine_profile() == p  # cached
