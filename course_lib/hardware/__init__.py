"""Part III, chapter 10 (*Hardware for LLM training*): matrix throughput, memory bandwidth
(STREAM), the roofline, disk reads, the input pipeline and the all-reduce benchmark."""
