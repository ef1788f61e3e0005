"""veil.defenses.lm.DPFineTuning (``lm-dpsgd``) and veil.defenses.dpsgd.sequences: the clipped sum against a slow
loop over texts, the noise actually added (its half-noise control must be caught), the accounting, what moves, the
exposure bound, and typed errors before any work."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from veil.defenses.lm import DPFineTuning, exposure_bound
from veil.errors import InvalidParameterError, NegativeControlWarning, PrivacyLeakWarning

ALPHA = 1e-6  # false-positive rate of the noise test
TEXTS = ["the film is a warm and funny ride .", "a dull , overlong mess .", "my account number is 4 8 1 5 1 6 .",
         "it never finds its footing .", "an honest , moving portrait of a family .", "call ann at 212-555-0187 .",
         "flat characters and a plot that goes nowhere .", "one of the year 's best ."]


def _slow_clipped_sum(lm, names: list[str], texts: list[str], clip: float) -> tuple[dict, np.ndarray]:
    """One text at a time: the gradient of its mean next-token NLL over the ``names`` parameters, scaled by
    min(1, clip / (norm + 1e-6)) (Opacus' coefficient), summed; and the per-text norms."""
    from veil.models.causal_lm import _token_nll

    params = dict(lm.net.named_parameters())
    total = {k: torch.zeros_like(params[k]) for k in names}
    norms = []
    lm.net.train()
    for text in texts:
        lm.net.zero_grad()
        nll, count = _token_nll(lm, [text])
        (nll.sum() / count.sum()).backward()
        grads = {k: params[k].grad.detach().clone() for k in names}
        norm = math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads.values()))
        norms.append(norm)
        for k in names:
            total[k] += grads[k] * min(1.0, clip / (norm + 1e-6))
    return total, np.array(norms)


def _one_step(cls_or_name: str, clip: float, lr: float, seed: int):
    """One full-lot SGD step (batch_size = n: q = 1) on the top layer; the trained model and the initial one."""
    from veil.defenses.dpsgd.sequences import top_layer_parameters
    from veil.models.causal_lm import build_causal_lm

    params = dict(epsilon=1.0, clip=clip, layers=1, optimizer="sgd", steps=1, batch_size=len(TEXTS), lr=lr,
                  max_tokens=24, init_seed=0, rng=seed)
    if cls_or_name == "lm-dpsgd":
        with pytest.warns(PrivacyLeakWarning):
            mech = DPFineTuning(**params)
    else:
        from veil.controls import make_control

        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            mech = make_control(cls_or_name, **params)
        assert {NegativeControlWarning, PrivacyLeakWarning} <= {w.category for w in seen}
    out = mech.train_lm(TEXTS)
    start = build_causal_lm(max_tokens=24, seed=0, dropout=False)
    return out, start, top_layer_parameters(start.net, 1)


def test_the_step_is_the_clipped_sum_plus_exactly_the_accounted_noise_and_half_noise_is_caught():
    """The update of one full-lot SGD step, times n / lr, minus the slow loop's clipped sum, is the noise; in units
    of the accounted sigma * clip it must pass Kolmogorov-Smirnov against N(0, 1) at alpha 1e-6, and the control
    drawing half the noise it accounts for must fail it while claiming the same epsilon."""
    from scipy.stats import kstest

    clip, lr = 0.5, 1e-3
    recovered = {}
    for name in ("lm-dpsgd", "lm-dpsgd-broken-half-noise"):
        out, start, names = _one_step(name, clip, lr, seed=3)
        ref, norms = _slow_clipped_sum(start, names, TEXTS, clip)
        assert (norms > clip).all()  # every text's gradient is clipped: the sum's sensitivity is clip
        before, after = dict(start.net.named_parameters()), dict(out.lm.net.named_parameters())
        noise = torch.cat([((before[k].detach() - after[k].detach()).double() * len(TEXTS) / lr
                            - ref[k].double()).flatten() for k in names])
        acc = out.accounting
        assert acc.steps == 1 and acc.sample_rate == 1.0 and acc.epsilon <= 1.0
        z = noise.numpy() / (acc.sigma * clip)
        rng = np.random.default_rng(0)
        recovered[name] = (rng.choice(z, 200_000, replace=False), acc.epsilon)
        # nothing outside the trainable set moved (the embeddings, the lower layers, the output bias)
        frozen = [k for k in before if k not in names]
        assert frozen and all(torch.equal(before[k], after[k]) for k in frozen)
    z, eps = recovered["lm-dpsgd"]
    z_bad, eps_bad = recovered["lm-dpsgd-broken-half-noise"]
    assert kstest(z, "norm").pvalue > ALPHA
    assert eps_bad == eps  # the control claims the same epsilon...
    assert kstest(z_bad, "norm").pvalue <= ALPHA  # ...and the test sees through it


def test_a_short_run_learns_is_accounted_and_states_its_guarantee():
    texts = TEXTS * 5
    with pytest.warns(PrivacyLeakWarning):
        mech = DPFineTuning(epsilon=8.0, steps=6, batch_size=8, layers=2, max_tokens=24, rng=1)
    lines: list[str] = []
    out = mech.train_lm(texts, log=lines.append)
    acc = out.accounting
    assert acc.epsilon <= 8.0 and acc.delta == pytest.approx(1 / (10 * len(texts))) and acc.steps == 6
    assert acc.sample_rate == pytest.approx(8 / len(texts)) and acc.epsilon_rdp >= acc.epsilon
    assert out.guarantee.kind == "epsilon-delta-dp" and out.guarantee.epsilon == acc.epsilon
    assert "one training text" in out.guarantee.statement and "group of k" in out.guarantee.statement
    assert out.losses == () and lines[0].startswith("DP-SGD: epsilon")  # losses: outside the guarantee, not released
    assert sum("DP-SGD causal LM: step" in line for line in lines) == 6  # ...shown to the owner only
    assert out.config["noise"].startswith("seeded") and out.config["dropout"] is False
    assert not mech.resumable


def test_exposure_bound_is_group_privacy_over_the_exposure_definition():
    log2e, floor = math.log2(math.e), 1 / math.log(2)
    assert exposure_bound(0.0, 0.0, 1, 10 ** 6) == pytest.approx(floor)  # a canary the model never saw
    assert exposure_bound(1.0, 0.0, 1, 2 ** 40) == pytest.approx(log2e + floor)
    assert exposure_bound(1.0, 0.0, 4, 2 ** 40) == pytest.approx(4 * log2e + floor)
    assert exposure_bound(1.0, 1e-6, 2, 2 ** 40) == pytest.approx(2 * log2e + floor + 2 * math.e * 1e-6 * 40)
    assert exposure_bound(8.0, 1e-5, 16, 2 ** 20) == 20.0  # capped at log2 |R|
    values = [exposure_bound(1.0, 1e-5, k, 2 ** 30) for k in (1, 2, 4, 8, 16)]
    assert values == sorted(values)
    # the bound holds for the worst epsilon-DP ranking: randomised response that ranks the canary first with
    # probability e^eps / (e^eps + |R| - 1) and uniformly otherwise has expected exposure below it
    eps, space = 2.0, 1024
    p_first = math.exp(eps) / (math.exp(eps) + space - 1)
    rest = [(1 - p_first) / (space - 1)] * (space - 1)
    expected = p_first * math.log2(space) + sum(p * (math.log2(space) - math.log2(r)) for p, r in
                                                zip(rest, range(2, space + 1)))
    assert expected <= exposure_bound(eps, 0.0, 1, space)
    with pytest.raises(InvalidParameterError):
        exposure_bound(-1.0, 0.0, 1, 100)


def test_bad_settings_are_refused_before_any_training():
    with pytest.raises(InvalidParameterError, match="layers=7"):
        mech = DPFineTuning(layers=7, steps=1, batch_size=4)
        mech.train_lm(TEXTS)
    with pytest.raises(InvalidParameterError, match="batch_size=16"):
        DPFineTuning(batch_size=16, steps=1).plan(len(TEXTS))
    with pytest.raises(InvalidParameterError, match="delta"):
        DPFineTuning(delta=0.2, steps=1, batch_size=4).plan(len(TEXTS))
    with pytest.raises(InvalidParameterError, match="not resumable"):
        DPFineTuning(steps=1).train_lm(TEXTS, checkpoint="state.pt")
    for bad in ({"epsilon": 0}, {"clip": -1.0}, {"accountant": "gdp"}, {"optimizer": "lbfgs"}):
        with pytest.raises(InvalidParameterError):
            DPFineTuning(**bad)
