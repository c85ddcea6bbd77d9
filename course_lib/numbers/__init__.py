"""Part I, chapters 2 to 4 (*The memory wall*, *Number formats*, *Quantizing π*): memory
estimates, exact number formats, mixed precision, and the bit explorer and memory calculator."""
