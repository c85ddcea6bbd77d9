"""The training planner (chapters 2, 9, 10 and 11): will a run fit, how fast, on what.

* :mod:`~course_lib.planner.inputs`: the plan as typed, the presets, GPUs and links by
  name, and the checks of every input (one line in English or Dutch saying what to do).
* :mod:`~course_lib.planner.model`: memory per GPU, the cheapest change that makes it
  fit, the step time (compute, communication, bubble), days and GPU-hours;
  ``planner.js`` is the same model in JavaScript, proven equal by the tests.
* :mod:`~course_lib.planner.report`: the plan as a table (the command line's ``plan``).
* :mod:`~course_lib.planner.validation`: published runs (Megatron-LM, Llama 3, BLOOM,
  llm-foundry, torchtitan) predicted from their settings alone, next to their figures.
* :mod:`~course_lib.planner.widget`: the planner in the page, with no kernel.
* :mod:`~course_lib.planner.texts`: its texts in English and Dutch.
"""
