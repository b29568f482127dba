"""Transformer decoders from Hugging Face `transformers` configs (built, never downloaded),
trained with the causal-LM loss, as a plain (ids -> logits, targets) pair the rank scripts'
loop takes: the module returns the logits of every position but the last, flattened to
[batch * (seq - 1), vocab], and the targets are the ids shifted by one, so
`cross_entropy(model(x), y)` is the causal-LM loss.

  llama-mini  LlamaConfig: hidden 256, 4 layers, 4 heads, intermediate 688, vocab 32000,
              untied input embedding and LM head (19.5M parameters)
  gpt2-mini   GPT2Config: n_embd 256, 4 layers, 4 heads, vocab 50257, the LM head tied to
              the input embedding (16.3M parameters)
  llama-tiny, gpt2-tiny  the same structure at test size (hidden 32, 2 layers, vocab 512)

Token ids are Zipf-distributed (p(rank r) ~ 1/r, as words in text are), so a batch touches
a few hundred to a few thousand distinct rows of the embedding, as real text does.
torch is imported where used: the lab's drivers read LANGUAGE_MODELS and batch_of without it."""

LANGUAGE_MODELS = ("llama-mini", "gpt2-mini", "llama-tiny", "gpt2-tiny")


def batch_of(model):
    """Examples per rank the benchmarks train with: 8 sequences of a language model, 32 images."""
    return 8 if model in LANGUAGE_MODELS else 32


def _sizes(name):
    if name.endswith("-mini"):
        return {"hidden": 256, "layers": 4, "heads": 4, "vocab": 32000 if name.startswith("llama") else 50257}
    return {"hidden": 32, "layers": 2, "heads": 4, "vocab": 512}


def _decoder(name):
    import transformers  # only the language models need it
    s = _sizes(name)
    if name.startswith("llama"):
        config = transformers.LlamaConfig(
            hidden_size=s["hidden"], num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
            num_key_value_heads=s["heads"], intermediate_size=s["hidden"] * 688 // 256, vocab_size=s["vocab"],
            tie_word_embeddings=False, use_cache=False, max_position_embeddings=512)
        return transformers.LlamaForCausalLM(config)
    config = transformers.GPT2Config(n_embd=s["hidden"], n_layer=s["layers"], n_head=s["heads"],
                                     vocab_size=s["vocab"], use_cache=False)
    return transformers.GPT2LMHeadModel(config)


def build_language_model(name):
    """A Hugging Face causal LM as ids -> next-token logits, [batch * (seq - 1), vocab]; its
    `vocab` says the vocabulary's size."""
    import torch
    if name not in LANGUAGE_MODELS:
        raise ValueError(f"unknown language model {name}: one of {', '.join(LANGUAGE_MODELS)}")

    class CausalLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.decoder = _decoder(name)
            self.vocab = self.decoder.config.vocab_size

        def forward(self, ids):
            logits = self.decoder(input_ids=ids).logits
            return logits[:, :-1].reshape(-1, self.vocab)

    return CausalLM()


def zipf_batch(batch, seq, vocab, generator, exponent=1.0):
    """(ids [batch, seq], targets [batch * (seq - 1)]): ids drawn with p(id r) ~ 1/(r+1)^exponent."""
    import torch
    weights = 1.0 / torch.arange(1, vocab + 1, dtype=torch.float64) ** exponent
    ids = torch.multinomial(weights, batch * seq, replacement=True, generator=generator).view(batch, seq)
    return ids, ids[:, 1:].reshape(-1)
