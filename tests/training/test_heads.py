"""veil.models.heads.MLPHead: its own generator for initialisation and dropout, never torch's global one."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from veil.errors import InvalidParameterError, InvalidTypeError
from veil.models.heads import GeneratorDropout, MLPHead

ALPHA = 1e-6  # false-positive rate of each statistical test below


def _weights(head):
    return [t.clone() for t in head.state_dict().values()]


def test_same_rng_same_weights_and_dropout_other_rng_differs():
    a, b, c = MLPHead(16, 3, hidden=(16, 16), rng=5), MLPHead(16, 3, hidden=(16, 16), rng=5), \
        MLPHead(16, 3, hidden=(16, 16), rng=6)
    assert all(torch.equal(x, y) for x, y in zip(_weights(a), _weights(b)))
    assert not torch.equal(_weights(a)[0], _weights(c)[0])
    x = torch.randn(32, 16, generator=torch.Generator().manual_seed(0))
    a.train(), b.train()
    assert torch.equal(a(x), b(x))  # dropout masks from the same stream
    assert not torch.equal(a(x), a(x))  # and the stream advances
    a.eval()
    assert torch.equal(a(x), a(x))  # no dropout at evaluation


def test_building_and_training_never_touch_the_global_generator():
    torch.manual_seed(123)
    expected = torch.rand(5)
    torch.manual_seed(123)
    head = MLPHead(8, 2, hidden=(8, 8), dropout=0.5, rng=0)
    head.train()
    head(torch.ones(4, 8)).sum().backward()
    MLPHead(8, 2, hidden=(8,))  # rng=None: OS entropy, not the global generator either
    assert torch.equal(torch.rand(5), expected)


def test_default_initialisation_law_matches_torch():
    """Weights U(-1/sqrt(fan_in), 1/sqrt(fan_in)) as nn.Linear's default (KS test, false-positive rate 1e-6)."""
    head = MLPHead(400, 300, rng=1)
    w, b = head.net[0].weight.detach().flatten().numpy(), head.net[0].bias.detach().numpy()
    bound = 1 / np.sqrt(400)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert stats.kstest(w, stats.uniform(-bound, 2 * bound).cdf).pvalue > ALPHA


def test_generator_dropout_law():
    """Dropped fraction ~ Binomial(n, p) (two-sided binomial test, false-positive rate 1e-6); kept values scaled."""
    drop = GeneratorDropout(0.3, torch.Generator().manual_seed(2))
    out = drop(torch.ones(200, 100))
    dropped = int((out == 0).sum())
    assert stats.binomtest(dropped, out.numel(), 0.3).pvalue > ALPHA
    assert torch.allclose(out[out != 0], torch.full_like(out[out != 0], 1 / 0.7))


def test_head_takes_a_shared_torch_generator_and_validates():
    gen = torch.Generator().manual_seed(9)
    a = MLPHead(4, 2, hidden=(4,), rng=gen)
    b = MLPHead(4, 2, hidden=(4,), rng=gen)  # the shared stream has advanced: different weights
    assert not torch.equal(a.net[0].weight, b.net[0].weight)
    with pytest.raises(InvalidTypeError, match="rng must be"):
        MLPHead(4, 2, rng="seed")
    with pytest.raises(InvalidParameterError, match="dropout"):
        MLPHead(4, 2, dropout=1.0)
    with pytest.raises(InvalidParameterError, match="layer sizes"):
        MLPHead(0, 2)
