"""Leakage metrics (TextHide Sec. 4.4): hand-made pairs, intervals, validation, and MiniLM SBERT cosine."""

from __future__ import annotations

import math

import numpy as np
import pytest

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.results import Metric
from veil.metrics.leakage import (LEAKAGE_METRICS, TfidfScorer, cosine_scores, identity_scores, jaccard_scores,
                                  label_scores, leakage_metrics, leakage_scores, normal_interval, summarize_scores,
                                  wilson_interval, word_set)

CORPUS = [
    "The cat sat on the mat.",
    "A dog barked at the mailman.",
    "Stock markets fell sharply on Monday.",
    "I loved this film, a real gem!",
    "The soup was cold and bland.",
    "Rain is expected tomorrow in the north.",
]


def test_word_set_is_lowercase_word_regex():
    assert word_set("The cat, THE Cat's mat!") == {"the", "cat", "s", "mat"}
    assert word_set("...  !!") == frozenset()


def test_identical_texts_score_one_on_explicit_metrics():
    q = ["The cat sat on the mat.", "Stock markets fell sharply on Monday."]
    scores = leakage_scores(q, list(q), tfidf=TfidfScorer(CORPUS))
    for name in ("identity", "jaccard", "tfidf_cosine"):
        assert scores[name].tolist() == [1.0, 1.0], name


def test_disjoint_words_score_zero():
    q, r = ["The cat sat on the mat."], ["Stock markets fell sharply Monday."]
    scores = leakage_scores(q, r, tfidf=TfidfScorer(CORPUS))
    assert scores["identity"].tolist() == [0.0]
    assert scores["jaccard"].tolist() == [0.0]
    assert scores["tfidf_cosine"].tolist() == [0.0]


def test_jaccard_values_and_empty_convention():
    # {the, cat, sat} vs {the, cat, ran}: 2 shared of 4
    assert jaccard_scores(["the cat sat"], ["The CAT ran"]).tolist() == [0.5]
    assert jaccard_scores(["!!", "word"], ["...", "?"]).tolist() == [1.0, 0.0]  # empty vs empty = 1, one empty = 0


def test_identity_is_exact_string_equality():
    assert identity_scores(["A b", "a b", "x"], ["A b", "A b", "x "]).tolist() == [1.0, 0.0, 0.0]


def test_tfidf_partial_overlap_between_zero_and_one_and_oov_rule():
    scorer = TfidfScorer(CORPUS)
    s = scorer.scores(["The cat sat on the mat."], ["The dog sat on a mat."])[0]
    assert 0.0 < s < 1.0
    # words outside the fitted vocabulary: 1.0 only for identical strings
    assert scorer.scores(["zebra quokka", "zebra quokka"], ["zebra quokka", "quokka zebra!"]).tolist() == [1.0, 0.0]


def test_tfidf_matches_a_slow_reference():
    scorer = TfidfScorer(CORPUS)
    a, b = "The cat sat on the mat.", "The soup sat on the mat, cold."
    docs = [sorted(word_set(t) | set()) for t in CORPUS]  # vocabulary from the corpus, \w+ lowercase
    vocab = sorted(set().union(*docs))
    n = len(CORPUS)
    df = {w: sum(w in word_set(t) for t in CORPUS) for w in vocab}
    idf = {w: math.log((1 + n) / (1 + df[w])) + 1 for w in vocab}

    def vec(text: str) -> np.ndarray:
        import re

        words = re.findall(r"\w+", text.lower())
        v = np.array([words.count(w) * idf[w] for w in vocab], dtype=float)
        return v / np.linalg.norm(v)

    assert scorer.scores([a], [b])[0] == pytest.approx(float(vec(a) @ vec(b)), abs=1e-12)


def test_label_agreement_counts():
    s = label_scores(np.array([0, 1, 1, 0]), np.array([0, 0, 1, 1]))
    assert s.tolist() == [1.0, 0.0, 1.0, 0.0]
    m = leakage_metrics(["a"] * 4, ["b"] * 4, query_labels=[0, 1, 1, 0], returned_labels=[0, 0, 1, 1])
    assert m["label"].mean == 0.5 and m["label"].n == 4


def test_keys_follow_the_inputs():
    m = leakage_metrics(["a b"], ["a c"])
    assert list(m) == ["identity", "jaccard", "tfidf_cosine"]
    emb = np.eye(3)[:2]
    m = leakage_metrics(["a b", "c"], ["a c", "c"], query_labels=[1, 2], returned_labels=[1, 1], query_emb=emb,
                        returned_emb=emb)
    assert tuple(m) == LEAKAGE_METRICS
    assert m["sbert_cosine"].mean == 1.0


def test_metric_objects_with_intervals_containing_the_mean():
    rng = np.random.default_rng(0)
    scores = {"identity": (rng.random(200) < 0.3).astype(float), "jaccard": rng.random(200),
              "sbert_cosine": rng.uniform(-1, 1, 200)}
    out = summarize_scores(scores)
    for name, m in out.items():
        assert isinstance(m, Metric)
        assert m.ci_level == 0.95 and m.n == 200
        assert m.ci_low < m.mean < m.ci_high, name
        assert m.mean == pytest.approx(scores[name].mean())
        assert m.std == pytest.approx(scores[name].std(ddof=1))


def test_interval_shrinks_with_n():
    widths = []
    for n in (50, 200, 800, 3200):
        x = np.tile([0.0, 0.25, 1.0, 0.5], n // 4)  # same distribution, more queries
        p = np.tile([0.0, 1.0, 0.0, 0.0], n // 4)
        out = summarize_scores({"jaccard": x, "identity": p})
        widths.append((out["jaccard"].ci_high - out["jaccard"].ci_low,
                       out["identity"].ci_high - out["identity"].ci_low))
    for (a1, b1), (a2, b2) in zip(widths, widths[1:]):
        assert a2 < a1 and b2 < b1
    # a 4x larger sample halves the normal-approximation width
    assert widths[1][0] / widths[2][0] == pytest.approx(2.0, rel=0.01)


def test_wilson_interval_known_values_and_extremes():
    # Wilson 95% for 0/10: [0, 0.2775]; 5/10: [0.2366, 0.7634] (standard table values)
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.27753, abs=1e-4)
    lo, hi = wilson_interval(5, 10)
    assert (lo, hi) == (pytest.approx(0.23659, abs=1e-4), pytest.approx(0.76341, abs=1e-4))
    lo, hi = wilson_interval(10, 10)
    assert hi == 1.0 and lo == pytest.approx(1 - 0.27753, abs=1e-4)


def test_normal_interval_clipped_and_undefined_for_one_value():
    assert normal_interval([0.5]) is None
    lo, hi = normal_interval([0.0, 0.0, 0.0, 1.0], bounds=(0.0, 1.0))
    assert lo == 0.0 and 0.25 < hi <= 1.0
    m = summarize_scores({"jaccard": [0.4]})["jaccard"]
    assert m.mean == 0.4 and m.ci_low is None and m.std is None


def test_ci_level_changes_the_width():
    x = {"jaccard": np.linspace(0, 1, 101)}
    w90 = summarize_scores(x, ci_level=0.9)["jaccard"]
    w99 = summarize_scores(x, ci_level=0.99)["jaccard"]
    assert (w99.ci_high - w99.ci_low) > (w90.ci_high - w90.ci_low)
    with pytest.raises(InvalidParameterError):
        summarize_scores(x, ci_level=1.5)


def test_keep_values_and_json_round_trip():
    m = leakage_metrics(["a b", "c"], ["a b", "d"], keep_values=True)
    assert m["identity"].values == (1.0, 0.0)
    assert Metric.from_dict(m["jaccard"].to_dict()) == m["jaccard"]


def test_bad_inputs_raise_typed_errors():
    with pytest.raises(DataFormatError):
        leakage_metrics(["a", "b"], ["a"])
    with pytest.raises(InvalidTypeError):
        leakage_metrics("abc", "abc")
    with pytest.raises(InvalidTypeError):
        leakage_metrics(["a", 3], ["a", "b"])
    with pytest.raises(InvalidParameterError):
        leakage_metrics(["a"], ["a"], query_labels=[1])
    with pytest.raises(DataFormatError):
        label_scores([1, 2], [1])
    with pytest.raises(DataFormatError):
        cosine_scores(np.ones((2, 3)), np.ones((2, 4)))
    with pytest.raises(DataFormatError):
        cosine_scores(np.zeros((1, 3)), np.ones((1, 3)))
    with pytest.raises(DataFormatError):
        cosine_scores(np.array([[np.nan, 1.0]]), np.ones((1, 2)))
    with pytest.raises(DataFormatError):
        summarize_scores({"identity": [0.5, 1.0]})  # a proportion must be 0/1
    with pytest.raises(DataFormatError):
        summarize_scores({"jaccard": []})
    with pytest.raises(DataFormatError):
        TfidfScorer(["...", "!"])
    with pytest.raises(InvalidParameterError):
        wilson_interval(3, 2)


@pytest.mark.slow
def test_sbert_cosine_with_minilm_on_real_sentences():
    from veil.encoders import TextEncoder

    enc = TextEncoder("minilm")
    queries = ["The film was a delight from start to finish.", "Interest rates rose again this quarter.",
               "Take one tablet twice a day with food.", "The striker scored twice in the second half.",
               "Where is the nearest train station?", "The soup was cold and far too salty.",
               "Photosynthesis turns light into chemical energy.", "Our flight was delayed by fog.",
               "The committee publishes its report next week.", "I could not put this novel down."]
    paraphrases = ["A delightful movie from beginning to end.", "This quarter, interest rates went up once more.",
                   "Swallow a pill two times daily with meals.", "He netted two goals after half-time.",
                   "How do I get to the closest railway station?", "The soup was salty and cold.",
                   "Plants convert sunlight into chemical energy.", "Fog delayed our plane.",
                   "Next week the committee will release its report.", "This book was impossible to put down."]
    same = leakage_metrics(queries, queries, encoder=enc)["sbert_cosine"]
    para = leakage_scores(queries, paraphrases, encoder=enc)["sbert_cosine"]
    shuffled = leakage_scores(queries, paraphrases[1:] + paraphrases[:1], encoder=enc)["sbert_cosine"]
    assert same.mean == pytest.approx(1.0, abs=1e-5)
    assert same.ci_high <= 1.0
    # each paraphrase is closer to its own query than an unrelated sentence is
    assert (para > shuffled).all()
    assert para.mean() > 0.6 > shuffled.mean()
    # precomputed embeddings give the same numbers as encoding inside
    Eq, Ep = enc.encode(queries, progress=False), enc.encode(paraphrases, progress=False)
    np.testing.assert_allclose(leakage_scores(queries, paraphrases, query_emb=Eq, returned_emb=Ep)["sbert_cosine"],
                               para, atol=1e-6)
