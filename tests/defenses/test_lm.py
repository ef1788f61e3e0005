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


def test_deduplication_keeps_the_first_copy_of_each_text_and_trains_on_the_distinct_ones():
    from veil.defenses.lm import DeduplicatedFineTuning, deduplicate

    assert deduplicate(["A  film", "a film", "b", "a film ", "B"]) == ["A  film", "b"]
    canary = "my pin number is 4 7 1"
    lines: list[str] = []
    out = DeduplicatedFineTuning(steps=1, batch_size=2, max_tokens=16, rng=0).train_lm(TEXTS + [canary] * 10,
                                                                                       log=lines.append)
    assert out.n_train == 4 and "deduplicated: 4 distinct texts of 13" in lines
    assert out.config["defense"] == "lm-dedup" and out.guarantee.kind == "none"


def test_scrubbing_replaces_what_presidio_finds_and_keeps_what_it_misses():
    from veil.defenses.lm import ScrubbedFineTuning

    scrub = ScrubbedFineTuning(steps=1, batch_size=2, max_tokens=16, rng=0)
    texts = ["Write to ann.lee@example.org please.", "Call 212-555-0187 now.", "a dull mess of a movie"]
    assert scrub.prepare(texts) == ["Write to <EMAIL_ADDRESS> please.", "Call <PHONE_NUMBER> now.", texts[2]]
    cfg = scrub.config()
    assert cfg["defense"] == "lm-scrub" and cfg["operator"] == "type" and cfg["scrubber"]["model"] == "sm"
    assert "guarantee" not in cfg["scrubber"] and get_defense("lm-scrub").releases == "generative-model"
    # a resumable run scrubs again when it resumes: operators that draw fresh secrets are refused there
    with pytest.raises(InvalidParameterError, match="fresh secrets"):
        ScrubbedFineTuning(operator="hash", steps=1, rng=0).train_lm(texts, checkpoint="state.pt")
    with pytest.raises(Exception, match="operator"):
        ScrubbedFineTuning(operator="blur")
