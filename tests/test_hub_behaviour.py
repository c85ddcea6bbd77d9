"""A saved course model behaves like a hub model in plain transformers: AutoTokenizer, pipeline, generate.

Each tiny model is trained for a few steps, saved with ``models.save_model`` and loaded back only
through transformers' own classes; what transformers does with it must equal what the library's
helpers (``continue_text``, ``fill_mask``, ``fill_spans``) do, which add the special tokens the
model saw in training by hand.
"""

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSeq2SeqLM, AutoTokenizer, pipeline

from course_lib.text import evaluation, models, training

RECIPE = training.Recipe(steps=30, batch_size=8, seq_len=64)  # enough to write a span


_SAVED: dict[str, tuple[torch.nn.Module, object]] = {}


def saved(kind, tokenizer, tmp_path_factory):
    """A tiny model of ``kind`` trained for a few steps and saved; trained once per session, as
    every test only reads it."""
    if kind not in _SAVED:
        trained = training.train_model(kind, recipe=RECIPE, tokenizer=tokenizer, cache=False, progress=False)
        directory = tmp_path_factory.mktemp(kind)
        models.save_model(trained.model, tokenizer, directory)
        _SAVED[kind] = trained.model, directory
    return _SAVED[kind]


def test_causal_tokenizer_adds_only_the_story_separator(tokenizer, tmp_path_factory):
    _, directory = saved("gpt2", tokenizer, tmp_path_factory)
    tok = AutoTokenizer.from_pretrained(directory)
    ids = tok("Once upon a time")["input_ids"]
    assert tok.convert_ids_to_tokens(ids)[0] == "</s>"
    assert ids[-1] != tok.eos_token_id, "the prompt must not end in end-of-text"
    assert ids[1:] == tokenizer("Once upon a time", add_special_tokens=False)["input_ids"]


def test_text_generation_pipeline_continues_the_prompt(tokenizer, tmp_path_factory):
    model, directory = saved("gpt2", tokenizer, tmp_path_factory)
    prompt = "One day, Mia"
    ours = evaluation.continue_text(model, tokenizer, prompt, max_new_tokens=12)
    generator = pipeline("text-generation", model=str(directory), device="cpu")
    out = generator(prompt, max_new_tokens=12, do_sample=False)[0]["generated_text"]
    assert out.startswith(prompt)
    assert out[len(prompt):] == ours
    # The plain generate() call of a learner who loads it like a hub model gives the same.
    tok = AutoTokenizer.from_pretrained(directory)
    lm = AutoModelForCausalLM.from_pretrained(directory)
    enc = tok(prompt, return_tensors="pt")
    ids = lm.generate(**enc, max_new_tokens=12, do_sample=False, pad_token_id=tok.pad_token_id)
    assert tok.decode(ids[0, enc["input_ids"].shape[1]:], skip_special_tokens=True) == ours


def test_fill_mask_pipeline_equals_the_library(tokenizer, tmp_path_factory):
    model, directory = saved("bert", tokenizer, tmp_path_factory)
    text = "Mia dropped the <mask>, so it broke."
    ours = evaluation.fill_mask(model, tokenizer, text, top_k=5)
    theirs = pipeline("fill-mask", model=str(directory), device="cpu")(text, top_k=5)
    assert [r["token_str"] for r in theirs] == [tok for tok, _ in ours]
    assert [r["score"] for r in theirs] == pytest.approx([p for _, p in ours], rel=1e-4)


def test_seq2seq_generate_equals_fill_spans(tokenizer, tmp_path_factory):
    model, directory = saved("t5", tokenizer, tmp_path_factory)
    text = "Mia went to the <extra_id_0> and fed the ducks."
    tok = AutoTokenizer.from_pretrained(directory)
    enc = tok(text, return_tensors="pt")
    ours = tokenizer(text.replace(" <extra_id_0>", "<extra_id_0>"), add_special_tokens=False)["input_ids"]
    assert enc["input_ids"][0].tolist() == ours + [tokenizer.eos_token_id]
    lm = AutoModelForSeq2SeqLM.from_pretrained(directory)
    out = lm.generate(**enc, max_new_tokens=8, do_sample=False)
    target, _ = evaluation.fill_spans(model, tokenizer, text, max_new_tokens=8)
    written = tok.decode(out[0], skip_special_tokens=False).replace("<pad>", "").split("</s>")[0]
    assert written.startswith("<extra_id_0>")
    assert target.startswith(written) or written.startswith(target)


def test_masked_lm_loads_with_auto_class(tokenizer, tmp_path_factory):
    _, directory = saved("bert", tokenizer, tmp_path_factory)
    lm = AutoModelForMaskedLM.from_pretrained(directory)
    tok = AutoTokenizer.from_pretrained(directory)
    enc = tok("Mia dropped the <mask>.", return_tensors="pt")
    assert tok.convert_ids_to_tokens(enc["input_ids"][0].tolist())[:1] == ["<s>"]
    assert "Ġ" not in tok.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    with torch.no_grad():
        assert lm(**enc).logits.shape[-1] == len(tokenizer)
