"""The training planner's texts in English and Dutch, and :func:`text` that fills them
in.

Chapters 2, 9, 10, 11 and 12 meet them through the planner
(:mod:`course_lib.planner.model`, its command line and its view). Every key starts with ``plan_``. :data:`PLAN_EN` and
:data:`PLAN_NL` have the same keys in the same order and follow the rules of
:mod:`course_lib.numbers.i18n`'s tables (plain ``{name}`` placeholders, the same in both
languages; Dutch terms from its glossary); the language is checked by
:func:`course_lib.numbers.i18n.check_language` and numbers are written the language's
way by :func:`course_lib.numbers.i18n.localise_number`. They live here rather than in
``i18n.py``'s tables because that module is near the length a module may have, and its
tests require every key there to be used by a widget of its own folder. The
``plan_what_`` texts name an input inside a sentence, the ``plan_label_`` texts name it
next to its box. The ``plan_err_`` texts, one line per bad input, are
:mod:`course_lib.planner.refusals`'.
"""

from __future__ import annotations

from course_lib.numbers import i18n
from course_lib.planner.refusals import REFUSALS_EN, REFUSALS_NL

__all__ = ["PLAN_EN", "PLAN_NL", "text", "texts"]

#: English, less the refusals.
_WORDS_EN: dict[str, str] = {
    # What each input is called inside a sentence (an error message)
    "plan_what_model": "model",
    "plan_what_params": "number of parameters",
    "plan_what_layers": "number of layers",
    "plan_what_hidden": "hidden size",
    "plan_what_heads": "number of attention heads",
    "plan_what_kv_heads": "number of key-value heads",
    "plan_what_mlp": "width of the SwiGLU MLP (0: a 4h-wide GELU MLP)",
    "plan_what_experts": "number of experts",
    "plan_what_top_k": "number of experts per token (top-k)",
    "plan_what_expert_params": "parameters inside the experts",
    "plan_what_vocab": "vocabulary size",
    "plan_what_seq_len": "sequence length",
    "plan_what_precision": "precision",
    "plan_what_optimizer": "optimizer",
    "plan_what_gpu": "GPU type",
    "plan_what_gpu_memory_gb": "GPU memory (GB)",
    "plan_what_gpu_tflops": "GPU peak (TFLOP/s)",
    "plan_what_gpu_hbm_tbs": "GPU memory bandwidth (TB/s)",
    "plan_what_gpus_per_node": "number of GPUs per node",
    "plan_what_nodes": "number of nodes",
    "plan_what_node_link": "link inside a node",
    "plan_what_network_link": "link between nodes",
    "plan_what_node_alpha_us": "latency inside a node (µs)",
    "plan_what_node_beta_gbs": "bandwidth inside a node (GB/s)",
    "plan_what_net_alpha_us": "latency between nodes (µs)",
    "plan_what_net_beta_gbs": "bandwidth between nodes (GB/s)",
    "plan_what_zero": "ZeRO stage",
    "plan_what_shard": "sharding factor",
    "plan_what_zero3_live": "number of parameters ZeRO 3 keeps gathered",
    "plan_what_offload": "CPU offload",
    "plan_what_tp": "tensor-parallel degree",
    "plan_what_tp_overlap": "share of tensor parallelism's communication hidden",
    "plan_what_sequence_parallel": "sequence parallelism",
    "plan_what_cp": "context-parallel degree",
    "plan_what_pp": "pipeline-parallel degree",
    "plan_what_virtual_stages": "number of virtual stages",
    "plan_what_edge_layers": "layers of the first and last stage",
    "plan_what_ep": "expert-parallel degree",
    "plan_what_ep_overlap": "share of expert parallelism's all-to-alls hidden",
    "plan_what_micro_batches": "number of micro-batches",
    "plan_what_checkpointing": "activation checkpointing",
    "plan_what_flash_attention": "fused attention",
    "plan_what_dropout": "dropout",
    "plan_what_global_batch": "global batch (sequences)",
    "plan_what_tokens": "number of tokens to train on",
    "plan_what_mfu": "MFU of the matrix products",
    "plan_label_model": "Model",
    "plan_label_params": "Parameters",
    "plan_label_layers": "Layers",
    "plan_label_hidden": "Hidden size",
    "plan_label_heads": "Attention heads",
    "plan_label_kv_heads": "Key-value heads",
    "plan_label_mlp": "SwiGLU width (0: GELU)",
    "plan_label_experts": "Experts",
    "plan_label_top_k": "Experts per token",
    "plan_label_expert_params": "Expert parameters",
    "plan_label_vocab": "Vocabulary",
    "plan_label_seq_len": "Sequence length",
    "plan_label_precision": "Precision",
    "plan_label_optimizer": "Optimizer",
    "plan_label_gpu": "GPU",
    "plan_label_gpu_memory_gb": "Memory (GB)",
    "plan_label_gpu_tflops": "Peak (TFLOP/s)",
    "plan_label_gpu_hbm_tbs": "HBM bandwidth (TB/s)",
    "plan_label_gpus_per_node": "GPUs per node",
    "plan_label_nodes": "Nodes",
    "plan_label_node_link": "Link in a node",
    "plan_label_network_link": "Link between nodes",
    "plan_label_zero": "ZeRO stage",
    "plan_label_shard": "Sharding factor",
    "plan_label_zero3_live": "ZeRO 3 live params (0: FSDP)",
    "plan_label_offload": "CPU offload",
    "plan_label_tp": "Tensor parallel",
    "plan_label_tp_overlap": "TP comm. hidden (0-1)",
    "plan_label_sequence_parallel": "Sequence parallel (with TP)",
    "plan_label_cp": "Context parallel",
    "plan_label_pp": "Pipeline stages",
    "plan_label_virtual_stages": "Virtual stages",
    "plan_label_edge_layers": "End-stage layers",
    "plan_label_ep": "Expert parallel",
    "plan_label_ep_overlap": "EP all-to-alls hidden (0-1)",
    "plan_label_micro_batches": "Micro-batches",
    "plan_label_checkpointing": "Activation checkpointing",
    "plan_label_flash_attention": "Fused attention",
    "plan_label_dropout": "Dropout",
    "plan_label_global_batch": "Global batch (sequences)",
    "plan_label_tokens": "Tokens to train on",
    "plan_label_mfu": "MFU of the matrix products",
    "plan_custom": "custom",
    "plan_auto": "(auto)",
    "plan_option_checkpointing_none": "none",
    "plan_option_checkpointing_full": "full (each layer keeps its input)",
    "plan_option_checkpointing_selective": "selective (torchtitan's op-level policy)",
    "plan_option_checkpointing_attention": "attention (Megatron-LM's selective: scores "
                                           "recomputed)",
    "plan_heading_model": "Model and data",
    "plan_heading_hardware": "Hardware",
    "plan_heading_strategy": "Strategy",
    # Results
    "plan_heading_memory": "Memory per GPU",
    "plan_heading_time": "Time per step",
    "plan_more_time": "Time per step, days and GPU-hours: open",
    "plan_mem_parameters": "parameters",
    "plan_mem_gradients": "gradients",
    "plan_mem_optimizer": "optimizer states and master weights",
    "plan_mem_activations": "activations",
    "plan_mem_buffers": "buffers (buckets, gathered layers)",
    "plan_mem_cuda_context": "CUDA context",
    "plan_mem_total": "total",
    "plan_mem_margin": "allocator margin",
    "plan_fits": "fits: {total} GB of the {usable} GB one {gpu} leaves for tensors",
    "plan_no_fit": (
        "does not fit: {total} GB against the {usable} GB one {gpu} leaves for tensors"
    ),
    "plan_change_zero": "cheapest change that fits: ZeRO stage {start} to {end}",
    "plan_change_checkpointing": (
        "cheapest change that fits: turn activation checkpointing on"
    ),
    "plan_change_selective": (
        "cheapest change that fits: selective activation checkpointing "
        "(torchtitan's op-level policy)"
    ),
    "plan_change_full": (
        "cheapest change that fits: full activation checkpointing (each layer keeps only "
        "its input)"
    ),
    "plan_change_tp": (
        "cheapest change that fits: tensor-parallel degree {start} to {end}"
    ),
    "plan_change_pp": "cheapest change that fits: pipeline stages {start} to {end}",
    "plan_change_nodes": (
        "cheapest change that fits: {start} to {end} nodes ({gpus} GPUs)"
    ),
    "plan_change_none": (
        "no single change fits: combine several (ZeRO 3, checkpointing, more GPUs) or "
        "take a GPU with more memory"
    ),
    "plan_host": "kept on the host by CPU offload: {host} GB per GPU",
    "plan_time_compute": "compute",
    "plan_time_tp": "tensor-parallel all-reduces",
    "plan_time_pp": "pipeline sends",
    "plan_time_cp": "context-parallel K/V all-gathers",
    "plan_time_ep": "expert-parallel all-to-alls",
    "plan_time_bubble": "pipeline bubble",
    "plan_time_dp": "data-parallel communication, exposed",
    "plan_time_offload": "CPU offload copies",
    "plan_time_step": "step",
    "plan_seconds": "seconds",
    "plan_share": "share",
    "plan_layout": (
        "{gpus} GPUs = tensor {tp}{sp} x pipeline {pp} x data {dp}; {micro} "
        "micro-batches of {micro_batch} sequence(s) per replica and step"
    ),
    "plan_layout_cp": (
        "{gpus} GPUs = tensor {tp}{sp} x context {cp} x pipeline {pp} x data {dp}; "
        "{micro} micro-batches of {micro_batch} sequence(s) per replica and step"
    ),
    "plan_sp_on": "sequence parallel",
    "plan_sp_off": "without sequence parallelism",
    "plan_bubble": "bubble (p - 1) / (m + p - 1) = {share} with p = {pp}, m = {micro}",
    "plan_cp_traffic": (
        "context parallelism over {cp} GPUs: per layer and micro-batch each sends "
        "{mb} MB of keys and values (all-gather, forward) and as much of their "
        "gradients (reduce-scatter, backward) on {link}: {seconds} s per step, none "
        "hidden"
    ),
    "plan_ep_traffic": (
        "expert parallelism over {ep} GPUs: {count} all-to-alls per layer and "
        "micro-batch (dispatch and combine, forward and backward), each sending {mb} MB "
        "per GPU on {link}: {seconds} s per step not hidden behind compute; {active} of "
        "the {params} "
        "parameters active per token"
    ),
    "plan_train": (
        "{days} days on {gpus} GPUs, {gpu_hours} GPU-hours, for {tokens} tokens"
    ),
    "plan_train_one": "{days} days on 1 GPU, {gpu_hours} GPU-hours, for {tokens} tokens",
    "plan_mfu": (
        "achieved MFU {achieved}, end to end as papers publish it (assumed {assumed} "
        "in the matrix products)"
    ),
    "plan_dp_hidden": (
        "data-parallel communication {dp} s, of which {hidden} s hide behind compute"
    ),
    "plan_fallback": (
        "Training planner: {summary}. It needs JavaScript: run the cell (in a trusted "
        "notebook) to change the inputs."
    ),
    "plan_could_not_start": "The planner could not start: {error}",
    "plan_cannot": "Cannot plan:",
}

#: Dutch, less the refusals. Terms follow the course's glossary.
_WORDS_NL: dict[str, str] = {
    "plan_what_model": "het model",
    "plan_what_params": "het aantal parameters",
    "plan_what_layers": "het aantal lagen",
    "plan_what_hidden": "de verborgen dimensie",
    "plan_what_heads": "het aantal attention-heads",
    "plan_what_kv_heads": "het aantal key-value-heads",
    "plan_what_mlp": "de breedte van de SwiGLU-MLP (0: een 4h brede GELU-MLP)",
    "plan_what_experts": "het aantal experts",
    "plan_what_top_k": "het aantal experts per token (top-k)",
    "plan_what_expert_params": "het aantal parameters in de experts",
    "plan_what_vocab": "de grootte van de woordenschat",
    "plan_what_seq_len": "de sequentielengte",
    "plan_what_precision": "de precisie",
    "plan_what_optimizer": "de optimizer",
    "plan_what_gpu": "het GPU-type",
    "plan_what_gpu_memory_gb": "het GPU-geheugen (GB)",
    "plan_what_gpu_tflops": "de piekrekenkracht van de GPU (TFLOP/s)",
    "plan_what_gpu_hbm_tbs": "de geheugenbandbreedte van de GPU (TB/s)",
    "plan_what_gpus_per_node": "het aantal GPU's per node",
    "plan_what_nodes": "het aantal nodes",
    "plan_what_node_link": "de verbinding binnen een node",
    "plan_what_network_link": "de verbinding tussen nodes",
    "plan_what_node_alpha_us": "de latentie binnen een node (µs)",
    "plan_what_node_beta_gbs": "de bandbreedte binnen een node (GB/s)",
    "plan_what_net_alpha_us": "de latentie tussen nodes (µs)",
    "plan_what_net_beta_gbs": "de bandbreedte tussen nodes (GB/s)",
    "plan_what_zero": "de ZeRO-stage",
    "plan_what_shard": "de shardingfactor",
    "plan_what_zero3_live": "het aantal parameters dat ZeRO 3 opgehaald houdt",
    "plan_what_offload": "CPU-offload",
    "plan_what_tp": "de tensor-parallelle graad",
    "plan_what_tp_overlap": (
        "het verborgen deel van de communicatie van het tensorparallellisme"
    ),
    "plan_what_sequence_parallel": "het sequentieparallellisme",
    "plan_what_cp": "de context-parallelle graad",
    "plan_what_pp": "de pipeline-parallelle graad",
    "plan_what_virtual_stages": "het aantal virtuele stages",
    "plan_what_edge_layers": "het aantal lagen van de eerste en laatste stage",
    "plan_what_ep": "de expert-parallelle graad",
    "plan_what_ep_overlap": (
        "het verborgen deel van de all-to-alls van het expertparallellisme"
    ),
    "plan_what_micro_batches": "het aantal micro-batches",
    "plan_what_checkpointing": "activatie-checkpointing",
    "plan_what_flash_attention": "gefuseerde attention",
    "plan_what_dropout": "de dropout",
    "plan_what_global_batch": "de globale batch (sequenties)",
    "plan_what_tokens": "het aantal tokens om op te trainen",
    "plan_what_mfu": "de MFU van de matrixproducten",
    # The view's labels
    "plan_label_model": "Model (voorgedefinieerd of eigen)",
    "plan_label_params": "Aantal parameters",
    "plan_label_layers": "Aantal lagen",
    "plan_label_hidden": "Verborgen dimensie",
    "plan_label_heads": "Attention-heads",
    "plan_label_kv_heads": "Key-value-heads",
    "plan_label_mlp": "SwiGLU-breedte (0: GELU)",
    "plan_label_experts": "Aantal experts",
    "plan_label_top_k": "Experts per token (top-k)",
    "plan_label_expert_params": "Parameters in experts",
    "plan_label_vocab": "Woordenschat",
    "plan_label_seq_len": "Sequentielengte",
    "plan_label_precision": "Precisie",
    "plan_label_optimizer": "Optimalisatiemethode",
    "plan_label_gpu": "GPU-type",
    "plan_label_gpu_memory_gb": "Geheugen (GB)",
    "plan_label_gpu_tflops": "Piek (TFLOP/s)",
    "plan_label_gpu_hbm_tbs": "HBM-bandbreedte (TB/s)",
    "plan_label_gpus_per_node": "GPU's per node",
    "plan_label_nodes": "Aantal nodes",
    "plan_label_node_link": "Verbinding in een node",
    "plan_label_network_link": "Verbinding tussen nodes",
    "plan_label_zero": "ZeRO-stage",
    "plan_label_shard": "Shardingfactor",
    "plan_label_zero3_live": "Levend bij ZeRO 3 (0: FSDP)",
    "plan_label_offload": "CPU-offload",
    "plan_label_tp": "Tensorparallel",
    "plan_label_tp_overlap": "Verborgen TP-comm. (0-1)",
    "plan_label_sequence_parallel": "Sequentieparallel (met TP)",
    "plan_label_cp": "Contextparallel",
    "plan_label_pp": "Pipelinestages",
    "plan_label_virtual_stages": "Virtuele stages",
    "plan_label_edge_layers": "Lagen eindstages",
    "plan_label_ep": "Expertparallel",
    "plan_label_ep_overlap": "Verborgen EP-all-to-alls (0-1)",
    "plan_label_micro_batches": "Aantal micro-batches",
    "plan_label_checkpointing": "Activatie-checkpointing",
    "plan_label_flash_attention": "Gefuseerde attention",
    "plan_label_dropout": "Met dropout",
    "plan_label_global_batch": "Globale batch (sequenties)",
    "plan_label_tokens": "Trainingstokens",
    "plan_label_mfu": "MFU van de matrixproducten",
    "plan_custom": "zelf invullen",
    "plan_auto": "(automatisch)",
    "plan_option_checkpointing_none": "geen",
    "plan_option_checkpointing_full": "volledig (elke laag bewaart zijn invoer)",
    "plan_option_checkpointing_selective": "selectief (torchtitans beleid per operatie)",
    "plan_option_checkpointing_attention": "attentie (Megatron-LM's selectieve: scores "
                                           "opnieuw berekend)",
    "plan_heading_model": "Model en data",
    "plan_heading_hardware": "De hardware",
    "plan_heading_strategy": "Strategie",
    "plan_heading_memory": "Geheugen per GPU",
    "plan_heading_time": "Tijd per stap",
    "plan_more_time": "Tijd per stap, dagen en GPU-uren: openen",
    "plan_mem_parameters": "parameters (gewichten)",
    "plan_mem_gradients": "gradi\u00ebnten",
    "plan_mem_optimizer": "optimizer-states en masterkopie",
    "plan_mem_activations": "activaties",
    "plan_mem_buffers": "buffers (buckets, opgehaalde lagen)",
    "plan_mem_cuda_context": "CUDA-context",
    "plan_mem_total": "totaal",
    "plan_mem_margin": "marge van de allocator",
    "plan_fits": (
        "past: {total} GB van de {usable} GB die een {gpu} vrijlaat voor tensors"
    ),
    "plan_no_fit": (
        "past niet: {total} GB tegen de {usable} GB die een {gpu} vrijlaat voor "
        "tensors"
    ),
    "plan_change_zero": "goedkoopste wijziging die past: ZeRO-stage {start} naar {end}",
    "plan_change_checkpointing": (
        "goedkoopste wijziging die past: zet activatie-checkpointing aan"
    ),
    "plan_change_selective": (
        "goedkoopste wijziging die past: selectieve activatie-checkpointing "
        "(torchtitans beleid per operatie)"
    ),
    "plan_change_full": (
        "goedkoopste wijziging die past: volledige activatie-checkpointing (elke laag "
        "bewaart alleen zijn invoer)"
    ),
    "plan_change_tp": (
        "goedkoopste wijziging die past: tensor-parallelle graad {start} naar {end}"
    ),
    "plan_change_pp": (
        "goedkoopste wijziging die past: pipelinestages {start} naar {end}"
    ),
    "plan_change_nodes": (
        "goedkoopste wijziging die past: {start} naar {end} nodes ({gpus} GPU's)"
    ),
    "plan_change_none": (
        "geen enkele wijziging alleen past: combineer er meer (ZeRO 3, checkpointing, "
        "meer GPU's) of neem een GPU met meer geheugen"
    ),
    "plan_host": "door CPU-offload op de host bewaard: {host} GB per GPU",
    "plan_time_compute": "rekenen",
    "plan_time_tp": "all-reduces van het tensorparallellisme",
    "plan_time_pp": "berichten tussen pipelinestages",
    "plan_time_cp": "all-gathers van K/V van het contextparallellisme",
    "plan_time_ep": "all-to-alls van het expertparallellisme",
    "plan_time_bubble": "pipelinebubbel",
    "plan_time_dp": "communicatie van het dataparallellisme, niet verborgen",
    "plan_time_offload": "kopie\u00ebn van de CPU-offload",
    "plan_time_step": "stap",
    "plan_seconds": "seconden",
    "plan_share": "aandeel",
    "plan_layout": (
        "{gpus} GPU's = tensor {tp}{sp} x pipeline {pp} x data {dp}; {micro} "
        "micro-batches van {micro_batch} sequentie(s) per replica en stap"
    ),
    "plan_layout_cp": (
        "{gpus} GPU's = tensor {tp}{sp} x context {cp} x pipeline {pp} x data {dp}; "
        "{micro} micro-batches van {micro_batch} sequentie(s) per replica en stap"
    ),
    "plan_sp_on": "sequentieparallel",
    "plan_sp_off": "zonder sequentieparallellisme",
    "plan_bubble": "bubbel (p - 1) / (m + p - 1) = {share} met p = {pp}, m = {micro}",
    "plan_cp_traffic": (
        "contextparallellisme over {cp} GPU's: per laag en micro-batch stuurt elke "
        "GPU {mb} MB aan keys en values (all-gather, voorwaarts) en evenveel van hun "
        "gradi\u00ebnten (reduce-scatter, achterwaarts) over {link}: {seconds} s per "
        "stap, niets verborgen"
    ),
    "plan_ep_traffic": (
        "expertparallellisme over {ep} GPU's: {count} all-to-alls per laag en "
        "micro-batch (verzenden en terugsturen, voorwaarts en achterwaarts), elk {mb} MB "
        "per GPU over {link}: {seconds} s per stap niet achter het rekenen verborgen; "
        "{active} van de "
        "{params} parameters actief per token"
    ),
    "plan_train": (
        "{days} dagen op {gpus} GPU's, {gpu_hours} GPU-uren, voor {tokens} tokens"
    ),
    "plan_train_one": "{days} dagen op 1 GPU, {gpu_hours} GPU-uren, voor {tokens} tokens",
    "plan_mfu": (
        "behaalde MFU {achieved}, van begin tot eind zoals papers die publiceren "
        "(aangenomen {assumed} in de matrixproducten)"
    ),
    "plan_dp_hidden": (
        "communicatie van het dataparallellisme {dp} s, waarvan {hidden} s achter het "
        "rekenen verdwijnt"
    ),
    "plan_fallback": (
        "Trainingsplanner: {summary}. Hiervoor is JavaScript nodig: voer de cel uit "
        "(in een vertrouwd notebook) om de invoer te veranderen."
    ),
    "plan_could_not_start": "De planner kon niet starten: {error}",
    "plan_cannot": "Plannen niet mogelijk:",
}

#: English: what each input is called, labels, results, and the refusals.
PLAN_EN: dict[str, str] = {**_WORDS_EN, **REFUSALS_EN}
#: Dutch, for the Dutch edition, in the same order.
PLAN_NL: dict[str, str] = {**_WORDS_NL, **REFUSALS_NL}

_TABLES = {"en": PLAN_EN, "nl": PLAN_NL}


def text(key: str, language: str = "en", **values: object) -> str:
    """One of the planner's texts in ``language`` ('en' or 'nl'), its placeholders
    filled.

    Used by the library's other modules.
    """
    return _TABLES[i18n.check_language(language)][key].format(**values)


def texts(language: str = "en") -> dict[str, str]:
    """Every planner text in one language, unfilled, with the language's decimal point
    and thousands separator: what the planner's JavaScript receives.

    Used by the library's other modules.
    """
    language = i18n.check_language(language)
    return {**_TABLES[language], "decimal_point": i18n.text("decimal_point", language),
            "thousands_separator": i18n.text("thousands_separator", language)}
