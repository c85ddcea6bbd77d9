"""The Dutch edition of chapters 2 to 5 (*Kwantisatie: minder bits per getal*): its exercises, checked in Dutch.

Each answer is a number that the library computes; a wrong answer that a known misconception
produces is named, so the learner reads *why* it is wrong, not only that it is.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch

from course_lib.compression import quant
from course_lib.exercises.questions import Question
from course_lib.numbers import memory


def _pi_in_int8_block(absmax: float = 10.0) -> float:
    """π read back from absmax INT8 in a block whose largest magnitude is ``absmax``."""
    block = torch.tensor([math.pi, -absmax])
    return quant.quantize_dequantize(block, "int8-tensor")[0].item()


def _mixed_precision_7b() -> memory.Breakdown:
    return memory.training_memory(7e9, "bf16-mixed", "adam", batch=1, seq_len=2048)


#: The Dutch edition's numeric questions, each checked against the library.
quiz = SimpleNamespace(
    q1=Question(
        "Een blok gewichten bevat π en heeft als grootste absolute waarde 10,0. Met absmax-INT8 "
        "(schaal = 10,0 / 127, code = round(x / schaal)): als welke waarde komt π terug na het "
        "dekwantiseren (code x schaal)?",
        _pi_in_int8_block,
        rel_tol=1e-3,
        hint="π / (10/127) = 39,9; rond af naar de dichtstbijzijnde code en vermenigvuldig die weer met de schaal.",
        language="nl",
        misconceptions=(
            (3.0, "π zonder schaalfactor naar een geheel getal afrondt (een cast)"),
            (39 * 10.0 / 127, "39,9 afkapt tot 39 in plaats van af te ronden naar 40"),
            (40.0, "de code zelf geeft en vergeet die met de schaal te vermenigvuldigen"),
            (40 * 10.0 / 128, "door 128 deelt in plaats van door 127: absmax gebruikt de codes -127 tot 127"),
        ),
    ),
    q2=Question(
        "Hoeveel GB kosten alleen de gewichten van een model van 7 miljard parameters tijdens training in "
        "BF16 mixed precision (gradiënten en optimizer-states niet meegeteld)?",
        lambda: memory.gb(_mixed_precision_7b().weights + _mixed_precision_7b().master_weights),
        unit="GB",
        hint="mixed precision rekent met een BF16-kopie (2 bytes) en werkt een FP32-masterkopie bij (4 bytes).",
        language="nl",
        misconceptions=(
            (14.0, "alleen de BF16-kopie telt en de FP32-masterkopie vergeet"),
            (28.0, "alleen de FP32-masterkopie telt, of denkt dat de gewichten gewoon FP32 blijven"),
            (112.0, "de hele modeltoestand telt (ook gradiënten en optimizer-states)"),
        ),
    ),
    q3=Question(
        "Hoeveel GB aan modeltoestand (gewichten, masterkopie, gradiënten, optimizer-states van Adam) "
        "vraagt het trainen van een model van 7 miljard parameters in BF16 mixed precision?",
        lambda: memory.gb(_mixed_precision_7b().model_states),
        unit="GB",
        hint="2 (BF16-gewichten) + 4 (FP32-masterkopie) + 2 (BF16-gradiënten) + 8 (twee FP32-states van Adam) "
        "bytes per parameter.",
        language="nl",
        misconceptions=(
            (56.0, "aanneemt dat mixed precision alles halveert: 8 in plaats van 16 bytes per parameter"),
            (84.0, "de FP32-masterkopie vergeet: 12 in plaats van 16 bytes per parameter"),
            (42.0, "alleen de gewichten telt: de BF16-kopie en de masterkopie"),
        ),
    ),
)
