"""Part III, *Beyond one GPU* (chapters 8 to 10): real ``torch.distributed`` on CPU processes (gloo) or GPUs (NCCL).

* :mod:`~course_lib.parallel.launch`: start N worker processes as ``torchrun`` does, from a
  notebook (free port, rank-prefixed output, a timeout, no orphans), and join the process group
  inside a worker, whether ``launch`` or ``torchrun`` started it.
* :mod:`~course_lib.parallel.warm_ranks`: ``launch`` forks its ranks from a server that
  imported torch once, so that a launch does not pay Python's start and torch's import again.
* :mod:`~course_lib.parallel.ring`: the ring all-reduce written with send and receive, and its
  traffic per rank.
* :mod:`~course_lib.parallel.traffic`: a DDP communication hook that counts the buckets, the
  bytes and the timings of every all-reduce.
* :mod:`~course_lib.parallel.links`: a link emulator that slows this machine's collectives to
  what NVLink, InfiniBand or Ethernet would add (alpha + n / beta per message).
* :mod:`~course_lib.parallel.buckets`: DDP's gradient buckets watched over an emulated link:
  overlap with the backward pass, ``bucket_cap_mb``, buckets rebuilt after the first step.
* :mod:`~course_lib.parallel.ddp`: data-parallel training of the course's GPT-2 with
  ``DistributedDataParallel``, through the course's one training loop; also a script for torchrun.
* :mod:`~course_lib.parallel.cost_model`: the alpha-beta model of communication and the links
  of real machines, to predict how data parallelism scales on GPUs (and what offload copies cost).
* :mod:`~course_lib.parallel.collectives`: counts the bytes of every all-gather, reduce-scatter,
  all-reduce and broadcast a training step calls.
* :mod:`~course_lib.parallel.zero`: ZeRO-1 and ZeRO-2 written by hand (reduce-scatter, AdamW on
  a shard, all-gather), equal to DDP bit for bit.
* :mod:`~course_lib.parallel.wire`: the bytes each rank really sends, the ring formulas, and the
  time FSDP waits on its all-gathers.
* :mod:`~course_lib.parallel.fsdp`: ZeRO stages 1-3 with PyTorch's own tools (DDP,
  ``ZeroRedundancyOptimizer``, FSDP2 ``fully_shard``, hybrid sharding, CPU offload, mixed
  precision), measured per rank; also a script for torchrun.
* :mod:`~course_lib.parallel.at_scale`: one rank of a real-size run (Llama 2 7B to Llama 3 405B)
  measured on a fake process group with fake tensors: its bytes by category, its collectives and
  FLOPs in one training step, next to chapter 2's estimate (chapters 9 and 11).
* :mod:`~course_lib.hardware.allreduce_bench`: all-reduce time and bandwidth against message
  size between local processes, fitted with the alpha-beta model (chapter 10); also a script.

The modules import ``torch.distributed`` only; nothing here needs a GPU.
"""
