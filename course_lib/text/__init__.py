"""Part I, chapter 1 (*Pretraining objectives*): the story corpus, the tokenizer, the three
objectives, tiny models, the one training loop, evaluation, the scaling study and the course model."""
