"""The Dutch edition's lab: wrong answers, written as a learner might, that its checkers must
recognise, and feedback in Dutch from chapter 4's references and cases."""

import torch

from course_lib.chapters import ch04_lab, nl_lab
from course_lib.exercises.checker import PHRASES


def afgerond_weg_van_nul(blok):
    schaal = blok.abs().max() / 127
    q = blok / schaal
    return (torch.sign(q) * (q.abs() + 0.5).floor()).to(torch.int8), schaal


def afgekapt(blok):
    schaal = blok.abs().max() / 127
    return torch.trunc(blok / schaal).to(torch.int8), schaal


def bits(waarden):
    return waarden.view(torch.int32).long() % 2**32


def bf16_afgekapt(waarden):
    return torch.div(bits(waarden), 2**16, rounding_mode="floor")


def bf16_weg_van_nul(waarden):
    return torch.div(bits(waarden) + 2**15, 2**16, rounding_mode="floor")


def bf16_zonder_nan(waarden):
    b = bits(waarden)
    laatste = torch.div(b, 2**16, rounding_mode="floor") % 2
    return torch.div(b + 2**15 - 1 + laatste, 2**16, rounding_mode="floor")


WRONG = {"absmax_int8": {"weg van nul afronden": afgerond_weg_van_nul, "afkappen": afgekapt},
         "bf16_bits": {"afkappen": bf16_afgekapt, "weg van nul afronden": bf16_weg_van_nul,
                       "NaN afgerond als een getal": bf16_zonder_nan}}


def test_the_dutch_exercises_share_chapter_4s_references_and_cases():
    for name in ("absmax_int8", "bf16_bits"):
        dutch, english = getattr(nl_lab, name), getattr(ch04_lab, name)
        assert dutch.reference is english.reference and dutch.compare is english.compare
        pairs = zip(dutch.cases(), english.cases(), strict=True)
        assert all(d.args[0].shape == e.args[0].shape and d.label != e.label for d, e in pairs)
        assert [m.wrong for m in dutch.misconceptions] == [m.wrong for m in english.misconceptions]


def test_feedback_is_dutch_from_the_first_line_to_the_misconception():
    feedback = nl_lab.bf16_bits.check(bf16_zonder_nan)
    first = PHRASES["nl"]["wrong"].split("{")[0]
    assert feedback.message.startswith(first) and "Bekende misvatting" in feedback.message
    assert "NaN (één met zijn inhoud in de lage bits)" in feedback.message
    assert feedback.case.startswith("NaN (één") and feedback.misconception == "NaN afgerond als een getal"


def test_the_dutch_prediction_measures_chapter_4s_file_with_dutch_parts():
    measured = nl_lab.int4_op_schijf.measure()
    assert list(measured) == ["codes", "schalen", "kop (header)"]
    assert list(measured.values()) == list(ch04_lab.int4_on_disk.measure().values())
    factors = [f for f, _ in nl_lab.int4_op_schijf.misconceptions]
    assert factors == [f for f, _ in ch04_lab.int4_on_disk.misconceptions]
    feedback = nl_lab.int4_op_schijf.check(sum(measured.values()) * 8)
    assert feedback.message.startswith("Nog niet") and "bits telt in plaats van bytes" in feedback.message
