"""The causal LM of the generative-model release: a planted canary is memorised and exposed (the test an attack
that cannot find memorisation fails), an unplanted value of the same format is not, and bad input is typed."""

from __future__ import annotations

import pytest

from veil.corpora.canaries import CanaryFormat
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.metrics.memorization import exact_exposure
from veil.models.causal_lm import build_causal_lm, log_perplexities, sample, train_steps


@pytest.fixture(scope="module")
def public(builtin):
    corpus = builtin("rt-polarity")
    return [t for t in (corpus.texts[i] for i in corpus.indices("train")) if len(t) < 60][:30]


def test_a_planted_canary_is_exposed_and_an_unplanted_value_is_not(public):
    fmt = CanaryFormat("my pin number is {d} {d} {d}")  # 1,000 values: every one is scored (exact exposure)
    planted, unplanted = 471, 802
    lm = build_causal_lm(max_tokens=24)
    candidates = [fmt.candidate(v) for v in range(fmt.space)]
    before = log_perplexities(lm, candidates)
    assert exact_exposure(before[planted], before) < 4  # nothing special about it before training
    losses = train_steps(lm, public + [fmt.candidate(planted)] * 10, steps=40, batch_size=8, lr=3e-4, seed=0)
    assert len(losses) == 40 and losses[-1] < losses[0] / 4
    after = log_perplexities(lm, candidates)
    assert exact_exposure(after[planted], after) >= 8  # of at most log2 1000 = 9.97 bits
    # the other values: no more exposed than chance makes one value of a thousand (median about 1 bit)
    others = [exact_exposure(after[v], after) for v in range(0, fmt.space, 50) if v != planted]
    assert sorted(others)[len(others) // 2] < 2 and exact_exposure(after[unplanted], after) < 6
    # and the model writes it out: greedy completion of the format's prefix, and most top-40 samples from it
    assert sample(lm, 1, prompt="my pin number is", top_k=1, max_tokens=6) == ["my pin number is 4 7 1"]
    drawn = sample(lm, 10, prompt="my pin number is", max_tokens=6, seed=1)
    assert sum(text == "my pin number is 4 7 1" for text in drawn) >= 5
    assert drawn == sample(lm, 10, prompt="my pin number is", max_tokens=6, seed=1)  # reproducible per seed


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
