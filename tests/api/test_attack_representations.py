"""veil.attack on released representations: attribute inference by the bench's post-hoc attackers, scored by the
bench cell's function, with a positive control (raw r(x)) and LEACE's own guarantee (no linear attacker beats a
constant) as the negative one; what it cannot score names veil.evaluate."""

from __future__ import annotations

import numpy as np
import pytest

import veil
from veil.api import Protected
from veil.errors import DataFormatError, InvalidParameterError


@pytest.fixture(scope="module")
def speakers(builtin):
    """600 debate turns' MiniLM vectors and their speaker (9 values), as a user's r(x) and private variable."""
    from veil.corpora.attributes import load_attributes
    from veil.encoders import TextEncoder

    builtin("debates-2016")
    corpus = load_attributes("debates-2016")
    idx = np.arange(600)
    texts = [corpus.texts[i][:400] for i in idx]  # the opening of each turn (MiniLM reads 256 tokens)
    return TextEncoder("minilm").encode(texts, progress=False), corpus.private.select(idx)


def test_the_speaker_is_found_in_raw_r_and_leace_leaves_no_linear_attacker_above_the_floor(speakers):
    R, z = speakers
    erased = veil.protect((R, z), "leace")
    after = veil.attack(erased, "attribute", private=z)
    raw = veil.attack(Protected(R, erased.defense, "representations"), "attribute", private=z)
    assert raw.kind == "representations" and raw.metric == "attribute accuracy"
    assert raw.significant and raw.value > raw.floor + 0.1  # positive control: r(x) names its speaker
    linear = after.record["config"]["significance"]["linear"]
    assert not linear["reject"] and after.record["metrics"]["score[linear]"]["mean"] <= after.floor
    assert raw.value > after.value
    assert after.record["config"]["n_test"] == 120 and after.floor == pytest.approx(raw.floor)


def test_what_attribute_inference_cannot_score_is_a_typed_error_naming_the_fix(speakers):
    R, z = speakers
    with pytest.raises(InvalidParameterError, match=r"veil.evaluate\(corpus, 'grl'"):
        veil.attack(veil.protect(None, "grl"), "attribute", private=list(range(3)))
    erased = veil.protect((R[:40], z.select(np.arange(40))), "leace")
    with pytest.raises(InvalidParameterError, match="veil.evaluate"):
        veil.attack(erased, "invert-representations", private=["a"] * 40)
    with pytest.raises(DataFormatError, match="one per row"):
        veil.attack(erased, "attribute", private=["a", "b"] * 10)
    with pytest.raises(InvalidParameterError, match="pass private="):
        veil.attack(erased, "attribute")
    tiny = veil.protect((R[:6], ["a", "b"] * 3), "leace")  # values given as a list: one-hot, one variable
    with pytest.raises(DataFormatError, match="at least 10 rows"):
        veil.attack(tiny, "attribute", private=["a", "b"] * 3)
