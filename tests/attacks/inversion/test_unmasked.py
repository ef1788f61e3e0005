"""Inversion after unmasking TextHide: the unmasking step against the truth on synthetic and planted cases (right
masks and signs, the fallbacks), controls where it must fail, the attack seeing only an Observation, registry
and plan, typed errors, and the whole chain on real MiniLM vectors with a small inverter."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

from veil.attacks.base import attack_names, get_attack
from veil.attacks.inversion.unmasked import UnmaskedInversion, unmask
from veil.errors import InvalidTypeError, PrivacyLeakWarning


def anisotropic(n, d, seed):
    """Sentence-embedding-like vectors: a strong mean direction plus noise (as MiniLM's: mean norm well above 0)."""
    rng = np.random.default_rng(seed)
    mu = np.where(rng.random(d) < 0.5, -1.0, 1.0) * rng.uniform(0.2, 1.0, size=d)
    return (mu + 0.3 * rng.normal(size=(n, d))).astype(np.float32), mu


def signs(rows, d, seed):
    return np.where(np.random.default_rng(seed).random((rows, d)) < 0.5, -1, 1).astype(np.int8)


def test_unmask_inverts_the_true_masks_whichever_of_a_mask_and_its_negation_is_given():
    X, mu = anisotropic(200, 32, 0)
    masks = signs(4, 32, 1)
    idx = np.random.default_rng(2).integers(0, 4, size=200)
    E = X * masks[idx]
    flip = np.where(np.random.default_rng(3).random(4) < 0.5, -1, 1).astype(np.int8)[:, None]
    Z = unmask(E, masks * flip, idx, mu)  # the attacker's masks are right up to their sign
    assert np.array_equal(Z, X)
    # a control: the wrong masks do not give the vectors back
    wrong = unmask(E, signs(4, 32, 9), idx, mu)
    assert np.mean(np.sum(wrong * X, 1) / np.linalg.norm(wrong, axis=1) / np.linalg.norm(X, axis=1)) < 0.5


def test_unassigned_encodings_take_the_closest_mask_and_no_mask_falls_back_to_the_mean_signs():
    X, mu = anisotropic(300, 64, 4)
    masks = signs(3, 64, 5)
    idx = np.random.default_rng(6).integers(0, 3, size=300)
    E = X * masks[idx]
    none = np.full(300, -1)
    Z = unmask(E, masks, none, mu)
    assert np.mean(np.all(Z == X, axis=1)) >= 0.95  # the soft estimate points at the right mask
    # no mask found: |e| o sign(mu) (the signs of each encoding's own soft estimate)
    G = unmask(E, np.zeros((0, 64), dtype=np.int8), none, mu)
    assert np.array_equal(G, np.abs(E) * np.where(mu >= 0, 1, -1))
    cos = np.sum(G * X, 1) / np.linalg.norm(G, axis=1) / np.linalg.norm(X, axis=1)
    assert 0.5 < cos.mean() < 0.999  # the anisotropy guess: close, not exact


def test_flip_repair_finds_the_bits_that_other_domain_statistics_flip_in_every_mask():
    """Public statistics whose mean has the other sign on some coordinates flip those bits in every recovered mask;
    the covariance's sign pattern (shared across domains) gives them back. With in-domain statistics the repair
    changes nothing. A control: with a covariance that carries no structure, the flips stay."""
    rng = np.random.default_rng(11)
    d = 48
    basis = rng.normal(size=(d, 6))
    mu = np.where(rng.random(d) < 0.5, -1.0, 1.0) * rng.uniform(0.1, 0.5, size=d)

    def draw(n, mean):
        return (mean + rng.normal(size=(n, 6)) @ basis.T * 0.3 + 0.05 * rng.normal(size=(n, d))).astype(np.float32)

    X = draw(2000, mu)
    other = np.abs(mu) * np.where(rng.random(d) < 0.3, -1.0, 1.0) * np.sign(mu)  # another domain's mean
    P = draw(4000, other)
    f = np.sign(mu) * np.sign(other)  # the bits anchoring the masks to the public mean flips
    assert (f < 0).sum() >= 5
    ones = np.zeros(len(X), dtype=np.int64)
    cos = lambda Z: float(np.mean(np.sum(Z * X, 1) / np.linalg.norm(Z, axis=1) / np.linalg.norm(X, axis=1)))  # noqa
    unrepaired = unmask(X, f[None, :], ones, P.mean(0))
    repaired = unmask(X, f[None, :], ones, P.mean(0), np.cov(P, rowvar=False))
    assert cos(unrepaired) < 0.9 and cos(repaired) > 0.999
    same = unmask(X, np.ones((1, d)), ones, X.mean(0), np.cov(X, rowvar=False))  # in-domain: nothing to repair
    assert np.array_equal(same, unmask(X, np.ones((1, d)), ones, X.mean(0)))
    flat = unmask(X, f[None, :], ones, P.mean(0), np.eye(d))  # no structure to read the flips from
    assert cos(flat) < 0.9


def test_the_attack_recovers_the_pool_and_unmasks_real_structure_without_the_key():
    """The chain's first half end to end on synthetic encodings: MaskRecovery from public statistics, then
    :meth:`UnmaskedInversion.unmask`, exact for inference encodings (k = 1)."""
    from veil.attacks.texthide import MaskRecovery, observe_inference
    from veil.defenses.texthide import MaskPool, TextHide

    X, _ = anisotropic(600, 48, 7)
    P, _ = anisotropic(3000, 48, 7)  # the same distribution: public statistics
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        th = TextHide(k=1, pool=MaskPool(6, 48, rng=1), rng=2, record_details=True)
    obs, truth = observe_inference(X, th)
    attack = UnmaskedInversion.__new__(UnmaskedInversion)  # unmasking needs no inverter
    attack.recovery, attack.last_unmask = MaskRecovery.from_public(P, rng=0), {}
    Z = attack.unmask(obs)
    assert np.array_equal(Z, X)
    assert attack.last_unmask["masks_found"] == 6 and attack.last_unmask["encodings"] == 600
    assert set(attack.last_unmask) == {"masks_found", "encodings", "assigned", "seconds"}  # counts, no key


def test_registered_planned_on_texthide_pools_only_and_sees_an_observation_only():
    from veil.bench.plan import BenchConfig, plan_cells

    assert "invert-unmasked" in attack_names() and get_attack("invert-unmasked") is UnmaskedInversion
    tasks = {"rt-polarity": "sentence-classification", "drug-reviews": "document-classification"}
    planned = {(c.defense, tuple(sorted(c.setting.items()))) for c in plan_cells(
        list(tasks), config=BenchConfig(quick=False), corpus_tasks=tasks) if c.attack == "invert-unmasked"}
    assert planned and {d for d, _ in planned} == {"texthide", "texthide-inference"}
    assert all(dict(s)["m"] not in (0, "inf") for _, s in planned)
    params = list(inspect.signature(UnmaskedInversion.run).parameters)
    assert params == ["self", "observation"]
    with pytest.raises(InvalidTypeError, match="MaskRecovery"):
        UnmaskedInversion("not a recovery")


@pytest.mark.slow
def test_the_cell_unmasks_texthide_inference_and_inverts_against_the_floor(tiny_inverter_home, builtin):
    """The bench cell on real rt-polarity vectors with a small pool and a small inverter: every mask found, the
    unmasked vectors are the private texts' own (cosine 1), and the record holds the floor and the test."""
    from veil.bench.cells.vectors import unmasked_inversion_cell
    from veil.bench.data import bench_data
    from veil.bench.plan import BenchConfig, Cell

    builtin("rt-polarity")
    config = BenchConfig(quick=True, limit=300, queries=6, key_seed=1)  # a seeded key: the same pool every run
    data = bench_data("rt-polarity", True, 300)
    cell = Cell.make("rt-polarity", "texthide-inference", {"m": 4}, "invert-unmasked", config)
    rec = unmasked_inversion_cell(cell, data)
    assert rec.config["unmask"]["masks_found"] >= 4  # all four (a small sample may add a spurious one)
    cos = rec.metrics["unmask_cosine"]
    assert cos.n == 6 and cos.mean > 0.99
    assert rec.metrics["token_f1"].n == 6 and "floor_token_f1" in rec.metrics
    assert rec.extra["bench"]["success"] == "token_f1" and 0 < rec.extra["bench"]["test"]["p_value"] <= 1
    assert rec.config["defense"]["encodings_seen"] == len(data.splits["train"])
    assert "mask_key" in rec.config["defense"] and "masks" not in rec.config["unmask"]
