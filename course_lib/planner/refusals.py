"""The training planner's refusals: one line per bad input, in English and Dutch.

Chapters 2, 9, 10, 11 and 12 meet them when a plan cannot be planned
(:func:`course_lib.planner.inputs.check` raises them, ``planner.js`` throws the same).
Each says what is wrong and what to do, naming the valid values where there are few.
:mod:`course_lib.planner.texts` joins them to the planner's other texts; they live apart
because they are a second idea (what the planner refuses, and why) and the texts would
pass the length a module may have. The rules are the texts': plain ``{name}``
placeholders, the same keys in the same order in both languages.
"""

from __future__ import annotations

__all__ = ["REFUSALS_EN", "REFUSALS_NL"]

#: English.
REFUSALS_EN: dict[str, str] = {
    "plan_err_number": (
        "{what} must be a number, got {value}; write it with a decimal point, e.g. "
        "0.4, 7B or 2e12"
    ),
    "plan_err_whole": "{what} must be a whole number from {low} to {high}, got {value}",
    "plan_err_positive": (
        "{what} must be a number above 0 and at most {high}, got {value}"
    ),
    "plan_err_nonneg": "{what} must be a number from 0 to {high}, got {value}",
    "plan_err_bool": "{what} must be true or false, got {value}",
    "plan_err_choice": "unknown {what} {value}; valid values: {options}",
    "plan_err_switch": (
        "{what} must be one of {options} (false: {off}, true: {on}), got {value}"
    ),
    "plan_err_missing": "a custom model needs its {what}: give it, or choose a preset",
    "plan_err_missing_gpu": (
        "a custom GPU needs its {what}: give it, or choose a GPU type"
    ),
    "plan_err_gpu_memory": (
        "GPU memory must be more than {least} MB: the CUDA context ({context} MB) and the "
        "allocator's margin ({margin} %) leave nothing for tensors below that"
    ),
    "plan_err_missing_link": (
        "a custom link needs its {what}: give it, or choose a link"
    ),
    "plan_err_custom_only": (
        "{flag} is for {choice} custom only: add {choice} custom (which needs {first} and "
        "{second}), or leave {flag} out to keep the published figures"
    ),
    "plan_err_heads": (
        "the hidden size {hidden} does not split into {heads} attention heads; "
        "use a number of heads that divides {hidden}"
    ),
    "plan_err_gpus_max": (
        "{gpus} GPUs are more than the planner takes ({limit}); use fewer nodes"
    ),
    "plan_err_tp_node": (
        "tensor parallelism stays inside a node: the tensor-parallel degree {tp} must "
        "divide the {per_node} GPUs per node; use one of {options}"
    ),
    "plan_err_tp_split": (
        "the tensor-parallel degree {tp} must divide the hidden size {hidden} and the "
        "{heads} attention heads; use one of {options}"
    ),
    "plan_err_pp_layers": (
        "{pp} pipeline stages for {layers} layers: every stage needs at least one "
        "layer; use at most {layers} stages"
    ),
    "plan_err_mp_gpus": (
        "tensor x pipeline degree {tp} x {pp} = {mp} does not divide the {gpus} GPUs; "
        "use degrees whose product divides {gpus}"
    ),
    "plan_err_shard_zero": (
        "a sharding factor needs ZeRO stage 1, 2 or 3; stage 0 (DDP) shards nothing"
    ),
    "plan_err_shard": (
        "the sharding factor {shard} must divide the {dp} data-parallel replicas; "
        "use one of {options}"
    ),
    "plan_err_batch_dp": (
        "a global batch of {batch} sequences does not split over the {dp} "
        "data-parallel replicas; use a multiple of {dp}"
    ),
    "plan_err_batch": (
        "a global batch of {batch} sequences does not split into {dp} replicas x "
        "{micro} micro-batches; use a multiple of {unit}"
    ),
    "plan_err_virtual_pp": (
        "{virtual} virtual stages interleave a pipeline: use 2 or more pipeline stages, "
        "or 1 virtual stage"
    ),
    "plan_err_virtual_layers": (
        "{pp} stages x {virtual} virtual stages need a layer each, and there are "
        "{layers}; use at most {most} virtual stages"
    ),
    "plan_err_edge_pp": (
        "fewer layers on the first and last stage need a middle stage: use 3 or more "
        "pipeline stages (not {pp}), or leave the edge layers out"
    ),
    "plan_err_edge_virtual": (
        "{edge} layers on the first and on the last stage leave more than one of their "
        "{virtual} virtual stages without a layer (one may hold the embedding or the "
        "head alone); use at least {least} edge layers, or fewer virtual stages"
    ),
    "plan_err_edge_layers": (
        "{edge} layers on the first and on the last stage leave too few of the {layers} "
        "for the other {pp} - 2 stages; use at most {most}"
    ),
    "plan_err_kv_heads": (
        "{kv_heads} key-value heads do not split the {heads} attention heads into equal "
        "groups; use one of {options}"
    ),
    "plan_err_top_k": (
        "each token goes to {top_k} experts, more than the {experts} there are; use a "
        "top-k from 1 to {experts}"
    ),
    "plan_err_expert_params_dense": (
        "a dense model (1 expert) has no parameters inside experts: give 0, or give the "
        "number of experts"
    ),
    "plan_err_expert_params": (
        "a mixture of {experts} experts needs the parameters inside its experts: above 0 "
        "and below the {params} parameters of the whole model"
    ),
    "plan_err_cp_seq": (
        "context parallelism cuts each sequence into 2 x {cp} = {chunks} mirrored chunks "
        "(causal load balancing), and {seq_len} tokens are no multiple of {chunks}; use "
        "a context-parallel degree from {options}"
    ),
    "plan_err_cp_gpus": (
        "tensor x context x pipeline degree {tp} x {cp} x {pp} = {mp} does not divide the "
        "{gpus} GPUs; use degrees whose product divides {gpus}"
    ),
    "plan_err_ep_dense": (
        "expert parallelism spreads experts, and a dense model (1 expert) has none: give "
        "the number of experts, or use expert-parallel degree 1 (not {ep})"
    ),
    "plan_err_ep": (
        "the expert-parallel degree {ep} must divide the {experts} experts and the "
        "{group} GPUs of the data and context dimensions it is carved from; use one of "
        "{options}"
    ),
}

#: Dutch, for the Dutch edition.
REFUSALS_NL: dict[str, str] = {
    "plan_err_number": (
        "{what} moet een getal zijn, niet {value}; schrijf het met een punt als "
        "decimaalteken, bijvoorbeeld 0.4, 7B of 2e12"
    ),
    "plan_err_whole": (
        "{what} moet een geheel getal van {low} tot en met {high} zijn, niet {value}"
    ),
    "plan_err_positive": (
        "{what} moet een getal boven 0 en hoogstens {high} zijn, niet {value}"
    ),
    "plan_err_nonneg": (
        "{what} moet een getal van 0 tot en met {high} zijn, niet {value}"
    ),
    "plan_err_bool": "{what} moet waar of onwaar zijn (true of false), niet {value}",
    "plan_err_choice": (
        "onbekende waarde {value} voor {what}; geldige waarden: {options}"
    ),
    "plan_err_switch": (
        "{what} moet een van {options} zijn (false: {off}, true: {on}), niet {value}"
    ),
    "plan_err_missing": (
        "een eigen model heeft {what} nodig: vul het in, of kies een bekend model"
    ),
    "plan_err_missing_gpu": (
        "een eigen GPU heeft {what} nodig: vul het in, of kies een GPU-type"
    ),
    "plan_err_gpu_memory": (
        "het GPU-geheugen moet meer dan {least} MB zijn: de CUDA-context ({context} MB) en de "
        "marge van de allocator ({margin} %) laten daaronder niets over voor tensors"
    ),
    "plan_err_missing_link": (
        "een eigen verbinding heeft {what} nodig: vul het in, of kies een verbinding"
    ),
    "plan_err_custom_only": (
        "{flag} geldt alleen bij {choice} custom: voeg {choice} custom toe (dat vraagt {first} "
        "en {second}), of laat {flag} weg om de gepubliceerde cijfers te houden"
    ),
    "plan_err_heads": (
        "de verborgen dimensie {hidden} is niet te verdelen over {heads} "
        "attention-heads; kies een aantal heads dat een deler is van {hidden}"
    ),
    "plan_err_gpus_max": (
        "{gpus} GPU's zijn meer dan de planner aankan ({limit}); neem minder nodes"
    ),
    "plan_err_tp_node": (
        "tensorparallellisme blijft binnen een node: de tensor-parallelle graad {tp} "
        "moet een deler zijn van de {per_node} GPU's per node; kies een van {options}"
    ),
    "plan_err_tp_split": (
        "de tensor-parallelle graad {tp} moet een deler zijn van de verborgen dimensie "
        "{hidden} en van de {heads} attention-heads; kies een van {options}"
    ),
    "plan_err_pp_layers": (
        "{pp} pipelinestages voor {layers} lagen: elke stage heeft minstens een laag "
        "nodig; neem hoogstens {layers} stages"
    ),
    "plan_err_mp_gpus": (
        "tensor- x pipelinegraad {tp} x {pp} = {mp} is geen deler van de {gpus} GPU's; "
        "kies graden waarvan het product een deler is van {gpus}"
    ),
    "plan_err_shard_zero": (
        "een shardingfactor vraagt ZeRO-stage 1, 2 of 3; stage 0 (DDP) verdeelt niets"
    ),
    "plan_err_shard": (
        "de shardingfactor {shard} moet een deler zijn van de {dp} data-parallelle "
        "replica's; kies een van {options}"
    ),
    "plan_err_batch_dp": (
        "een globale batch van {batch} sequenties is niet te verdelen over de {dp} "
        "data-parallelle replica's; neem een veelvoud van {dp}"
    ),
    "plan_err_batch": (
        "een globale batch van {batch} sequenties is niet te verdelen in {dp} "
        "replica's x {micro} micro-batches; neem een veelvoud van {unit}"
    ),
    "plan_err_virtual_pp": (
        "{virtual} virtuele stages verweven een pipeline: neem 2 of meer "
        "pipelinestages, of 1 virtuele stage"
    ),
    "plan_err_virtual_layers": (
        "{pp} stages x {virtual} virtuele stages hebben elk een laag nodig, en er zijn "
        "er {layers}; neem hoogstens {most} virtuele stages"
    ),
    "plan_err_edge_pp": (
        "minder lagen op de eerste en laatste stage vragen een middelste stage: neem "
        "3 of meer pipelinestages (niet {pp}), of laat de randlagen weg"
    ),
    "plan_err_edge_virtual": (
        "{edge} lagen op de eerste en op de laatste stage laten meer dan een van hun "
        "{virtual} virtuele stages zonder laag (een mag alleen de embedding of de head "
        "dragen); neem minstens {least} randlagen, of minder virtuele stages"
    ),
    "plan_err_edge_layers": (
        "{edge} lagen op de eerste en op de laatste stage laten te weinig van de "
        "{layers} over voor de andere {pp} - 2 stages; neem hoogstens {most}"
    ),
    "plan_err_kv_heads": (
        "{kv_heads} key-value-heads verdelen de {heads} attention-heads niet in gelijke "
        "groepen; kies een van {options}"
    ),
    "plan_err_top_k": (
        "elk token gaat naar {top_k} experts, meer dan de {experts} die er zijn; kies een "
        "top-k van 1 tot en met {experts}"
    ),
    "plan_err_expert_params_dense": (
        "een dicht model (1 expert) heeft geen parameters in experts: geef 0, of geef het "
        "aantal experts"
    ),
    "plan_err_expert_params": (
        "een mixture van {experts} experts heeft de parameters in zijn experts nodig: "
        "boven 0 en onder de {params} parameters van het hele model"
    ),
    "plan_err_cp_seq": (
        "contextparallellisme snijdt elke sequentie in 2 x {cp} = {chunks} gespiegelde "
        "stukken (causale lastverdeling), en {seq_len} tokens zijn geen veelvoud van "
        "{chunks}; kies een context-parallelle graad uit {options}"
    ),
    "plan_err_cp_gpus": (
        "tensor- x context- x pipelinegraad {tp} x {cp} x {pp} = {mp} is geen deler van "
        "de {gpus} GPU's; kies graden waarvan het product een deler is van {gpus}"
    ),
    "plan_err_ep_dense": (
        "expertparallellisme verdeelt experts, en een dicht model (1 expert) heeft er "
        "geen: geef het aantal experts, of neem expert-parallelle graad 1 (niet {ep})"
    ),
    "plan_err_ep": (
        "de expert-parallelle graad {ep} moet een deler zijn van de {experts} experts en "
        "van de {group} GPU's van de data- en contextdimensie waaruit hij komt; kies een "
        "van {options}"
    ),
}
