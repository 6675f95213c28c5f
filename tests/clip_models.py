"""A tiny, randomly initialised CLIP in Hugging Face's layout (config, weights, tokenizer): what a user's
folder of real CLIP weights looks like, small enough for tests. No weights are fetched anywhere."""

from __future__ import annotations

from pathlib import Path

WORDS = ("a red ball rolls across the floor person opens fridge dog runs in park man cooks dinner "
         "white square blue circle moves slowly woman reads book").split()


def tiny_hf_clip(folder: Path, seed: int = 0, words: tuple[str, ...] | list[str] = WORDS, text: dict | None = None,
                 projection_dim: int = 16) -> Path:
    """``text``: the text tower's shape (default: 2 layers of width 32); ``words``: the tokenizer's vocabulary."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import CLIPConfig, CLIPModel, PreTrainedTokenizerFast

    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1, "[UNK]": 2}
    for w in words:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="<|startoftext|> $A <|endoftext|>",
                                                       special_tokens=[("<|startoftext|>", 0), ("<|endoftext|>", 1)])
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|startoftext|>", eos_token="<|endoftext|>",
                            pad_token="<|endoftext|>", unk_token="[UNK]").save_pretrained(folder)
    torch.manual_seed(seed)
    text = text or dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=2, max_position_embeddings=16)
    cfg = CLIPConfig(text_config=dict(text, bos_token_id=0, eos_token_id=1, pad_token_id=1),
                     vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=2, image_size=32, patch_size=8),
                     projection_dim=projection_dim)
    CLIPModel(cfg).save_pretrained(folder)
    return folder
