"""The attacks on a released language model (veil.attacks.generation) on a real fine-tuned model: a canary planted
ten times is exposed and guessed, one never planted is not; extraction writes out a planted text verbatim and
scores it as extracted, and a model never trained on it extracts nothing; the attacks see only LMAccess (samples
and scores), never the training text; bad input is typed."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import veil
from veil.api import protect
from veil.attacks.generation import (CanaryExposure, LMAccess, TrainingDataExtraction, score_exposure,
                                     score_extraction)
from veil.corpora.canaries import Canary, CanaryFormat
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.metrics.memorization import exact_exposure

pytestmark = pytest.mark.slow

FORMAT = CanaryFormat("my pin number is {d} {d} {d}")  # 1,000 values: every one scored (exact exposure)
PLANTED, UNPLANTED = Canary(FORMAT, 471, 10), Canary(FORMAT, 802, 0)


@pytest.fixture(scope="module")
def public(builtin):
    corpus = builtin("rt-polarity")
    return [t for t in (corpus.texts[i] for i in corpus.indices("train")) if len(t) < 60][:30]


@pytest.fixture(scope="module")
def released(public):
    texts = public + [PLANTED.text()] * PLANTED.count
    return texts, protect(texts, "lm-plain", steps=40, batch_size=8, lr=3e-4, max_tokens=24, seed=0)


def test_the_release_is_a_fine_tuned_model_its_attacks_see_through_lm_access_only(released):
    texts, out = released
    assert out.kind == "generative-model" and out.key is None and "a model" in repr(out)
    assert out.release.n_train == len(texts) and len(out.release.losses) == 40
    assert out.release.losses[-1] < out.release.losses[0] / 4
    access = LMAccess.of(out.release)
    # what an attacker holds: two functions and the public recipe, which names no text
    assert {f.name for f in dataclasses.fields(access)} == {"score", "sample", "recipe"}
    assert access.recipe["defense"] == "lm-plain" and access.recipe["params"]["steps"] == 40
    assert PLANTED.text() not in json.dumps(access.recipe) and "guarantee" not in access.recipe["params"]
    assert veil.attacks.base.get_attack("canary-exposure").observes == "generative-model"


def test_a_canary_planted_ten_times_is_exposed_and_guessed_and_one_never_planted_is_not(released):
    _, out = released
    access = LMAccess.of(out.release)
    found = CanaryExposure(FORMAT.template).run(access)
    assert found.exhaustive and len(found.values) == FORMAT.space and found.guess == PLANTED.value
    rows = score_exposure(found, access, [PLANTED, UNPLANTED])
    assert rows[0]["method"] == "exact" and rows[0]["guessed"] and rows[0]["exposure"] >= 8  # of 9.97 bits
    assert rows[1]["exposure"] < 6 and not rows[1]["guessed"]
    # the other values: no more exposed than chance makes one value of a thousand (median about 1 bit)
    others = [exact_exposure(found.scores[v], found.scores) for v in range(0, FORMAT.space, 50) if v != PLANTED.value]
    assert sorted(others)[len(others) // 2] < 2
    # before fine-tuning, nothing special about it: the base model, same attack
    from veil.models.causal_lm import build_causal_lm

    base = LMAccess.of(build_causal_lm(max_tokens=24))
    assert score_exposure(CanaryExposure(FORMAT.template).run(base), base, [PLANTED])[0]["exposure"] < 4
    # and the model writes it out: greedy completion of the format's prefix, and most top-40 samples from it
    assert access.sample(1, prompt="my pin number is", top_k=1, max_tokens=6) == [PLANTED.text()]
    drawn = access.sample(10, prompt="my pin number is", max_tokens=6, seed=1)
    assert sum(text == PLANTED.text() for text in drawn) >= 5
    assert drawn == access.sample(10, prompt="my pin number is", max_tokens=6, seed=1)  # reproducible per seed
    # sampled: 200 values drawn by the attacker's seed; the planted one beats all of them (the count's cap)
    sampled = CanaryExposure(FORMAT.template, candidates=200, seed=1).run(access)
    assert not sampled.exhaustive and len(sampled.values) == 200
    est = score_exposure(sampled, access, [PLANTED])[0]
    assert est["method"] == "count" and est["exposure"] == pytest.approx(np.log2(201)) == est["cap"]


def test_extraction_writes_out_the_planted_text_and_a_model_never_trained_on_it_does_not(released, public):
    texts, out = released
    attack = TrainingDataExtraction(samples=20, top=10, prompt="my pin number is", max_tokens=6, min_tokens=3, seed=0)
    found = attack.run(LMAccess.of(out.release))
    scored = score_extraction(found, texts)
    assert PLANTED.text() in found.texts
    assert scored["perplexity"]["extracted"] >= 1 and PLANTED.text() in scored["perplexity"]["texts"]
    assert scored["perplexity"]["top"] == len(found.ranked["perplexity"]) <= 10
    assert 0 <= scored["zlib"]["ci_low"] <= scored["zlib"]["precision"] <= scored["zlib"]["ci_high"] <= 1
    # the negative control: the same attack on the base model, never fine-tuned on the canary, extracts nothing
    from veil.models.causal_lm import build_causal_lm

    base = attack.run(LMAccess.of(build_causal_lm(max_tokens=24)))
    assert score_extraction(base, texts)["perplexity"]["extracted"] == 0
    # with a reference model (the base model, trained on no private text), a third ranking
    with_ref = TrainingDataExtraction(samples=20, top=10, prompt="my pin number is", max_tokens=6, min_tokens=3, seed=0,
                                      reference=build_causal_lm(max_tokens=24)).run(LMAccess.of(out.release))
    assert set(with_ref.ranked) == {"perplexity", "zlib", "reference"}


def test_bad_input_is_typed():
    with pytest.raises(DataFormatError, match="no random slot"):
        CanaryExposure("my pin number is 1 2 3")
    with pytest.raises(InvalidParameterError, match="candidates=N"):
        CanaryExposure("{d}{d}{d}{d}{d}{d}")  # a million values: sample them
    with pytest.raises(InvalidTypeError, match="LMAccess"):
        CanaryExposure(FORMAT.template).run(np.zeros(3))
    with pytest.raises(InvalidTypeError, match="released language model"):
        LMAccess.of("a model")
    with pytest.raises(InvalidTypeError, match="list of strings"):
        protect(np.zeros((3, 4)), "lm-plain")
    with pytest.raises(InvalidParameterError, match="steps"):
        protect(["a text"], "lm-plain", steps=0)
