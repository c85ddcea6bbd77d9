md('''
# Kwantisatie: minder bits per getal

*Nederlandstalige editie.* Wie een groot taalmodel probeert te trainen, of het zelfs maar wil
laden, loopt vroeg of laat tegen dezelfde foutmelding aan: `CUDA out of memory`. De GPU heeft
niet genoeg geheugen voor alle getallen die het model nodig heeft. In dit hoofdstuk rekenen we
uit hoeveel geheugen dat is, en bekijken we de eerste manier om het te verkleinen: *kwantisatie*,
het opslaan van elk getal in minder bits. Alle getallen op deze pagina worden live berekend met
dezelfde bibliotheek als de Engelstalige hoofdstukken 2 tot en met 4; waar de collegeaantekeningen
een vuistregel geven, staat het precieze getal ernaast.
''')

md('''
**Leerdoelen.** Na dit hoofdstuk kun je

* uitrekenen hoeveel geheugen de gewichten van een model innemen, en wat training daar bovenop
  vraagt;
* uitleggen hoe FP32, FP16, BF16 en INT8 een getal opslaan (teken, exponent, mantisse) en wat
  dat kost aan precisie en bereik;
* met de bitverkenner zelf bits omzetten en zien wat er met π gebeurt;
* inschatten wanneer een model niet meer op één GPU past.
''')

code('''
import math

import matplotlib.pyplot as plt

from course_lib import formats, i18n, memory
from course_lib.bit_explorer import bit_explorer, compare_formats
from course_lib.tables import Table
from course_lib.widgets import memory_calculator

nl = i18n.decimal  # getallen in lopende tekst: met een decimale komma
''')

md('''
## 1 · Hoeveel geheugen kost één miljard parameters?

Een parameter wordt meestal opgeslagen als een 32-bits floating-pointgetal (FP32): vier bytes.
Eén miljard parameters kosten dus vier miljard bytes, vier gigabyte, en dan hebben we het alleen
nog over de gewichten:
''')

code('''
# NBVAL_CHECK_OUTPUT
N = 1e9
gewichten = memory.gb(memory.weight_memory(N, "fp32"))
print(f"1 miljard parameters x 4 bytes = {nl(gewichten, 2, 'nl')} GB")
''')

md('''
Wie het model wil trainen, heeft meer nodig: de gradiënten, de twee optimalisatie-states van
Adam (het eerste en tweede moment), de activaties van de voorwaartse stap en tijdelijke waarden.
De collegeaantekeningen vatten dat samen in een vuistregel: zo'n 20 extra bytes per parameter,
samen ongeveer zes keer de gewichten, dus ongeveer 24 GB voor één miljard parameters in FP32.
De schatter van hoofdstuk 2 telt elk onderdeel apart:
''')

code('''
# NBVAL_CHECK_OUTPUT
schatting = memory.training_memory(N, "fp32", "adam", batch=1, seq_len=2048)
namen = {"weights": "gewichten", "gradients": "gradiënten",
         "master_weights": "masterkopie", "optimizer_states": "optimalisatie-states",
         "activations": "activaties", "temporaries": "tijdelijke waarden"}
rijen = [[namen[k], nl(v / N, 1, "nl"), nl(memory.gb(v), 1, "nl")]
         for k, v in schatting.components().items() if v]
rijen.append(["totaal", nl(schatting.total / N, 1, "nl"),
              nl(memory.gb(schatting.total), 1, "nl")])
rijen.append(["vuistregel (24 bytes)", "24,0", nl(memory.gb(memory.rule_of_thumb(N)), 1, "nl")])
Table(["onderdeel", "bytes per parameter", "GB"], rijen,
      title="1 miljard parameters, FP32, Adam, batch 1 van 2048 tokens")
''')

md('''
De vuistregel klopt in orde van grootte, maar het precieze getal hangt af van de activaties, en
die groeien met de batchgrootte en de lengte van de reeksen: de gewichten, gradiënten en
optimalisatie-states samen zijn precies 16 bytes per parameter, de rest verschilt per
trainingsopzet. Hoe dan ook: dit past niet op een consumentenkaart, en ook in een datacenter is
het krap als je op één GPU wilt trainen. Probeer het zelf met de geheugencalculator (een ander
aantal parameters, een andere precisie of optimalisatiemethode):
''')

code('''
memory_calculator(params="1B", precision="fp32", optimizer="adam", language="nl")
''')

md('''
## 2 · FP32, FP16, BF16 en INT8

Kwantisatie verkleint het geheugen door elk getal in minder bits op te slaan: niet in 32-bits
floating point, maar in 16-bits floating point of in 8-bits gehele getallen. De datatypes die
deep-learningbibliotheken daarvoor gebruiken:

* **FP32**: 32 bits, volledige precisie;
* **FP16** en **BF16**: 16 bits, halve precisie;
* **INT8**: 8-bits gehele getallen.

Een floating-pointgetal bestaat uit drie velden: één bit voor het *teken* (0 is positief,
1 negatief), een aantal bits voor de *exponent* en de rest voor de *mantisse* (ook fractie of
significand genoemd), de bits die de precisie bepalen. Hoeveel bits elk veld krijgt, bepaalt
het bereik en de precisie:
''')

code('''
# NBVAL_CHECK_OUTPUT
rijen = []
for naam in ("fp32", "fp16", "bf16"):
    f = formats.get_format(naam)
    rijen.append([naam.upper(), f.total_bits, 1, f.exponent_bits, f.mantissa_bits,
                  f"{f.max:.4g}", f"{f.epsilon:.3g}"])
for naam in ("int8",):
    f = formats.get_format(naam)
    rijen.append([naam.upper(), f.total_bits, 1, "-", "-", f"{f.min} tot {f.max}", "1"])
Table(["formaat", "bits", "teken", "exponent", "mantisse", "grootste waarde",
       "afstand tot het volgende getal na 1"], rijen)
''')

md('''
Het bereik van FP32 loopt dus van ongeveer −3,4 · 10³⁸ tot 3,4 · 10³⁸; FP16 houdt op bij
65.504. BF16 houdt de acht exponentbits van FP32 en daarmee vrijwel hetzelfde bereik, maar heeft
maar zeven mantissebits: het is een ingekorte FP32.

## 3 · π in elk formaat

Neem π en sla het op in elk formaat. De tabel laat per formaat de opgeslagen waarde zien, de bits
en de fout ten opzichte van π:
''')

code('''
# NBVAL_CHECK_OUTPUT
pi = compare_formats("pi", ["fp32", "fp16", "bf16", "int8"])
pi
''')

code('''
# NBVAL_CHECK_OUTPUT
opgeslagen = {rij.format.name: rij.value for rij in pi.rows}
for naam, waarde in opgeslagen.items():
    goed = next(i for i, (a, b) in enumerate(zip(repr(waarde), repr(math.pi)))
                if a != b) - len("3.")
    print(f"{naam.upper():>4}: {waarde!r:<20} {max(goed, 0)} decimalen goed")
''')

md('''
De collegeaantekeningen zeggen dat FP32 π opslaat als 3,1415927410125732 en FP16 als 3,140625,
en dat er dan "nog maar zes cijfers na de komma" over zijn. De tabel bevestigt beide waarden,
met een kanttekening: van die zes cijfers zijn er maar twee goed (3,14). FP16 bewaart zo'n
drie significante decimalen, FP32 zo'n zeven. BF16 komt bij π op precies dezelfde waarde uit als
FP16: met zeven mantissebits is het nog grover, maar 3,140625 ligt toevallig in beide roosters.
INT8 maakt er 3 van: "twee of drie", schrijven de aantekeningen; afronden naar het dichtstbijzijnde
gehele getal geeft 3. Een byte in plaats van vier, maar alles achter de komma is weg.

De aantekeningen noemen BF16 ook "niet goed geschikt voor integer-berekeningen". Dat klopt in
deze zin: met zeven mantissebits zijn gehele getallen boven 256 niet meer allemaal te
representeren.
''')

code('''
# NBVAL_CHECK_OUTPUT
for geheel in (255, 256, 257, 1000, 1001):
    print(f"{geheel:>5} in BF16: {formats.round_to_format(geheel, 'bf16'):g}")
''')

md('''
## 4 · De bitverkenner

Klik op een bit om het om te zetten, of typ een ander getal in het tekstvak (bijvoorbeeld
`1e-8`, `70000` of `0x4248`). De verkenner laat zien welke waarde het formaat opslaat, hoe groot
de fout is en wat de buren zijn. Hij werkt ook in het boek zonder Python-kernel:
''')

code('''
bit_explorer("pi", "fp16", language="nl")
''')

md('''
## 5 · Het model van één miljard parameters in 16 en 8 bits

Terug naar het geheugen. Met 16 bits per gewicht halveert het geheugen voor de gewichten, met
8 bits halveert het nog een keer. Het model heeft nog steeds één miljard parameters; alleen elk
getal is kleiner:
''')

code('''
# NBVAL_CHECK_OUTPUT
rijen = []
for naam in ("fp32", "fp16", "bf16", "int8"):
    gb = memory.gb(memory.weight_memory(N, naam))
    rijen.append([naam.upper(), memory.BYTES_PER_DTYPE[naam], nl(gb, 1, "nl")])
Table(["formaat", "bytes per gewicht", "GB voor 1 miljard gewichten"], rijen)
''')

code('''
fig, ax = plt.subplots(figsize=(6, 3.5))
formaten = ["FP32", "FP16", "BF16", "INT8"]
waarden = [memory.gb(memory.weight_memory(N, f.lower())) for f in formaten]
ax.bar(formaten, waarden, color=["C0", "C1", "C2", "C3"])
for x, y in enumerate(waarden):
    ax.annotate(f"{nl(y, 0, 'nl')} GB", (x, y), ha="center", va="bottom")
ax.set_ylabel("geheugen voor de gewichten (GB)")
ax.set_title("Eén miljard parameters in vier formaten")
fig.tight_layout()
''')

md('''
De aantekeningen zeggen dat kwantisatie "dezelfde mate van besparing" geeft bij training. Dat
klopt voor de gewichten en de activaties, maar niet voor alles: wie met BF16 traint, houdt een
FP32-masterkopie van de gewichten en de optimalisatie-states in FP32 bij (*mixed precision*,
hoofdstuk 3). Per parameter:
''')

code('''
# NBVAL_CHECK_OUTPUT
rijen = []
for precisie in ("fp32", "bf16-mixed"):
    b = memory.training_memory(N, precisie, "adam", batch=1, seq_len=2048)
    rijen.append([precisie, nl(b.model_states / N, 0, "nl"),
                  nl(memory.gb(b.activations), 1, "nl"), nl(memory.gb(b.total), 1, "nl")])
Table(["precisie", "modeltoestand: bytes per parameter", "activaties (GB)", "totaal (GB)"],
      rijen, title="1 miljard parameters met Adam, batch 1 van 2048 tokens")
''')

md('''
De modeltoestand (gewichten, gradiënten, masterkopie en optimalisatie-states) blijft 16 bytes per
parameter; alleen de activaties halveren. Wie de training echt kleiner wil maken, moet verder:
de optimalisatie-states zelf kwantiseren, of ze verdelen over meerdere GPU's.

## 6 · Voorbij één GPU

Veel modellen hebben tegenwoordig meer dan 50 of zelfs 100 miljard parameters. De aantekeningen
spreken van "tot 500 keer meer geheugen" en "tienduizenden gigabytes". Met de schatter, in BF16
mixed precision en met Adam:
''')

code('''
# NBVAL_CHECK_OUTPUT
gpu = memory.GPUS[-1]  # 80 GiB
rijen = []
for n in (1e9, 7e9, 50e9, 100e9, 175e9):
    b = memory.training_memory(n, "bf16-mixed", "adam", batch=1, seq_len=2048)
    aantal = memory.gpus_to_train(n, gpu, activation_checkpointing=True)
    rijen.append([f"{n / 1e9:g} miljard", nl(memory.gb(b.total), 0, "nl"),
                  nl(b.total / memory.training_memory(1e9, "bf16-mixed").total, 0, "nl"),
                  aantal if aantal else "meer dan 4096"])
Table(["model", "geheugen op één GPU (GB)", "keer 1 miljard",
       "GPU's van 80 GiB (ZeRO-3, checkpointing)"], rijen,
      title="training met Adam in BF16 mixed precision, batch 1 per GPU")
''')

md('''
Honderd miljard parameters vragen bijna 2.000 GB, zo'n zeventig keer zoveel als één miljard
(de activaties groeien minder snel dan het aantal parameters). De "500 keer" en de
"tienduizenden gigabytes" van de aantekeningen horen bij modellen van vele honderden miljarden
parameters. Geen enkele GPU heeft zoveel geheugen: zulke modellen worden verdeeld over
tientallen GPU's of meer, elk met een deel van de modeltoestand (ZeRO-3) en met *activation
checkpointing*, dat activaties opnieuw berekent in plaats van ze te bewaren: gedistribueerd
trainen, hoofdstukken 8 en 9 van de Engelstalige editie.

## Samenvatting

* Eén miljard parameters in FP32 kosten 4 GB aan gewichten; training met Adam vraagt 16 bytes
  per parameter aan modeltoestand plus de activaties, samen in de orde van de 24 GB uit de
  vuistregel.
* Kwantisatie verkleint elk getal: FP16 en BF16 halveren het geheugen, INT8 deelt het door
  vier. Het kost precisie: π wordt 3,140625 in FP16 en BF16, en 3 in INT8.
* BF16 heeft het bereik van FP32 en weinig precisie; FP16 heeft meer precisie maar houdt op bij
  65.504.
* Mixed-precision training halveert de activaties, niet de modeltoestand.
* Modellen van tientallen miljarden parameters passen op geen enkele GPU: ze vragen
  gedistribueerd trainen.

## Woordenlijst

De termen van dit hoofdstuk, met het Engelse woord dat je in de literatuur tegenkomt:
''')

code('''
# NBVAL_CHECK_OUTPUT
Table(["Engels", "Nederlands", "betekenis"],
      [[en, term, uitleg] for en, (term, uitleg) in i18n.GLOSSARY.items()])
''')
