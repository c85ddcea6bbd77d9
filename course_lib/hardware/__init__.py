"""Part III, chapter 10 (*Hardware for LLM training*): matrix throughput, memory bandwidth
(STREAM), the roofline, disk reads, the input pipeline, the all-reduce benchmark, this machine's
profile (read by chapters 8 and 9) and the utilisation (MFU, HFU) of a training run."""
