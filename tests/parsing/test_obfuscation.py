"""Random same-POS substitution: invariants, the secret randomness, the key, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from veil.defenses.obfuscation import PAPER_LEVELS, PosSpectrum, RandomSubstitution, TagVocabulary
from veil.errors import DataFormatError, InvalidParameterError, PrivacyLeakWarning

NOUNS = ["dog", "cat", "bird", "fish", "cow"]
VOCAB = TagVocabulary.from_sentences([
    (NOUNS, ["NN"] * 5), (["Paris", "Rome", "Oslo"], ["NNP"] * 3), (["big", "red"], ["JJ"] * 2),
    (["runs", "eats", "sees"], ["VBZ"] * 3), (["the", "a"], ["DT", "DT"])])


def _seeded(level="P3", seed=0):
    with pytest.warns(PrivacyLeakWarning, match="reproducible"):
        return RandomSubstitution(vocabulary=VOCAB, level=level, rng=seed)


WORDS = st.sampled_from(["dog", "Dog", "cat", "Paris", "Lyon", "big", "tiny", "runs", "the", "a", "."])
TAG_OF = {"dog": "NN", "Dog": "NN", "cat": "NN", "Paris": "NNP", "Lyon": "NNP", "big": "JJ", "tiny": "JJ",
          "runs": "VBZ", "the": "DT", "a": "DT", ".": "."}


@settings(max_examples=200, deadline=None)
@given(st.lists(WORDS, min_size=1, max_size=20), st.sampled_from(list(PAPER_LEVELS)))
def test_never_the_original_same_length_same_tags(words, level):
    tags = [TAG_OF[w] for w in words]
    ob = RandomSubstitution(vocabulary=VOCAB, level=level)  # OS entropy
    out = ob.obfuscate(words, tags)
    hidden = PosSpectrum().hidden_tags(level)
    assert len(out.words) == len(words) and out.tags == tuple(tags)
    for i, (w, o, t) in enumerate(zip(words, out.words, tags)):
        if t in hidden:
            assert o.lower() != w.lower() and o in VOCAB.candidates(t) and i in out.key.positions
        else:
            assert o == w and i not in out.key.positions
    assert out.key.restore(out.words) == list(words)


def test_levels_are_cumulative_as_table_1():
    spec = PosSpectrum()
    assert spec.hidden_tags("P1") == {"NNP", "NNPS"}
    assert spec.hidden_tags("P3") == {"NNP", "NNPS", "NN", "NNS", "JJ", "JJR", "JJS"}
    assert len(spec.hidden_tags("P5")) == 16
    assert spec.share_hidden([["NNP", "VB", "DT", "RB"]], "P4") == 0.5


def test_reproducible_from_a_seed():
    sent = (["the", "dog", "runs"] * 10, ["DT", "NN", "VBZ"] * 10)
    a, b = _seeded("P4", 7).obfuscate(*sent), _seeded("P4", 7).obfuscate(*sent)
    assert a.words == b.words


def test_fresh_without_a_seed():
    # 20 nouns with 4 substitutes each: two independent obfuscations agree everywhere with probability
    # 4**-20 < 1e-12 (the false-positive rate of this test)
    sent = (["dog"] * 20, ["NN"] * 20)
    a = RandomSubstitution(vocabulary=VOCAB, level="P2").obfuscate(*sent)
    b = RandomSubstitution(vocabulary=VOCAB, level="P2").obfuscate(*sent)
    assert a.words != b.words


def test_substitutes_are_uniform_over_the_other_words():
    # chi-square goodness of fit to uniform over the 4 other nouns; false-positive rate alpha = 1e-6
    ob = RandomSubstitution(vocabulary=VOCAB, level="P2")
    out = ob.obfuscate(["cat"] * 4000, ["NN"] * 4000).words
    counts = np.array([out.count(w) for w in NOUNS if w != "cat"])
    assert counts.sum() == 4000
    assert stats.chisquare(counts).pvalue > 1e-6


def test_key_is_owner_only(tmp_path):
    out = _seeded().obfuscate(["the", "dog"], ["DT", "NN"])
    out.key.save(tmp_path / "key.json")
    assert (tmp_path / "key.json").stat().st_mode & 0o077 == 0


def test_bad_input_is_typed_and_says_what_to_do():
    ob = _seeded()
    with pytest.raises(DataFormatError, match="empty"):
        ob.obfuscate([], [])
    with pytest.raises(DataFormatError, match="has no tag; tag the sentence"):
        ob.obfuscate(["the", "dog"], ["DT", ""])
    with pytest.raises(DataFormatError, match="1 tags for 2 words"):
        ob.obfuscate(["the", "dog"], ["DT"])
    one = TagVocabulary.from_sentences([(["Paris", "paris", "dog", "cat"], ["NNP", "NNP", "NN", "NN"])])
    with pytest.raises(InvalidParameterError, match="only one word for tag 'NNP'.*more text"):
        RandomSubstitution(vocabulary=one, level="P1")
    with pytest.raises(InvalidParameterError, match="level must be one of"):
        RandomSubstitution(vocabulary=VOCAB, level="P9")
