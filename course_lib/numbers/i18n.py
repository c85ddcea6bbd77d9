"""The course's texts in every language it speaks (English and Dutch), and its Dutch terminology.

Chapter 3 (*Number formats*) meets it through the bit explorer, chapter 2 (*The memory wall*)
through the memory estimate's notes and input errors; the Dutch edition of the quantization
lesson prints :data:`GLOSSARY` at its end. Chapter 2 also meets the training planner
(:mod:`course_lib.planner`), whose own texts live in :mod:`course_lib.planner.texts`, written by
this module's rules.

Every text is one entry of the tables :data:`EN` and :data:`NL`, which have the same keys;
:func:`text` picks one and fills in its ``{placeholders}``. A placeholder that names another
entry of the same table (``{bx_err_hint}``) is filled with that entry, so a shared phrase is
written once. Keys starting with ``bx_`` belong to the bit explorer
(:mod:`course_lib.numbers.bit_explorer`, whose JavaScript receives them in its configuration), keys
starting with ``cmp_`` to the table that compares one value in several formats (chapter 4's π
table), keys starting with ``mem_`` to :mod:`course_lib.numbers.memory`, which writes its notes
and input errors with them (the ``memory`` command of ``python -m course_lib`` names its inputs
with them too).

Numbers: :func:`decimal` writes a number the way the language does (``24,5`` and ``1.234,5`` in
Dutch). The widgets use it where they write a number inside a sentence; the bit explorer's table
keeps ``3.140625`` with a decimal point, because its values are meant to be copied into code and
into its own text box, which (like Python) reads a decimal point only.
"""

from __future__ import annotations

from course_lib.base.checks import choice

__all__ = ["LANGUAGES", "EN", "NL", "GLOSSARY", "check_language", "text", "texts", "localise_number", "decimal"]

#: The languages the widgets speak; English is the default everywhere.
LANGUAGES: tuple[str, ...] = ("en", "nl")

#: English, the course's language. The bit explorer's and the memory estimate's English texts are
#: exactly those they showed before they could speak Dutch.
EN: dict[str, str] = {
    # Numbers
    "decimal_point": ".",
    "thousands_separator": ",",
    # -- The bit explorer (course_lib/numbers/bit_explorer.py and assets/bit_explorer.js) -----------------
    "bx_summary": "{value} in {format} is stored as {stored} ({bits}, {hex})",
    "bx_fallback": (
        "Bit explorer: {summary}. It needs JavaScript: run the cell (in a trusted notebook) to click the bits."
    ),
    "bx_could_not_start": "The bit explorer could not start: {error}",
    # Controls
    "bx_value": "value",
    "bx_format": "format",
    "bx_saturate": "saturate",
    "bx_saturate_title": "on overflow, clamp to the largest finite value instead of giving inf (or NaN)",
    "bx_choice_e4m3": "FP8 E4M3 (OCP, no inf)",
    "bx_choice_custom": "custom ExMy",
    "bx_note": (
        "Click a bit to flip it. Type a number, pi, e, inf, nan, 2^-24 or a bit pattern (0x4248) and press Enter. "
        "Overflow gives inf (IEEE formats) or NaN (E4M3) unless {saturate} is on; integers round half to even, "
        "then clamp."
    ),
    # What a bad typed value or custom format says (the codec's errors; bx_err_hint is shared)
    "bx_err_hint": "try pi, 1e-8, -0, inf, nan or a hex pattern like 0x4248",
    "bx_err_empty": "type a value first; {bx_err_hint}",
    "bx_err_unreadable": "cannot read {text} as a number; {bx_err_hint}",
    "bx_err_too_wide": "{text} does not fit in the {n} bits of {format} (patterns 0x0..0x{limit})",
    "bx_err_power_range": "2^{k} is outside float64's range (2^-1074 to 2^1023)",
    "bx_err_int_nan": "NaN has no {format} representation",
    "bx_err_no_nan": "format {format} has no NaN: cannot encode NaN",
    "bx_err_exponent_bits": "exponent bits must be a whole number from 1 to 11, got {e}",
    "bx_err_mantissa_bits": "mantissa bits must be a whole number from 0 up, got {m}",
    "bx_err_too_many_bits": "the explorer shows formats of at most 32 bits; 1 + {e} + {m} = {n}",
    "bx_err_ieee_mantissa": "an IEEE-style format needs at least 1 mantissa bit to tell NaN from inf",
    "bx_err_no_normals": "E{e}M{m} has no normal numbers with these special values; use at least 2 exponent bits",
    "bx_err_float64_range": "exponent range outside float64's",
    # The bits: tooltips and legend
    "bx_title_sign_int": "sign bit (weighs -2^{weight})",
    "bx_title_sign": "sign bit",
    "bx_title_exponent": "exponent bit (2^{k} of the raw exponent)",
    "bx_title_mantissa": "mantissa bit (2^-{k} of the significand)",
    "bx_title_int": "bit {weight} (2^{weight})",
    "bx_legend_sign": "sign",
    "bx_legend_exponent": "exponent ({e} bits, bias {bias})",
    "bx_legend_mantissa": "mantissa ({m} bits)",
    "bx_legend_twos": "sign (two's complement)",
    "bx_legend_value_bits": "value bits",
    "bx_legend_size_one": "{n} bits = {bytes} byte per value",
    "bx_legend_size_many": "{n} bits = {bytes} bytes per value",
    # The anatomy line under the bits
    "bx_sign_negative": "sign {bit} (negative)",
    "bx_sign_positive": "sign {bit} (positive)",
    "bx_nan_ieee": "NaN: exponent all ones, mantissa not zero",
    "bx_nan_fn": "NaN: the E4M3FN NaN pattern S.1111.111",
    "bx_nan_fnuz": "NaN: the single NaN pattern 1.000..0",
    "bx_infinity": "infinity: exponent all ones, mantissa zero",
    "bx_exponent_normal": "exponent {bits} = {raw} \u2212 bias {bias} \u2192 {power}",
    "bx_exponent_subnormal": "exponent {bits} (subnormal) \u2192 {power}, no implicit 1",
    "bx_significand": "significand {bits} (binary) = {value}",
    "bx_value_is": "value = {value}",
    "bx_twos_complement": "two's complement: the top bit weighs \u22122^{top}, the others 2^{next} .. 2^0",
    "bx_unsigned": "unsigned: bit k weighs 2^k",
    # The table: row names
    "bx_row_stored": "stored value",
    "bx_row_exact": "exact decimal",
    "bx_row_bits": "bits",
    "bx_row_typed": "typed value",
    "bx_row_abserr": "absolute error",
    "bx_row_relerr": "relative error",
    "bx_row_outcome": "what happened",
    "bx_row_ulp": "ULP here",
    "bx_row_prev": "previous value",
    "bx_row_next": "next value",
    "bx_row_max": "range: max",
    "bx_row_minnormal": "range: min normal",
    "bx_row_minsub": "range: min subnormal",
    "bx_row_eps": "epsilon (ULP of 1)",
    "bx_row_specials": "special values",
    "bx_row_range": "range",
    # The table: words around the values
    "bx_typed_bits": "{text} (typed bits) = {value}",
    "bx_undefined": "undefined",
    "bx_undefined_nan": "undefined (NaN)",
    "bx_undefined_zero": "undefined (typed 0)",
    "bx_undefined_at": "undefined at {value}",
    "bx_infinite": "infinite ({typed} stored as {stored})",
    "bx_error_larger": "{error} (stored is larger)",
    "bx_error_smaller": "{error} (stored is smaller)",
    "bx_error_exact": "{error} (exact)",
    "bx_none_nan": "none (NaN)",
    "bx_none_below": "none (below -max there is no {format} value)",
    "bx_none_above": "none ({format} has no infinity; overflow is NaN)",
    "bx_none_min": "none ({value} is the minimum)",
    "bx_none_max": "none ({value} is the maximum)",
    "bx_specials_ieee": "\u00b1inf and NaN (exponent all ones)",
    "bx_specials_fn": "no inf; NaN = S.1111.111 (E4M3FN)",
    "bx_specials_fnuz": "no inf, no -0; NaN = 1.000..0",
    "bx_specials_none": "none: every pattern is a number",
    # The table's "what happened" row (a sentence: its numbers follow the language)
    "bx_clamped": "clamped: {value} is outside {min} .. {max}",
    "bx_rounded_int": "rounded to the nearest integer (ties to even)",
    "bx_overflow_nan": "overflow: above max {max}, so NaN ({format} has no infinity)",
    "bx_overflow": "overflow: above max {max}, so {stored}",
    "bx_saturated": "saturated to \u00b1max",
    "bx_inf_to_nan": "{format} has no infinity: inf becomes NaN (tick saturate to clamp)",
    "bx_underflow": "underflow: below half the smallest subnormal, so zero",
    "bx_subnormal": "subnormal: below min normal {min}, fewer significant bits",
    "bx_stored_exactly": "stored exactly",
    # -- The comparison table of one value in several formats (bit_explorer.compare_formats) ------
    "cmp_title": "{values} in {n} formats",
    "cmp_format": "format",
    "cmp_stored": "stored value (exact)",
    "cmp_hex": "bits (hex)",
    "cmp_bits": "bits",
    "cmp_abs_error": "abs error",
    "cmp_rel_error": "rel error",
    "cmp_bits_per_value": "bits/value",
    # -- The memory estimate (course_lib/numbers/memory.py) ---------------------------------------------
    # The notes course_lib.numbers.memory.training_memory writes (it takes them from here, in English)
    "mem_note_stage3": "stage 3 gathers each layer's full weights before use (two layers' worth held)",
    "mem_note_buckets": "all-reduce / reduce-scatter buckets (2 x 25 MB, DDP's default bucket size)",
    "mem_note_adam8bit": "8-bit Adam keeps a small FP32 scale per block of 2048 values, ignored here",
    "mem_note_zero_one_gpu": "ZeRO shards across GPUs: on one GPU it saves nothing, so these are stage 0's figures",
    # Bad input (course_lib.numbers.memory raises these: parse_count, check_count and check_job)
    "mem_err_count": "cannot read {text} as a parameter count; write a positive number such as 7e9, 7B, 125M or 1.3b",
    "mem_err_positive": "{what} must be a positive number, got {value}",
    "mem_what_params": "number of parameters",
    "mem_what_batch": "batch size",
    "mem_what_seq_len": "sequence length",
    "mem_err_gpus": "number of GPUs must be a whole number >= 1, got {value}",
    "mem_err_zero": "ZeRO stage must be one of {stages}, got {value}",
    "mem_err_whole": "{what} must be a whole number >= 1, got {value}",
    "mem_err_max": "{what} must be at most {limit}, got {value}; is there a digit too many?",
    "mem_err_context": (
        "sequence length {value} is longer than the model's context of {positions} positions; "
        "use {positions} tokens or fewer"
    ),
}

#: Dutch, for the Dutch edition. Terms follow :data:`GLOSSARY`.
NL: dict[str, str] = {
    "decimal_point": ",",
    "thousands_separator": ".",
    "bx_summary": "{value} wordt in {format} opgeslagen als {stored} ({bits}, {hex})",
    "bx_fallback": (
        "Bitverkenner: {summary}. Hiervoor is JavaScript nodig: voer de cel uit (in een vertrouwd notebook) "
        "om op de bits te kunnen klikken."
    ),
    "bx_could_not_start": "De bitverkenner kon niet starten: {error}",
    "bx_value": "waarde",
    "bx_format": "formaat",
    "bx_saturate": "verzadigen",
    "bx_saturate_title": "bij overflow afkappen op de grootste eindige waarde in plaats van inf (of NaN) te geven",
    "bx_choice_e4m3": "FP8 E4M3 (OCP, geen inf)",
    "bx_choice_custom": "eigen ExMy",
    "bx_note": (
        "Klik op een bit om het om te zetten. Typ een getal (met een punt als decimaalteken: 3.14), pi, e, inf, nan, "
        "2^-24 of een bitpatroon (0x4248) en druk op Enter. Overflow geeft inf (IEEE-formaten) of NaN (E4M3), "
        "tenzij {saturate} aanstaat; gehele getallen worden afgerond (bij gelijke afstand naar het even getal) "
        "en daarna afgekapt."
    ),
    "bx_err_hint": (
        "probeer pi, 1e-8, -0, inf, nan of een bitpatroon zoals 0x4248, en schrijf decimalen met een punt (3.14)"
    ),
    "bx_err_empty": "typ eerst een waarde; {bx_err_hint}",
    "bx_err_unreadable": "{text} is niet als getal te lezen; {bx_err_hint}",
    "bx_err_too_wide": "{text} past niet in de {n} bits van {format} (patronen 0x0..0x{limit})",
    "bx_err_power_range": "2^{k} valt buiten het bereik van float64 (2^-1074 tot en met 2^1023)",
    "bx_err_int_nan": "NaN is niet weer te geven in {format}",
    "bx_err_no_nan": "formaat {format} kent geen NaN: NaN is niet te coderen",
    "bx_err_exponent_bits": "het aantal exponentbits moet een geheel getal van 1 tot en met 11 zijn, niet {e}",
    "bx_err_mantissa_bits": "het aantal mantissebits moet een geheel getal van 0 of meer zijn, niet {m}",
    "bx_err_too_many_bits": "de bitverkenner toont formaten van hoogstens 32 bits; 1 + {e} + {m} = {n}",
    "bx_err_ieee_mantissa": (
        "een formaat in IEEE-stijl heeft minstens 1 mantissebit nodig om NaN van inf te onderscheiden"
    ),
    "bx_err_no_normals": (
        "E{e}M{m} heeft met deze speciale waarden geen normale getallen; gebruik minstens 2 exponentbits"
    ),
    "bx_err_float64_range": "het exponentbereik valt buiten dat van float64",
    "bx_title_sign_int": "tekenbit (weegt -2^{weight})",
    "bx_title_sign": "tekenbit",
    "bx_title_exponent": "exponentbit (2^{k} van de ruwe exponent)",
    "bx_title_mantissa": "mantissebit (2^-{k} van de significand)",
    "bx_title_int": "bit {weight} (2^{weight})",
    "bx_legend_sign": "teken",
    "bx_legend_exponent": "exponent ({e} bits, bias {bias})",
    "bx_legend_mantissa": "mantisse ({m} bits)",
    "bx_legend_twos": "teken (tweecomplement)",
    "bx_legend_value_bits": "waardebits",
    "bx_legend_size_one": "{n} bits = {bytes} byte per waarde",
    "bx_legend_size_many": "{n} bits = {bytes} bytes per waarde",
    "bx_sign_negative": "teken {bit} (negatief)",
    "bx_sign_positive": "teken {bit} (positief)",
    "bx_nan_ieee": "NaN: exponent allemaal enen, mantisse niet nul",
    "bx_nan_fn": "NaN: het NaN-patroon S.1111.111 van E4M3FN",
    "bx_nan_fnuz": "NaN: het enige NaN-patroon, 1.000..0",
    "bx_infinity": "oneindig: exponent allemaal enen, mantisse nul",
    "bx_exponent_normal": "exponent {bits} = {raw} \u2212 bias {bias} \u2192 {power}",
    "bx_exponent_subnormal": "exponent {bits} (subnormaal) \u2192 {power}, geen impliciete 1",
    "bx_significand": "significand {bits} (binair) = {value}",
    "bx_value_is": "waarde = {value}",
    "bx_twos_complement": "tweecomplement: het hoogste bit weegt \u22122^{top}, de andere 2^{next} .. 2^0",
    "bx_unsigned": "zonder teken: bit k weegt 2^k",
    "bx_row_stored": "opgeslagen waarde",
    "bx_row_exact": "exacte decimale waarde",
    "bx_row_bits": "bits",
    "bx_row_typed": "getypte waarde",
    "bx_row_abserr": "absolute fout",
    "bx_row_relerr": "relatieve fout",
    "bx_row_outcome": "wat er gebeurde",
    "bx_row_ulp": "ULP hier",
    "bx_row_prev": "vorige waarde",
    "bx_row_next": "volgende waarde",
    "bx_row_max": "bereik: max",
    "bx_row_minnormal": "bereik: kleinste normale",
    "bx_row_minsub": "bereik: kleinste subnormale",
    "bx_row_eps": "epsilon (ULP van 1)",
    "bx_row_specials": "speciale waarden",
    "bx_row_range": "bereik",
    "bx_typed_bits": "{text} (getypte bits) = {value}",
    "bx_undefined": "onbepaald",
    "bx_undefined_nan": "onbepaald (NaN)",
    "bx_undefined_zero": "onbepaald (0 getypt)",
    "bx_undefined_at": "onbepaald bij {value}",
    "bx_infinite": "oneindig ({typed} opgeslagen als {stored})",
    "bx_error_larger": "{error} (opgeslagen waarde is groter)",
    "bx_error_smaller": "{error} (opgeslagen waarde is kleiner)",
    "bx_error_exact": "{error} (exact gelijk)",
    "bx_none_nan": "geen (NaN)",
    "bx_none_below": "geen (onder -max bestaat geen {format}-waarde)",
    "bx_none_above": "geen ({format} kent geen oneindig; overflow geeft NaN)",
    "bx_none_min": "geen ({value} is het minimum)",
    "bx_none_max": "geen ({value} is het maximum)",
    "bx_specials_ieee": "\u00b1inf en NaN (exponent allemaal enen)",
    "bx_specials_fn": "geen inf; NaN = S.1111.111 (E4M3FN)",
    "bx_specials_fnuz": "geen inf, geen -0; NaN = 1.000..0",
    "bx_specials_none": "geen: elk patroon is een getal",
    "bx_clamped": "afgekapt: {value} ligt buiten {min} .. {max}",
    "bx_rounded_int": "afgerond op het dichtstbijzijnde gehele getal (bij gelijke afstand naar het even getal)",
    "bx_overflow_nan": "overflow: groter dan max {max}, dus NaN ({format} kent geen oneindig)",
    "bx_overflow": "overflow: groter dan max {max}, dus {stored}",
    "bx_saturated": "verzadigd tot \u00b1max",
    "bx_inf_to_nan": "{format} kent geen oneindig: inf wordt NaN (vink verzadigen aan om af te kappen)",
    "bx_underflow": "underflow: kleiner dan de helft van het kleinste subnormale getal, dus nul",
    "bx_subnormal": "subnormaal: kleiner dan het kleinste normale getal {min}, dus minder significante bits",
    "bx_stored_exactly": "exact opgeslagen",
    "cmp_title": "{values} in {n} formaten",
    "cmp_format": "formaat",
    "cmp_stored": "opgeslagen waarde (exact)",
    "cmp_hex": "bits (hex)",
    "cmp_bits": "bits",
    "cmp_abs_error": "abs. fout",
    "cmp_rel_error": "rel. fout",
    "cmp_bits_per_value": "bits/waarde",
    "mem_note_stage3": (
        "stage 3 haalt v\u00f3\u00f3r gebruik de volledige gewichten van elke laag op "
        "(twee lagen tegelijk in het geheugen)"
    ),
    "mem_note_buckets": "buffers voor all-reduce / reduce-scatter (2 x 25 MB, de standaardgrootte van DDP)",
    "mem_note_adam8bit": (
        "8-bit Adam bewaart per blok van 2048 waarden een kleine FP32-schaalfactor; die is hier niet meegeteld"
    ),
    "mem_note_zero_one_gpu": (
        "ZeRO verdeelt over GPU's: op \u00e9\u00e9n GPU bespaart het niets, dus dit zijn de getallen van ZeRO-stage 0"
    ),
    "mem_err_count": (
        "{text} is niet te lezen als aantal parameters; schrijf een positief getal zoals 7e9, 7B, 125M of 1,3B"
    ),
    "mem_err_positive": "{what} moet een positief getal zijn, niet {value}",
    "mem_what_params": "het aantal parameters",
    "mem_what_batch": "de batchgrootte",
    "mem_what_seq_len": "de sequentielengte",
    "mem_err_gpus": "het aantal GPU's moet een geheel getal van minstens 1 zijn, niet {value}",
    "mem_err_zero": "de ZeRO-stage moet een van {stages} zijn, niet {value}",
    "mem_err_whole": "{what} moet een geheel getal van minstens 1 zijn, niet {value}",
    "mem_err_max": "{what} mag hoogstens {limit} zijn, niet {value}; staat er een cijfer te veel?",
    "mem_err_context": (
        "de sequentielengte {value} is langer dan de context van het model ({positions} posities); "
        "neem hoogstens {positions} tokens"
    ),
}

_TABLES = {"en": EN, "nl": NL}

#: The course's Dutch terminology: English term -> (Dutch term, what it means, in one Dutch sentence).
GLOSSARY: dict[str, tuple[str, str]] = {
    "quantization": (
        "kwantisatie",
        "Getallen met minder bits opslaan door ze af te ronden op een grover rooster van toegestane waarden.",
    ),
    "floating-point number": (
        "drijvendekommagetal",
        "Een getal dat als teken, exponent en mantisse is opgeslagen, zodat de komma met de exponent "
        "meeschuift: zo past zowel 0,0001 als 10 miljard in hetzelfde formaat.",
    ),
    "exponent": (
        "exponent",
        "Het deel van een drijvendekommagetal dat zegt met welke macht van twee de significand wordt "
        "vermenigvuldigd, en dus hoe groot het getal ongeveer is.",
    ),
    "mantissa / fraction": (
        "mantisse / fractie",
        "De bits achter de binaire komma van de significand: hoe meer mantissebits, hoe preciezer het getal.",
    ),
    "bit": ("bit", "De kleinste eenheid van informatie: een 0 of een 1."),
    "byte": ("byte", "Acht bits; geheugen en bestandsgroottes tellen we in bytes."),
    "memory": (
        "geheugen",
        "Waar een GPU of CPU de getallen bewaart waarmee hij rekent; bij het trainen is het GPU-geheugen "
        "vaak de krapste grens.",
    ),
    "weights": ("gewichten", "De parameters van het model, die tijdens het trainen worden geleerd."),
    "gradients": (
        "gradi\u00ebnten",
        "De afgeleiden van de loss naar elk gewicht: ze geven aan in welke richting de gewichten moeten veranderen.",
    ),
    "optimizer states": (
        "optimizer-states",
        "Wat de optimizer per parameter bijhoudt; bij Adam het momentum en de variantie, "
        "dus twee extra getallen per gewicht.",
    ),
    "master weights": (
        "masterkopie",
        "De FP32-kopie van de gewichten die mixed-precision training naast de BF16-kopie bewaart, "
        "en die de optimizer bijwerkt.",
    ),
    "activations": (
        "activaties",
        "De tussenresultaten van de voorwaartse stap, die bewaard blijven tot de achterwaartse stap ze nodig heeft.",
    ),
    "precision": (
        "precisie",
        "Hoe fijn een formaat getallen van elkaar kan onderscheiden: de relatieve afstand tussen twee "
        "opeenvolgende getallen die het kan opslaan.",
    ),
    "range": ("bereik", "Van het kleinste tot het grootste getal dat een formaat kan weergeven."),
    "rounding": (
        "afronden",
        "Een getal vervangen door de dichtstbijzijnde waarde die het formaat kan opslaan; "
        "bij gelijke afstand kiezen we de even waarde.",
    ),
    "scale factor": (
        "schaalfactor",
        "Het getal waardoor we de waarden delen voordat we kwantiseren (en waarmee we na afloop weer "
        "vermenigvuldigen), zodat ze het bereik van het formaat goed benutten.",
    ),
    "sign": ("teken", "Het bit dat zegt of een getal positief (0) of negatief (1) is."),
    "subnormal": (
        "subnormaal",
        "Een getal dat kleiner is dan het kleinste normale getal: zonder impliciete 1, en dus met minder "
        "significante bits.",
    ),
    "overflow": (
        "overflow",
        "Een waarde die groter is dan het grootste getal van het formaat; ze wordt oneindig, NaN, "
        "of bij verzadigen het maximum.",
    ),
    "saturate": (
        "verzadigen",
        "Bij overflow afkappen op het grootste getal dat het formaat kan opslaan, in plaats van oneindig "
        "of NaN te geven.",
    ),
    "quantize to INT8": (
        "kwantiseren naar INT8",
        "Waarden met een schaalfactor afbeelden op gehele getallen van 8 bits, van \u2212128 tot en met 127.",
    ),
    "quantization-aware training": (
        "kwantisatiebewuste training",
        "Trainen met afgeronde gewichten in de voorwaartse stap, zodat het model leert met de afronding te "
        "leven; de achterwaartse stap doet alsof er niet is afgerond.",
    ),
    "CUDA": (
        "CUDA",
        "Compute Unified Device Architecture: NVIDIA's platform (compiler, driver en bibliotheken) om op "
        "zijn GPU's te rekenen; PyTorch gebruikt het voor zijn GPU-bewerkingen.",
    ),
    "BF16": (
        "BF16",
        "Brain floating point: 16 bits met een exponent van 8 bits en 7 mantissebits; hetzelfde bereik als FP32, "
        "maar veel minder precisie.",
    ),
    "FP16": (
        "FP16",
        "Halve precisie volgens IEEE 754: 16 bits met een exponent van 5 bits en 10 mantissebits; preciezer dan "
        "BF16, maar met een veel kleiner bereik (hoogstens 65.504).",
    ),
    "FP32": (
        "FP32",
        "Enkele precisie volgens IEEE 754: 32 bits met een exponent van 8 bits en 23 mantissebits; "
        "het standaardformaat om in te trainen.",
    ),
    "mixed precision": (
        "mixed precision",
        "Rekenen met BF16- of FP16-kopie\u00ebn van gewichten, gradi\u00ebnten en activaties, en bijwerken met "
        "een FP32-masterkopie en FP32-optimizer-states.",
    ),
    "distributed training": (
        "gedistribueerd trainen",
        "E\u00e9n model tegelijk op meerdere GPU's of machines trainen, die onderling gradi\u00ebnten, "
        "gewichten of stukken van het model uitwisselen.",
    ),
}


def check_language(language: str) -> str:
    """The language's code if the widgets speak it ('en', 'nl'), else a ValueError naming the valid ones.

    Chapter 3, *Number formats*.
    """
    return choice(language, LANGUAGES, "language")


class _Fill(dict):
    """The values to fill a template with; a missing name is looked up in the language's table."""

    def __init__(self, values: dict, table: dict[str, str]) -> None:
        super().__init__(values)
        self.table = table

    def __missing__(self, name: str) -> str:
        if name in self.table:
            return self.table[name]
        raise KeyError(f"text needs a value for {{{name}}}")


def text(key: str, language: str = "en", **values: object) -> str:
    """One text in one language, its ``{placeholders}`` filled from ``values`` (or from the table's other entries).

    ``text("mem_what_batch", "nl")`` is ``'de batchgrootte'``; ``text("bx_err_unreadable", "nl", text="'pie'")``
    says in Dutch that 'pie' is no number, followed by the shared hint ``bx_err_hint``.

    Chapter 3, *Number formats*.
    """
    table = _TABLES[check_language(language)]
    if key not in table:
        raise KeyError(f"no text {key!r}; the keys are those of course_lib.numbers.i18n.EN")
    return table[key].format_map(_Fill(values, table))


def texts(prefix: str, language: str = "en") -> dict[str, str]:
    """Every entry whose key starts with ``prefix``, unfilled, in one language: what a JavaScript view receives.

    Chapter 3, *Number formats*.
    """
    table = _TABLES[check_language(language)]
    return {k: v for k, v in table.items() if k.startswith(prefix)}


def localise_number(formatted: str, language: str = "en") -> str:
    """A number written the English way ('1,234.5', '3.140625') written the language's way ('1.234,5', '3,140625').

    Chapter 3, *Number formats*.
    """
    table = _TABLES[check_language(language)]
    return formatted.translate(str.maketrans({",": table["thousands_separator"], ".": table["decimal_point"]}))


def decimal(x: float, digits: int, language: str = "en") -> str:
    """``x`` with ``digits`` decimals and thousands separators, as the language writes it.

    ``decimal(24.5, 1, "nl")`` is ``'24,5'``, ``decimal(1234.5, 2, "nl")`` is ``'1.234,50'``;
    in English ``'24.5'`` and ``'1,234.50'``.

    Chapter 3, *Number formats*.
    """
    if isinstance(digits, bool) or not isinstance(digits, int) or digits < 0:
        raise ValueError(f"digits must be a whole number >= 0, got {digits!r}")
    return localise_number(f"{x:,.{digits}f}", language)

