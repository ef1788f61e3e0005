"""Dirac canaries and the white-box auditor: the signal it computes for each canary is the clipped gradient the
real training loop adds (checked against torch autograd on the defense's own head), the columns it reads hold
nothing but that signal and the noise, and the transcript checks accept DP-SGD and reject its broken controls."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from veil.attacks.audit.canaries import (DiracCanaries, WhiteBoxScorer, _canary_gradients, black_box_scores,
                                         mechanism_checks)
from veil.defenses.dpsgd import DPSGD
from veil.defenses.dpsgd.controls import HalfNoise, NoClip
from veil.errors import DataFormatError, PrivacyLeakWarning


def _real(n=200, d=24, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X, (X[:, 0] > 0).astype(np.int64)


def test_canaries_are_their_own_axis_at_the_norm_of_a_real_embedding():
    X, _ = _real()
    c = DiracCanaries(m=5, d=24, labels=np.zeros(5, dtype=np.int64))
    P, inputs = c.pad(X), c.inputs()
    scale = math.sqrt(c.dim)  # the head's input scaling
    assert P.shape == (200, 29) and not P[:, 24:].any()
    assert np.allclose(np.linalg.norm(P * scale, axis=1), math.sqrt(24), rtol=1e-5)  # as without the audit
    assert np.allclose(np.linalg.norm(inputs * scale, axis=1), math.sqrt(24), rtol=1e-5)
    assert (np.count_nonzero(inputs, axis=1) == 1).all() and (inputs[np.arange(5), 24 + np.arange(5)] > 0).all()
    with pytest.raises(DataFormatError):
        c.pad(X[:, :10])
    with pytest.raises(DataFormatError):
        DiracCanaries(m=5, d=24, labels=np.zeros(4, dtype=np.int64))


@pytest.mark.parametrize("hidden", [(16,), ()])
def test_the_signal_is_the_per_example_gradient_of_the_head_clipped_as_opacus_clips(hidden):
    c = DiracCanaries(m=6, d=24, labels=np.array([0, 1, 1, 0, 1, 0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        module = DPSGD(epsilon=1.0, hidden=hidden, num_classes=2, init_seed=3, rng=0)._build(c.dim, 2)
    params = [p for p in module.parameters()]
    g_col, norm = _canary_gradients([p.detach() for p in params], c, math.sqrt(c.dim))
    inputs = torch.from_numpy(c.inputs())
    for i in range(c.m):
        module.zero_grad()
        loss = torch.nn.functional.cross_entropy(module(inputs[i:i + 1]), torch.tensor([int(c.labels[i])]))
        grads = torch.autograd.grad(loss, params)
        full = torch.sqrt(sum((g ** 2).sum() for g in grads))
        assert float(norm[i]) == pytest.approx(float(full), rel=1e-4)
        assert torch.allclose(g_col[i], grads[0][:, c.d + i], rtol=1e-4, atol=1e-7)
        # and nothing outside its own column of the first layer
        others = grads[0].clone()
        others[:, c.d + i] = 0
        assert not others[:, c.d:].any()


def _audit(cls, *, m=600, epochs=1, batch=None, seed=0, norm=1.0):
    X, y = _real(n=300, d=24, seed=seed)
    rng = np.random.default_rng(seed)
    c = DiracCanaries(m=m, d=24, labels=rng.integers(0, 2, m), norm=norm)
    included = rng.random(m) < 0.5
    n_public = len(X) + m // 2
    batch = n_public if batch is None else batch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        defense = cls(epsilon=2.0, epochs=epochs, batch_size=batch, hidden=(16,), num_classes=2, init_seed=0,
                      rng=seed + 1)
    acc = defense.plan(n_public)
    scorer = WhiteBoxScorer(c, sigma=acc.sigma, clip=1.0, q=acc.sample_rate, expected=(batch / n_public) * n_public,
                            scale=math.sqrt(c.dim))
    X_all = np.concatenate([c.pad(X), c.inputs(np.flatnonzero(included))])
    y_all = np.concatenate([y, c.labels[included]])
    model = defense.train((X_all, y_all), public_n=n_public, transcript=scorer)
    return scorer, included, model, c


@pytest.mark.parametrize("epochs,batch", [(1, None), (3, 200)])
def test_dpsgd_passes_the_transcript_checks_and_its_scores_rank_included_canaries_higher(epochs, batch):
    scorer, included, model, c = _audit(DPSGD, epochs=epochs, batch=batch)
    checks = mechanism_checks(scorer, included)
    assert checks["noise"]["passed"] and checks["sensitivity"]["passed"], checks
    assert abs(checks["noise"]["variance_ratio"] - 1) < 0.05
    assert scorer.steps == (1 if batch is None else round(3 * 600 / 200))
    # the white-box score carries the signal: included canaries score higher on average
    assert scorer.scores[included].mean() > scorer.scores[~included].mean()
    assert black_box_scores(model, c).shape == (c.m,)


def test_half_noise_fails_the_noise_check_and_no_clipping_fails_the_sensitivity_check():
    half = mechanism_checks(*_audit(HalfNoise)[:2])
    assert not half["noise"]["passed"] and half["noise"]["variance_ratio"] == pytest.approx(0.25, abs=0.02)
    # unclipped gradients stand out as far as they exceed the clip: canaries of 4 times a real embedding's norm
    loose = mechanism_checks(*_audit(NoClip, norm=4.0)[:2])
    assert not loose["sensitivity"]["passed"] and loose["sensitivity"]["z"] > 10
    assert mechanism_checks(*_audit(DPSGD, norm=4.0)[:2])["sensitivity"]["passed"]
