"""Unmix (veil.attacks.texthide.unmix): oracle tests on synthetic mixtures, real MiniLM mixtures, bad input,
the API boundary (the attack never receives ground truth) and the scoring."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

from veil.attacks import attack_names, get_attack
from veil.attacks.base import Observation
from veil.attacks.retrieval import SimilaritySearch
from veil.attacks.retrieval.observe import experiment_texthide, observe, protect_with_texthide_truth
from veil.attacks.texthide.unmix import Unmix, Unmixed, _nnls_rows, score_unmix
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError


# ---------------------------------------------------------------- synthetic data
def _index(n: int, d: int, rng: np.random.Generator, *, anisotropic: bool = True) -> SimilaritySearch:
    """Unit vectors; anisotropic ones share a dense mean direction (|mean| ~0.5, like MiniLM's ~0.46)."""
    x = rng.standard_normal((n, d)) / np.sqrt(d)
    if anisotropic:
        x += 0.6 * np.where(rng.random(d) < 0.5, -1, 1) / np.sqrt(d)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return SimilaritySearch([f"text {i}" for i in range(n)], x.astype(np.float32), backend="torch")


def _mixtures(index: SimilaritySearch, masks: np.ndarray, k: int, n: int, rng: np.random.Generator,
              scale: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """TextHide-style encodings sigma o sum_j lambda_j x_j * scale: (encodings, sources, coefficients, mask ids).

    Every 7th encoding repeats its first source in its last slot (TextHide's permutations allow it)."""
    x = index.vectors.astype(np.float64)
    sources = np.stack([rng.choice(len(index), size=k, replace=False) for _ in range(n)])
    if k > 1:
        sources[::7, -1] = sources[::7, 0]
    lam = np.abs(rng.standard_normal((n, k)))
    lam /= lam.sum(axis=1, keepdims=True)
    mask_ids = rng.integers(0, len(masks), size=n)
    e = masks[mask_ids] * np.einsum("nk,nkd->nd", lam, x[sources]) * scale
    return e.astype(np.float32), sources, lam, mask_ids


def _signs(m: int, d: int, rng: np.random.Generator) -> np.ndarray:
    return np.where(rng.random((m, d)) < 0.5, -1, 1).astype(np.int8)


def _recovered_exactly(out: Unmixed, sources: np.ndarray) -> np.ndarray:
    return np.array([set(s) <= set(r) for s, r in zip(sources.tolist(), out.ids.tolist())])


# ---------------------------------------------------------------- (1) oracle: true masks -> exact recovery
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_true_masks_recover_every_synthetic_mixture_exactly(k):
    rng = np.random.default_rng(k)
    index = _index(400, 64, rng)
    masks = _signs(16, 64, rng)
    e, sources, lam, mask_ids = _mixtures(index, masks, k, 150, rng, scale=8.0)
    given = masks.copy()
    given[::2] *= -1  # a recovered mask may come out negated: the same mask to the attack
    out = Unmix(index, given, k=k).attack(observe(e))
    assert _recovered_exactly(out, sources).all()
    np.testing.assert_array_equal(out.mask_ids, mask_ids)
    np.testing.assert_array_equal(out.mask_signs, np.where(mask_ids % 2 == 0, -1, 1))
    assert (out.sign_flips == 0).all() and (out.residuals < 1e-5).all()
    # weights are the coefficients (times the scale); a repeated source carries both of its slots' weight
    for i in range(len(e)):
        expected = {}
        for s, c in zip(sources[i], lam[i]):
            expected[int(s)] = expected.get(int(s), 0.0) + 8.0 * c
        got = {int(s): w for s, w in zip(out.ids[i], out.weights[i]) if w > 1e-6}
        assert got.keys() == expected.keys()
        np.testing.assert_allclose([got[s] for s in expected], list(expected.values()), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out.coefficients.sum(axis=1), 1.0, atol=1e-9)
    assert (np.diff(out.weights, axis=1) <= 0).all()  # ordered by weight
    res = score_unmix(out, sources)
    assert res.metrics["all_sources"].mean == res.metrics["source_recall"].mean == 1.0


def test_isotropic_index_needs_the_exhaustive_mask_search():
    """Without a mean direction the mean-agreement score cannot rank masks; step 4 (every mask scored by its
    best match in the index) still finds each encoding's mask, and turning it off loses most encodings."""
    rng = np.random.default_rng(11)
    index = _index(300, 128, rng, anisotropic=False)
    masks = _signs(32, 128, rng)
    e, sources, _, mask_ids = _mixtures(index, masks, 2, 60, rng)
    full = Unmix(index, masks, k=2).attack(observe(e))
    assert _recovered_exactly(full, sources).all()
    np.testing.assert_array_equal(full.mask_ids, mask_ids)
    blind = Unmix(index, masks, k=2, exhaustive=False).attack(observe(e))
    assert _recovered_exactly(blind, sources).mean() < 0.5  # measured 0.27: 3 of 32 masks, uninformative ranking


def test_sign_repair_corrects_mask_bits_the_recovery_got_wrong():
    rng = np.random.default_rng(5)
    index = _index(500, 96, rng)
    masks = _signs(8, 96, rng)
    e, sources, _, mask_ids = _mixtures(index, masks, 3, 120, rng)
    noisy = masks * np.where(rng.random(masks.shape) < 0.1, -1, 1).astype(np.int8)  # 10% of the bits wrong
    repaired = Unmix(index, noisy, k=3).attack(observe(e))
    assert _recovered_exactly(repaired, sources).all()
    np.testing.assert_array_equal(repaired.mask_ids, mask_ids)
    # the repair flipped exactly the wrong bits of the chosen mask back
    wrong = (noisy != masks).sum(axis=1)
    np.testing.assert_array_equal(repaired.sign_flips, wrong[repaired.mask_ids])
    strict = Unmix(index, noisy, k=3, repair_signs=False).attack(observe(e))
    assert _recovered_exactly(strict, sources).mean() < 0.9  # measured 0.33
    assert (strict.sign_flips == 0).all()


def test_nnls_rows_matches_scipy_row_by_row():
    from scipy.optimize import nnls

    rng = np.random.default_rng(3)
    for t in (1, 2, 4, 6):
        atoms = rng.standard_normal((40, t, 12))
        u = rng.standard_normal((40, 12))  # random targets: many rows have negative unconstrained weights
        w, r = _nnls_rows(atoms, u)
        for i in range(40):
            ref = nnls(atoms[i].T, u[i])[0]
            np.testing.assert_allclose(w[i], ref, atol=1e-9)
            np.testing.assert_allclose(r[i], u[i] - atoms[i].T @ ref, atol=1e-9)


def test_swap_scores_are_the_least_squares_residual_reduction():
    """The OLS score of entry i equals |r|^2 - |r_i|^2, r_i the least-squares residual with i added (slow loop)."""
    rng = np.random.default_rng(8)
    index = _index(60, 16, rng)
    attack = Unmix(index, _signs(2, 16, rng), k=3)
    x = index.vectors.astype(np.float64)
    sel = np.array([[4, 17], [30, 2]])
    u = np.stack([0.7 * x[4] + 0.2 * x[17] + 0.1 * x[9], 0.5 * x[30] + 0.3 * x[2] + 0.2 * x[41]])
    w, r = _nnls_rows(x[sel], u)
    assert (w > 0).all()  # interior NNLS solutions = least squares, so the identity is exact
    g = np.stack([attack._products(x[sel[:, j]]) for j in range(2)], axis=1)
    scores = attack._ols_scores(attack._products(u), g, sel, w)
    for b in range(2):
        for i in range(len(index)):
            if i in sel[b]:
                assert scores[b, i] == -2.0
                continue
            support = x[list(sel[b]) + [i]].T
            ri = u[b] - support @ np.linalg.lstsq(support, u[b], rcond=None)[0]
            gain = r[b] @ r[b] - ri @ ri
            if abs(r[b] @ x[i]) < 1e-5:
                continue  # float32 scores cannot resolve the sign of a vanishing correlation
            if r[b] @ x[i] > 0:
                assert scores[b, i] == pytest.approx(gain, rel=1e-3, abs=1e-6)
            else:
                assert scores[b, i] == -1.0
        assert scores[b].argmax() == (9, 41)[b]


# ---------------------------------------------------------------- (2) real MiniLM representations
@pytest.fixture(scope="module")
def trec_index(builtin):
    from veil.encoders import TextEncoder

    corpus = builtin("trec-questions")
    X = TextEncoder("minilm").encode_corpus(corpus, None, progress=False)[:2000]  # the retrieval runner's cache
    return SimilaritySearch(list(corpus.texts[:2000]), X, backend="torch"), X


@pytest.mark.slow
@pytest.mark.parametrize("k", [2, 4])
def test_texthide_mixtures_of_real_sentences_with_the_true_pool(trec_index, k):
    from veil.defenses.texthide import MaskPool

    index, X = trec_index
    rng = np.random.default_rng(100 + k)
    q = rng.choice(len(X), 500, replace=False)
    pool = MaskPool.from_masks(_signs(64, X.shape[1], rng))  # an experiment's pool, reproducible on purpose
    texthide = experiment_texthide(k, pool, 100 + k, record_details=True)
    obs, truth = protect_with_texthide_truth(X[q] * np.float32(np.sqrt(X.shape[1])), 64, k, texthide=texthide)
    true_sources = truth.index_ids(q)
    out = Unmix(index, pool.masks.numpy(), k=k).attack(obs)
    # every mixture of distinct index vectors is explained exactly, so every source is found
    res = score_unmix(out, true_sources, index=index)
    assert res.metrics["all_sources"].mean == 1.0 and res.metrics["source_recall"].mean == 1.0
    assert (out.residuals < 1e-5).all()
    np.testing.assert_array_equal(out.mask_ids, truth.mask_ids)
    distinct = np.array([len(set(row)) == k for row in true_sources.tolist()])  # else slots share a weight
    np.testing.assert_allclose(np.sort(out.coefficients[distinct], axis=1),
                               np.sort(truth.coefficients[distinct], axis=1), atol=1e-4)
    # recovered masks with 5% of their bits wrong (mask-recovery is not perfect): the repair absorbs them
    noisy = pool.masks.numpy() * np.where(rng.random((64, X.shape[1])) < 0.05, -1, 1).astype(np.int8)
    res_noisy = score_unmix(Unmix(index, noisy, k=k).attack(obs), true_sources, index=index)
    strict = score_unmix(Unmix(index, noisy, k=k, repair_signs=False).attack(obs), true_sources, index=index)
    assert res_noisy.metrics["all_sources"].ci_low > strict.metrics["all_sources"].ci_high
    # measured at these seeds: 1.0 with the repair for k=2 and k=4; 0.874 (k=2) and 0.592 (k=4) without it
    assert res_noisy.metrics["all_sources"].mean >= 0.99


# ---------------------------------------------------------------- (3) bad input -> typed errors
def test_bad_input_gives_typed_errors():
    rng = np.random.default_rng(0)
    index = _index(50, 16, rng)
    masks = _signs(4, 16, rng)
    good = observe(rng.standard_normal((5, 16)).astype(np.float32))
    with pytest.raises(InvalidTypeError):
        Unmix(index.vectors, masks, k=2)  # an array is not an index
    with pytest.raises(DataFormatError, match="dimension"):
        Unmix(index, _signs(4, 15, rng), k=2)
    with pytest.raises(DataFormatError, match="-1 and \\+1"):
        Unmix(index, np.where(masks > 0, 1, 0), k=2)
    with pytest.raises(DataFormatError, match="-1 and \\+1"):
        Unmix(index, masks * 0.5, k=2)
    nan_masks = masks.astype(np.float32)
    nan_masks[0, 0] = np.nan
    with pytest.raises(DataFormatError, match="NaN"):
        Unmix(index, nan_masks, k=2)
    with pytest.raises(DataFormatError, match="empty"):
        Unmix(index, np.empty((0, 16)), k=2)
    with pytest.raises(InvalidTypeError):
        Unmix(index, "masks", k=2)
    with pytest.raises(InvalidParameterError):
        Unmix(index, masks, k=0)
    with pytest.raises(InvalidParameterError):
        Unmix(index, masks, k=51)  # more sources than index entries
    with pytest.raises(InvalidTypeError):
        Unmix(index, masks, k=2.0)
    with pytest.raises(InvalidParameterError):
        Unmix(index, masks, k=2, unexplained_above=1.5)
    with pytest.raises(InvalidTypeError):
        Unmix(index, masks, k=2, repair_signs="yes")
    attack = Unmix(index, masks, k=2)
    with pytest.raises(DataFormatError, match="dimension"):
        attack.attack(observe(rng.standard_normal((5, 8)).astype(np.float32)))
    with pytest.raises(InvalidParameterError, match="k=4"):
        attack.attack(Observation(good.vectors, defense={"defense": "texthide", "k": 4}))
    bad = rng.standard_normal((5, 16)).astype(np.float32)
    bad[2, 3] = np.nan
    with pytest.raises(DataFormatError, match="NaN"):
        attack.attack(observe(bad))
    with pytest.raises(DataFormatError, match="empty"):
        SimilaritySearch([], np.empty((0, 16), dtype=np.float32))
    # scoring
    out = attack.attack(good)
    with pytest.raises(DataFormatError):
        score_unmix(out, np.zeros((4, 2), dtype=np.int64))  # one row per encoding
    with pytest.raises(InvalidParameterError):
        score_unmix(out, np.full((5, 2), 50))  # not an index id
    with pytest.raises(InvalidTypeError):
        score_unmix(out, np.zeros((5, 2)))  # float ids
    with pytest.raises(InvalidParameterError):
        score_unmix(out, np.zeros((5, 2), dtype=np.int64), ci_level=1.0)
    with pytest.raises(InvalidParameterError):
        score_unmix(out, np.zeros((5, 2), dtype=np.int64), index=_index(40, 16, rng))  # not the attacked index


# ---------------------------------------------------------------- (4) the attack never takes ground truth
def test_the_attack_sees_only_the_observation():
    from veil.defenses.texthide import MaskPool

    params = inspect.signature(Unmix.attack).parameters
    assert list(params) == ["self", "observation"]
    init = set(inspect.signature(Unmix.__init__).parameters)
    assert not init & {"truth", "details", "pool", "sources", "coefficients", "labels", "mask_index"}
    assert not Unmix.threat.knows_key
    rng = np.random.default_rng(1)
    index = _index(80, 16, rng)
    x = index.vectors[:12]
    pool = MaskPool.from_masks(_signs(4, 16, rng))
    texthide = experiment_texthide(2, pool, 0, record_details=True)
    obs, truth = protect_with_texthide_truth(x, 4, 2, texthide=texthide, batch_size=6)
    attack = Unmix(index, pool.masks.numpy(), k=2)
    for leak in (truth, (obs, truth), texthide.last_details, obs.vectors):
        with pytest.raises(InvalidTypeError):
            attack.attack(leak)
    with pytest.raises(TypeError):
        attack.attack(obs, truth)  # no second argument to smuggle it in
    with pytest.raises(InvalidTypeError):
        Unmix(index, pool, k=2)  # the defense's pool object is not an array of recovered masks
    # deterministic: the answer depends on the observation only
    a, b = attack.attack(obs), attack.attack(Observation(np.array(obs.vectors)))
    np.testing.assert_array_equal(a.ids, b.ids)
    np.testing.assert_array_equal(a.weights, b.weights)
    assert a.defense["defense"] == "texthide" and "masks" not in a.config
    assert "unmix" in attack_names() and get_attack("unmix") is Unmix
    with pytest.raises(ValueError):
        a.ids[0, 0] = 3  # read-only output


# ---------------------------------------------------------------- scoring
def _unmixed(ids, index_size: int = 10) -> Unmixed:
    ids = np.asarray(ids, dtype=np.int64)
    n, k = ids.shape
    return Unmixed(ids=ids, weights=np.tile(np.arange(k, 0, -1, dtype=float), (n, 1)),
                   mask_ids=np.zeros(n, dtype=np.int64), mask_signs=np.ones(n, dtype=np.int8),
                   sign_flips=np.zeros(n, dtype=np.int64), residuals=np.zeros(n), index_size=index_size)


def test_scoring_by_hand():
    from veil.metrics.leakage import wilson_interval

    truth = np.array([[0, 1], [2, 2], [3, 4], [5, 6]])
    out = _unmixed([[1, 0], [2, 7], [3, 9], [8, 9]])
    res = score_unmix(out, truth, n_bootstrap=500, rng=1)
    m = res.metrics
    assert m["all_sources"].mean == 0.5  # rows 0 and 1 (row 1's two slots are one example)
    assert m["source_recall"].mean == pytest.approx((1 + 1 + 0.5 + 0) / 4)
    assert m["query_recovered"].mean == 0.75
    assert (m["all_sources"].ci_low, m["all_sources"].ci_high) == pytest.approx(wilson_interval(2, 4))
    assert m["source_recall"].ci_low <= m["source_recall"].mean <= m["source_recall"].ci_high
    assert res.n_queries == 4 and res.attack == "unmix"
    assert score_unmix(out, truth, n_bootstrap=500, rng=1).metrics == m  # the bootstrap seed makes it reproducible
    assert res.to_dict()["metrics"]["all_sources"]["n"] == 4


def test_identical_index_vectors_count_as_one_source_only_when_asked():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 8)).astype(np.float32)
    x[5] = x[2]  # e.g. two texts that differ only in case under an uncased encoder
    index = SimilaritySearch([f"t{i}" for i in range(6)], x, backend="torch")
    out = _unmixed([[5, 0]], index_size=6)
    truth = np.array([[2, 0]])
    assert score_unmix(out, truth).metrics["all_sources"].mean == 0.0
    assert score_unmix(out, truth, index=index).metrics["all_sources"].mean == 1.0


def test_k_matches_the_declared_defense_and_warns_about_nothing():
    rng = np.random.default_rng(4)
    index = _index(100, 16, rng)
    masks = _signs(4, 16, rng)
    e, sources, _, _ = _mixtures(index, masks, 2, 20, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = Unmix(index, masks, k=2).attack(Observation(e, defense={"defense": "texthide", "k": 2, "m": 4}))
    assert _recovered_exactly(out, sources).all()
    assert score_unmix(out, sources).defense["m"] == 4
