"""The causal LM of the generative-model release: training is a fixed number of steps, reproducible per seed, and
bad input is typed. That it memorises a planted canary, and writes it out, is tested through the attacks that must
find it (tests/attacks/test_generation.py), on one model trained once."""

from __future__ import annotations

import pytest

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.models.causal_lm import build_causal_lm, log_perplexities, sample, train_steps


@pytest.fixture(scope="module")
def public(builtin):
    corpus = builtin("rt-polarity")
    return [t for t in (corpus.texts[i] for i in corpus.indices("train")) if len(t) < 60][:30]


def test_training_is_a_fixed_number_of_steps_reproducible_per_seed(public):
    runs = []
    for _ in range(2):
        lm = build_causal_lm(max_tokens=24)
        runs.append(train_steps(lm, public, steps=3, batch_size=4, lr=1e-4, seed=5))
    assert runs[0] == runs[1] and len(runs[0]) == 3


def test_bad_input_is_a_typed_error():
    lm = build_causal_lm(max_tokens=8)
    with pytest.raises(InvalidTypeError, match="list of texts"):
        log_perplexities(lm, "one text")
    with pytest.raises(DataFormatError, match="no text"):
        log_perplexities(lm, [])
    with pytest.raises(DataFormatError, match="non-empty"):
        train_steps(lm, ["a text", "  "], steps=1)
    with pytest.raises(InvalidParameterError, match="lr"):
        train_steps(lm, ["a text"], steps=1, lr=0.0)
    with pytest.raises(InvalidParameterError, match="temperature"):
        sample(lm, 1, temperature=0.0)
    with pytest.raises(InvalidParameterError, match="min_tokens"):
        sample(lm, 1, max_tokens=2, min_tokens=3)
    fixed = sample(lm, 2, prompt="a", max_tokens=5, min_tokens=5, seed=3)  # [SEP] held back: five new pieces each
    assert all(len(lm.tokenizer(t, add_special_tokens=False)["input_ids"]) >= 5 for t in fixed)
