"""Inversion metrics (veil.metrics.inversion): each metric against values worked out by hand from its definition,
corpus BLEU from summed statistics against sacrebleu itself, the names rules, the bootstrap, and typed errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.metrics.inversion import (INVERSION_METRICS, InversionScores, bleu_from_statistics, bleu_statistics,
                                    paired_difference, person_names, score_inversions)

REFS = ["The cat sat on the mat.", "Hello world", "a b c d"]
HYPS = ["the cat is on the mat", "hello, world!", "d c b a"]


def test_token_f1_exact_match_and_rouge_l_by_hand():
    s = score_inversions(REFS, HYPS)
    # 1: words the cat sat on the mat / the cat is on the mat: 5 shared (the x2, cat, on, mat) of 6 and 6 -> 5/6;
    #    ROUGE-L: LCS "the cat on the mat" = 5 of 6 and 6 -> 5/6. 2: same words (punctuation, case ignored) -> 100.
    # 3: the same bag -> F1 100, but reversed: LCS 1 of 4 and 4 -> 25; only 2 is an exact match.
    assert s.token_f1 == pytest.approx([500 / 6, 100, 100], abs=1e-12)
    assert s.exact_match.tolist() == [0.0, 100.0, 0.0]
    assert s.rouge_l == pytest.approx([500 / 6, 100, 25], abs=1e-12)
    m = s.metrics()
    assert m["token_f1"].mean == pytest.approx((500 / 6 + 200) / 3, abs=1e-12)
    assert m["exact_match"].mean == pytest.approx(100 / 3, abs=1e-12) and m["exact_match"].n == 3


def test_token_f1_counts_repeats_and_rouge_l_weighs_unequal_lengths():
    s = score_inversions(["the the cat", "the quick brown fox jumps", "Café Müller", "something"],
                         ["the cat cat", "quick fox jumps high", "cafe muller", ""])
    # "the the cat" vs "the cat cat": shared the (min 2, 1) + cat (min 1, 2) = 2 of 3 and 3 -> 2/3; LCS "the cat" 2.
    # "quick fox jumps high" vs 5 words: 3 shared, P = 3/4, R = 3/5, F = 2PR/(P+R) = 0.9/1.35 = 2/3 (LCS is also 3).
    # accents and case do not count for token F1 / exact match; an empty reconstruction scores 0.
    assert s.token_f1 == pytest.approx([200 / 3, 200 / 3, 100, 0], abs=1e-12)
    assert s.rouge_l[:2] == pytest.approx([200 / 3, 200 / 3], abs=1e-12) and s.rouge_l[3] == 0
    assert s.exact_match.tolist() == [0, 0, 100, 0]


def test_bleu_statistics_and_corpus_bleu_by_hand():
    stats = bleu_statistics(REFS, HYPS)
    # 13a tokens, lower-cased: ref 1 "the cat sat on the mat ." (7); hyp 2 "hello , world !" (4).
    # hyp 1: 1-grams 6, 5 matched; 2-grams 5, 3 matched (the cat, on the, the mat); 3-grams 4, 1 (on the mat); 4: 3, 0.
    # hyp 2: 1-grams 4, 2 matched (hello, world); nothing longer matches. hyp 3: 4 of 4 words, no longer n-gram.
    assert stats.tolist() == [[6, 7, 5, 3, 1, 0, 6, 5, 4, 3], [4, 2, 2, 0, 0, 0, 4, 3, 2, 1],
                              [4, 4, 4, 0, 0, 0, 4, 3, 2, 1]]
    # sums: 14 hyp and 13 ref tokens (no brevity penalty); p1..p3 = 11/14, 3/11, 1/8; no 4-gram matches, so the exp
    # smoothing gives p4 = 1 / (2 * 5); BLEU = 100 * (11/14 * 3/11 * 1/8 * 1/10) ** (1/4) = 100 * (3/1120) ** (1/4)
    expected = 100 * (3 / 1120) ** 0.25
    assert bleu_from_statistics(stats) == pytest.approx(expected, rel=1e-12)
    assert score_inversions(REFS, HYPS).metrics()["bleu"].mean == pytest.approx(expected, rel=1e-12)


def test_corpus_bleu_from_summed_statistics_equals_sacrebleu():
    import sacrebleu

    refs = ["The President said on Monday that the bill would pass.", "It's 3.5 degrees in St. Petersburg!",
            "We don't know (yet) what happened.", "short", "A long sentence with many words in it for BLEU to see .",
            "Numbers like 1,000 and 2.5% count too.", "Nobody came.", "Same text here", "x y z w v u"]
    hyps = ["the president said monday the bill will pass", "it is 3.5 degrees in st petersburg", "we do not know",
            "", "a long sentence with words in it for bleu .", "numbers like 1,000 and 2.5 % count", "nobody came .",
            "same text here", "u v w x y z"]
    stats = bleu_statistics(refs, hyps)
    rng = np.random.default_rng(3)
    subsets = [np.arange(len(refs)), np.array([0]), np.array([3]), np.array([3, 6])] + \
              [rng.integers(0, len(refs), size=len(refs)) for _ in range(20)]
    for idx in subsets:  # every subset (with repeats, like a bootstrap resample)
        theirs = sacrebleu.corpus_bleu([hyps[i] for i in idx], [[refs[i] for i in idx]], lowercase=True).score
        assert abs(bleu_from_statistics(stats[idx]) - theirs) <= 1e-9


def test_cosine_per_text():
    R = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    H = np.array([[3.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    s = score_inversions(REFS, HYPS, reference_vectors=R, hypothesis_vectors=H)
    assert s.cosine == pytest.approx([1.0, 0.0, 1 / math.sqrt(2)], abs=1e-12)
    assert s.metrics()["cosine"].mean == pytest.approx((1 + 1 / math.sqrt(2)) / 3, abs=1e-12)
    assert "cosine" not in score_inversions(REFS, HYPS).metrics()


def test_names_recovered_pooled_over_texts():
    names = [["Barack Obama"], [], ["John Smith", "Putin"]]
    hyps = ["obama and barack met", "nothing", "john met putin's friend"]
    # Obama: both words present (order free); John Smith: smith missing; Putin: present -> 2 of 3 names; the text
    # without names does not count, so n is 2 texts
    s = score_inversions(REFS, hyps, names=names)
    assert s.names_recovered.tolist() == [1, 0, 1] and s.names_total.tolist() == [1, 0, 2]
    m = s.metrics()["names_recovered"]
    assert m.mean == pytest.approx(200 / 3, abs=1e-12) and m.n == 2
    # a name without word tokens is ignored; no name anywhere -> the metric is absent, not 0
    assert score_inversions(REFS, hyps, names=[["--"], [], ["John Smith"]]).metrics()["names_recovered"].mean == 0
    assert "names_recovered" not in score_inversions(REFS, hyps, names=[[], [], []]).metrics()
    assert "names_recovered" not in score_inversions(REFS, hyps).metrics()


def test_bootstrap_contains_the_mean_is_seeded_and_shares_resamples():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(30)]
    refs = [" ".join(rng.choice(words, size=8)) for _ in range(40)]
    # each reconstruction keeps an ordered subset of the words: LCS = shared words, so ROUGE-L == token F1 per text
    hyps = [" ".join(w for w in r.split() if rng.random() < 0.6) for r in refs]
    s = score_inversions(refs, hyps, n_boot=500, seed=7)
    assert s.token_f1 == pytest.approx(s.rouge_l, abs=1e-9)
    m = s.metrics()
    assert m["token_f1"].ci_low == pytest.approx(m["rouge_l"].ci_low, abs=1e-9)  # the same resamples
    assert m["token_f1"].ci_high == pytest.approx(m["rouge_l"].ci_high, abs=1e-9)
    for name in ("token_f1", "rouge_l", "bleu"):
        assert m[name].ci_low < m[name].mean < m[name].ci_high and m[name].ci_level == 0.95
    assert score_inversions(refs, hyps, n_boot=500, seed=7).metrics() == m
    assert score_inversions(refs, hyps, n_boot=500, seed=8).metrics()["token_f1"] != m["token_f1"]
    assert set(m) == set(INVERSION_METRICS) - {"cosine", "names_recovered"}


def test_paired_difference():
    s = score_inversions(REFS, HYPS, names=[["Ann Lee"], [], []], n_boot=200)
    for metric in ("token_f1", "bleu", "rouge_l", "names_recovered"):
        d = paired_difference(s, s, metric)
        assert d.mean == 0 and d.ci_low == 0 and d.ci_high == 0
    other = score_inversions(REFS, ["", "hello world", "a b c d"], names=[["Ann Lee"], [], []], n_boot=200)
    d = paired_difference(other, s)
    assert d.mean == pytest.approx(other.metrics()["token_f1"].mean - s.metrics()["token_f1"].mean, abs=1e-12)
    assert d.ci_low <= d.mean <= d.ci_high and d.n == 3
    with pytest.raises(DataFormatError, match="same references"):
        paired_difference(s, score_inversions(["x", "y", "z"], HYPS))
    with pytest.raises(InvalidParameterError, match="cosine"):
        paired_difference(s, s, "cosine")
    with pytest.raises(InvalidTypeError):
        paired_difference(s, "s")


def test_bad_inputs_are_typed_errors():
    with pytest.raises(DataFormatError, match="2 hypotheses"):
        score_inversions(REFS, HYPS[:2])
    with pytest.raises(InvalidTypeError, match=r"hypotheses\[1\]"):
        score_inversions(REFS, ["a", 3, "b"])
    with pytest.raises(InvalidTypeError):
        score_inversions("one text", "one text")
    with pytest.raises(DataFormatError, match="no texts"):
        score_inversions([], [])
    R = np.ones((3, 4))
    with pytest.raises(InvalidParameterError, match="both"):
        score_inversions(REFS, HYPS, reference_vectors=R)
    with pytest.raises(DataFormatError, match="dimension"):
        score_inversions(REFS, HYPS, reference_vectors=R, hypothesis_vectors=np.ones((3, 5)))
    with pytest.raises(DataFormatError, match="per text"):
        score_inversions(REFS, HYPS, reference_vectors=R, hypothesis_vectors=np.ones((2, 4)))
    with pytest.raises(DataFormatError, match="NaN"):
        score_inversions(REFS, HYPS, reference_vectors=R, hypothesis_vectors=np.full((3, 4), np.nan))
    with pytest.raises(DataFormatError, match="all-zero"):
        score_inversions(REFS, HYPS, reference_vectors=R, hypothesis_vectors=np.zeros((3, 4)))
    with pytest.raises(DataFormatError, match="names"):
        score_inversions(REFS, HYPS, names=[["Ann"]])
    with pytest.raises(InvalidTypeError):
        score_inversions(REFS, HYPS, names=["Ann", "Bo", "Cy"])
    with pytest.raises(InvalidParameterError):
        score_inversions(REFS, HYPS, n_boot=0)
    with pytest.raises(InvalidParameterError):
        score_inversions(REFS, HYPS, level=1.0)
    with pytest.raises(DataFormatError):
        bleu_from_statistics([1, 2, 3])
    assert isinstance(score_inversions(REFS, HYPS), InversionScores)


def test_person_names_with_spacy_sm():
    found = person_names(["Barack Obama met Angela Merkel in Berlin, and Obama spoke first.", "Nobody came."])
    assert found == [["Barack Obama", "Angela Merkel"], []]  # a repeated name counts once; Berlin is not a person
