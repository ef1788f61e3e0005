"""TextHide's inference release as a vectors defense: each row under a sign mask from a secret pool of m."""

import numpy as np
import pytest

from veil.defenses.base import get_defense
from veil.errors import InvalidParameterError


def _patterns(X, Y):
    return {tuple(r) for r in np.sign(Y * X).astype(int)}


def test_protect_keeps_magnitudes_and_uses_at_most_m_masks():
    cls = get_defense("texthide-inference")
    assert cls.releases == "vectors" and "sentence-classification" in cls.tasks
    X = np.random.default_rng(0).standard_normal((400, 16)).astype(np.float32)
    Y = cls(m=3, dim=16).protect(X)
    assert Y.dtype == np.float32 and Y.shape == X.shape
    np.testing.assert_array_equal(np.abs(Y), np.abs(X))
    used = _patterns(X, Y)
    assert 1 <= len(used) <= 3  # 400 rows, 3 masks: a fourth pattern would be a mask outside the pool
    assert len(_patterns(X, cls(m=64, dim=16).protect(X))) > 3  # a larger pool is used as such


def test_keys_come_from_the_os_csprng_unless_seeded():
    cls = get_defense("texthide-inference")
    X = np.ones((50, 32), dtype=np.float32)
    assert not np.array_equal(cls(m=8, dim=32).protect(X), cls(m=8, dim=32).protect(X))
    with pytest.warns(Warning):
        a = cls(m=8, dim=32, rng=5).protect(X)
    with pytest.warns(Warning):
        b = cls(m=8, dim=32, rng=5).protect(X)
    np.testing.assert_array_equal(a, b)
    assert cls(m=8, dim=32).config()["mask_key"] == "os-csprng"


def test_bad_parameters_are_refused():
    cls = get_defense("texthide-inference")
    with pytest.raises(InvalidParameterError):
        cls(m=0, dim=8)
    assert cls.bench_settings(True) == [{"m": 256}]


def test_the_model_reading_the_release_trains_through_the_same_pool():
    import torch

    cls = get_defense("texthide-inference")
    d = cls(m=2, dim=8)
    hook = d.training_hook("classification", 2)
    X = torch.randn(64, 8)
    masked = hook.infer(X)
    np.testing.assert_array_equal(masked.abs().numpy(), X.abs().numpy())
    pool = {tuple(r) for r in np.sign((masked * X).numpy()).astype(int)} | _patterns(X.numpy(), d.protect(X.numpy()))
    assert len(pool) <= 2  # inference through the hook and protect draw from one pool of two masks
