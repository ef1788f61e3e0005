"""Retrieval attacks (TextHide Sec. 4.4, App. C.2-C.3): exact search against a numpy oracle, ties, RepRecon
learning a known transform, random-guess floor, TextHide observations, results and validation."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from veil.attacks import attack_names, get_attack
from veil.attacks.base import AttackResult, Observation
from veil.attacks.retrieval import (PAPER_SETTINGS, RSS, AbsRSS, RandomGuess, RepRecon, RetrievalResult,
                                    SimilaritySearch, evaluate_retrieval, observe, observe_original, protect,
                                    protect_with_texthide, reprecon_table, rss_table, sample_queries)
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError, UnknownNameError
from veil.results import Metric

BACKENDS = ("torch", "faiss")


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def reference_search(X: np.ndarray, Q: np.ndarray, top_k: int, normalize: bool = True):
    """Slow, obviously-correct oracle: float64 scores of the float32-stored vectors, sorted by (-score, index)."""
    X64, Q64 = X.astype(np.float64), Q.astype(np.float64)
    if normalize:
        X64, Q64 = unit(X64).astype(np.float32).astype(np.float64), unit(Q64).astype(np.float32).astype(np.float64)
    idx, scores = [], []
    for q in Q64:
        s = np.array([float(np.dot(x, q)) for x in X64])
        order = sorted(range(len(s)), key=lambda i: (-s[i], i))[:top_k]
        idx.append(order)
        scores.append(s[order])
    return np.array(idx), np.array(scores)


def make_texts(n: int) -> list[str]:
    return [f"sentence number {i} about topic {i % 7}" for i in range(n)]


# ---------------------------------------------------------------- imports and registry
def test_import_does_not_load_torch_faiss_or_sklearn():
    code = ("import sys, veil.attacks, veil.attacks.retrieval, veil.metrics.leakage; "
            "print(sorted(m for m in ('torch', 'faiss', 'sklearn', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_registry():
    # other attack families register further names; the retrieval ones must all be there
    assert {"abs-rss", "random-guess", "reprecon", "rss"} <= set(attack_names())
    assert get_attack("rss") is RSS and get_attack("reprecon") is RepRecon and get_attack("random-guess") is RandomGuess
    assert get_attack("abs-rss") is AbsRSS
    with pytest.raises(UnknownNameError, match="rss"):
        get_attack("nope")


# ---------------------------------------------------------------- exact search
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("top_k", [1, 5])
def test_search_matches_bruteforce_reference(backend, top_k):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(700, 24)).astype(np.float32)
    Q = rng.normal(size=(40, 24)).astype(np.float32)
    index = SimilaritySearch(make_texts(700), X, backend=backend)
    idx, scores = index.query(Q, top_k=top_k)
    ref_idx, ref_scores = reference_search(X, Q, top_k)
    assert idx.shape == scores.shape == (40, top_k) and idx.dtype == np.int64
    np.testing.assert_array_equal(idx, ref_idx)
    np.testing.assert_allclose(scores, ref_scores, rtol=0, atol=1e-12)
    assert (np.diff(scores, axis=1) <= 0).all()


@pytest.mark.parametrize("top_k", [1, 3, 20])
def test_backends_agree_bit_for_bit(top_k):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(5000, 64)).astype(np.float32)
    Q = np.concatenate([rng.normal(size=(150, 64)), X[:50] + 1e-3 * rng.normal(size=(50, 64))]).astype(np.float32)
    a = SimilaritySearch(make_texts(5000), X, backend="torch").query(Q, top_k)
    b = SimilaritySearch(make_texts(5000), X, backend="faiss").query(Q, top_k)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    np.testing.assert_array_equal(a[0][150:, 0], np.arange(50))  # near-copies find their source


@pytest.mark.parametrize("backend", BACKENDS)
def test_inner_product_without_normalisation(backend):
    rng = np.random.default_rng(3)
    X = (rng.normal(size=(300, 16)) * rng.uniform(0.1, 5, size=(300, 1))).astype(np.float32)
    Q = rng.normal(size=(20, 16)).astype(np.float32)
    idx, scores = SimilaritySearch(make_texts(300), X, backend=backend, normalize=False).query(Q, 4)
    ref_idx, ref_scores = reference_search(X, Q, 4, normalize=False)
    np.testing.assert_array_equal(idx, ref_idx)
    np.testing.assert_allclose(scores, ref_scores, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("copies", "margin"), [(30, 8), (30, 0), (2, 8), (6, 8)])
def test_ties_go_to_the_lowest_index(backend, copies, margin):
    """Copies of one vector at scattered positions: the lowest indices win. 30 copies exceed the candidate
    margin (exact fallback path), 2 and 6 stay inside it (candidate re-sorting path); margin 0 forces the
    fallback on every query."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(2000, 32)).astype(np.float32)
    group = np.sort(rng.choice(np.arange(5, 2000), size=copies, replace=False))
    X[group] = X[3]
    group = np.concatenate([[3], group])
    index = SimilaritySearch(make_texts(2000), X, backend=backend)
    index.margin = margin
    Q = np.concatenate([X[3:4] * 7.0, X[group[-1]:group[-1] + 1], rng.normal(size=(10, 32))]).astype(np.float32)
    top_k = min(5, copies)
    idx, scores = index.query(Q, top_k=top_k)
    np.testing.assert_array_equal(idx[0], group[:top_k])
    np.testing.assert_array_equal(idx[1], group[:top_k])
    assert len(set(scores[0].tolist())) == 1  # exactly tied
    ref_idx, _ = reference_search(X, Q, top_k)
    np.testing.assert_array_equal(idx, ref_idx)


def test_query_blocks_and_torch_chunks_do_not_change_answers(monkeypatch):
    import veil.attacks.retrieval.index as ri

    rng = np.random.default_rng(12)
    X = rng.normal(size=(500, 16)).astype(np.float32)
    Q = rng.normal(size=(77, 16)).astype(np.float32)
    expected = {b: SimilaritySearch(make_texts(500), X, backend=b).query(Q, 3) for b in BACKENDS}
    monkeypatch.setattr(ri, "_CHUNK_BYTES", 4 * 500 * 5)  # torch chunks of 5 queries, re-scoring blocks of 7
    for b in BACKENDS:
        got = SimilaritySearch(make_texts(500), X, backend=b).query(Q, 3)
        np.testing.assert_array_equal(got[0], expected[b][0])
        np.testing.assert_array_equal(got[1], expected[b][1])


def test_duplicate_texts_count_as_identity_hits():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(50, 8)).astype(np.float32)
    texts = make_texts(50)
    texts[40] = texts[2]  # same sentence stored twice, with different vectors
    X[40] = X[2]  # ... and the same vector: ties go to index 2
    index = SimilaritySearch(texts, X)
    res = evaluate_retrieval(RSS(index), observe_original(X[[40, 2, 7]]), np.array([40, 2, 7]))
    assert res.metrics["identity"].mean == 1.0
    assert [e["returned_id"] for e in res.examples] == [2, 2, 7]


def test_single_vector_query_and_empty_query():
    X = np.eye(4, dtype=np.float32)
    index = SimilaritySearch(make_texts(4), X)
    idx, scores = index.query(np.array([0, 0, 1, 0.1], dtype=np.float32))
    assert idx.tolist() == [[2]] and scores.shape == (1, 1)
    idx, scores = index.query(np.empty((0, 4), dtype=np.float32), top_k=2)
    assert idx.shape == (0, 2)


def test_index_bad_input_raises_typed_errors():
    X = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    texts = make_texts(5)
    with pytest.raises(DataFormatError, match="empty"):
        SimilaritySearch([], np.empty((0, 3), dtype=np.float32))
    with pytest.raises(DataFormatError, match="5 texts but 4 vectors"):
        SimilaritySearch(texts, X[:4])
    bad = X.copy()
    bad[1, 1] = np.nan
    with pytest.raises(DataFormatError, match="NaN"):
        SimilaritySearch(texts, bad)
    bad[1, 1] = np.inf
    with pytest.raises(DataFormatError, match="NaN or inf"):
        SimilaritySearch(texts, bad)
    zero = X.copy()
    zero[0] = 0
    with pytest.raises(DataFormatError, match="all-zero"):
        SimilaritySearch(texts, zero)
    SimilaritySearch(texts, zero, normalize=False)  # inner product is defined for zero vectors
    with pytest.raises(InvalidTypeError):
        SimilaritySearch("abc", X)
    with pytest.raises(InvalidTypeError):
        SimilaritySearch(texts, X.tolist())
    with pytest.raises(InvalidTypeError):
        SimilaritySearch([1, 2, 3, 4, 5], X)
    with pytest.raises(InvalidTypeError):
        SimilaritySearch(texts, X.astype(str))
    with pytest.raises(DataFormatError):
        SimilaritySearch(texts, X[:, :, None])
    with pytest.raises(DataFormatError, match="labels"):
        SimilaritySearch(texts, X, labels=[0, 1])
    with pytest.raises(InvalidParameterError, match="backend"):
        SimilaritySearch(texts, X, backend="annoy")
    index = SimilaritySearch(texts, X)
    with pytest.raises(DataFormatError, match="dimension 4"):
        index.query(np.ones((2, 4), dtype=np.float32))
    with pytest.raises(DataFormatError, match="NaN"):
        index.query(np.full((1, 3), np.nan, dtype=np.float32))
    with pytest.raises(InvalidParameterError, match="top_k"):
        index.query(X, top_k=6)
    with pytest.raises(InvalidParameterError):
        index.query(X, top_k=0)
    with pytest.raises(InvalidTypeError):
        index.query(X, top_k=1.0)
    with pytest.raises(InvalidTypeError):
        index.query([[1.0, 2.0, 3.0]])


def test_auto_backend_rule_prefers_faiss():
    from veil.attacks.retrieval.index import resolve_backend

    assert resolve_backend("auto") == "faiss"  # faiss-cpu is a pinned dependency
    assert resolve_backend("faiss") == "faiss"
    assert resolve_backend("torch") == "torch"


def test_index_vectors_are_read_only_and_normalised():
    X = np.random.default_rng(0).normal(size=(6, 5)).astype(np.float32) * 3
    index = SimilaritySearch(make_texts(6), X, labels=np.arange(6))
    np.testing.assert_allclose(np.linalg.norm(index.vectors, axis=1), 1.0, atol=1e-6)
    with pytest.raises(ValueError):
        index.vectors[0, 0] = 1.0
    with pytest.raises(ValueError):
        index.labels[0] = 3
    assert index.labels_at([1, 4]).tolist() == [1, 4]
    assert index.config()["ties"] == "lowest index"


# ---------------------------------------------------------------- queries and observations
def test_sample_queries_without_replacement_and_reproducible():
    q = sample_queries(100, 100, rng=3)
    assert sorted(q.tolist()) == list(range(100))
    np.testing.assert_array_equal(sample_queries(100, 10, rng=3), sample_queries(100, 10, rng=3))
    dev = np.arange(50, 60)
    assert set(sample_queries(100, 10, rng=1, candidates=dev).tolist()) == set(dev.tolist())
    with pytest.raises(InvalidParameterError, match="without replacement"):
        sample_queries(100, 101, rng=0)
    with pytest.raises(InvalidParameterError):
        sample_queries(100, 11, candidates=dev)
    with pytest.raises(InvalidParameterError):
        sample_queries(10, 2, candidates=[3, 12])


def test_observation_is_frozen_float32_copy():
    x = np.ones((3, 4))
    obs = observe(x, defense={"defense": "x", "m": 1})
    x[0, 0] = 5
    assert obs.vectors.dtype == np.float32 and obs.vectors[0, 0] == 1.0
    with pytest.raises(ValueError):
        obs.vectors[0, 0] = 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        obs.source = "original"
    with pytest.raises(TypeError):
        obs.defense["m"] = 2
    with pytest.raises(DataFormatError):
        observe(np.ones(3))
    with pytest.raises(InvalidParameterError):
        Observation(np.ones((1, 2)), source="magic")


def test_protect_with_texthide_shapes_config_and_identity_case():
    rng = np.random.default_rng(6)
    X = unit(rng.normal(size=(130, 16))).astype(np.float32)
    same = protect_with_texthide(X, 0, 1, rng=0)
    np.testing.assert_array_equal(same.vectors, X)  # (m, k) = (0, 1) is the identity
    obs = protect_with_texthide(X, 256, 4, rng=0, batch_size=64)
    assert obs.vectors.shape == X.shape and obs.source == "defense"
    assert obs.defense["m"] == 256 and obs.defense["k"] == 4 and obs.defense["query_batch_size"] == 64
    assert not set(obs.defense) & {"masks", "pool", "bits", "mask_index"}  # public configuration only
    assert len(json.dumps(obs.describe())) < 1000
    with pytest.raises(InvalidParameterError, match="at least 4"):
        protect_with_texthide(X[:3], 0, 4)
    flipped = protect(X, lambda a: -a)
    np.testing.assert_array_equal(flipped.vectors, -X)
    with pytest.raises(InvalidTypeError):
        protect(X, 3)


def test_texthide_hides_from_rss_and_mix_only_leaks_partly():
    """Random unit vectors in d=64: mix-only RSS finds the query's own example about when it has the largest
    of the 4 coefficients (~1/4), TextHide (256, 4) about as often as chance (1/2000)."""
    rng = np.random.default_rng(7)
    n, d = 2000, 64
    X = unit(rng.normal(size=(n, d))).astype(np.float32)
    index = SimilaritySearch(make_texts(n), X, labels=rng.integers(0, 2, n))
    q = sample_queries(n, 400, rng=1)
    results = rss_table(index, q, rng=2, text_embeddings=X)
    by = {r.setting: r for r in results}
    assert [r.setting for r in results] == [s for s, _, _ in PAPER_SETTINGS] + ["random"]
    assert by["baseline"].metrics["identity"].mean == 1.0
    assert by["baseline"].metrics["sbert_cosine"].mean == pytest.approx(1.0, abs=1e-6)
    # mean 0.25, sd 0.022 at n=400: the bounds are > 6 sd away
    assert 0.1 < by["mix-only"].metrics["identity"].mean < 0.45
    # chance is 1/2000 per query: P(identity >= 0.03, i.e. >= 12 hits of 400) < 1e-12
    assert by["texthide"].metrics["identity"].mean < 0.03
    assert by["random"].metrics["identity"].mean < 0.03
    assert by["texthide"].defense["m"] == 256 and by["random"].attack == "random-guess"
    assert all(r.config["table_rng"] == "seed 2" for r in results)


# ---------------------------------------------------------------- random guess
def test_random_guess_reproducible_and_uniform():
    X = np.eye(10, dtype=np.float32)
    index = SimilaritySearch(make_texts(10), X)
    obs = observe(np.ones((20000, 10)))
    a = RandomGuess(index, rng=5).retrieve(obs)
    b = RandomGuess(index, rng=5).retrieve(obs)
    np.testing.assert_array_equal(a.indices, b.indices)
    assert np.isnan(a.scores).all()
    assert not np.array_equal(a.indices, RandomGuess(index, rng=6).retrieve(obs).indices)
    # chi-square goodness of fit to uniform over 10 entries, alpha = 1e-6 (false-positive rate of this test)
    from scipy.stats import chisquare

    counts = np.bincount(a.indices[:, 0], minlength=10)
    assert chisquare(counts).pvalue > 1e-6
    top3 = RandomGuess(index, rng=0).retrieve(observe(np.ones((50, 10))), top_k=3).indices
    assert all(len(set(row)) == 3 for row in top3.tolist())


# ---------------------------------------------------------------- RepRecon
def _sign_mask_problem(d=32, n_index=600, n_train=2000, seed=8):
    rng = np.random.default_rng(seed)
    sign = rng.choice([-1.0, 1.0], size=d).astype(np.float32)
    X = unit(rng.normal(size=(n_index, d))).astype(np.float32)
    train = unit(rng.normal(size=(n_train, d))).astype(np.float32)
    return sign, X, train


def test_reprecon_learns_a_fixed_sign_mask_and_rss_then_finds_the_sentence():
    sign, X, train = _sign_mask_problem()
    index = SimilaritySearch(make_texts(len(X)), X)
    q = np.arange(300)
    masked = observe(X[q] * sign, defense={"defense": "sign-mask"})
    direct = evaluate_retrieval(RSS(index), masked, q)
    rr = RepRecon(index, rng=0).fit(train * sign, train)
    assert len(rr.history) == 20 and rr.n_train == len(train)
    assert rr.history[-1] < 0.05 * rr.init_loss  # training reduced the error 20x
    # held-out error far below predicting 0 (mean square of unit vectors in d=32: 1/32)
    assert rr.reconstruction_error(X[q] * sign, X[q]) < 0.1 / 32
    res = evaluate_retrieval(rr, masked, q)
    assert res.metrics["identity"].mean >= 0.95
    assert direct.metrics["identity"].mean < 0.1  # the mask does hide from plain RSS
    assert res.config["final_train_mse"] == rr.history[-1] and res.config["rng"] == "seed 0"


def test_reprecon_cannot_learn_from_noise():
    """Negative control: protected vectors independent of the originals give chance-level identity."""
    sign, X, train = _sign_mask_problem()
    rng = np.random.default_rng(9)
    index = SimilaritySearch(make_texts(len(X)), X)
    rr = RepRecon(index, hidden=(64, 64), epochs=5, rng=0).fit(rng.normal(size=train.shape), train)
    q = np.arange(300)
    res = evaluate_retrieval(rr, observe(rng.normal(size=(300, 32))), q)
    assert res.metrics["identity"].mean < 0.05


def test_reprecon_reproducible_with_a_seed():
    sign, X, train = _sign_mask_problem(n_train=300)
    index = SimilaritySearch(make_texts(len(X)), X)

    def fit(seed):
        return RepRecon(index, hidden=(64, 64), epochs=3, rng=seed).fit(train * sign, train)

    a, b, c = fit(1), fit(1), fit(2)
    # same seed, same thread count: same init, order and float operations
    assert a.history == b.history
    np.testing.assert_array_equal(a.reconstruct(X[:10] * sign), b.reconstruct(X[:10] * sign))
    assert a.history != c.history


def test_reprecon_validation():
    sign, X, train = _sign_mask_problem(n_train=100)
    index = SimilaritySearch(make_texts(len(X)), X)
    rr = RepRecon(index, hidden=(8,), epochs=1, rng=0)
    with pytest.raises(InvalidParameterError, match="fit"):
        rr.reconstruct(X)
    with pytest.raises(InvalidParameterError, match="pairs"):
        rr.fit(train[:50], train)
    with pytest.raises(DataFormatError, match="dimension"):
        rr.fit(train, train[:, :5])
    rr.fit(train[:, :10], train)  # protected vectors may have another dimension than the originals
    with pytest.raises(DataFormatError, match="dimension"):
        rr.reconstruct(train)
    with pytest.raises(InvalidParameterError):
        RepRecon(index, epochs=0)
    with pytest.raises(InvalidTypeError):
        RepRecon(index, hidden=1024)
    with pytest.raises(InvalidTypeError):
        RepRecon(X)
    with pytest.raises(InvalidTypeError):
        RepRecon(index, rng="seed")


def test_reprecon_table_wiring():
    rng = np.random.default_rng(10)
    X = unit(rng.normal(size=(300, 16))).astype(np.float32)
    index = SimilaritySearch(make_texts(300), X, labels=rng.integers(0, 3, 300))
    out = reprecon_table(index, np.arange(200), np.arange(200, 300), rng=0, hidden=(32,), epochs=2)
    assert [r.setting for r in out] == ["baseline", "mix-only", "texthide", "random"]
    assert all(r.n_queries == 100 and "label" in r.metrics for r in out)
    assert out[0].attack == "reprecon" and out[0].config["epochs"] == 2


# ---------------------------------------------------------------- results
def test_result_is_frozen_and_exports_json_and_rows():
    rng = np.random.default_rng(11)
    X = unit(rng.normal(size=(40, 8))).astype(np.float32)
    index = SimilaritySearch(make_texts(40), X, labels=rng.integers(0, 2, 40))
    q = sample_queries(40, 12, rng=0)
    res = evaluate_retrieval(RandomGuess(index, rng=0), observe_original(X[q]), q, text_embeddings=X,
                             n_examples=3, setting="random")
    assert isinstance(res, RetrievalResult) and isinstance(res, AttackResult)
    assert set(res.metrics) == {"identity", "jaccard", "tfidf_cosine", "label", "sbert_cosine"}
    assert all(isinstance(m, Metric) and m.n == 12 and m.ci_level == 0.95 for m in res.metrics.values())
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.n_queries = 3
    with pytest.raises(TypeError):
        res.metrics["identity"] = None
    d = json.loads(json.dumps(res.to_dict(), allow_nan=False))
    assert d["attack"] == "random-guess" and d["setting"] == "random" and len(d["examples"]) == 3
    assert d["examples"][0]["score"] is None  # NaN (random guesses have no score) -> null
    rows = res.to_rows()
    assert len(rows) == 5 and {r["metric"] for r in rows} == set(res.metrics)
    assert all(r["setting"] == "random" and r["attack"] == "random-guess" for r in rows)
    record = res.to_record("texthide-rss", "table3-test")
    assert record.metrics["identity"] == res.metrics["identity"]


def test_evaluate_validation():
    X = np.eye(5, dtype=np.float32)
    index = SimilaritySearch(make_texts(5), X)
    obs = observe_original(X[:3])
    with pytest.raises(DataFormatError, match="3 observed"):
        evaluate_retrieval(RSS(index), obs, np.array([0, 1]))
    with pytest.raises(InvalidParameterError):
        evaluate_retrieval(RSS(index), obs, np.array([0, 1, 7]))
    with pytest.raises(InvalidTypeError):
        evaluate_retrieval(RSS(index), X[:3], np.array([0, 1, 2]))
    with pytest.raises(InvalidTypeError):
        evaluate_retrieval(RSS(index), obs, np.array([0.0, 1.0, 2.0]))
    with pytest.raises(DataFormatError, match="one embedding per index text"):
        evaluate_retrieval(RSS(index), obs, np.array([0, 1, 2]), text_embeddings=X[:4])
    with pytest.raises(InvalidTypeError):
        RSS(X)


# ---------------------------------------------------------------- abs-rss tables, any-source scoring, verdicts
def test_rss_table_runs_abs_rss_with_any_source_scoring_and_verdicts():
    """Random unit vectors in d=64 (as above): with TextHide (256, 4), abs-RSS's answer is one of the 4 sources
    for most encodings and beats Rand on every metric; RSS's slot-0 identity stays at chance."""
    rng = np.random.default_rng(13)
    n, d = 2000, 64
    X = unit(rng.normal(size=(n, d))).astype(np.float32)
    index = SimilaritySearch(make_texts(n), X, labels=rng.integers(0, 2, n))
    q = sample_queries(n, 300, rng=1)
    settings = (("baseline", 0, 1), ("inference", 256, 1), ("texthide", 256, 4))
    abs_rows = rss_table(index, q, settings=settings, rng=2, text_embeddings=X, attack="abs-rss", any_source=True)
    rss_rows = rss_table(index, q, settings=settings, rng=2, text_embeddings=X, any_source=True)
    a = {r.setting: r for r in abs_rows}
    r = {x.setting: x for x in rss_rows}
    assert [x.setting for x in abs_rows] == ["baseline", "inference", "texthide", "random"]
    assert a["texthide"].attack == "abs-rss" and r["texthide"].attack == "rss"
    assert a["inference"].metrics["identity"].mean == 1.0  # masks only: |sigma o e| == |e|
    assert r["inference"].metrics["identity"].mean < 0.1
    assert a["texthide"].metrics["identity_any"].mean > 0.5
    assert a["texthide"].metrics["identity_any"].mean >= a["texthide"].metrics["identity"].mean
    assert a["baseline"].metrics["identity_any"].mean == a["baseline"].metrics["identity"].mean == 1.0
    assert "identity_any" not in a["random"].metrics  # Rand has no mixture to score against
    # verdicts: exact tests for identity, identity_any and label, permutation tests vs Rand for the others
    sig = a["texthide"].significance
    assert set(sig) == {"identity", "identity_any", "label", "jaccard", "tfidf_cosine", "sbert_cosine"}
    assert all(v.reject for v in sig.values())
    assert sig["jaccard"].test.startswith("permutation") and sig["identity"].test.startswith("exact binomial")
    assert not a["random"].significance["identity"].reject
    assert set(a["random"].significance) == {"identity", "label"}
    # export: JSON, rows with p-values, record config with the identity verdict
    d = json.loads(json.dumps(a["texthide"].to_dict(), allow_nan=False))
    assert d["significance"]["identity"]["reject"] is True and d["significance"]["identity"]["alpha"] == 0.05
    assert "scores" not in d  # per-query scores stay in memory
    rows = {row["metric"]: row for row in a["texthide"].to_rows()}
    assert rows["identity_any"]["beats_random"] is True and rows["identity"]["p_value"] < 1e-10
    rec = a["texthide"].to_record("retrieval", "x")
    assert rec.config["identity_beats_random"] is True and rec.config["significance_alpha"] == 0.05
    assert set(rec.config["significance"]) == set(sig)
    with pytest.raises(InvalidParameterError, match="abs-rss"):
        rss_table(index, q, attack="reprecon")
    with pytest.raises(InvalidTypeError):
        rss_table(index, q, any_source="yes")


def test_default_rss_table_outputs_are_unchanged_by_the_new_options():
    """any_source off (the default): no identity_any metric; mixing and guesses draw from the rng exactly as
    before (the permutation tests consume the rng only after every answer was drawn). Settings without masks
    only: masks come from the OS CSPRNG, so masked rows differ between runs by design."""
    rng = np.random.default_rng(14)
    X = unit(rng.normal(size=(300, 16))).astype(np.float32)
    index = SimilaritySearch(make_texts(300), X)
    q = sample_queries(300, 100, rng=0)
    settings = PAPER_SETTINGS[:2]  # baseline (0, 1) and mix-only (0, 4)
    one = rss_table(index, q, settings=settings, rng=5, text_embeddings=X)
    two = rss_table(index, q, settings=settings, rng=5, text_embeddings=X, random_guess=False)
    assert len(one) == 3 and len(two) == 2
    assert all("identity_any" not in r.metrics for r in one)
    for a, b in zip(one, two):
        assert {k: m.mean for k, m in a.metrics.items()} == {k: m.mean for k, m in b.metrics.items()}
    assert "jaccard" in one[0].significance and "jaccard" not in two[0].significance


def test_compare_to_random_and_evaluate_alpha():
    from veil.attacks.retrieval import compare_to_random

    rng = np.random.default_rng(15)
    X = unit(rng.normal(size=(200, 8))).astype(np.float32)
    index = SimilaritySearch(make_texts(200), X)
    q = np.arange(100)
    hit = evaluate_retrieval(RSS(index), observe_original(X[q]), q, text_embeddings=X, alpha=0.01)
    rand = evaluate_retrieval(RandomGuess(index, rng=0), observe_original(X[q]), q, text_embeddings=X)
    assert hit.significance["identity"].alpha == 0.01 and hit.config["alpha"] == 0.01
    both = compare_to_random(hit, rand, rng=0, n_resamples=999)
    assert both.significance["sbert_cosine"].reject and both.significance["sbert_cosine"].alpha == 0.01
    back = compare_to_random(rand, hit, rng=0, n_resamples=999)
    assert not back.significance["sbert_cosine"].reject  # one-sided: Rand does not beat the exact attack
    with pytest.raises(InvalidTypeError):
        compare_to_random(hit, {"identity": 1})
    with pytest.raises(InvalidParameterError, match="alpha"):
        evaluate_retrieval(RSS(index), observe_original(X[q]), q, alpha=1.0)
