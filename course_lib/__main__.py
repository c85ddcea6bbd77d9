"""Command line of the course: ``python -m course_lib check | memory ... | plan ... |
prepare | train-course-model | grade | learner-copies``."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

from course_lib.base.tables import Table
from course_lib.numbers import i18n, memory

#: The memory command's flags that take a number: argparse reads a negative one (-7e9) as a flag.
_NUMBER_FLAGS = ("--params", "--batch", "--seq-len", "--gpus", "--zero")
#: The plan command's flags: (flag, the planner's input, help); every value reaches the
#: planner as typed, so that its checks (and their messages) are the planner's own.
_PLAN_FLAGS = (
    ("--preset", "model", "a published model or 'custom' (default llama2-7b)"),
    ("--params", "params", "parameters, e.g. 7e9 or 7B (custom; overrides a preset)"),
    ("--layers", "layers", "transformer layers"),
    ("--hidden", "hidden", "hidden size"),
    ("--heads", "heads", "attention heads"),
    ("--kv-heads", "kv_heads", "key-value heads (grouped-query attention; default: the "
     "preset's, else one per head)"),
    ("--mlp", "mlp", "width of a gated SwiGLU MLP, as Llama's (default: the preset's, "
     "else 0: a 4h-wide GELU MLP)"),
    ("--vocab", "vocab", "vocabulary size"),
    ("--experts", "experts", "experts of a mixture of experts (default: the preset's, else "
     "1, dense)"),
    ("--top-k", "top_k", "experts each token is routed to (default: the preset's, else 1)"),
    ("--expert-params", "expert_params", "parameters inside the routed experts, e.g. 650B "
     "(default: the preset's, else 0)"),
    ("--seq-len", "seq_len", "tokens per sequence (default: the preset's)"),
    ("--precision", "precision", "fp32, bf16-mixed (default), fp16-mixed or bf16"),
    ("--optimizer", "optimizer", "adam (default), adam-8bit, sgd-momentum or sgd"),
    ("--gpu", "gpu", "a100-40, a100-80, h100 (default), l40s or custom"),
    ("--gpu-memory", "gpu_memory_gb", "GPU memory in GB (--gpu custom)"),
    ("--gpu-tflops", "gpu_tflops", "GPU peak in TFLOP/s at the precision (--gpu custom)"),
    ("--gpu-hbm", "gpu_hbm_tbs", "GPU memory bandwidth in TB/s (--gpu custom)"),
    ("--gpus-per-node", "gpus_per_node", "GPUs per node (default 8)"),
    ("--nodes", "nodes", "nodes (default 1)"),
    ("--node-link", "node_link", "link in a node (default: the GPU's own; or custom)"),
    ("--network-link", "network_link", "between nodes (default ib-ndr; or custom)"),
    ("--node-alpha-us", "node_alpha_us", "latency per step in a node, microseconds (--node-link custom)"),
    ("--node-beta-gbs", "node_beta_gbs", "bandwidth inside a node, GB/s per GPU (--node-link custom)"),
    ("--net-alpha-us", "net_alpha_us", "latency per step between nodes, microseconds "
     "(--network-link custom)"),
    ("--net-beta-gbs", "net_beta_gbs", "bandwidth between nodes, GB/s per GPU (--network-link custom)"),
    ("--zero", "zero", "ZeRO stage 0-3 (0 = DDP, 3 = FSDP full sharding; default 0)"),
    ("--shard", "shard", "hybrid sharding: shard over groups of this many replicas"),
    ("--zero3-live", "zero3_live", "ZeRO 3 as DeepSpeed runs it: at most this many "
     "parameters gathered at once (1e9 by default there; default 0: FSDP's whole "
     "layers)"),
    ("--tp", "tp", "tensor-parallel degree, inside a node (default 1)"),
    ("--tp-overlap", "tp_overlap", "share of tensor parallelism's all-reduces hidden "
     "behind compute, at most its time, 0-1 (default 0)"),
    ("--cp", "cp", "context-parallel degree: each sequence split over this many GPUs "
     "(default 1)"),
    ("--pp", "pp", "pipeline stages (default 1)"),
    ("--virtual-stages", "virtual_stages", "interleaved 1F1B: model chunks per GPU "
     "(default 1, plain 1F1B)"),
    ("--edge-layers", "edge_layers", "layers of the first and of the last stage, when "
     "fewer than the others (default: equal stages)"),
    ("--ep", "ep", "expert-parallel degree, carved from the data-parallel GPUs (default 1)"),
    ("--ep-overlap", "ep_overlap", "share of expert parallelism's all-to-alls hidden "
     "behind compute, at most its time, 0-1 (default 0)"),
    ("--micro-batches", "micro_batches", "micro-batches per replica and step (default: "
     "one sequence each)"),
    ("--global-batch", "global_batch", "sequences per step (default: the preset's)"),
    ("--tokens", "tokens", "tokens to train on, e.g. 2T (default: the preset's, or 20 "
     "per parameter)"),
    ("--mfu", "mfu", "share of the peak the matrix products reach (default 0.4); the "
     "plan prints the end-to-end MFU papers publish"),
)
#: The plan command's flags that describe a custom GPU or link: (the choice, its flags).
_CUSTOM_ONLY = (
    ("--gpu", ("--gpu-memory", "--gpu-tflops", "--gpu-hbm")),
    ("--node-link", ("--node-alpha-us", "--node-beta-gbs")),
    ("--network-link", ("--net-alpha-us", "--net-beta-gbs")),
)
_PLAN_SWITCHES = (
    ("--offload", "offload", True, "CPU offload: optimizer states, master weights"),
    ("--no-flash-attention", "flash_attention", False,
     "keep the s x s attention scores (no fused attention)"),
    ("--dropout", "dropout", True, "count dropout's masks"),
    ("--no-sequence-parallel", "sequence_parallel", False, "tensor parallelism without "
     "sequence parallelism: the norms' and dropout's activations whole on every TP GPU"),
)


#: The plan command's --checkpointing: alone, full; or one of the planner's settings, as typed.
_PLAN_CHECKPOINTING = ("--checkpointing", "checkpointing", True,
                       "activation checkpointing: full when given alone, or none, full, "
                       "selective (torchtitan's op-level policy) or attention "
                       "(Megatron-LM's selective: attention's scores recomputed)")


def _join_negative_numbers(argv: Sequence[str] | None) -> list[str]:
    """``--params -7e9`` as ``--params=-7e9``, the same to argparse, so that the value reaches its check."""
    out: list[str] = []
    for arg in sys.argv[1:] if argv is None else argv:
        numeric = _NUMBER_FLAGS + tuple(flag for flag, _, _ in _PLAN_FLAGS)
        number = arg.startswith("-") and memory.read_count(arg) is not None
        if out and out[-1] in numeric and number:
            out[-1] = f"{out[-1]}={arg}"
        else:
            out.append(arg)
    return out


class _Once(argparse.Action):
    """Store a flag's value; a flag given twice is refused (argparse alone silently keeps the last)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        given = vars(namespace).setdefault("_given", set())
        if self.dest in given:
            raise argparse.ArgumentError(self, "given twice; give each flag once")
        given.add(self.dest)
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


def _whole_count(what: str, limit: int | None = None):
    """A parser for --batch or --seq-len with course_lib.numbers.memory's checks and messages."""

    def parse(text: str) -> int:
        try:
            value: float = int(text)
        except ValueError:
            try:
                value = float(text)  # 1e5
            except ValueError:
                message = f"{i18n.text(what)} must be a whole number >= 1, got {text!r}"
                raise argparse.ArgumentTypeError(message) from None
            value = int(value) if value.is_integer() else value
        try:
            return int(memory.check_count(value, what, limit))
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    return parse


def _count(text: str) -> float:
    try:
        return memory.parse_count(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _positive_int(what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a whole number >= 1, got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{what} must be a whole number >= 1, got {value}")
        return value

    return parse


def _zero_stage(text: str) -> int:
    valid = ", ".join(map(str, memory.ZERO_STAGES))
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"ZeRO stage must be one of {valid}, got {text!r}") from None
    if value not in memory.ZERO_STAGES:
        raise argparse.ArgumentTypeError(f"ZeRO stage must be one of {valid}, got {value}")
    return value


def _name(options, what: str):
    canonical = {name.lower(): name for name in options}

    def parse(text: str) -> str:
        key = text.strip().lower()
        if key not in canonical:
            raise argparse.ArgumentTypeError(f"unknown {what} {text!r}; valid values: {', '.join(options)}")
        return canonical[key]

    return parse


class _Parser(argparse.ArgumentParser):
    """An argument parser that takes no abbreviated option: ``--gpus`` is not ``--gpus-per-node``."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with its commands: check, memory, prepare, train-course-model, grade, learner-copies."""
    parser = _Parser(prog="python -m course_lib", description=__doc__)
    sub = parser.add_subparsers(
        dest="command", required=True,
        metavar="{check,memory,plan,prepare,train-course-model,grade,learner-copies}")

    sub.add_parser("grade", add_help=False,
                   help="run learners' notebooks headless without their solutions: exercise, pass / not yet, feedback")
    sub.add_parser("learner-copies", add_help=False,
                   help="write the notebooks without their solution cells, exercise outputs cleared")
    check = sub.add_parser("check", help="print Python, torch, transformers, CPU/GPU, network and Colab status")
    check.add_argument("--offline", action="store_true", help="skip the network probe")

    sub.add_parser(
        "prepare",
        help="train (or load from the cache) every model the notebooks use, with progress bars",
        description="Train the course tokenizer, chapter 1's tiny models and scaling study, and the "
        "course model into the course cache, so that notebooks and the book only load them.",
    )

    mem = sub.add_parser(
        "memory",
        help="estimate training memory per GPU as a breakdown",
        description="Estimate training memory per GPU (weights, gradients, master weights, optimizer "
        "states, activations, temporaries) and say which GPUs it fits on.",
    )
    group = mem.add_mutually_exclusive_group()
    group.add_argument("--params", type=_count, action=_Once, help="parameter count, e.g. 7e9, 7B, 125M (default 1B)")
    group.add_argument(
        "--preset", type=_name(memory.MODEL_PRESETS, "preset"), action=_Once,
        help=f"a named shape: {', '.join(memory.MODEL_PRESETS)}",
    )
    mem.add_argument(
        "--precision",
        action=_Once,
        type=_name(memory.PRECISIONS, "precision"),
        default="fp32",
        help=f"one of {', '.join(memory.PRECISIONS)} (default fp32)",
    )
    mem.add_argument(
        "--optimizer",
        action=_Once,
        type=_name(memory.OPTIMIZERS, "optimizer"),
        default="adam",
        help=f"one of {', '.join(memory.OPTIMIZERS)} (default adam)",
    )
    mem.add_argument("--batch", type=_whole_count("mem_what_batch"), action=_Once, default=1,
                     help="sequences per GPU (default 1)")
    mem.add_argument("--seq-len", type=_whole_count("mem_what_seq_len", memory.MAX_SEQ_LEN), action=_Once,
                     help="tokens per sequence (default 2048, or a preset's positions if fewer)")
    mem.add_argument("--gpus", type=_positive_int("number of GPUs"), action=_Once, default=1,
                     help="data-parallel GPUs (default 1)")
    mem.add_argument("--zero", type=_zero_stage, action=_Once, default=0,
                     help="ZeRO stage 0-3; 3 = FSDP full sharding (default 0; on one GPU it shards nothing)")
    mem.add_argument("--checkpointing", action=_Once, nargs=0, const=True, default=False,
                     help="activation checkpointing (full recomputation)")

    planning = sub.add_parser(
        "plan",
        help="plan a training run: memory per GPU, the cheapest change that fits, step "
        "time, days",
        description="Will it fit, how fast, on what: memory per GPU by component "
        "against the GPU's usable memory, the cheapest change that makes it fit, the "
        "step time split into compute, communication and the pipeline bubble, and days "
        "and GPU-hours to train.",
    )
    for flag, dest, text in _PLAN_FLAGS:
        planning.add_argument(flag, dest=dest, action=_Once, help=text)
    for flag, dest, value, text in _PLAN_SWITCHES:
        planning.add_argument(flag, dest=dest, action=_Once, nargs=0, const=value,
                              default=None, help=text)
    flag, dest, value, text = _PLAN_CHECKPOINTING
    planning.add_argument(flag, dest=dest, action=_Once, nargs="?", const=value, default=None,
                          metavar="{none,full,selective,attention}", help=text)
    planning.add_argument("--language", action=_Once, default="en",
                          type=_name(i18n.LANGUAGES, "language"),
                          help="en (default) or nl")

    course = sub.add_parser(
        "train-course-model",
        help="train the course model (tiny GPT-2, about 3 minutes on 2 CPU cores) and save it",
        description="Train the course model from scratch (seeded, deterministic) and save it as safetensors "
        "with its config, tokenizer, training record and model card (README.md).",
    )
    course.add_argument("--output", default=None, help="directory to write (default: the course cache, "
                        "where course_lib.text.course_model.course_model() looks); an old course "
                        "model there is replaced, a folder holding other files never is")
    course.add_argument("--overwrite", action="store_true",
                        help="also replace a model directory that is not a course model (no training.json)")
    return parser


def run_memory(args: argparse.Namespace) -> str:
    """The memory command's report as text."""
    if args.preset:
        shape = given = memory.MODEL_PRESETS[args.preset]
        n_params = shape.n_params
    else:
        n_params = args.params or 1e9
        shape, given = memory.shape_for_params(n_params), None  # a guess: its positions are no limit
    seq_len = args.seq_len or min(2048, shape.positions or 2048)
    if given is not None:
        try:
            memory.check_context(given, seq_len)
        except ValueError as err:
            raise ValueError(f"argument --seq-len: {err} with --preset {args.preset}") from None
    b = memory.training_memory(
        n_params,
        precision=args.precision,
        optimizer=args.optimizer,
        batch=args.batch,
        seq_len=seq_len,
        gpus=args.gpus,
        zero_stage=args.zero,
        shape=given,
        activation_checkpointing=args.checkpointing,
    )
    head = (
        f"{n_params / 1e9:,.3g}B parameters ({shape.n_layers} layers, hidden {shape.hidden}, {shape.n_heads} heads), "
        f"{b.precision}, {b.optimizer}, batch {args.batch} x {seq_len} tokens, "
        f"{b.gpus} GPU(s), ZeRO stage {b.zero_stage}"
    )
    parts = [
        head,
        "",
        str(Table(["component", "GB per GPU", "bytes/param", "share"], memory.breakdown_rows(b))),
        "",
        str(Table(["GPU", "verdict", "memory used"], memory.verdict_rows(b))),
        "",
        f"Rule of thumb (24 bytes/param, one GPU): {memory.gb(memory.rule_of_thumb(n_params)):,.2f} GB",
    ]
    parts += [f"Note: {note}" for note in b.notes]
    return "\n".join(parts)


def run_plan(args: argparse.Namespace) -> str:
    """The plan command's report as text (the planner checks every value as typed)."""
    from course_lib.planner import model, report

    names = [dest for _, dest, _ in _PLAN_FLAGS]
    names += [dest for _, dest, _, _ in (*_PLAN_SWITCHES, _PLAN_CHECKPOINTING)]
    inputs = {name: getattr(args, name) for name in names
              if getattr(args, name) is not None}
    check_custom_only(args)
    return report.report(model.plan(language=args.language, **inputs))


def check_custom_only(args: argparse.Namespace) -> None:
    """Refuse a custom GPU's or link's figure (``--node-alpha-us``) without ``--node-link custom``.

    The planner's view shows those boxes for a custom choice only; on the command line such a
    flag would otherwise change a published GPU or link without a word.
    """
    from course_lib.planner import texts

    dest = {flag: name for flag, name, _ in _PLAN_FLAGS}
    for choice, flags in _CUSTOM_ONLY:
        if str(getattr(args, dest[choice]) or "").strip().lower() == "custom":
            continue
        for flag in flags:
            if getattr(args, dest[flag]) is not None:
                raise ValueError(texts.text("plan_err_custom_only", args.language, flag=flag,
                                            choice=choice, first=", ".join(flags[:-1]),
                                            second=flags[-1]))


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments and run the chosen command; bad input exits with status 2 and a message."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["grade"], ["learner-copies"]):
        from course_lib.exercises import grading

        return grading.main(argv)
    args = build_parser().parse_args(_join_negative_numbers(argv))
    if args.command == "check":
        from course_lib.base.env import check_env

        report = check_env(online_probe=not args.offline)
        if report.torch and report.transformers:  # the saved models, as the notebooks load them
            from course_lib.prepare import model_problems

            report.problems += model_problems()
        print(report)
        return 0 if report.ok else 1
    if args.command == "prepare":
        from course_lib.base.env import CacheError
        from course_lib.prepare import prepare
        from course_lib.text.models import CheckpointError

        try:
            prepare()
        except (CacheError, CheckpointError, TimeoutError) as err:
            print(f"python -m course_lib prepare: error: {err}", file=sys.stderr)
            return 1
        return 0
    if args.command == "train-course-model":
        from course_lib.text.course_model import build_course_model

        try:
            build_course_model(args.output, overwrite=args.overwrite)
        except (ValueError, OSError) as err:
            print(f"python -m course_lib train-course-model: error: {err}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("python -m course_lib train-course-model: interrupted; nothing was written", file=sys.stderr)
            return 130
        return 0
    if args.command == "plan":
        try:
            print(run_plan(args))
        except ValueError as err:
            print(f"python -m course_lib plan: error: {err}", file=sys.stderr)
            return 2
        return 0
    try:
        print(run_memory(args))
    except ValueError as err:
        print(f"python -m course_lib memory: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
