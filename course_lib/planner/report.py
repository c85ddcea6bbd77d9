"""The training planner's result as tables and sentences, in English or Dutch.

Chapters 2, 9, 10, 11 and 12 show it; the command line's ``plan`` prints :func:`report`.
Numbers inside sentences and tables follow the language (``24,5 GB`` in Dutch); the
names of models, GPUs and links stay as they are.
"""

from __future__ import annotations

import html

from course_lib.base.tables import Table
from course_lib.numbers import i18n
from course_lib.planner import recomputation, texts
from course_lib.planner.model import COMPONENTS, PlanResult, active_params

__all__ = ["memory_table", "report", "report_html", "sentences", "time_table"]

_TIMES = ("compute", "tp", "pp", "cp", "ep", "bubble", "dp_exposed", "offload")
_TIME_KEYS = {"compute": "plan_time_compute", "tp": "plan_time_tp",
              "pp": "plan_time_pp", "cp": "plan_time_cp", "ep": "plan_time_ep",
              "bubble": "plan_time_bubble",
              "dp_exposed": "plan_time_dp", "offload": "plan_time_offload"}


def _n(x: float, digits: int, language: str) -> str:
    return i18n.decimal(x, digits, language)


def _pct(x: float, digits: int, language: str) -> str:
    return i18n.localise_number(f"{x:.{digits}%}", language)


def _short(x: float, language: str) -> str:
    """A large count in words of thousands: 2T, 15.6T, 300B, 7.5M."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return i18n.localise_number(f"{x / scale:.3g}", language) + suffix
    return i18n.localise_number(f"{x:.3g}", language)


def memory_table(result: PlanResult) -> Table:
    """Memory per GPU by component (GB and share of the usable memory), with the total.

    Used by the library's other modules.
    """
    lang, m = result.language, result.memory

    def t(key: str) -> str:
        return texts.text(key, lang)

    rows = [[t(f"plan_mem_{name}"), _n(getattr(m, name) / 1e9, 2, lang),
             _pct(getattr(m, name) / m.usable, 0, lang)] for name in COMPONENTS[:-1]]
    rows.append([t("plan_mem_total"), _n(m.total / 1e9, 2, lang),
                 _pct(m.total / m.usable, 0, lang)])
    rows.append([t("plan_mem_cuda_context"), _n(m.cuda_context / 1e9, 2, lang), "-"])
    return Table([t("plan_heading_memory"), "GB", t("plan_share")], rows)


def time_table(result: PlanResult) -> Table:
    """One step's seconds by part (exposed communication only) and their shares.

    Used by the library's other modules.
    """
    lang, time = result.language, result.time
    rows = [[texts.text(_TIME_KEYS[name], lang), _n(getattr(time, name), 3, lang),
             _pct(getattr(time, name) / time.step, 1, lang)] for name in _TIMES]
    rows.append([texts.text("plan_time_step", lang), _n(time.step, 3, lang),
                 _pct(1, 1, lang)])
    headers = [texts.text(key, lang)
               for key in ("plan_heading_time", "plan_seconds", "plan_share")]
    return Table(headers, rows)


def _verdict(result: PlanResult) -> list[str]:
    lang, m, s = result.language, result.memory, result.setup
    gb = {"total": _n(m.total / 1e9, 2, lang), "usable": _n(m.usable / 1e9, 2, lang),
          "gpu": s.gpu_name}
    lines = [texts.text("plan_fits" if m.fits else "plan_no_fit", lang, **gb)]
    if not m.fits:
        c = result.change
        if c is None:
            lines.append(texts.text("plan_change_none", lang))
        else:
            gpus = i18n.localise_number(f"{c.gpus:,}", lang)
            lines.append(texts.text(f"plan_change_{c.kind}", lang, start=c.start,
                                    end=c.end, gpus=gpus))
    if m.host:
        lines.append(texts.text("plan_host", lang, host=_n(m.host / 1e9, 2, lang)))
    return lines


def _traffic(result: PlanResult) -> list[str]:
    """What context and expert parallelism send, per GPU, layer and micro-batch, where
    they are used."""
    lang, s, time = result.language, result.setup, result.time
    lines = []
    if s.cp > 1:
        link = s.node_link if s.tp * s.cp <= s.gpus_per_node else s.network_link
        lines.append(texts.text("plan_cp_traffic", lang, cp=s.cp,
                                mb=_n(time.cp_bytes / 1e6, 1, lang), link=link.name,
                                seconds=_n(time.cp, 3, lang)))
    if s.ep > 1:
        link = s.node_link if s.tp * s.ep <= s.gpus_per_node else s.network_link
        lines.append(texts.text("plan_ep_traffic", lang, ep=s.ep,
                                count=recomputation.collective_passes(s, "ep"),
                                mb=_n(time.ep_bytes / 1e6, 1, lang), link=link.name,
                                seconds=_n(time.ep, 3, lang),
                                active=_short(active_params(s), lang),
                                params=_short(s.params, lang)))
    return lines


def _sp(result: PlanResult) -> str:
    """Whether tensor parallelism runs with sequence parallelism, in brackets; "" at t 1."""
    s = result.setup
    if s.tp == 1:
        return ""
    key = "plan_sp_on" if s.sequence_parallel else "plan_sp_off"
    return f" ({texts.text(key, result.language)})"


def sentences(result: PlanResult) -> list[str]:
    """The verdict, the cheapest change, the layout, context and expert parallelism's
    traffic (where used), the bubble, the run and its MFU, as lines.

    Used by the library's other modules.
    """
    lang, s, time = result.language, result.setup, result.time

    def group(x: float) -> str:
        return i18n.localise_number(f"{x:,.0f}", lang)

    return [
        *_verdict(result),
        texts.text("plan_layout_cp" if s.cp > 1 else "plan_layout", lang,
                   gpus=group(s.gpus), tp=s.tp, cp=s.cp, pp=s.pp, sp=_sp(result),
                   dp=group(s.dp), micro=group(s.micro_batches),
                   micro_batch=group(s.micro_batch)),
        *_traffic(result),
        texts.text("plan_bubble", lang, share=_pct(time.bubble_share, 1, lang), pp=s.pp,
                  micro=group(s.micro_batches)),
        texts.text("plan_dp_hidden", lang, dp=_n(time.dp, 3, lang),
                  hidden=_n(time.dp - time.dp_exposed, 3, lang)),
        texts.text("plan_train_one" if s.gpus == 1 else "plan_train", lang,
                   days=_n(result.days, 1, lang),
                   gpus=group(s.gpus), gpu_hours=group(result.gpu_hours),
                   tokens=_short(s.tokens, lang)),
        texts.text("plan_mfu", lang, achieved=_pct(result.achieved_mfu, 1, lang),
                  assumed=_pct(s.mfu, 0, lang)),
    ]


def _head(result: PlanResult) -> list[str]:
    s = result.setup
    hybrid = f" (shard {s.shard})" if s.zero and s.shard != s.dp * s.cp else ""
    live = (f", at most {_short(s.zero3_live, 'en')} parameters gathered"
            if s.zero == 3 and s.zero3_live else "")
    strategy = f"ZeRO {s.zero}{hybrid}{live}"
    spread = [f"{name} {n}" for name, n in (("CP", s.cp), ("EP", s.ep)) if n > 1]
    recompute = {"full": ["checkpointing"], "selective": ["selective checkpointing"],
                 "attention": ["attention recomputed"]}.get(s.checkpointing, [])
    flags = [strategy, *spread, *recompute] + [name for name, on in (
        ("offload", s.offload), ("fused attention", s.flash_attention),
        ("dropout", s.dropout)) if on]
    return [
        f"{s.name}: {_short(s.params, 'en')} parameters ({s.layers} layers, hidden "
        f"{s.hidden}, {s.heads} heads ({s.kv_heads} key-value), "
        f"{f'SwiGLU MLP {s.mlp:,}, ' if s.mlp else ''}vocabulary "
        f"{s.vocab:,}{_mixture(result)}), sequences of {s.seq_len:,} tokens",
        f"{s.precision}, {s.optimizer}; {s.gpus:,} x {s.gpu_name} "
        f"({s.gpus_per_node} per node, {s.nodes:,} node(s); {s.node_link.name} inside, "
        f"{s.network_link.name} between)",
        f"{', '.join(flags)}; global batch {s.global_batch:,} sequences; "
        f"MFU {s.mfu:.0%}",
    ]


def _mixture(result: PlanResult) -> str:
    s = result.setup
    if s.experts == 1:
        return ""
    return (f"; {s.experts} experts, top-{s.top_k}, "
            f"{_short(active_params(s), 'en')} active")


def report(result: PlanResult) -> str:
    """The whole plan as text: inputs, memory table, verdict, time table, the run.

    Used by the library's other modules.
    """
    lines = sentences(result)
    n_verdict = len(_verdict(result))
    return "\n".join([*_head(result), "", str(memory_table(result)), "",
                      *lines[:n_verdict], "", str(time_table(result)), "",
                      *lines[n_verdict:]])


def report_html(result: PlanResult) -> str:
    """The plan as HTML: the same tables and sentences.

    Used by the library's other modules.
    """
    lines = sentences(result)
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    head = "<br>".join(html.escape(line) for line in _head(result))
    return (f"<div class='course-plan'><p>{head}</p>"
            f"{memory_table(result)._repr_html_()}"
            f"{time_table(result)._repr_html_()}<ul>{items}</ul></div>")
