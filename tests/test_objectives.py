"""Tests for course_lib.text.objectives (masked LM, causal LM and T5 span corruption) and for
chapter 1's token-by-token views of their batches (course_lib.chapters.ch01)."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.chapters import ch01
from course_lib.text import data
from course_lib.text import objectives as obj

IGNORE = -100


@pytest.fixture(scope="module")
def tokenizer():
    return data.train_tokenizer()


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return data.load_corpus("course", "validation")


@pytest.fixture(scope="module")
def encoded(tokenizer, texts) -> list[list[int]]:
    return tokenizer(texts, truncation=True, max_length=128)["input_ids"]


class _Without:
    """A tokenizer proxy that pretends one attribute is missing (None)."""

    def __init__(self, tokenizer, *missing: str):
        self._tok, self._missing = tokenizer, set(missing)

    def __getattr__(self, name):
        if name in self._missing:
            return None
        return getattr(self._tok, name)

    def __len__(self):
        return len(self._tok)

    def __call__(self, *args, **kwargs):
        return self._tok(*args, **kwargs)


# --- masked LM -----------------------------------------------------------------------------------

def _mlm_counts(batch, original, special_ids, mask_id):
    """Count selected / masked / random / kept among ordinary tokens of one batch."""
    ids, labels = batch["input_ids"], batch["labels"]
    special = torch.isin(original, torch.tensor(special_ids))
    selected = labels != IGNORE
    assert not (selected & special).any(), "a special token was selected"
    # Labels hold the original token where selected, and inputs are untouched elsewhere.
    assert torch.equal(labels[selected], original[selected])
    assert torch.equal(ids[~selected], original[~selected])
    masked = selected & (ids == mask_id)
    kept = selected & (ids == original)
    random = selected & ~masked & ~kept
    return {
        "ordinary": int((~special).sum()),
        "selected": int(selected.sum()),
        "masked": int(masked.sum()),
        "random": int(random.sum()),
        "kept": int(kept.sum()),
    }


def test_masked_lm_statistics_match_transformers_collator(tokenizer, encoded):
    from transformers import DataCollatorForLanguageModeling

    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, seed=1234)
    g = torch.Generator().manual_seed(1234)
    special_ids = sorted(tokenizer.all_special_ids)
    ours, theirs = Counter2(), Counter2()
    batches = itertools.islice(itertools.cycle(range(0, len(encoded), 8)), 200)
    for start in batches:
        rows = encoded[start:start + 8]
        original, _ = obj._pad(rows, tokenizer.pad_token_id)
        mine = obj.masked_lm_batch(rows, tokenizer, mlm_probability=0.15, generator=g)
        ref = collator([{"input_ids": r} for r in rows])
        assert torch.equal(ref["attention_mask"], mine["attention_mask"])  # same padding
        ours.add(_mlm_counts(mine, original, special_ids, tokenizer.mask_token_id))
        theirs.add(_mlm_counts(ref, original, special_ids, tokenizer.mask_token_id))
        # Padding is never a prediction target.
        assert (mine["labels"][mine["attention_mask"] == 0] == IGNORE).all()

    assert ours["ordinary"] == theirs["ordinary"] > 100_000
    rates = {}
    for name, c in (("ours", ours), ("transformers", theirs)):
        sel = c["selected"] / c["ordinary"]
        split = {k: c[k] / c["selected"] for k in ("masked", "random", "kept")}
        rates[name] = (sel, split)
        # Binomial standard errors: ~0.0009 for the 15% rate, ~0.003 for 80%, ~0.002 for 10%.
        assert sel == pytest.approx(0.15, abs=0.005), (name, sel)
        assert split["masked"] == pytest.approx(0.80, abs=0.015), (name, split)
        assert split["random"] == pytest.approx(0.10, abs=0.012), (name, split)
        assert split["kept"] == pytest.approx(0.10, abs=0.012), (name, split)
    (s1, p1), (s2, p2) = rates["ours"], rates["transformers"]
    assert abs(s1 - s2) < 0.006
    for k in ("masked", "random", "kept"):
        assert abs(p1[k] - p2[k]) < 0.02, (k, p1, p2)


class Counter2(dict):
    """Sum of count dicts."""

    def add(self, other: dict) -> None:
        for k, v in other.items():
            self[k] = self.get(k, 0) + v


def test_masked_lm_random_tokens_are_ordinary(tokenizer, encoded):
    specials = set(tokenizer.all_special_ids)
    ids = obj._pad(encoded[:64], tokenizer.pad_token_id)[0]
    inputs, labels = obj.mask_tokens(ids, tokenizer, mlm_probability=0.5, mask_replace_prob=0.0,
                                     random_replace_prob=1.0, generator=0)
    replaced = inputs[labels != IGNORE]
    assert replaced.numel() > 1000
    assert not any(int(t) in specials for t in replaced)
    assert len(set(replaced.tolist())) > 500  # spread over the vocabulary


def test_masked_lm_is_seeded(tokenizer, texts):
    a = obj.masked_lm_batch(texts[:8], tokenizer, generator=7)
    b = obj.masked_lm_batch(texts[:8], tokenizer, generator=torch.Generator().manual_seed(7))
    c = obj.masked_lm_batch(texts[:8], tokenizer, generator=8)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["labels"], c["labels"])
    assert set(a) == {"input_ids", "attention_mask", "labels"}
    first = a["input_ids"][:, 0]
    assert (first == tokenizer.bos_token_id).all()


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.lists(st.integers(5, 4000), min_size=1, max_size=40),
                    min_size=1, max_size=6),
       p=st.floats(0.05, 0.95), seed=st.integers(0, 2**31 - 1))
def test_mask_tokens_properties(tokenizer, rows, p, seed):
    batch = obj.masked_lm_batch(rows, tokenizer, mlm_probability=p, generator=seed)
    original, attention = obj._pad(rows, tokenizer.pad_token_id)
    selected = batch["labels"] != IGNORE
    assert torch.equal(batch["attention_mask"], attention)
    assert torch.equal(batch["labels"][selected], original[selected])
    assert torch.equal(batch["input_ids"][~selected], original[~selected])
    assert not selected[attention == 0].any()


def test_masked_lm_bad_inputs(tokenizer, texts):
    with pytest.raises(ValueError, match="batch is empty"):
        obj.masked_lm_batch([], tokenizer)
    with pytest.raises(ValueError, match="list of texts, not a single string"):
        obj.masked_lm_batch("one story", tokenizer)
    with pytest.raises(ValueError, match=r"no mask token.*add_special_tokens"):
        obj.masked_lm_batch(texts[:2], _Without(tokenizer, "mask_token_id"))
    with pytest.raises(ValueError, match="no padding token"):
        obj.masked_lm_batch(texts[:2], _Without(tokenizer, "pad_token_id"))
    for bad in (0.0, 1.0, -0.1, 15):
        expected = r"mlm_probability must be strictly between 0 and 1.*0\.15"
        with pytest.raises(ValueError, match=expected):
            obj.masked_lm_batch(texts[:2], tokenizer, mlm_probability=bad)
    with pytest.raises(ValueError, match="at most 1"):
        obj.masked_lm_batch(texts[:2], tokenizer, mask_replace_prob=0.8, random_replace_prob=0.3)


# --- causal LM -----------------------------------------------------------------------------------

def test_causal_lm_labels_and_padding(tokenizer, texts):
    batch = obj.causal_lm_batch(texts[:6], tokenizer, max_length=64)
    ids, att, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
    assert ids.shape == att.shape == labels.shape and ids.shape[1] <= 64
    assert torch.equal(labels[att == 1], ids[att == 1])
    assert (labels[att == 0] == IGNORE).all()
    assert (ids[att == 0] == tokenizer.pad_token_id).all()
    lengths = att.sum(1).tolist()
    expected = [min(len(tokenizer(t)["input_ids"]), 64) for t in texts[:6]]
    assert lengths == expected
    assert (att[:, 0] == 1).all()  # right padding
    assert att.sum() < att.numel()  # the texts differ in length, so there is padding


def test_causal_lm_shift_happens_inside_the_model(tokenizer, texts):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=64, n_embd=32,
                                       n_layer=1, n_head=2, pad_token_id=tokenizer.pad_token_id))
    model.eval()
    batch = obj.causal_lm_batch(texts[:4], tokenizer, max_length=48)
    with torch.no_grad():
        out = model(**batch)
    logits, labels = out.logits, batch["labels"]
    shifted = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1), ignore_index=IGNORE)
    unshifted = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=IGNORE)
    assert out.loss.item() == pytest.approx(shifted.item(), rel=1e-5)
    assert abs(out.loss.item() - unshifted.item()) > 1e-4


def test_causal_lm_bad_inputs(tokenizer):
    with pytest.raises(ValueError, match="batch is empty"):
        obj.causal_lm_batch([], tokenizer)
    with pytest.raises(ValueError, match="max_length must be a positive"):
        obj.causal_lm_batch(["a story"], tokenizer, max_length=0)


# --- span corruption -----------------------------------------------------------------------------

def _t5_counts(length: int) -> tuple[int, int]:
    """T5's counts, written out independently of the library (density 0.15, mean span 3)."""
    noise = int(round(0.15 * length))
    noise = min(max(noise, 1), length - 1)
    spans = max(1, int(round(noise / 3)))
    return noise, spans


def _runs(mask: list[bool]) -> list[tuple[bool, int]]:
    return [(k, len(list(g))) for k, g in itertools.groupby(mask)]


def test_noise_mask_follows_t5_counts_for_every_length():
    g = torch.Generator().manual_seed(0)
    for length in range(2, 400):
        mask = obj.random_spans_noise_mask(length, generator=g).tolist()
        noise, spans = _t5_counts(length)
        runs = _runs(mask)
        assert len(mask) == length
        assert sum(mask) == noise, length
        assert sum(1 for hidden, _ in runs if hidden) == spans, length
        assert mask[0] is False, "T5 always starts with a kept span"
    assert obj.span_counts(100) == (15, 5)
    assert obj.span_counts(2) == (1, 1)


def test_mean_span_length_and_noise_fraction_over_many_samples():
    g = torch.Generator().manual_seed(1)
    lengths = torch.randint(50, 400, (2000,), generator=g).tolist()
    noise_total = span_total = token_total = 0
    span_sizes = []
    for length in lengths:
        mask = obj.random_spans_noise_mask(length, generator=g).tolist()
        spans = [n for hidden, n in _runs(mask) if hidden]
        noise_total += sum(mask)
        span_total += len(spans)
        token_total += length
        span_sizes += spans
    assert noise_total / token_total == pytest.approx(0.15, abs=0.003)
    assert noise_total / span_total == pytest.approx(3.0, abs=0.1)
    # The segmentation is random, not a fixed pattern of 3s: cutting n noise tokens uniformly
    # into n/3 parts gives span lengths close to a geometric law with mean 3:
    # P(k) = (1/3)(2/3)^(k-1).
    assert max(span_sizes) >= 8
    for k in (1, 2, 3, 4):
        share = span_sizes.count(k) / len(span_sizes)
        assert share == pytest.approx((1 / 3) * (2 / 3) ** (k - 1), abs=0.03), (k, share)


def test_noise_mask_is_seeded():
    a = obj.random_spans_noise_mask(200, generator=5)
    b = obj.random_spans_noise_mask(200, generator=5)
    c = obj.random_spans_noise_mask(200, generator=6)
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_corrupt_spans_by_hand():
    tokens = [10, 11, 12, 13, 14, 15, 16, 17]
    mask = [False, True, True, False, False, True, False, False]
    sentinels, eos = [99, 98, 97], 1
    inputs, targets = obj._corrupt_spans(tokens, mask, sentinels, eos)
    assert inputs == [10, 99, 13, 14, 98, 16, 17, 1]
    assert targets == [99, 11, 12, 98, 15, 1]
    assert obj.reconstruct_from_spans(inputs, targets, sentinels, eos) == tokens


@settings(max_examples=150, deadline=None)
@given(length=st.integers(2, 600), seed=st.integers(0, 2**31 - 1), data_seed=st.integers(0, 10**6))
def test_span_corruption_round_trip_property(tokenizer, length, seed, data_seed):
    sentinels = data.sentinel_ids(tokenizer)
    eos = tokenizer.eos_token_id
    gen = torch.Generator().manual_seed(data_seed)
    tokens = torch.randint(5, len(tokenizer) - len(sentinels), (length,), generator=gen).tolist()
    mask = obj.random_spans_noise_mask(length, generator=seed)
    noise, spans = _t5_counts(length)
    inputs, targets = obj._corrupt_spans(tokens, mask, sentinels, eos)
    used = sentinels[:spans]
    assert [t for t in inputs if t in sentinels] == used  # extra_id_0, extra_id_1, ... in order
    assert [t for t in targets if t in sentinels] == used
    assert targets[0] == sentinels[0]
    assert inputs[-1] == eos and targets[-1] == eos
    assert len(inputs) == length - noise + spans + 1
    assert len(targets) == noise + spans + 1
    assert obj.reconstruct_from_spans(inputs, targets, sentinels, eos) == tokens


def test_span_corruption_batch_rebuilds_the_texts(tokenizer, texts):
    batch = obj.span_corruption_batch(texts[:8], tokenizer, max_length=200, generator=3)
    sentinels, eos = data.sentinel_ids(tokenizer), tokenizer.eos_token_id
    assert set(batch) == {"input_ids", "attention_mask", "labels"}
    for row, text in enumerate(texts[:8]):
        original = tokenizer(text, add_special_tokens=False)["input_ids"][:200]
        att = batch["attention_mask"][row]
        inputs = batch["input_ids"][row][att == 1].tolist()
        assert (batch["input_ids"][row][att == 0] == tokenizer.pad_token_id).all()
        labels = batch["labels"][row].tolist()
        targets = [t for t in labels if t != IGNORE]
        assert labels[: len(targets)] == targets  # -100 only as right padding
        assert inputs[-1] == eos and targets[-1] == eos
        noise, spans = _t5_counts(len(original))
        assert sum(t in sentinels for t in inputs) == spans
        assert len(targets) == noise + spans + 1
        assert obj.reconstruct_from_spans(inputs, targets, sentinels, eos) == original
    assert tokenizer.decode(obj.reconstruct_from_spans(
        batch["input_ids"][0].tolist(), batch["labels"][0].tolist(), sentinels, eos)) == texts[0]


def test_span_corruption_batch_trains_a_t5_model(tokenizer, texts):
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    config = T5Config(vocab_size=len(tokenizer), d_model=32, d_kv=8, d_ff=64, num_layers=1,
                      num_decoder_layers=1, num_heads=2, pad_token_id=tokenizer.pad_token_id,
                      eos_token_id=tokenizer.eos_token_id,
                      decoder_start_token_id=tokenizer.pad_token_id)
    model = T5ForConditionalGeneration(config)
    batch = obj.span_corruption_batch(texts[:4], tokenizer, max_length=64, generator=0)
    loss = model(**batch).loss
    assert torch.isfinite(loss) and loss.item() > 0
    loss.backward()


def test_span_corruption_bad_inputs(tokenizer, texts):
    with pytest.raises(ValueError, match="batch is empty"):
        obj.span_corruption_batch([], tokenizer)
    with pytest.raises(ValueError, match=r"Example 1 has 1 token\(s\), too short to corrupt"):
        obj.span_corruption_batch([[7, 8, 9], [7]], tokenizer)
    with pytest.raises(ValueError, match="too short to corrupt"):
        obj.random_spans_noise_mask(1)
    small = data.train_tokenizer(texts, vocab_size=400, n_sentinels=0)
    with pytest.raises(ValueError, match=r"no sentinel tokens.*extra_id"):
        obj.span_corruption_batch(texts[:2], small)
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="noise_density must be strictly between 0 and 1"):
            obj.span_corruption_batch(texts[:2], tokenizer, noise_density=bad)
    with pytest.raises(ValueError, match="mean_noise_span_length must be at least 1"):
        obj.random_spans_noise_mask(50, mean_noise_span_length=0.5)
    with pytest.raises(ValueError, match=r"needs more than 2 sentinels.*max_length"):
        mask = obj.random_spans_noise_mask(100, generator=0)
        obj._corrupt_spans(list(range(100)), mask, [90, 91], 1)


# --- chapter 1's views ---------------------------------------------------------------------------

def test_show_masked_lm(tokenizer, texts):
    batch = obj.masked_lm_batch(texts[:2], tokenizer, generator=11)
    view = ch01.show_masked_lm(batch, tokenizer, row=1)
    labels = batch["labels"][1]
    ids = batch["input_ids"][1]
    n_masked = int(((labels != IGNORE) & (ids == tokenizer.mask_token_id)).sum())
    assert n_masked > 0
    assert str(view) == view.text and view._repr_html_() == view.html
    assert view.text.count("[<mask>→") == n_masked
    assert f"{n_masked} masked" in view.text
    assert view.html.count("background:#ffd166") == n_masked + 1  # + the legend
    assert "&lt;mask&gt;" in view.html and "<mask>" not in view.html.replace("&lt;", "")


def test_show_causal_lm(tokenizer, texts):
    batch = obj.causal_lm_batch(texts[:2], tokenizer)
    short = int(batch["attention_mask"].sum(1).argmin())
    view = ch01.show_causal_lm(batch, tokenizer, row=short, max_tokens=500)
    n = int(batch["attention_mask"][short].sum())
    lines = view.text.splitlines()
    assert len(lines) == n  # n-1 next-token pairs and the final token with nothing after it
    assert lines[0].strip().startswith("'<s>' →")
    assert lines[-1].endswith("(end)")
    assert view.html.count("<td>") == 2 * batch["input_ids"].shape[1]


def test_show_span_corruption(tokenizer, texts):
    batch = obj.span_corruption_batch(texts[:1], tokenizer, generator=2)
    view = ch01.show_span_corruption(batch, tokenizer)
    lines = view.text.splitlines()
    assert lines[0].startswith("input :") and "<extra_id_0>" in lines[0]
    assert lines[1].startswith("target:  <extra_id_0>")
    assert lines[2] == f"rebuilt: {texts[0]}"
    assert 'title="sentinel 0"' in view.html and "&lt;extra_id_0&gt;" in view.html


# ---------------------------------------------------------------------------------------------
# Each objective's context-free loss
# ---------------------------------------------------------------------------------------------

def test_context_free_loss_of_causal_lm_skips_each_window_s_first_token(tokenizer):
    # windows [5, 6] and [5, 7]: the targets are 6 and 7 (the 5s are never predicted)
    assert obj.context_free_loss("gpt2", [5, 6, 5, 7], tokenizer, seq_len=2) == pytest.approx(
        torch.log(torch.tensor(2.0)).item())
    # a trailing partial window is dropped, as in training
    assert obj.context_free_loss("gpt2", [5, 6, 5, 7, 9], tokenizer, seq_len=2) == pytest.approx(
        obj.context_free_loss("gpt2", [5, 6, 5, 7], tokenizer, seq_len=2))


def test_context_free_loss_of_span_corruption_counts_sentinels_and_eos(tokenizer):
    # 64 copies of one token: each window's target is 3 sentinels, 10 copies and </s>
    noise, spans = obj.span_counts(64)
    assert (noise, spans) == (10, 3)
    p = torch.tensor([1.0] * (spans + 1) + [noise], dtype=torch.float64) / (noise + spans + 1)
    want = float(-(p * p.log()).sum())
    got = obj.context_free_loss("t5", [10] * 640, tokenizer, seq_len=64, generator=1)
    assert got == pytest.approx(want, rel=1e-12)


def test_context_free_loss_of_masked_lm_is_the_token_entropy(tokenizer, encoded):
    assert obj.context_free_loss("bert", [10] * 640, tokenizer) == 0  # one token: no surprise
    stream = torch.tensor([t for row in encoded for t in row])
    ordinary = stream[~torch.isin(stream, torch.tensor(tokenizer.all_special_ids))]
    p = torch.bincount(ordinary).double()
    p = p[p > 0] / p.sum()
    unigram = float(-(p * p.log()).sum())
    # 15% of the ordinary tokens, chosen at random: about the same frequencies
    assert obj.context_free_loss("bert", stream, tokenizer) == pytest.approx(unigram, abs=0.35)
    assert obj.context_free_loss("bert", stream, tokenizer, generator=3) != \
        obj.context_free_loss("bert", stream, tokenizer, generator=4)


def test_context_free_loss_bad_inputs(tokenizer):
    with pytest.raises(ValueError, match="'bert', 'gpt2' or 't5'"):
        obj.context_free_loss("gpt", [1, 2, 3], tokenizer)
    with pytest.raises(ValueError, match="at least one"):
        obj.context_free_loss("gpt2", [5, 6, 7], tokenizer, seq_len=64)
