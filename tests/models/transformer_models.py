"""Tiny transformers models from configs, with random weights (no download),
shared by the model suite (tests/models/test_model_suite.py) and the
training-step benchmarks (benchmarks/run.py). Each builder imports
transformers itself, so importing this module does not need it."""

from __future__ import annotations


def tiny_gpt2():
    import transformers

    cfg = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=64, n_positions=32)
    return transformers.GPT2LMHeadModel(cfg)


def tiny_llama():
    import transformers

    cfg = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, vocab_size=64,
                                   max_position_embeddings=32)
    return transformers.LlamaForCausalLM(cfg)


def tiny_bert():
    import transformers

    cfg = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=64, vocab_size=64, max_position_embeddings=32)
    return transformers.BertForMaskedLM(cfg)


def tiny_vit():
    import transformers

    cfg = transformers.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=64, image_size=16, patch_size=4, num_labels=10)
    return transformers.ViTForImageClassification(cfg)


def tiny_t5():
    import transformers

    cfg = transformers.T5Config(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, vocab_size=64,
                                decoder_start_token_id=0)
    return transformers.T5ForConditionalGeneration(cfg)


#: The vocabulary size of the tiny decoders (token ids are drawn below it).
TINY_VOCAB = 64
