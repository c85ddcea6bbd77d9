"""Part II, chapters 5 to 7 (*Quantization*, *Pruning lab*, *GPTQ lab*): quantizers and quantized
layers, outliers, LoRA and QLoRA, quantization-aware training, pruning, sparse checkpoints, GPTQ."""
