"""The query encoder's fast BERT forward (``text/bert_fast.py``) computes what transformers' ``BertModel`` computes:
all-MiniLM-L6-v2's token states for one text and for a padded batch, within float rounding; a model it does not
cover is left to transformers. At batch 1 the linear layers run through the compiled small-row kernel
(``text/small_linear.py``): the same states as torch's F.linear and transformers'."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tests.conftest import HAS_AVX512

from momentsearch.text.bert_fast import FastBert
from momentsearch.text.encoders import MiniLMTokenEncoder
from momentsearch.text.small_linear import MAX_ROWS

TEXTS = ["a person opens the door", "the man puts a cup on the table and walks slowly to the kitchen", "hi"]


@pytest.fixture(scope="module")
def minilm() -> MiniLMTokenEncoder:
    """all-MiniLM-L6-v2, loaded once for the module."""
    enc = MiniLMTokenEncoder()
    enc._load()
    return enc


def test_minilm_token_states_equal_transformers(minilm: MiniLMTokenEncoder) -> None:
    enc = minilm
    got = enc.encode(TEXTS)  # the fast forward, one padded batch
    assert enc._fast is not None
    with torch.inference_mode():
        for text, mine in zip(TEXTS, got, strict=True):
            t = enc._tok([text], truncation=True, max_length=32, return_tensors="pt")
            want = enc._model(**t).last_hidden_state[0].numpy()
            assert mine.shape == want.shape == (int(t["attention_mask"].sum()), 384)
            np.testing.assert_allclose(mine, want, atol=1e-5, rtol=0)
        alone = enc.encode([TEXTS[1]])[0]  # alone, no padding: the same states
        np.testing.assert_allclose(alone, got[1], atol=1e-5, rtol=0)


@pytest.mark.parametrize("change", [{"hidden_act": "relu"}, {"position_embedding_type": "relative_key"}])
def test_a_model_it_does_not_cover_keeps_transformers(change: dict) -> None:
    from transformers import BertConfig, BertModel

    cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                     **change)
    assert FastBert.of(BertModel(cfg).eval()) is None
    plain = BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=32)).eval()
    fast = FastBert.of(plain)
    assert fast is not None
    ids = torch.tensor([[1, 5, 7, 9, 2], [1, 4, 2, 0, 0]])
    mask = (ids > 0).long()
    with torch.inference_mode():
        want = plain(input_ids=ids, attention_mask=mask).last_hidden_state
        got = fast(ids, mask)
    assert torch.allclose(got[0], want[0], atol=1e-5) and torch.allclose(got[1, :3], want[1, :3], atol=1e-5)


def test_minilm_through_it_equals_torch_and_transformers(minilm: MiniLMTokenEncoder):
    enc = minilm
    fast = enc._fast
    assert (fast.small is not None) == HAS_AVX512  # the compiled kernel where the CPU has AVX-512, else F.linear
    assert fast.small is None or len(fast.small) == 36  # 6 layers x (q, k, v, out, intermediate, output)
    plain = FastBert(fast.w, fast.layers, fast.heads, fast.eps, small=False)
    texts = ["a person opens the fridge", "someone puts a cup on the table, then walks slowly to the kitchen door"]
    with torch.inference_mode():
        for text in texts:  # 7 and 17 rows: the small kernel
            t = enc._tok([text], return_tensors="pt")
            got = fast(t["input_ids"], t["attention_mask"])
            assert torch.allclose(got, plain(t["input_ids"], t["attention_mask"]), atol=1e-5, rtol=0)
            want = enc._model(**t).last_hidden_state
            assert torch.allclose(got, want, atol=1e-5, rtol=0)
        t = enc._tok(texts * 2, padding=True, return_tensors="pt")  # 4 x 17 = 68 rows: F.linear, the same states
        assert t["input_ids"].numel() > MAX_ROWS
        got = fast(t["input_ids"], t["attention_mask"])
        assert torch.allclose(got[1], fast(t["input_ids"][1:2], t["attention_mask"][1:2])[0], atol=1e-5, rtol=0)


def test_a_model_not_in_float32_keeps_f_linear() -> None:
    from transformers import BertConfig, BertModel

    model = BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=32)).eval().double()
    fast = FastBert.of(model)
    assert fast is not None and fast.small is None  # the small-row kernel is float32 only
    ids = torch.tensor([[1, 5, 7, 2]])
    with torch.inference_mode():
        want = model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
        assert torch.allclose(fast(ids, torch.ones_like(ids)), want, atol=1e-10)


@pytest.mark.skipif(not HAS_AVX512, reason="this CPU lacks AVX-512F: F.linear is the only path here")
def test_without_the_compiled_kernel_f_linear_computes_the_same(minilm: MiniLMTokenEncoder, monkeypatch) -> None:
    from momentsearch.text import small_linear

    enc = minilm
    monkeypatch.setattr(small_linear, "_on", False)  # as after an install without a C compiler, or SIMD=none
    plain = FastBert(enc._fast.w, enc._fast.layers, enc._fast.heads, enc._fast.eps)
    assert plain.small is None and enc._fast.small is not None
    t = enc._tok(["a person opens the fridge"], return_tensors="pt")
    with torch.inference_mode():
        assert torch.allclose(plain(t["input_ids"], t["attention_mask"]), enc._fast(t["input_ids"], t["attention_mask"]),
                              atol=1e-5, rtol=0)


def test_encode_batches_texts_by_length_and_gives_them_back_in_order(minilm: MiniLMTokenEncoder) -> None:
    texts = ["a person opens the door and then walks out of the kitchen very slowly", "hi", "a man sits"] * 3
    minilm.batch_size = 2  # 5 batches, each of texts of about one length: the long ones together
    try:
        got = minilm.encode(texts)
    finally:
        minilm.batch_size = 128
    alone = [minilm.encode([t])[0] for t in texts[:3]]
    assert [g.shape[0] for g in got] == [a.shape[0] for a in alone] * 3
    for g, a in zip(got, alone * 3, strict=True):
        np.testing.assert_allclose(g, a, atol=1e-5, rtol=0)
