"""Chapter 2's lab: wrong answers, written as a learner might, that its checkers must recognise; its
references worked by hand and its prediction's measurement against the chapter's formulas."""

import pytest

from course_lib.chapters import ch02_lab
from course_lib.numbers import memory

# --- model states, as a learner might get them wrong ------------------------------------------


def no_master(n_params, precision):
    half = precision != "fp32"
    w = 2 if half else 4
    return {"weights": w * n_params, "gradients": w * n_params, "master_weights": 0,
            "optimizer_states": 8 * n_params}


def one_moment(n_params, precision):
    half = precision != "fp32"
    w = 2 if half else 4
    return {"weights": w * n_params, "gradients": w * n_params,
            "master_weights": 4 * n_params if half else 0, "optimizer_states": 4 * n_params}


def sixteen_bit_moments(n_params, precision):
    half = precision != "fp32"
    w = 2 if half else 4
    return {"weights": w * n_params, "gradients": w * n_params,
            "master_weights": 4 * n_params if half else 0, "optimizer_states": 2 * w * n_params}


def in_bits(n_params, precision):
    half = precision != "fp32"
    w = 16 if half else 32
    return {"weights": w * n_params, "gradients": w * n_params,
            "master_weights": 32 * n_params if half else 0, "optimizer_states": 64 * n_params}


def master_always(n_params, precision):
    w = 2 if precision != "fp32" else 4
    return {"weights": w * n_params, "gradients": w * n_params, "master_weights": 4 * n_params,
            "optimizer_states": 8 * n_params}


def fp32_gradients(n_params, precision):
    half = precision != "fp32"
    return {"weights": (2 if half else 4) * n_params, "gradients": 4 * n_params,
            "master_weights": 4 * n_params if half else 0, "optimizer_states": 8 * n_params}


# --- activations of one layer, as a learner might get them wrong ------------------------------


def scores_linear(s, b, h, a, e, d):
    return s * b * h * (16 * e + 2 * d) + a * s * b * (2 * e + d)


def papers_numbers(s, b, h, a, e, d):
    return 34 * s * b * h + 5 * a * s * s * b


def layer_in_bits(s, b, h, a, e, d):
    return 8 * (s * b * h * (16 * e + 2 * d) + a * s * s * b * (2 * e + d))


def wide_masks(s, b, h, a, e, d):
    return s * b * h * 18 * e + a * s * s * b * 3 * e


WRONG = {
    "adam_model_states": {"forgotten master copy": no_master, "one Adam moment": one_moment,
                          "16-bit Adam moments": sixteen_bit_moments,
                          "bits for bytes": in_bits, "a master copy in fp32 too": master_always,
                          "FP32 gradients": fp32_gradients},
    "activation_bytes_per_layer": {"scores grow with s, not s²": scores_linear,
                                   "the paper's 34 and 5 for every size": papers_numbers,
                                   "bits for bytes": layer_in_bits, "masks as wide as the data": wide_masks},
}


@pytest.mark.parametrize("precision, per_param", [("fp32", (4, 4, 0, 8)), ("bf16-mixed", (2, 2, 4, 8)),
                                                  ("fp16-mixed", (2, 2, 4, 8))])
def test_model_states_worked_by_hand(precision, per_param):
    got = ch02_lab.adam_model_states.reference(1_000, precision)
    assert list(got) == list(ch02_lab.STATES)
    assert [got[k] for k in ch02_lab.STATES] == [1_000 * b for b in per_param]
    assert sum(got.values()) == 16_000  # the course's 16-byte convention, either way


def test_a_layers_activations_are_the_papers_formula_for_16_bit():
    # Korthikanti et al. 2022: s*b*h*(34 + 5*a*s/h) bytes, for e = 2 and d = 1
    s, b, h, a = 2048, 1, 4096, 32
    assert ch02_lab.activation_bytes_per_layer.reference(s, b, h, a, 2, 1) == s * b * h * (34 + 5 * a * s / h)
    assert ch02_lab.activation_bytes_per_layer.reference(7, 1, 8, 1, 2, 1) == 7 * 8 * 34 + 49 * 5


def test_the_step_measured_is_the_chapters_formula_to_a_tenth_of_a_percent():
    measured = ch02_lab.training_step_memory.measure()
    n = ch02_lab.SHAPE.n_params
    assert measured["weights"] == measured["gradients"] == 4 * n / 1e6
    assert 8 * n / 1e6 < measured["optimizer states"] < 8 * n / 1e6 + 1e-3  # + 4-byte step counters
    acts = memory.activation_bytes(ch02_lab.SHAPE, ch02_lab.SEQ, ch02_lab.BATCH, 4, 4) / 1e6
    assert abs(measured["activations"] / acts - 1) < 1e-3
    assert abs(sum(measured.values()) / (ch02_lab._formula() / 1e6) - 1) < 1e-3  # the worked answer passes


def test_each_wrong_formula_gets_its_own_misconception_from_the_real_measurement():
    prediction = ch02_lab.training_step_memory
    mistakes = [dict(state_bytes=12), dict(mask_bytes=1), dict(activations=False), dict(logits=False)]
    for mistake, (factor, explain) in zip(mistakes, prediction.misconceptions[2:]):
        feedback = prediction.check(ch02_lab._formula(**mistake) / 1e6)
        assert not feedback.passed and feedback.misconception == explain, feedback.message
    mib = {k: v * 1e6 / 2**20 for k, v in prediction.measure().items()}
    assert prediction.check(mib).misconception == prediction.misconceptions[1][1]
