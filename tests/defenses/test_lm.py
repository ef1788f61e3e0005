"""lm-plain (veil.defenses.lm): a fixed number of steps from a seed gives the same model; its settings are checked
before any work; it declares the generative-model kind and no guarantee."""

from __future__ import annotations

import numpy as np
import pytest

from veil.defenses.base import get_defense
from veil.defenses.lm import PlainFineTuning
from veil.errors import InvalidParameterError

pytestmark = pytest.mark.slow

TEXTS = ["the film is a warm and funny ride", "a dull mess of a movie", "one of the best films of the year"]


def test_the_same_seed_gives_the_same_model_and_the_config_says_how_it_was_trained():
    from veil.models.causal_lm import log_perplexities

    a = PlainFineTuning(steps=3, batch_size=2, max_tokens=16, rng=7).train_lm(TEXTS)
    b = PlainFineTuning(steps=3, batch_size=2, max_tokens=16, rng=7).train_lm(TEXTS)
    assert a.losses == b.losses and len(a.losses) == 3
    np.testing.assert_array_equal(log_perplexities(a.lm, TEXTS), log_perplexities(b.lm, TEXTS))
    assert a.config["defense"] == "lm-plain" and a.config["order"] == "seed 7" and a.config["steps"] == 3
    assert a.guarantee.kind == "none" and get_defense("lm-plain").releases == "generative-model"
    assert PlainFineTuning(steps=1).config()["order"] == "os-entropy"


@pytest.mark.parametrize("bad", [{"steps": 0}, {"batch_size": 0}, {"lr": 0.0}, {"lr": True}, {"max_tokens": 2},
                                 {"rng": -1}])
def test_bad_settings_are_refused_before_any_work(bad):
    with pytest.raises(InvalidParameterError):
        PlainFineTuning(**bad)
