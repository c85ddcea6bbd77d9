"""Tests for course_lib.text.data: the generated corpus, the loaders and the course tokenizer."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import types
from collections import Counter
from pathlib import Path

import pytest

from course_lib.base import env
from course_lib.text import data, story_discoveries, story_troubles, story_world
from course_lib.text import stories as S
from course_lib.text.story_world import WORDS

# SHA-256 of the built-in corpus, pinned with its CORPUS_VERSION: the trained models and the
# cached token streams are keyed by the version alone. If the generator changes on purpose, bump
# CORPUS_VERSION and update both; test_pinned_hash_is_reproduced_by_generation recomputes the
# hash from scratch, so the pin can only pass if generation really gives these bytes.
PINNED_VERSION = "course-stories-v1"
PINNED_SHA256 = "1c393d1a48a94cbaf7cee32cfed7ae1d934a511cc3ae9827d62f3f832ca5fe86"
WORD = re.compile(r"[A-Za-z]+")
#: The verbs that may follow a line of dialogue: '"Are you hurt?" asked Mom.'
DIALOGUE_TAGS = {"said", "asked", "shouted", "whispered", "called", "replied"}


@pytest.fixture(scope="module")
def splits() -> dict[str, list[str]]:
    return {s: data.load_corpus("course", s) for s in data.SPLITS}


@pytest.fixture(scope="module")
def tokenizer():
    return data.train_tokenizer()


# --- the corpus ----------------------------------------------------------------------------------

def test_generation_is_deterministic_and_seed_dependent():
    first = S.generate_stories(300, seed=7)
    second = S.generate_stories(300, seed=7)
    other = S.generate_stories(300, seed=8)
    assert first == second
    assert first != other
    assert len(set(first)) == 300, "stories within one corpus must be distinct"


def test_pinned_hash_is_reproduced_by_generation():
    data._course_splits.cache_clear()
    assert (S.CORPUS_VERSION, S.corpus_sha256()) == (PINNED_VERSION, PINNED_SHA256)
    assert S.corpus_sha256(seed=S.DEFAULT_SEED + 1) != PINNED_SHA256


def test_same_bytes_in_a_fresh_interpreter_with_another_hash_seed():
    # Set iteration order changes with PYTHONHASHSEED; the corpus must not depend on it.
    code = "from course_lib.text import stories; print(stories.corpus_sha256())"
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=Path(__file__).resolve().parents[1], check=True, timeout=60)
    assert out.stdout.strip() == PINNED_SHA256


def test_splits_are_the_generated_stories_in_order(splits):
    stories = S.generate_stories()
    assert len(stories) == S.N_STORIES
    rebuilt = {s: [] for s in data.SPLITS}
    for i, story in enumerate(stories):
        rebuilt[data._split_of(i)].append(story)
    assert rebuilt == splits


def test_generation_is_fast():
    t0 = time.perf_counter()
    S.generate_stories()
    assert time.perf_counter() - t0 < 5.0


def test_size_and_split_proportions(splits):
    stats = data.corpus_stats()
    assert stats.total_bytes >= 1_000_000
    assert stats.stories == {"train": 5400, "validation": 300, "test": 300}
    assert stats.stories == {s: len(v) for s, v in splits.items()}
    assert stats.characters["train"] == len("\n\n".join(splits["train"]))
    assert stats.sample in splits["train"]
    assert "train" in str(stats) and str(stats.stories["train"]) in str(stats)


def test_splits_are_disjoint(splits):
    train, val, test = (set(splits[s]) for s in data.SPLITS)
    assert not train & val
    assert not train & test
    assert not val & test


def test_words_come_from_the_generator_vocabulary(splits):
    vocab = S.generator_vocabulary()
    assert 1000 < len(vocab) < 5000
    counts = Counter(w.lower() for story in splits["train"][:2000] for w in WORD.findall(story))
    total = sum(counts.values())
    unknown = sum(c for w, c in counts.items() if w not in vocab)
    assert unknown / total < 0.01, [w for w in counts if w not in vocab][:20]
    # Common English function words dominate, as in real text.
    top = {w for w, _ in counts.most_common(15)}
    assert {"the", "and", "to", "was"} <= top


def test_every_word_table_is_used_and_read_only():
    code = "".join(Path(m.__file__).read_text(encoding="utf-8")
                   for m in (S, story_world, story_troubles, story_discoveries))
    unused = [name for name in vars(WORDS) if f"WORDS.{name}" not in code]
    assert not unused, f"word tables no plot uses: {unused}"
    assert isinstance(WORDS.places[0][2], tuple)  # rows are tuples, all the way down


def test_sentences_look_like_english(splits):
    n_sentences = 0
    lengths = []
    for story in splits["validation"]:
        assert story[0].isupper() or story[0] == '"'
        assert story.endswith((".", "!", "?", '."', '!"', '?"'))
        assert "  " not in story and "{" not in story and "None" not in story
        previous = ""
        for sentence in re.split(r'(?<=[.!?])\s+|(?<=[.!?]")\s+', story):
            # A lower-case start is only allowed for a dialogue tag: '"Are you hurt?" asked Mom.'
            if sentence[0].islower():
                assert previous.endswith(('?"', '!"')), sentence
                assert sentence.split()[0] in DIALOGUE_TAGS, sentence
            else:
                assert sentence[0].isupper() or sentence[0] == '"', sentence
                n_sentences += 1
                lengths.append(len(sentence.split()))
            previous = sentence
    assert n_sentences > 2000
    assert 4 <= sum(lengths) / len(lengths) <= 15


def test_cause_and_effect_is_consistent(splits):
    # Whoever drops a fragile thing sees that same thing break.
    dropped = 0
    for story in splits["train"]:
        m = re.search(r"dropped the (\w+)\.|the (\w+) fell out of", story)
        if m:
            dropped += 1
            obj = m.group(1) or m.group(2)
            assert re.search(rf"The {obj} (hit the floor and )?(broke|cracked|shattered)|"
                             rf"Crash! The {obj} ", story), story
    assert dropped > 50


def test_shop_arithmetic_is_right(splits):
    numbers = {w: i for i, w in enumerate(WORDS.numbers)}
    checked = 0
    for story in splits["train"]:
        have = re.search(r"(\w+) coins in (his|her) (pocket|piggy bank)", story)
        cost = re.search(r"cost (\w+) coins?\.", story)
        left = re.search(r"had (\w+) coins? left", story)
        if have and cost:
            checked += 1
            expected = numbers[have.group(1)] - numbers[cost.group(1)]
            if left:
                assert numbers[left.group(1)] == expected, story
            else:
                assert expected == 0 and "nothing left" in story, story
    assert checked > 50


def test_pronouns_agree_with_the_character():
    girls, boys = set(WORDS.girls), set(WORDS.boys)
    checked = 0
    for story in S.generate_stories(400, seed=3):
        m = re.match(r"(\w+) (wanted to learn|had a |dreamed of becoming|wanted to be)", story)
        if m and m.group(1) in girls | boys:
            checked += 1
            wrong = (" he ", " his ", " him ") if m.group(1) in girls else (" she ", " her ")
            first_other_name = min((story.find(n, 1) for n in (girls | boys) - {m.group(1)}
                                    if story.find(n, 1) > 0), default=len(story))
            before_others = story[:first_other_name]
            assert not any(w in before_others for w in wrong), story
    assert checked > 20


def test_unknown_split_is_rejected():
    with pytest.raises(ValueError, match="Unknown split 'dev'.*train, validation, test"):
        data.load_corpus("course", "dev")


# --- local files ---------------------------------------------------------------------------------

def test_local_file_is_split_by_paragraph(tmp_path):
    paragraphs = [f"Paragraph number {i}.\nIt has two lines." for i in range(40)]
    path = tmp_path / "book.txt"
    path.write_text("\n\n".join(paragraphs), encoding="utf-8")
    parts = {s: data.load_corpus(str(path), s) for s in data.SPLITS}
    assert [len(parts[s]) for s in data.SPLITS] == [36, 2, 2]
    assert parts["train"] + parts["validation"] + parts["test"] == paragraphs
    assert data.load_corpus(path, "test") == parts["test"]  # a Path works too


def test_local_file_with_few_paragraphs_is_split_by_line(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("\n".join(f"line {i}" for i in range(100)) + "\n", encoding="utf-8")
    parts = {s: data.load_corpus(str(path), s) for s in data.SPLITS}
    assert [len(parts[s]) for s in data.SPLITS] == [90, 5, 5]
    assert parts["validation"][0] == "line 90"


def test_local_file_too_small(tmp_path):
    path = tmp_path / "tiny.txt"
    path.write_text("only one line\n", encoding="utf-8")
    with pytest.raises(ValueError, match="at least 3"):
        data.load_corpus(str(path))


def test_missing_local_file_has_a_clear_message(tmp_path):
    missing = tmp_path / "nowhere" / "corpus.txt"
    expected = r"No text file at .*corpus\.txt.*load_corpus\('course'\)"
    with pytest.raises(FileNotFoundError, match=expected):
        data.load_corpus(str(missing))


# --- hub data sets, without the network ----------------------------------------------------------

def _fake_datasets(calls: list, rows: list[str]) -> types.SimpleNamespace:
    class _Dataset:
        column_names = ["text"]

        def __getitem__(self, key):
            assert key == "text"
            return rows

    def load_dataset(path, config=None, split=None):
        calls.append((path, config, split))
        return _Dataset()

    return types.SimpleNamespace(load_dataset=load_dataset)


def test_hub_offline_gives_a_clear_error(monkeypatch):
    calls: list = []
    monkeypatch.setattr(data, "_import_datasets", lambda: _fake_datasets(calls, ["x"]))
    monkeypatch.setattr(data, "_hub_reachable", lambda *a, **k: False)
    with pytest.raises(data.HubUnavailableError) as info:
        data.load_corpus("wikitext-2-raw-v1")
    message = str(info.value)
    assert "not reachable" in message
    assert "load_corpus('course')" in message and ".txt" in message
    assert isinstance(info.value, RuntimeError)
    assert calls == [], "the hub must not be contacted when it is unreachable"


def test_hub_without_datasets_package_gives_a_clear_error(monkeypatch):
    monkeypatch.setattr(data, "_import_datasets", lambda: None)
    expected = r"'datasets' package is not installed.*load_corpus\('course'\)"
    with pytest.raises(data.HubUnavailableError, match=expected):
        data.load_corpus("Salesforce/wikitext", "validation")


def test_hub_online_path_uses_datasets(monkeypatch):
    calls: list = []
    rows = ["", " = Title = \n", "Some text .\n"]
    monkeypatch.setattr(data, "_import_datasets", lambda: _fake_datasets(calls, rows))
    monkeypatch.setattr(data, "_hub_reachable", lambda *a, **k: True)
    out = data.load_corpus("wikitext-2-raw-v1", "validation")
    assert calls == [("Salesforce/wikitext", "wikitext-2-raw-v1", "validation")]
    assert out == [" = Title = \n", "Some text .\n"]


def test_hub_load_failure_is_wrapped(monkeypatch):
    def boom(*args, **kwargs):
        raise ConnectionError("simulated DNS failure")

    monkeypatch.setattr(data, "_import_datasets", lambda: types.SimpleNamespace(load_dataset=boom))
    monkeypatch.setattr(data, "_hub_reachable", lambda *a, **k: True)
    with pytest.raises(data.HubUnavailableError, match="simulated DNS failure.*load_corpus"):
        data.load_corpus("someone/some-dataset")


def test_hub_reachable_respects_offline_mode_and_socket_errors(monkeypatch):
    def no_network(*args, **kwargs):
        raise OSError("network is unreachable")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    assert data._hub_reachable() is False

    opened = []
    monkeypatch.setattr(socket, "create_connection",
                        lambda *a, **k: opened.append(a) or _Closable())
    assert data._hub_reachable() is True
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    opened.clear()
    assert data._hub_reachable() is False
    assert opened == []


class _Closable:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# --- tokenizer -----------------------------------------------------------------------------------

def test_tokenizer_size_and_training_time():
    texts = data.load_corpus("course", "train")
    t0 = time.perf_counter()
    tok = data.train_tokenizer(texts)
    seconds = time.perf_counter() - t0
    assert seconds < 20
    assert 4000 <= len(tok) <= 8000
    assert len(tok) == data.DEFAULT_VOCAB_SIZE


def test_tokenizer_is_deterministic(tokenizer):
    again = data.train_tokenizer()
    assert again.get_vocab() == tokenizer.get_vocab()
    assert again.backend_tokenizer.to_str() == tokenizer.backend_tokenizer.to_str()


def test_round_trip(tokenizer, splits):
    samples = splits["test"][:50] + [
        "Mia dropped the cup, so the cup broke.",
        "Unicode too: café, naïve, 東京, emoji 🙂, tabs\tand\nnewlines.",
        "Zyxwvut qqq 12345 !!!",
    ]
    for text in samples:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tokenizer.unk_token_id not in ids
        assert tokenizer.decode(ids) == text
    # The BPE learnt real words: a story word is a single token.
    assert len(tokenizer(" dropped", add_special_tokens=False)["input_ids"]) == 1


def test_special_tokens_and_sentinels(tokenizer):
    assert tokenizer.pad_token == "<pad>" and tokenizer.pad_token_id == 0
    assert tokenizer.eos_token == "</s>" and tokenizer.bos_token == "<s>"
    assert tokenizer.unk_token == "<unk>" and tokenizer.mask_token == "<mask>"
    ids = data.sentinel_ids(tokenizer)
    assert len(ids) >= 32
    # T5 order: <extra_id_0> is the highest id and the ids count down.
    assert ids[0] == len(tokenizer) - 1
    assert ids == list(range(len(tokenizer) - 1, len(tokenizer) - 1 - len(ids), -1))
    assert set(ids) <= set(tokenizer.all_special_ids)
    assert tokenizer.convert_ids_to_tokens(ids[5]) == "<extra_id_5>"
    # Sentinels and the mask are single tokens when they appear in text.
    enc = tokenizer("a <extra_id_3> b <mask>", add_special_tokens=False)["input_ids"]
    assert ids[3] in enc and tokenizer.mask_token_id in enc
    # Encoding with special tokens wraps the text in <s> ... </s>.
    wrapped = tokenizer("hello")["input_ids"]
    assert wrapped[0] == tokenizer.bos_token_id and wrapped[-1] == tokenizer.eos_token_id


def test_sentinel_ids_rejects_a_tokenizer_without_sentinels(splits):
    tok = data.train_tokenizer(splits["validation"], vocab_size=400, n_sentinels=0)
    with pytest.raises(ValueError, match=r"no sentinel tokens.*course_tokenizer"):
        data.sentinel_ids(tok)


def test_too_small_vocab_is_rejected():
    with pytest.raises(ValueError, match="too small"):
        data.train_tokenizer(["some text"], vocab_size=100)


def test_save_and_load_with_autotokenizer(tokenizer, tmp_path):
    from transformers import AutoTokenizer

    tokenizer.save_pretrained(tmp_path / "tok")
    loaded = AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    text = "Leo and Grandma went to the zoo by bus. <extra_id_0> <mask>"
    assert loaded(text)["input_ids"] == tokenizer(text)["input_ids"]
    assert loaded.get_vocab() == tokenizer.get_vocab()
    for attr in ("pad_token", "mask_token", "bos_token", "eos_token", "unk_token"):
        assert getattr(loaded, attr) == getattr(tokenizer, attr)
    assert data.sentinel_ids(loaded) == data.sentinel_ids(tokenizer)


def test_course_tokenizer_is_cached_on_disk(monkeypatch, tmp_path, tokenizer):
    monkeypatch.setenv("COURSE_LIB_CACHE", str(tmp_path))
    assert env.cache_dir() == tmp_path
    first = data.course_tokenizer()
    name = f"tokenizer-{data.CORPUS_VERSION}-{data.DEFAULT_VOCAB_SIZE}"
    saved = tmp_path / name / "tokenizer.json"
    assert saved.is_file()
    t0 = time.perf_counter()
    second = data.course_tokenizer()
    assert time.perf_counter() - t0 < 5
    assert first.get_vocab() == second.get_vocab() == tokenizer.get_vocab()


def test_course_stream_is_kept_on_disk_and_made_again_when_damaged_or_changed(
        tmp_path, monkeypatch):
    tokenizer = data.course_tokenizer()
    want = data.token_stream(data.load_corpus("course", "validation"), tokenizer)
    monkeypatch.setattr(data, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(data, "_STREAMS", {})
    assert data.course_stream(tokenizer, "validation").equal(want)
    [path] = (tmp_path / "streams").iterdir()
    data._STREAMS.clear()  # another process: read from disk, the same ids, no corpus made
    with monkeypatch.context() as patched:
        patched.setattr(data, "load_corpus", lambda *a: pytest.fail("the corpus was made"))
        assert data.course_stream(tokenizer, "validation").equal(want)
    path.write_bytes(path.read_bytes()[:100])  # damaged: tokenized again, rewritten
    data._STREAMS.clear()
    assert data.course_stream(tokenizer, "validation").equal(want)
    assert data._load_stream(path).equal(want)
    # Another layout of the ids is another file, never the old one read back.
    monkeypatch.setattr(data, "STREAM_FORMAT", "another")
    data._STREAMS.clear()
    assert data.course_stream(tokenizer, "validation").equal(want)
    assert len(list((tmp_path / "streams").iterdir())) == 2
    monkeypatch.setattr(data, "CORPUS_VERSION", "another")  # so is another corpus
    data._STREAMS.clear()
    assert data.course_stream(tokenizer, "validation").equal(want)
    assert len(list((tmp_path / "streams").iterdir())) == 3
