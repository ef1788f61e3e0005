"""Mask-pool recovery on TextHide (issue 11): observation plumbing against the truth, the algorithm's parts
against slow references, exact recovery on synthetic data, high recovery on real MiniLM vectors, controls
that must fail, the truth kept away from the attack, and typed errors on bad input."""

from __future__ import annotations

import inspect
import json
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest

from veil.attacks import attack_names, get_attack
from veil.attacks.base import Observation
from veil.attacks.texthide import (MaskRecovery, MaskRecoveryResult, PublicStats, RecoveredMasks, TextHideTruth,
                                   evaluate_mask_recovery, observe_inference, observe_training_run,
                                   score_mask_recovery)
from veil.attacks.texthide.mask_recovery import _best, refine_masks, soft_mask_estimates, vote_masks
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError, PrivacyLeakWarning
from veil.results import Metric


def texthide(m, k, dim, *, seed=0, record=True):
    """A TextHide with a seeded pool and seeded mixing (tests only: both warn)."""
    from veil.defenses.texthide import MaskPool, TextHide

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return TextHide(k=k, pool=MaskPool(m, dim, rng=seed), rng=seed + 1, record_details=record)


def anisotropic(n, d, seed):
    """Sentence-embedding-like vectors: a strong mean direction plus correlated noise (low-rank + isotropic)."""
    rng = np.random.default_rng(seed)
    mu = np.where(rng.random(d) < 0.5, -1.0, 1.0) * rng.uniform(0.2, 1.0, size=d)
    basis = rng.normal(size=(d, 8)) / np.sqrt(8)

    def draw(count):
        return (mu + 0.4 * rng.normal(size=(count, 8)) @ basis.T + 0.2 * rng.normal(size=(count, d))
                ).astype(np.float32)
    return draw(n), draw(4000)


# ---------------------------------------------------------------- imports and registry
def test_import_is_light_and_registered():
    code = ("import sys, veil.attacks.texthide; "
            "print(sorted(m for m in ('torch', 'sklearn', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert "mask-recovery" in attack_names()
    assert get_attack("mask-recovery") is MaskRecovery


# ---------------------------------------------------------------- what the eavesdropper sees vs the truth
def reconstruct(X, truth, public=None):
    """Slow reference: each encoding rebuilt from the truth, one at a time (Alg. 1)."""
    out = np.empty((truth.n_encodings, X.shape[1]))
    kp = truth.sources.shape[1]
    for i in range(truth.n_encodings):
        z = sum(truth.coefficients[i, j] * X[truth.sources[i, j]].astype(np.float64) for j in range(kp))
        if truth.public_index is not None:
            z = z + sum(truth.coefficients[i, kp + j] * public[truth.public_index[i, j]]
                        for j in range(truth.public_index.shape[1]))
        out[i] = truth.masks[truth.mask_index[i]] * z
    return out


@pytest.mark.parametrize("m", [5, 0, None])
def test_training_run_truth_rebuilds_every_encoding(m):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 12)).astype(np.float32)
    th = texthide(m, 3, 12)
    obs, truth = observe_training_run(X, th, epochs=3, batch_size=16, rng=4)
    assert len(obs) == truth.n_encodings == 150 and obs.source == "defense"
    np.testing.assert_allclose(obs.vectors, reconstruct(X, truth), rtol=1e-5, atol=1e-5)
    for epoch in range(3):  # every example is encrypted once per epoch, in slot 0
        assert sorted(truth.sources[truth.epoch == epoch, 0]) == list(range(50))
    assert truth.sources[:50, 0].tolist() != truth.sources[50:100, 0].tolist()  # reshuffled each epoch
    again_obs, again = observe_training_run(X, th, epochs=3, batch_size=16, rng=4)
    assert np.array_equal(again.sources[:, 0], truth.sources[:, 0])  # the order follows rng
    assert truth.masks.shape == ((5, 12) if m == 5 else (1, 12) if m == 0 else (150, 12))
    assert obs.defense["epochs"] == 3 and obs.defense["m"] == m and obs.defense["k"] == 3


def test_inter_mode_truth_and_inference_truth():
    from veil.defenses.texthide import MaskPool, TextHide

    rng = np.random.default_rng(1)
    X, public = rng.normal(size=(40, 8)).astype(np.float32), rng.normal(size=(30, 8)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        th = TextHide(k=4, pool=MaskPool(3, 8, rng=2), public=public, rng=3, record_details=True)
    obs, truth = observe_training_run(X, th, epochs=2, batch_size=10, rng=0)
    assert truth.sources.shape == (80, 2) and truth.public_index.shape == (80, 2)
    np.testing.assert_allclose(obs.vectors, reconstruct(X, truth, public), rtol=1e-5, atol=1e-5)
    obs, truth = observe_inference(X, texthide(3, 4, 8), repeats=2)
    assert truth.sources[:, 0].tolist() == list(range(40)) * 2 and truth.epoch.tolist() == [0] * 40 + [1] * 40
    np.testing.assert_allclose(obs.vectors, reconstruct(X, truth), rtol=1e-6)
    assert obs.defense["observed"].startswith("inference")


# ---------------------------------------------------------------- the parts against slow references
def test_soft_estimates_match_the_formula():
    rng = np.random.default_rng(2)
    E, mu = rng.normal(size=(30, 6)).astype(np.float32), rng.normal(size=6)
    T = soft_mask_estimates(E, mu)
    for i in range(30):
        row = []
        for j in range(6):
            s2 = max(float(np.mean(E[:, j].astype(np.float64) ** 2)) - mu[j] ** 2,
                     1e-3 * float(np.mean(E.astype(np.float64) ** 2)))
            row.append(np.tanh(E[i, j] * mu[j] / s2))
        np.testing.assert_allclose(T[i], np.array(row) / np.linalg.norm(row), rtol=1e-4, atol=1e-6)


def test_vote_matches_a_loop():
    rng = np.random.default_rng(3)
    T, a = rng.normal(size=(200, 9)).astype(np.float32), rng.integers(-1, 6, size=200)
    ref = np.ones((7, 9), dtype=np.float32)  # cluster 6 is empty: all +1
    for c in range(6):
        ref[c] = np.where(T[a == c].astype(np.float64).sum(0) >= 0, 1, -1)
    assert np.array_equal(vote_masks(T, a, 7), ref)


@pytest.mark.parametrize("top", [1, 3, 5])
def test_top_masks_match_a_full_sort(top, monkeypatch):
    import veil.attacks.texthide.mask_recovery as mr

    monkeypatch.setattr(mr, "_CHUNK", 7)  # several row blocks
    rng = np.random.default_rng(40)
    T, C = rng.normal(size=(30, 8)).astype(np.float32), rng.normal(size=(5, 8)).astype(np.float32)
    idx, val = _best(T, C, top)
    S = (T.astype(np.float64) @ C.T.astype(np.float64)) / np.sqrt(8)
    ref = np.array([sorted(range(5), key=lambda c: -S[i, c])[:top] for i in range(30)])
    assert np.array_equal(idx, ref)
    np.testing.assert_allclose(val, np.take_along_axis(S, ref, axis=1), rtol=1e-5)


def icm_reference(E, assignment, masks, mean, precision, max_sweeps):
    """Slow reference of step 3, written from the objective: one cluster, one coordinate at a time."""
    out = masks.astype(np.float64).copy()
    lmu = precision @ mean
    for c in range(len(masks)):
        members = E[assignment == c].astype(np.float64)
        M, s, sig = members.T @ members, members.sum(0), out[c]
        for _ in range(max_sweeps):
            changed = False
            for j in range(len(sig)):
                field = lmu[j] * s[j] - sum(precision[j, l] * M[j, l] * sig[l] for l in range(len(sig)) if l != j)
                new = 1.0 if field >= 0 else -1.0
                changed |= new != sig[j]
                sig[j] = new
            if not changed:
                break
    return out


@pytest.mark.parametrize("group", [1, 2, 32])
def test_refine_matches_the_slow_reference(group):
    rng = np.random.default_rng(4)
    d = 7
    E = rng.normal(loc=0.5, size=(60, d)).astype(np.float32)
    a = rng.integers(0, 3, size=60)
    start = np.where(rng.random((3, d)) < 0.5, 1.0, -1.0).astype(np.float32)
    A = rng.normal(size=(d, d))
    precision = np.linalg.inv(A @ A.T / d + np.eye(d))
    mean = rng.normal(size=d)
    fast = refine_masks(E, a, start, mean, precision, max_sweeps=5, group=group)
    assert np.array_equal(fast, icm_reference(E, a, start, mean, precision, 5))


def score_reference(masks, assignment, truth):
    """Slow reference of the scores: best sign-symmetric agreement per true mask, exact match per encoding."""
    bits, exact = [], []
    for t in truth.masks:
        agreements = [max(np.mean(t == r), np.mean(t == -r)) for r in masks] or [0.5]
        bits.append(max(agreements))
    for i, a in enumerate(assignment):
        t = truth.masks[truth.mask_index[i]]
        exact.append(a >= 0 and (np.array_equal(masks[a], t) or np.array_equal(masks[a], -t)))
    return float(np.mean(bits)), float(np.mean(exact))


def fake_truth(masks, mask_index):
    n = len(mask_index)
    return TextHideTruth(sources=np.arange(n)[:, None], coefficients=np.ones((n, 1)), mask_index=mask_index,
                         masks=masks, public_index=None, epoch=np.zeros(n), pool_size=len(masks), n_examples=n)


def test_scoring_matches_the_reference_and_is_sign_symmetric():
    rng = np.random.default_rng(5)
    true = np.where(rng.random((6, 20)) < 0.5, 1, -1).astype(np.int8)
    mask_index = rng.integers(0, 6, size=300)
    truth = fake_truth(true, mask_index)
    rec_masks = true[[0, 1, 2, 3]].copy()
    rec_masks[1] *= -1          # a negated mask is the same mask
    rec_masks[2, :3] *= -1      # 17 of 20 bits
    assignment = np.where(mask_index < 4, mask_index, -1)
    assignment[:10] = 3         # some wrong assignments
    rec = RecoveredMasks(rec_masks, assignment)
    res = score_mask_recovery(rec, truth)
    bits, exact = score_reference(rec_masks, assignment, truth)
    assert res.metrics["mask_bits"].mean == pytest.approx(bits)
    assert res.metrics["encodings_exact"].mean == pytest.approx(exact)
    assert res.metrics["masks_exact"].mean == pytest.approx(3 / 6)
    assert res.metrics["encodings_assigned"].mean == pytest.approx(np.mean(assignment >= 0))
    for m in res.metrics.values():
        assert m.ci_low <= m.mean <= m.ci_high and m.ci_level == 0.95
    nothing = score_mask_recovery(RecoveredMasks(np.zeros((0, 20)), np.full(300, -1)), truth)
    assert nothing.metrics["mask_bits"].mean == 0.5 and nothing.metrics["encodings_exact"].mean == 0.0
    json.dumps(res.to_dict())
    assert {r["metric"] for r in res.to_rows()} == set(res.metrics) and isinstance(res, MaskRecoveryResult)


# ---------------------------------------------------------------- recovery
def test_synthetic_pool_is_recovered_exactly():
    X, public = anisotropic(600, 64, seed=6)
    obs, truth = observe_training_run(X, texthide(8, 2, 64, seed=7), epochs=3, rng=8)
    res = evaluate_mask_recovery(MaskRecovery.from_public(public, rng=9), obs, truth)
    assert res.config["m_recovered"] == 8
    assert res.metrics["mask_bits"].mean == 1.0 and res.metrics["masks_exact"].mean == 1.0
    assert res.metrics["encodings_exact"].mean > 0.99


def test_upper_bound_and_vote_only_variants():
    X, public = anisotropic(600, 64, seed=31)
    obs, truth = observe_training_run(X, texthide(8, 2, 64, seed=32), epochs=3, rng=33)
    capped = MaskRecovery.from_public(public, max_masks=5, rng=34).recover(obs)
    assert capped.m_estimate == 5 and capped.assignment.max() == 4
    stats = PublicStats.from_vectors(public, covariance=False)
    res = evaluate_mask_recovery(MaskRecovery(stats, rng=35), obs, truth)
    assert res.config["m_recovered"] == 8 and res.metrics["mask_bits"].mean > 0.9


def test_control_without_mask_reuse_recovers_nothing():
    """m=None (a fresh mask per encoding): nothing is shared, so no mask may be 'recovered'."""
    X, public = anisotropic(600, 64, seed=10)
    obs, truth = observe_training_run(X, texthide(None, 2, 64, seed=11), epochs=2, rng=12)
    res = evaluate_mask_recovery(MaskRecovery.from_public(public, rng=13), obs, truth)
    assert res.config["m_recovered"] == 0 and res.metrics["masks_exact"].mean == 0.0
    assert res.metrics["mask_bits"].mean == 0.5


@pytest.fixture(scope="module")
def trec(builtin):
    from veil.encoders import TextEncoder

    corpus, enc = builtin("trec-questions"), TextEncoder("minilm")
    public = np.concatenate([enc.encode_corpus(corpus, "dev", progress=False),
                             enc.encode_corpus(corpus, "test", progress=False)])
    return enc.encode_corpus(corpus, "train", progress=False), PublicStats.from_vectors(public, source="trec dev+test")


@pytest.mark.slow
def test_real_minilm_training_run_and_inference(trec):
    """trec-questions train (4,325 MiniLM vectors), public statistics from its dev+test splits."""
    X, stats = trec
    obs, truth = observe_training_run(X, texthide(32, 4, X.shape[1], seed=14), epochs=2, rng=15)
    rec = MaskRecovery(stats, rng=16).recover(obs)
    res = score_mask_recovery(rec, truth, observation=obs)
    assert res.metrics["mask_bits"].mean >= 0.99 and res.metrics["masks_exact"].mean >= 0.9
    assert res.metrics["encodings_exact"].mean >= 0.95 and abs(rec.m_estimate - 32) <= 2
    obs, truth = observe_inference(X, texthide(16, 1, X.shape[1], seed=17), repeats=1)
    rec = MaskRecovery(stats, rng=18).recover(obs)
    res = score_mask_recovery(rec, truth)
    assert res.metrics["mask_bits"].mean >= 0.99 and res.metrics["encodings_exact"].mean >= 0.9
    # a control that must fail: the same recovery scored against another pool
    random_pool = np.where(np.random.default_rng(0).random(truth.masks.shape) < 0.5, 1, -1)
    other = TextHideTruth(truth.sources, truth.coefficients, truth.mask_index, random_pool, None, truth.epoch, 16,
                          truth.n_examples)
    wrong = score_mask_recovery(rec, other)
    assert wrong.metrics["mask_bits"].mean < 0.7 and wrong.metrics["masks_exact"].mean == 0.0


@pytest.mark.slow
def test_real_minilm_public_statistics_from_another_domain(trec, builtin):
    """Public statistics from movie reviews (rt-polarity dev) for questions (trec): the first pass finds part of
    the pool; the refit on the encodings it unmasked (in-domain statistics) recovers all of it."""
    from veil.encoders import TextEncoder

    X = trec[0]
    reviews = TextEncoder("minilm").encode_corpus(builtin("rt-polarity"), "dev", progress=False)
    obs, truth = observe_training_run(X, texthide(32, 4, X.shape[1], seed=36), epochs=1, rng=37)
    once = evaluate_mask_recovery(MaskRecovery.from_public(reviews, refits=0, rng=38), obs, truth)
    twice = evaluate_mask_recovery(MaskRecovery.from_public(reviews, refits=1, rng=38), obs, truth)
    assert once.metrics["encodings_exact"].mean < 0.6
    assert twice.metrics["masks_exact"].mean == 1.0 and twice.metrics["encodings_exact"].mean > 0.95
    assert [p["stats"] for p in twice.config["passes"]] == ["public vectors", "encodings unmasked by pass 1"]


# ---------------------------------------------------------------- the truth never reaches the attack
def test_the_attack_sees_the_observation_only():
    X, public = anisotropic(300, 16, seed=19)
    obs, truth = observe_training_run(X, texthide(4, 2, 16, seed=20), epochs=2, rng=21)
    attack = MaskRecovery.from_public(public, rng=22)
    assert list(inspect.signature(MaskRecovery.recover).parameters) == ["self", "observation"]
    with pytest.raises(InvalidTypeError, match="scoring only"):
        attack.recover(truth)
    with pytest.raises(InvalidTypeError):
        attack.recover(obs.vectors)
    assert set(Observation.__dataclass_fields__) == {"vectors", "defense", "source"}
    assert not {"masks", "mask_index", "sources", "coefficients"} & set(obs.defense)
    described = json.dumps(dict(obs.defense))  # plain public configuration, no key material
    assert len(described) < 2000 and "mask_index" not in described
    # the recovery depends on the vectors alone: the same vectors with no description give the same answer
    bare = Observation(vectors=obs.vectors.copy())
    a, b = MaskRecovery.from_public(public, rng=23).recover(obs), MaskRecovery.from_public(public, rng=23).recover(bare)
    assert np.array_equal(a.masks, b.masks) and np.array_equal(a.assignment, b.assignment)
    assert repr(truth).startswith("TextHideTruth(n_encodings=600,") and "[" not in repr(truth)
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(truth)
    assert not truth.masks.flags.writeable and not a.masks.flags.writeable


# ---------------------------------------------------------------- bad input
def test_bad_input_raises_typed_errors():
    X, public = anisotropic(100, 16, seed=24)
    attack = MaskRecovery.from_public(public)
    obs, truth = observe_training_run(X, texthide(4, 2, 16), epochs=1)
    with pytest.raises(DataFormatError, match="dimension"):
        attack.recover(Observation(vectors=np.ones((5, 8), dtype=np.float32)))
    with pytest.raises(DataFormatError, match="NaN"):
        Observation(vectors=np.full((3, 16), np.nan, dtype=np.float32))
    with pytest.raises(DataFormatError, match="empty"):
        Observation(vectors=np.zeros((0, 16), dtype=np.float32))
    bad = public.copy()
    bad[0, 0] = np.nan
    with pytest.raises(DataFormatError, match="NaN"):
        MaskRecovery.from_public(bad)
    with pytest.raises(DataFormatError):
        MaskRecovery.from_public(public[:1])
    with pytest.raises(DataFormatError):
        PublicStats(mean=np.ones((2, 16)))
    with pytest.raises(InvalidTypeError):
        MaskRecovery(public)
    for kwargs in ({"max_masks": 0}, {"seeds_per_round": 0}, {"min_cluster_size": 0}, {"shrinkage": 2.0}):
        with pytest.raises(InvalidParameterError):
            MaskRecovery.from_public(public, **kwargs)
    with pytest.raises(InvalidTypeError):
        MaskRecovery.from_public(public, rng="seed")
    with pytest.raises(InvalidParameterError, match="record_details=True"):
        observe_training_run(X, texthide(4, 2, 16, record=False), epochs=1)
    with pytest.raises(InvalidParameterError, match="dimension"):
        observe_training_run(X[:, :8], texthide(4, 2, 16), epochs=1)
    with pytest.raises(InvalidParameterError):
        observe_training_run(X, texthide(4, 2, 16), epochs=0)
    with pytest.raises(InvalidParameterError, match="at least 4"):
        observe_training_run(X[:3], texthide(4, 4, 16), epochs=1)
    with pytest.raises(InvalidTypeError):
        observe_inference(X, "texthide")
    nan = X.copy()
    nan[1, 1] = np.inf
    with pytest.raises(DataFormatError):
        observe_inference(nan, texthide(4, 1, 16))
    rec = attack.recover(obs)
    with pytest.raises(DataFormatError, match="assignments"):
        score_mask_recovery(RecoveredMasks(rec.masks, rec.assignment[:-1]), truth)
    with pytest.raises(InvalidTypeError):
        score_mask_recovery(rec, obs)
    with pytest.raises(DataFormatError):
        RecoveredMasks(np.ones((2, 16)), np.array([0, 5]))
    assert isinstance(score_mask_recovery(rec, truth).metrics["mask_bits"], Metric)
