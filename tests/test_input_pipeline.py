"""The CPU side of chapter 10 (course_lib.hardware.input_pipeline): tokenising through a DataLoader with 0, 1
and 2 worker processes counts exactly the tokens a direct call does, times every pass, restores
TOKENIZERS_PARALLELISM and leaves no worker behind (also when tokenising fails); the GPU's demand
in tokens per second by hand; the table against that demand; bad inputs say what to pass."""

from __future__ import annotations

import math
import multiprocessing
import os
import re

import pytest

from course_lib.chapters import ch10
from course_lib.hardware import input_pipeline as ip
from course_lib.hardware.input_pipeline import ThroughputResult
from course_lib.text import data


@pytest.fixture(scope="module")
def texts():
    return data.load_corpus("course", "train")[:200]


@pytest.fixture(scope="module")
def tokenizer(texts):
    """A tiny byte-level BPE (a hundredth of a second to train), the course tokenizer's kind."""
    return data.train_tokenizer(texts, vocab_size=400, n_sentinels=4)


class Broken:
    """A tokenizer that fails on every batch."""

    def __call__(self, batch):
        raise ValueError("broken on purpose")


def assert_no_workers_left():
    assert multiprocessing.active_children() == []


# --- measurements ---------------------------------------------------------------------------------

@pytest.mark.parametrize("workers", [0, 1, 2])
def test_token_count_matches_a_direct_call(texts, tokenizer, workers):
    result = ip.tokenize_throughput(texts, tokenizer, workers=workers, batch_size=32, repeats=2)
    direct = sum(len(ids) for ids in tokenizer(texts)["input_ids"])
    assert result.tokens == direct
    assert result.workers == workers
    assert result.texts == len(texts)
    assert result.characters == sum(len(t) for t in texts)
    assert len(result.times) == 2 and all(t > 0 for t in result.times)
    assert result.warmup_seconds > 0
    assert_no_workers_left()


def test_a_batch_size_that_does_not_divide_the_texts(texts, tokenizer):
    result = ip.tokenize_throughput(texts[:50], tokenizer, workers=0, batch_size=7, repeats=3)
    assert result.tokens == sum(len(ids) for ids in tokenizer(texts[:50])["input_ids"])
    assert len(result.times) == 3


def test_spawned_workers_count_the_same(texts, tokenizer):
    if "spawn" not in multiprocessing.get_all_start_methods():
        pytest.skip("no 'spawn' start method here")
    result = ip.tokenize_throughput(texts[:40], tokenizer, workers=1, repeats=1,
                                    start_method="spawn")
    assert result.tokens == sum(len(ids) for ids in tokenizer(texts[:40])["input_ids"])
    assert_no_workers_left()


def test_seconds_and_rates_from_the_times():
    r = ThroughputResult(workers=2, texts=10, tokens=1000, characters=4000, times=(0.5, 0.1, 0.2))
    assert r.seconds == 0.1 and r.median_seconds == 0.2
    assert r.tokens_per_second == pytest.approx(10_000)
    assert r.median_tokens_per_second == pytest.approx(5_000)
    assert r.processes == 2 and r.tokens_per_second_per_process == pytest.approx(5_000)
    assert ThroughputResult(0, 10, 1000, 4000, (1.0,)).processes == 1


@pytest.mark.parametrize("before", [None, "true"])
def test_tokenizers_parallelism_is_restored(texts, tokenizer, monkeypatch, before):
    if before is None:
        monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    else:
        monkeypatch.setenv("TOKENIZERS_PARALLELISM", before)
    seen = []

    def spy(batch):
        seen.append(os.environ.get("TOKENIZERS_PARALLELISM"))
        return tokenizer(batch)

    ip.tokenize_throughput(texts[:20], spy, workers=0, repeats=1)
    assert seen and set(seen) == {"false"}
    assert os.environ.get("TOKENIZERS_PARALLELISM") == before


@pytest.mark.parametrize("workers", [0, 2])
def test_a_failing_tokenizer_raises_and_leaves_no_worker(texts, monkeypatch, workers):
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")
    with pytest.raises(ValueError, match="broken on purpose"):
        ip.tokenize_throughput(texts[:20], Broken(), workers=workers, batch_size=4)
    assert_no_workers_left()
    assert os.environ["TOKENIZERS_PARALLELISM"] == "true"


def test_more_workers_than_cores_warns(texts, tokenizer, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    with pytest.warns(UserWarning, match="more than this machine's 1 core"):
        ip.tokenize_throughput(texts[:10], tokenizer, workers=2, repeats=1)
    assert_no_workers_left()


# --- the GPU's demand -----------------------------------------------------------------------------

def test_gpu_demand_by_hand():
    # GPT-2 small on an H100 (dense BF16 peak) at 40 % utilisation: about 532 thousand tokens/s.
    assert ip.gpu_tokens_per_second(124e6, 989e12, 0.4) == pytest.approx(989e12 * 0.4 / (6 * 124e6))
    assert ip.gpu_tokens_per_second(1e9, 6e9, 1.0) == pytest.approx(1.0)
    assert ip.gpu_tokens_per_second(124e6, 989e12) == ip.gpu_tokens_per_second(124e6, 989e12, 0.4)


# --- the table ------------------------------------------------------------------------------------

def results():
    return [ThroughputResult(0, 100, 1000, 5000, (0.01, 0.02)),
            ThroughputResult(2, 100, 1000, 5000, (0.004, 0.005, 0.006))]


def test_table_without_demands():
    table = ch10.throughput_table(results())
    assert table.headers == ["workers", "tokens", "tokens/s (fastest)", "tokens/s (median)"]
    assert table.rows[0] == ["0 (main process)", "1,000", "100,000", "66,667"]
    assert table.rows[1] == ["2", "1,000", "250,000", "200,000"]
    assert "100 texts" in table.title and "2 or 3 passes" in table.title


def test_table_against_demands():
    table = ch10.throughput_table(results(), {"big GPU": 1e6, "small GPU": 50_000})
    assert len(table.headers) == 6
    assert table.headers[4] == "big GPU: share met (cores to keep up)"
    # 100,000 tokens/s on one process: 10 % of 1e6, 10 processes; twice the small demand, 1.
    assert table.rows[0][4:] == ["10% (10)", "200% (1)"]
    # 250,000 tokens/s on two processes is 125,000 each: 1e6 needs ceil(8) = 8 cores.
    assert table.rows[1][4:] == ["25% (8)", "500% (1)"]
    assert table.rows[1][4].endswith(f"({math.ceil(1e6 / 125_000)})")
    assert "big GPU 1,000,000 tokens/s" in table.title


# --- bad inputs -----------------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda t, tok: ip.tokenize_throughput([], tok), "texts is empty"),
    (lambda t, tok: ip.tokenize_throughput("a story", tok), "texts must be a list of strings"),
    (lambda t, tok: ip.tokenize_throughput(["a", 3], tok), "texts must hold strings only"),
    (lambda t, tok: ip.tokenize_throughput(t, tok, workers=-1), "whole number >= 0"),
    (lambda t, tok: ip.tokenize_throughput(t, tok, workers=1.5), "workers must be a whole number"),
    (lambda t, tok: ip.tokenize_throughput(t, tok, workers=True), "workers must be a whole number"),
    (lambda t, tok: ip.tokenize_throughput(t, tok, workers=10_000), "more than twice"),
    (lambda t, tok: ip.tokenize_throughput(t, tok, batch_size=0), "batch_size must be"),
    (lambda t, tok: ip.tokenize_throughput(t, tok, repeats=0), "repeats must be a whole number"),
    (lambda t, tok: ip.tokenize_throughput(t, "gpt2"), "tokenizer must be callable"),
    (lambda t, tok: ip.tokenize_throughput(t, tok, start_method="thread"), "unknown start method"),
    (lambda t, tok: ip.gpu_tokens_per_second(0, 1e12), "n_params must be a positive number"),
    (lambda t, tok: ip.gpu_tokens_per_second(1e6, -1), "flops_per_second must be a positive"),
    (lambda t, tok: ip.gpu_tokens_per_second(1e6, 1e12, 0), "utilisation must be"),
    (lambda t, tok: ip.gpu_tokens_per_second(1e6, 1e12, 40), "in (0, 1]"),
    (lambda t, tok: ch10.throughput_table([]), "needs a list of results"),
    (lambda t, tok: ch10.throughput_table(results(), {"x": 0}), "demand 'x'"),
])
def test_bad_inputs_say_what_to_pass(texts, tokenizer, call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call(texts[:5], tokenizer)
    assert_no_workers_left()
