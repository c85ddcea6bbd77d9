"""Chapter 1, *Pretraining objectives*: the chapter's exercises."""

from __future__ import annotations

from types import SimpleNamespace

from course_lib.exercises.questions import Question


def _t5_sentinels(length: int) -> int:
    from course_lib.text.objectives import span_counts

    return span_counts(length)[1]


def _course_vocab_size() -> int:
    from course_lib.text.data import DEFAULT_VOCAB_SIZE

    return DEFAULT_VOCAB_SIZE


def _course_model_compute() -> float:
    from course_lib.text.course_model import COURSE_RECIPE, course_model_reference

    return 6.0 * course_model_reference().get("n_params", 0) * COURSE_RECIPE.tokens


#: The chapter's numeric questions, each checked against the library.
quiz = SimpleNamespace(
    q1=Question(
        "A batch holds 2,000 ordinary (non-special) tokens. How many of them does BERT's recipe "
        "expect to replace by <mask>?",
        lambda: 2000 * 0.15 * 0.8,
        unit="tokens",
        hint="15% are selected; of those, 80% become <mask> (10% random, 10% kept).",
    ),
    q2=Question(
        "T5 corrupts a sequence of 100 tokens with noise density 0.15 and mean span length 3. How "
        "many sentinel tokens appear in the encoder's input?",
        lambda: float(_t5_sentinels(100)),
        unit="sentinels",
        rel_tol=0,
        hint="noise tokens = round(0.15 x length); spans = round(noise / 3); one sentinel per span.",
    ),
    q3=Question(
        "A model that knows nothing spreads its probability evenly over the course tokenizer's "
        "4,096 tokens. What is its perplexity?",
        lambda: float(_course_vocab_size()),
        rel_tol=1e-6,
        hint="perplexity = exp(mean loss); a uniform guess over V tokens has loss ln V.",
    ),
    q4=Question(
        "Estimate the training compute of the course model with C = 6·N·D (N = all its parameters, "
        "D = training tokens, both printed in this chapter), in FLOPs.",
        _course_model_compute,
        unit="FLOPs",
        hint="D = steps x batch size x sequence length; multiply 6 x N x D.",
    ),
)
