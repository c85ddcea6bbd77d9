"""Part I, chapters 2 to 4 (*The memory wall*, *Number formats*, *Quantizing π*): memory
estimates, exact number formats, mixed precision, and the bit explorer. Chapter 2's "will it fit?"
tool is the training planner (course_lib.planner)."""
