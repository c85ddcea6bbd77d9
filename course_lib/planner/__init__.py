"""The training planner (chapters 2, 9, 10, 11 and 12): will a run fit, how fast, on what.

* :mod:`~course_lib.planner.inputs`: the plan as typed and the checks of every input
  (one line in English or Dutch saying what to do).
* :mod:`~course_lib.planner.presets`: the published models (dense and mixtures of
  experts), the GPUs and the links, by name.
* :mod:`~course_lib.planner.model`: memory per GPU, the cheapest change that makes it
  fit, the step time (compute, communication of tensor, pipeline, context, expert and
  data parallelism, bubble), days and GPU-hours; ``planner.js`` is the same model in
  JavaScript, proven equal by the tests.
* :mod:`~course_lib.planner.compute_time`: each matrix product's time from its shape
  (chapter 10's roofline: its FLOPs at the calibrated efficiency, its bytes at the HBM
  bandwidth).
* :mod:`~course_lib.planner.data_parallel_time`: data parallelism's collectives in a
  step and the part compute hides (each layer's gather prefetched, the first exposed).
* :mod:`~course_lib.planner.report`: the plan as a table (the command line's ``plan``).
* :mod:`~course_lib.planner.runs` and :mod:`~course_lib.planner.validation`: published
  runs (Megatron-LM, Korthikanti et al., Llama 3, BLOOM, llm-foundry, torchtitan,
  DeepSeek-V3) and their
  prediction from their settings alone, next to their figures.
* :mod:`~course_lib.planner.widget`: the planner in the page, with no kernel.
* :mod:`~course_lib.planner.texts` and :mod:`~course_lib.planner.refusals`: its texts
  and its refusals in English and Dutch.
"""
