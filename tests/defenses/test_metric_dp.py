"""veil.defenses.metric_dp: word-level metric DP (Feyisetan et al. 2019), Meehan et al.'s "Word Metric-DP" baseline."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from veil.defenses import get_defense
from veil.defenses.metric_dp import WordMetricDP, metric_noise, standard_normals
from veil.encoders import EmbeddingCache, TextEncoder
from veil.encoders.word_vectors import UnknownWordError, WordVectors, build_vocabulary, split_words
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError, PrivacyLeakWarning

ALPHA = 1e-6  # family-wise false-positive rate of every statistical test in this file

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _vectors(V=200, d=12, seed=0) -> WordVectors:
    rng = np.random.default_rng(seed)
    words = ["".join(rng.choice(list(LETTERS), 3)) + LETTERS[i % 26] + LETTERS[i // 26] for i in range(V)]
    return WordVectors(words=words, matrix=rng.standard_normal((V, d)).astype(np.float32))


def _seeded(vectors, epsilon, seed):
    with pytest.warns(PrivacyLeakWarning, match="seed"):
        return WordMetricDP(vectors=vectors, epsilon=epsilon, rng=seed)


# ------------------------------------------------------------ construction
@pytest.mark.parametrize("epsilon", [0.0, -2.0, float("nan"), float("inf")])
def test_epsilon_must_be_finite_and_positive(epsilon):
    with pytest.raises(InvalidParameterError, match="epsilon"):
        WordMetricDP(vectors=_vectors(), epsilon=epsilon)


def test_bad_arguments_are_refused():
    wv = _vectors()
    with pytest.raises(InvalidTypeError, match="WordVectors"):
        WordMetricDP(vectors=wv.matrix, epsilon=1.0)
    with pytest.raises(InvalidTypeError):
        WordMetricDP(vectors=wv, epsilon="1")
    with pytest.raises(InvalidTypeError):
        WordMetricDP(vectors=wv, epsilon=1.0, rng="seed")
    with pytest.raises(TypeError):
        WordMetricDP(wv, 1.0)  # keyword-only
    mech = WordMetricDP(vectors=wv, epsilon=1.0)
    with pytest.raises(InvalidTypeError):
        mech.rewrite(["a text"])
    with pytest.raises(InvalidTypeError):
        mech.rewrite_many("a text")
    with pytest.raises(DataFormatError, match=r"texts\[1\]"):
        mech.rewrite_many(["fine", None])
    with pytest.raises(UnknownWordError, match="no encoder"):
        mech.rewrite("words outside this vocabulary")
    with pytest.raises(InvalidParameterError):
        mech.noise(-1)


def test_guarantee_is_data_and_registered():
    mech = WordMetricDP(vectors=_vectors(), epsilon=7.0)
    g = mech.guarantee
    assert g.kind == "metric-dp" and g.epsilon == 7.0 and g.formal and g.delta is None
    assert "NOT SentDP" in g.statement and "||phi(w) - phi(w')||_2" in g.statement
    cfg = json.loads(json.dumps(mech.config()))
    assert cfg["defense"] == "metric-dp" and cfg["vocabulary_size"] == 200 and cfg["mean_noise_norm"] == 12 / 7.0
    assert get_defense("metric-dp") is WordMetricDP and WordMetricDP.name == "metric-dp"


# ------------------------------------------------------------ rewriting
def test_rewrite_keeps_everything_but_words_and_outputs_vocabulary_words():
    wv = _vectors()
    mech = WordMetricDP(vectors=wv, epsilon=0.5)
    w = wv.words
    texts = [f"{w[0].upper()}, {w[1]}!  42 {w[2]}_{w[3]}\n({w[4]})", "", "123 ...", f"{w[5]}"]
    out = mech.rewrite_many(texts)
    assert len(out) == len(texts)
    for before, after in zip(texts, out):
        a, b = split_words(before), split_words(after)
        assert len(a) == len(b) and a[0::2] == b[0::2]  # same layout, punctuation, digits, spaces
        assert all(word in wv for word in b[1::2])
    assert out[1] == "" and out[2] == "123 ..."


@pytest.mark.filterwarnings("ignore:epsilon=.* is above:veil.errors.PrivacyLeakWarning")  # huge epsilon on purpose
def test_huge_epsilon_returns_the_lowercased_words():
    wv = _vectors()
    text = " ".join(wv.words[:30]).title() + "."
    assert WordMetricDP(vectors=wv, epsilon=1e9).rewrite(text) == text.lower()


def test_perturb_matches_a_slow_reference():
    """Oracle: phi(word) + noise (the same seeded draws), nearest word by brute force, occurrence by occurrence."""
    wv = _vectors()
    rng = np.random.default_rng(3)
    words = list(rng.choice(wv.words, 300))
    mech = _seeded(wv, 2.0, 17)
    got = mech.perturb(words, chunk_size=1000)
    noise = metric_noise(np.random.default_rng(17), len(words), wv.dim, 2.0)
    M = wv.matrix.astype(np.float64)
    expected = []
    for word, z in zip(words, noise):
        q = M[wv.index(word)] + z
        expected.append(wv.words[int(np.argmin(((M - q) ** 2).sum(axis=1)))])
    assert got == expected
    assert len(set(got)) > 1 and got != words  # the noise does something at this epsilon


def test_seeded_runs_reproduce_and_default_draws_differ():
    wv = _vectors()
    texts = [" ".join(wv.words[:50]), " ".join(wv.words[50:90])]
    a, b = _seeded(wv, 1.0, 5), _seeded(wv, 1.0, 5)
    assert a.rewrite_many(texts) == b.rewrite_many(texts) and a.config()["seeded"]
    fresh = WordMetricDP(vectors=wv, epsilon=1.0)
    assert fresh.rewrite_many(texts) != fresh.rewrite_many(texts)
    # one draw per occurrence: a repeated word is not always replaced by the same word
    assert len(set(fresh.perturb([wv.words[0]] * 200))) > 1


def test_chunking_does_not_change_the_distribution_shape():
    wv = _vectors()
    mech = WordMetricDP(vectors=wv, epsilon=1.0)
    out = mech.perturb(list(wv.words) * 3, chunk_size=7)
    assert len(out) == 600 and all(w in wv for w in out)
    assert mech.perturb([]) == []


# ------------------------------------------------------------ the noise
@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_standard_normals_sizes(n):
    x = standard_normals(None, n)
    assert x.shape == (n,) and np.isfinite(x).all()


@pytest.mark.parametrize("seeded", [False, True])
def test_noise_radius_is_gamma_and_direction_uniform(seeded):
    """KS tests, Bonferroni over 5 tests (family-wise alpha 1e-6).

    |z| ~ Gamma(d, 1/eps); for a uniform direction u on the sphere of R^d and a
    fixed unit vector e, (1 + u.e)/2 ~ Beta((d-1)/2, (d-1)/2). Projections on a
    coordinate axis, on the diagonal and on a random direction are tested.
    """
    d, eps, n = 384, 30.0, 20_000
    wv = WordVectors(words=["word"], matrix=np.zeros((1, d), np.float32))
    mech = _seeded(wv, eps, 99) if seeded else WordMetricDP(vectors=wv, epsilon=eps)
    z = mech.noise(n)
    radius = np.linalg.norm(z, axis=1)
    tests = 5
    p = stats.kstest(radius, stats.gamma(a=d, scale=1 / eps).cdf).pvalue
    assert p > ALPHA / tests, f"radius is not Gamma({d}, 1/{eps}) (p = {p:.3g})"
    u = z / radius[:, None]
    axes = [np.eye(d)[0], np.eye(d)[-1], np.ones(d) / np.sqrt(d), np.random.default_rng(1).standard_normal(d)]
    beta = stats.beta((d - 1) / 2, (d - 1) / 2)
    for e in axes:
        p = stats.kstest((1 + u @ (e / np.linalg.norm(e))) / 2, beta.cdf).pvalue
        assert p > ALPHA / tests, f"direction is not uniform (p = {p:.3g})"


def test_noise_in_three_dimensions_has_uniform_projections():
    """Archimedes: on the sphere of R^3 each coordinate is uniform on [-1, 1] (alpha 1e-6, Bonferroni)."""
    z = metric_noise(None, 20_000, 3, 0.7)
    u = z / np.linalg.norm(z, axis=1, keepdims=True)
    for j in range(3):
        assert stats.kstest(u[:, j], stats.uniform(-1, 2).cdf).pvalue > ALPHA / 4
    assert stats.kstest(np.linalg.norm(z, axis=1), stats.gamma(a=3, scale=1 / 0.7).cdf).pvalue > ALPHA / 4


@pytest.mark.filterwarnings("ignore:epsilon=.* is above:veil.errors.PrivacyLeakWarning")  # huge epsilon on purpose
# ------------------------------------------------------------ with the real encoder
@pytest.mark.slow
def test_end_to_end_with_minilm_word_vectors(tmp_path):
    encoder = TextEncoder("minilm")
    corpus = ["The cat sat on the mat.", "A dog chased the cat around the house.", "The house was quiet."]
    vocab = build_vocabulary(corpus)
    wv = WordVectors.from_encoder(encoder, vocab, cache=EmbeddingCache(tmp_path))
    text = "The kitten sat on the mat, 3 times!"
    same = WordMetricDP(vectors=wv, epsilon=1e7).rewrite(text)
    words = split_words(same)[1::2]
    assert split_words(same)[0::2] == split_words(text)[0::2]
    assert [words[0], *words[2:6]] == ["the", "sat", "on", "the", "mat"]  # vocabulary words come back as is
    assert words[1] in vocab and words[6] in vocab  # "kitten", "times" (outside it) became vocabulary words
    noisy = WordMetricDP(vectors=wv, epsilon=10.0).rewrite_many([text] * 20)
    assert all(split_words(t)[0::2] == split_words(text)[0::2] for t in noisy)
    assert len(set(noisy)) > 1
