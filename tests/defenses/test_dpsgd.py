"""veil.defenses.dpsgd: DP-SGD on Opacus (clipping against a slow loop, accounting against independent oracles,
the noise actually added, typed errors, randomness) and its non-private reference."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from torch import nn

from veil.defenses.dpsgd import DPSGD, PlainTraining, UnsupportedModelError, account, calibrate_sigma
from veil.defenses.dpsgd.controls import HalfNoise
from veil.defenses.dpsgd.engine import fit
from veil.defenses.dpsgd.noise import gaussian, poisson_lot, sampling_rate
from veil.errors import InvalidParameterError, InvalidTypeError, PrivacyLeakWarning

ALPHA = 1e-6  # false-positive rate of every statistical test below


def _mlp(d: int, classes: int, seed: int, dtype: torch.dtype = torch.float32) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    m = nn.Sequential(nn.Linear(d, 64), nn.LayerNorm(64), nn.Tanh(), nn.Linear(64, classes))
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return m.to(dtype)


def _clipped_sum(model: nn.Module, X: torch.Tensor, y: torch.Tensor, clip: float) -> tuple[list, list, np.ndarray]:
    """The slow reference: one example at a time, its gradient scaled by min(1, clip / (norm + 1e-6)) (Opacus'
    coefficient), summed. Also returns the unclipped sum and the per-example norms."""
    m = copy.deepcopy(model)
    clipped = [torch.zeros_like(p) for p in m.parameters()]
    raw = [torch.zeros_like(p) for p in m.parameters()]
    norms = []
    for i in range(len(X)):
        m.zero_grad()
        nn.functional.cross_entropy(m(X[i:i + 1]), y[i:i + 1]).backward()
        grads = [p.grad.detach().clone() for p in m.parameters()]
        norm = torch.sqrt(sum((g ** 2).sum() for g in grads)).item()
        norms.append(norm)
        for c, r, g in zip(clipped, raw, grads):
            c += g * min(1.0, clip / (norm + 1e-6))
            r += g
    return clipped, raw, np.array(norms)


def _data(n: int, d: int, seed: int, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=dtype) * torch.linspace(0.1, 3.0, n, dtype=dtype)[:, None]
    return X, torch.randint(0, 3, (n,), generator=g)


# --------------------------------------------------------------------------- clipping (oracle)
def test_clipped_update_equals_a_slow_per_example_loop():
    """Ghost clipping inside veil's loop (one full lot, no noise, SGD lr 1) moves the weights by exactly the
    per-example-clipped sum / n of the slow loop; float64 throughout, so only float64 rounding separates them."""
    n, d, clip = 24, 10, 3.0
    X, y = _data(n, d, 0, torch.float64)
    model = _mlp(d, 3, 1, torch.float64)
    ref, raw, norms = _clipped_sum(model, X, y, clip)
    assert (norms > clip).sum() >= 5 and (norms < clip).sum() >= 2  # both branches of the clipping are exercised
    before = [p.detach().clone() for p in model.parameters()]
    log = fit(model, X, y, private=True, sigma=0.0, clip=clip, q=1.0, accounted_q=1.0, steps=1, lr=1.0,
              optimizer="sgd", sampling_rng=np.random.default_rng(0), noise_rng=np.random.default_rng(1))
    assert log.history == [(0.0, 1.0, 1)]
    update = [(b - p.detach()) * n for b, p in zip(before, model.parameters())]  # SGD's first step: lr * grad
    assert max((u - r).abs().max().item() for u, r in zip(update, ref)) < 1e-12
    assert max((u - r).abs().max().item() for u, r in zip(update, raw)) > 1e-2  # clipping did change the sum
    assert not any(hasattr(p, "grad_sample") or hasattr(p, "_norm_sample") for p in model.parameters())


def test_empty_lots_are_steps_that_add_noise():
    X, y = _data(50, 6, 2)
    for sigma, moved in ((0.0, False), (1.0, True)):
        model = _mlp(6, 3, 3)
        before = [p.detach().clone() for p in model.parameters()]
        q = 1e-12  # every lot is empty (each of 50 examples in with probability 1e-12)
        log = fit(model, X, y, private=True, sigma=sigma, clip=1.0, q=q, accounted_q=sampling_rate(q), steps=3,
                  lr=0.1, optimizer="sgd", sampling_rng=np.random.default_rng(0), noise_rng=np.random.default_rng(1))
        assert log.history == [(sigma, sampling_rate(q), 3)]
        changed = any(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
        assert changed is moved


# --------------------------------------------------------------------------- accounting
def _gaussian_delta(eps: float, sigma: float) -> float:
    """Exact delta(eps) of one Gaussian mechanism with sensitivity 1 and noise sigma (Balle and Wang 2018, Thm 8)."""
    from scipy.stats import norm

    return float(norm.cdf(-eps * sigma + 1 / (2 * sigma)) - math.exp(eps) * norm.cdf(-eps * sigma - 1 / (2 * sigma)))


def test_accounting_of_one_full_step_brackets_the_exact_gaussian_mechanism():
    """q = 1, one step is the plain Gaussian mechanism, whose exact epsilon is known in closed form: PRV's upper
    bound is above it by at most its stated error (plus the FFT's), RDP above it."""
    from scipy.optimize import brentq

    sigma, delta = 1.0, 1e-5
    exact = brentq(lambda e: _gaussian_delta(e, sigma) - delta, 0.0, 50.0, xtol=1e-12)
    acc = account(sigma, 1.0, 1, delta)
    assert exact <= acc.epsilon_prv <= exact + 2 * acc.eps_error
    assert acc.epsilon_rdp >= exact and acc.epsilon == acc.epsilon_prv and acc.accountant == "prv"


def test_accounting_agrees_with_opacus_own_accountants_stepped_as_its_privacy_engine_steps_them():
    from opacus.accountants import PRVAccountant, RDPAccountant

    from veil.defenses.dpsgd.accounting import quiet_opacus

    sigma, q, steps, delta = 0.9, 256 / 8530, 166, 1 / 85300
    acc = account(sigma, q, steps, delta, accountant="rdp")
    prv, rdp = PRVAccountant(), RDPAccountant()
    for _ in range(steps):  # what the optimizer's step hook does
        prv.step(noise_multiplier=sigma, sample_rate=q)
        rdp.step(noise_multiplier=sigma, sample_rate=q)
    with quiet_opacus():
        assert acc.epsilon_prv == pytest.approx(prv.get_epsilon(delta), rel=1e-12)
        assert acc.epsilon_rdp == pytest.approx(rdp.get_epsilon(delta), rel=1e-12)
    assert acc.epsilon == acc.epsilon_rdp and acc.epsilon_prv < acc.epsilon_rdp  # PRV is the tighter bound


@pytest.mark.parametrize("accountant", ["prv", "rdp"])
def test_calibrated_sigma_meets_the_target_within_the_search_tolerance(accountant):
    q, steps, delta = 256 / 8530, 166, 1 / 85300
    for target in (1.0, 8.0):
        sigma = calibrate_sigma(target, delta, q, steps, accountant=accountant)
        eps = account(sigma, q, steps, delta, accountant=accountant).epsilon
        assert target - 0.01 <= eps <= target


def test_no_noise_means_no_privacy():
    """Negative control of the accounting: sigma 0 accounts to infinite epsilon under both accountants; a sigma
    too small for PRV's domain is refused under PRV (Opacus would try to allocate terabytes) and bounded by RDP."""
    acc = account(0.0, 0.02, 100, 1e-5)
    assert acc.epsilon == math.inf and acc.epsilon_prv == math.inf and acc.epsilon_rdp == math.inf
    tiny = account(1e-3, 0.02, 100, 1e-5, accountant="rdp")
    assert tiny.epsilon_prv is None and tiny.epsilon_rdp > 1e6
    with pytest.raises(InvalidParameterError, match="too small for the PRV accountant"):
        account(1e-3, 0.02, 100, 1e-5)


# --------------------------------------------------------------------------- the noise actually added
def _recovered_noise(cls: type, seed: int) -> tuple[np.ndarray, float]:
    """One full-lot SGD step of ``cls`` (q = 1, 1 step): the noise it added, (theta0 - theta1) n / lr minus the
    slow loop's clipped sum, in units of the accounted sigma * clip."""
    n, d, clip, lr = 16, 32, 0.5, 0.01
    X, y = _data(n, d, seed)
    model = _mlp(d, 3, seed)
    ref, _, _ = _clipped_sum(model, X, y, clip)
    with pytest.warns(PrivacyLeakWarning):
        out = cls(epsilon=1.0, clip=clip, epochs=1, batch_size=n, lr=lr, optimizer="sgd", model=model,
                  rng=seed).train((X.numpy(), y.numpy()))
    assert out.steps == 1 and out.sample_rate == 1.0
    noise = [((p0.detach() - p1.detach()).double() * n / lr - r.double()).flatten()
             for p0, p1, r in zip(model.parameters(), out.model.parameters(), ref)]
    return torch.cat(noise).numpy() / (out.sigma * clip), out.epsilon


def test_the_noise_added_is_the_noise_accounted_and_the_half_noise_control_is_caught():
    """Kolmogorov-Smirnov of the recovered noise against N(0, 1) at alpha = 1e-6: DPSGD passes (a false alarm has
    probability 1e-6), the control that draws half the noise it accounts for must fail."""
    from scipy.stats import kstest

    z, eps = _recovered_noise(DPSGD, 5)
    assert len(z) > 2000 and eps <= 1.0
    assert kstest(z, "norm").pvalue > ALPHA
    z_bad, eps_bad = _recovered_noise(HalfNoise, 5)
    assert eps_bad == eps  # it claims the same epsilon...
    assert kstest(z_bad, "norm").pvalue <= ALPHA  # ...and the test sees through it


def test_csprng_gaussian_is_standard_normal_and_lots_have_the_accounted_rate():
    from scipy.stats import binomtest, kstest

    z = gaussian(None, 200_000, 1.0)  # the OS CSPRNG
    assert kstest(z, "norm").pvalue > ALPHA
    q, n, lots = 0.03, 1000, 200
    sizes = [len(poisson_lot(None, n, q)) for _ in range(lots)]
    assert binomtest(sum(sizes), n * lots, sampling_rate(q)).pvalue > ALPHA
    assert sampling_rate(q) >= q and sampling_rate(q) - q < 2.0 ** -53 and sampling_rate(0.5) == 0.5


# --------------------------------------------------------------------------- bad input
def test_bad_parameters_raise_typed_errors():
    for eps in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(InvalidParameterError, match="epsilon"):
            DPSGD(epsilon=eps)
    with pytest.raises(InvalidTypeError):
        DPSGD(epsilon="8")
    for bad in ({"delta": 0.0}, {"delta": 1.0}, {"clip": 0.0}, {"epochs": 0}, {"batch_size": 0}, {"lr": -1.0},
                {"accountant": "gdp"}, {"optimizer": "lbfgs"}):
        with pytest.raises(InvalidParameterError):
            DPSGD(epsilon=1.0, **bad)
    with pytest.raises(InvalidTypeError):
        DPSGD(epsilon=1.0, hidden=128)


def test_delta_of_one_over_n_or_more_is_refused_before_training():
    X, y = _data(40, 4, 0)
    with pytest.raises(InvalidParameterError, match=r"delta=0.025 is >= 1/n"):
        DPSGD(epsilon=1.0, delta=1 / 40, batch_size=8).train((X.numpy(), y.numpy()))
    with pytest.raises(InvalidParameterError, match="more than the 40 training examples"):
        DPSGD(epsilon=1.0, batch_size=41).train((X.numpy(), y.numpy()))
    with pytest.raises(InvalidTypeError, match="pair"):
        DPSGD(epsilon=1.0, batch_size=8).train(X.numpy())


@pytest.mark.parametrize("make", [lambda: nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2)),
                                  lambda: nn.LSTM(4, 8)], ids=["batchnorm", "lstm"])
def test_a_model_opacus_cannot_train_is_refused_with_a_typed_error(make):
    with pytest.raises(UnsupportedModelError, match="Opacus cannot train") as info:
        DPSGD(epsilon=1.0, model=make())
    assert isinstance(info.value, InvalidParameterError)
    with pytest.raises(UnsupportedModelError):
        PlainTraining(model=make())


# --------------------------------------------------------------------------- randomness and utility
def _separable(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    X = g.normal(size=(n, 16)).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)
    return X / np.linalg.norm(X, axis=1, keepdims=True), y


def _weights(out) -> np.ndarray:
    return torch.cat([p.detach().flatten() for p in out.model.parameters()]).numpy()


def test_os_entropy_by_default_and_seeds_reproduce():
    X, y = _separable(400, 0)
    make = dict(epsilon=4.0, epochs=2, batch_size=40, hidden=(8,), init_seed=0, accountant="rdp")
    a, b = (DPSGD(**make).train((X, y)) for _ in range(2))
    assert DPSGD(**make).config()["rng"] == "OS CSPRNG"
    assert not np.array_equal(_weights(a), _weights(b))  # same init, fresh lots and noise
    with pytest.warns(PrivacyLeakWarning, match="seeded rng"):
        c, d = (DPSGD(**make, rng=7).train((X, y)) for _ in range(2))
    assert np.array_equal(_weights(c), _weights(d)) and c.accounting == d.accounting == a.accounting
    p, r = (PlainTraining(epochs=2, batch_size=40, hidden=(8,), init_seed=0, rng=7).train((X, y)) for _ in range(2))
    assert np.array_equal(_weights(p), _weights(r)) and p.accounting is None and not p.guarantee.formal


def test_dp_and_plain_training_learn_and_report_what_they_release():
    X, y = _separable(2000, 1)
    Xt, yt = _separable(1000, 2)
    plain = PlainTraining(epochs=5, batch_size=100, init_seed=0).train((X, y))
    dp = DPSGD(epsilon=8.0, epochs=5, batch_size=100, init_seed=0).train((X, y))
    assert plain.evaluate(Xt, yt).accuracy > 0.9 and dp.evaluate(Xt, yt).accuracy > 0.85
    acc = dp.accounting
    assert acc.delta == 1 / 20000 and acc.steps == dp.steps == plain.steps == 100
    assert acc.sample_rate == dp.sample_rate == sampling_rate(0.05) and 8.0 - 0.01 <= acc.epsilon <= 8.0
    assert acc.epsilon_rdp > acc.epsilon_prv and dp.guarantee.epsilon == acc.epsilon and dp.guarantee.delta == acc.delta
    assert dp.predict(Xt).shape == (1000,) and dp.logits(Xt).shape == (1000, 2)
