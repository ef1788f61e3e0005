"""The planted corpus of issue 52 (veil.corpora.planted): each PII value and canary is in exactly as many training
texts as its count and in no held-out text; everything but the canaries' secrets is reproducible from the seed; no
planted value is shown; bad input is typed before any work."""

from __future__ import annotations

import pytest

from veil.corpora.planted import build_planted
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError

SMALL = dict(counts=(1, 4), pii_per_count=2, entities=("EMAIL_ADDRESS", "IBAN_CODE", "PERSON"), canaries_per_count=3,
             canary_format="my pin is {d} {d} {d} {d} {d}", n_heldout=50, n_train=200, seed=3)


@pytest.fixture(scope="module")
def planted(builtin):
    builtin("rt-polarity")
    return build_planted("rt-polarity", **SMALL)


def test_every_planted_value_is_in_as_many_training_texts_as_its_count_and_never_held_out(planted):
    assert len(planted.pii) == 2 * 3 * 2 and len(planted.canaries) == 3 * 2
    for p in planted.pii:
        holding = sum(p.value in t for t in planted.train)
        # an e-mail or an IBAN occurs nowhere else; a name may also be a word of some review
        assert holding == p.count if p.entity != "PERSON" else holding >= p.count
        assert not any(p.value in t for t in planted.heldout)
    for c in planted.canaries:
        assert sum(t == c.text() for t in planted.train) == c.count and c.text() not in planted.heldout
    plain = 200
    assert len(planted.train) == plain + sum(p.count for p in planted.pii) + sum(c.count for c in planted.canaries)
    assert len(planted.heldout) == 50 and not set(planted.heldout) & set(planted.train)


def test_it_is_reproducible_from_the_seed_but_the_canaries_secrets_are_fresh(planted):
    again = build_planted("rt-polarity", **SMALL)
    assert again.heldout == planted.heldout
    assert [(p.entity, p.value, p.count) for p in again.pii] == [(p.entity, p.value, p.count) for p in planted.pii]
    canary_texts = {c.text() for c in planted.canaries} | {c.text() for c in again.canaries}
    assert [t for t in again.train if t not in canary_texts] == [t for t in planted.train if t not in canary_texts]
    assert {c.value for c in again.canaries} != {c.value for c in planted.canaries}  # 6 of 100,000 values


def test_no_planted_value_is_shown(planted):
    shown = repr(planted) + repr(planted.pii) + repr(planted.canaries) + str(planted.describe())
    assert not any(p.value in shown for p in planted.pii)
    assert not any(c.text() in shown for c in planted.canaries)
    d = planted.describe()
    assert d["pii_per_count"] == {"1": 6, "4": 6} and d["canaries_per_count"] == {"1": 3, "4": 3}
    assert d["train_texts"] == len(planted.train) and d["train_words"] > 1000
    assert d["planted_texts"] == 6 * 1 + 6 * 4 + 3 * 1 + 3 * 4


def test_bad_input_is_typed_before_any_work():
    with pytest.raises(DataFormatError, match="no random slot"):
        build_planted("rt-polarity", canary_format="my pin is 1 2 3")
    with pytest.raises(InvalidParameterError, match="counts"):
        build_planted("rt-polarity", counts=(0, 2))
    with pytest.raises(InvalidParameterError, match="entities"):
        build_planted("rt-polarity", entities=("PASSWORD",))
    with pytest.raises(InvalidTypeError, match="corpus name"):
        build_planted(42)
    with pytest.raises(DataFormatError, match="too few"):
        build_planted("rt-polarity", n_heldout=20_000)


def test_the_canaries_planted_before_rebuild_the_same_corpus_and_others_are_refused(builtin):
    builtin("rt-polarity")
    first = build_planted("rt-polarity", counts=(1, 2), pii_per_count=1, canaries_per_count=2, n_heldout=50,
                          n_train=100, seed=4)
    again = build_planted("rt-polarity", counts=(1, 2), pii_per_count=1, canaries_per_count=2, n_heldout=50,
                          n_train=100, seed=4, canaries=list(first.canaries))
    assert again.train == first.train and again.heldout == first.heldout
    with pytest.raises(InvalidParameterError, match="give 2 canaries at each count of \\[1, 2\\]"):
        build_planted("rt-polarity", counts=(1, 2), pii_per_count=1, canaries_per_count=2, n_heldout=50,
                      n_train=100, seed=4, canaries=list(first.canaries)[:3])
    with pytest.raises(InvalidParameterError, match="list of veil.corpora.canaries.Canary"):
        build_planted("rt-polarity", counts=(1, 2), canaries_per_count=2, canaries=["my pin is 1 2 3"])
