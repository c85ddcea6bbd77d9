"""Predict, measure, grade: a close prediction passes with its breakdown, a known factor is named."""

from __future__ import annotations

import pytest

from course_lib.exercises.predictions import Prediction, saved_bytes

PREDICTION = Prediction("adam bytes", "Bytes of model states?", lambda: {"weights": 4e6, "adam": 8e6}, unit="B",
                        rel_tol=0.05, misconceptions=((8.0, "count bits instead of bytes"),
                                                      (2**30 / 1e9, "read GiB as GB")))


def test_a_prediction_within_tolerance_passes_with_a_breakdown():
    feedback = PREDICTION.check({"weights": 4e6, "adam": 8.2e6})
    assert feedback.passed and "adam" in feedback.message and "1.02" in feedback.message
    assert not PREDICTION.check(None).passed


@pytest.mark.parametrize("answer, why", [(8 * 12e6, "bits"), (12e6 * 2**30 / 1e9, "GiB")])
def test_a_prediction_off_by_a_known_factor_is_named(answer, why):
    feedback = PREDICTION.check(answer)
    assert not feedback.passed and why in feedback.misconception


def test_a_prediction_off_by_another_factor_names_nothing():
    feedback = PREDICTION.check(3 * 12e6)
    assert not feedback.passed and feedback.misconception is None and "3x the measured" in feedback.message


def test_dutch_predictions_answer_in_dutch():
    dutch = Prediction("adam", "Hoeveel bytes?", PREDICTION.measure, unit="B", rel_tol=0.05,
                       misconceptions=PREDICTION.misconceptions, language="nl")
    feedback = dutch.check(8 * 12e6)
    assert "Nog niet" in feedback.message and "Bekende misvatting" in feedback.message
    assert "voorspeld" in feedback.message and "gemeten" in feedback.message


def test_a_component_off_by_a_known_factor_is_named():
    feedback = PREDICTION.check({"weights": 4e6 * 8, "adam": 8e6})
    assert not feedback.passed and "bits" in feedback.misconception


def test_a_non_number_is_told_so_without_measuring():
    def measure():
        raise AssertionError("measured a non-answer")

    prediction = Prediction("p", "How many?", measure)
    assert "not a number" in prediction.check("many").message
    assert "Not answered yet" in prediction.check(None).message


def test_a_worked_prediction_must_pass(capsys):
    PREDICTION(12e6, must_pass=True)
    assert capsys.readouterr().out.startswith("Right")
    with pytest.raises(AssertionError, match="worked prediction of adam bytes fails"):
        PREDICTION(8 * 12e6, must_pass=True)
    PREDICTION(None)  # a learner's missing answer only shows its feedback


def test_a_tolerance_under_one_percent_is_printed_as_it_is():
    tight = Prediction("params", "How many?", lambda: {"all": 1000.0}, rel_tol=0.005)
    assert "within 0.5%" in tight.check(1010).message
    dutch = Prediction("params", "Hoeveel?", lambda: {"all": 1000.0}, rel_tol=0.005, language="nl")
    assert "binnen 0,5%" in dutch.check(1010).message


def test_saved_bytes_add_up_to_the_file_on_disk():
    import torch

    parts = saved_bytes({"codes": torch.zeros(1000, dtype=torch.uint8), "scale": torch.ones(10)})
    assert parts["codes"] == 1000 and parts["scale"] == 40 and 0 < parts["header"] < 1024
