"""Each defense's loss against a slow reference written from the paper's equations (Coavoux et al. 2018, Sec. 3)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from veil.corpora.attributes import PrivateVariables, entity_variables, one_hot_variables
from veil.defenses.adversarial import make_objective
from veil.defenses.adversarial.objectives import complement_targets
from veil.errors import DataWarning

W, K = 6, 3


def _private() -> PrivateVariables:
    Z = np.array([[1, 0, 1], [0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 0, 1]], dtype=np.float32)
    return PrivateVariables(Z, ("a", "b", "c"), (("a", (0,)), ("b", (1,)), ("c", (2,))), "entities")


def _r(n: int = 5, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, W, generator=torch.Generator().manual_seed(seed), dtype=torch.float32).requires_grad_(True)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def test_complement_targets_flip_every_private_variable():
    z = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    assert torch.equal(complement_targets(z), torch.tensor([[0.0, 1.0, 0.0], [1.0, 1.0, 1.0]]))


def test_multidetask_losses_equal_the_papers_equations():
    private, rows = _private(), np.array([4, 0, 2, 3])
    obj = make_objective("multidetask", alpha=1.0, beta=0.7)
    obj.attach(width=W, private=private, rng=0)
    r = _r(4)
    logits = obj.adversary(r.detach()).detach().numpy()
    # L_a' = -log P(z | r) = -sum_j log P(z_j | r); L_m's second term = -beta log P(not z | r)
    ref_adv, ref_enc = 0.0, 0.0
    for i, row in enumerate(rows):
        for j in range(K):
            p = _sigmoid(float(logits[i, j]))
            z = private.Z[row, j]
            ref_adv -= math.log(p if z == 1 else 1 - p)
            ref_enc -= math.log(1 - p if z == 1 else p)  # the complement label
    assert obj.adversary_loss(r.detach(), rows).item() == pytest.approx(ref_adv / len(rows), rel=1e-5)
    enc = obj.encoder_loss(r, rows)
    assert enc.item() == pytest.approx(0.7 * ref_enc / len(rows), rel=1e-5)
    enc.backward()
    assert r.grad is not None and r.grad.abs().sum() > 0
    assert all(p.grad is None for p in obj.adversary.parameters())  # the encoder term never trains the adversary
    assert obj.main_weight == 1.0


def test_gradient_reversal_forward_is_the_adversary_loss_and_backward_is_reversed():
    private, rows = _private(), np.arange(5)
    obj = make_objective("grl", beta=0.5)
    obj.attach(width=W, private=private, rng=1)
    r = _r()
    loss = obj.encoder_loss(r, rows)
    ref = torch.nn.functional.binary_cross_entropy_with_logits(obj.adversary(r.detach()), torch.from_numpy(private.Z),
                                                               reduction="none").sum(1).mean()
    assert loss.item() == pytest.approx(0.5 * ref.item(), rel=1e-6)
    loss.backward()
    r2 = r.detach().clone().requires_grad_(True)
    plain = torch.nn.functional.binary_cross_entropy_with_logits(obj.adversary(r2), torch.from_numpy(private.Z),
                                                                 reduction="none").sum(1).mean()
    grad_plain = torch.autograd.grad(plain, r2)[0]
    torch.testing.assert_close(r.grad, -0.5 * grad_plain)  # the encoder maximises the adversary's loss
    assert obj.joint_parameters() and not obj.adversary_parameters()


def _slow_char_nll(lm, r_row: torch.Tensor, ids: list[int]) -> float:
    """-sum_i log P(x_i | x_<i, r): one LSTM step at a time, c_0 = r(x), h_0 = 0."""
    w_ih, w_hh = lm.lstm.weight_ih_l0.detach(), lm.lstm.weight_hh_l0.detach()
    b = (lm.lstm.bias_ih_l0 + lm.lstm.bias_hh_l0).detach()
    h, c = torch.zeros(lm.width), r_row.detach().clone()
    total = 0.0
    for prev, nxt in zip(ids[:-1], ids[1:]):
        gates = w_ih @ lm.embed.weight[prev].detach() + w_hh @ h + b
        i, f, g, o = gates.chunk(4)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        logp = torch.log_softmax(lm.out.weight.detach() @ h + lm.out.bias.detach(), dim=0)
        total -= float(logp[nxt])
    return total


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_generation_losses_equal_the_character_lm_likelihood(reduction):
    texts = ["abc ab", "b", "cabbage and", "ba"]
    obj = make_objective("generation", beta=2.0, reduction=reduction, max_chars=8)
    with pytest.warns(DataWarning, match="first 8 characters"):
        obj.attach(width=W, private=None, texts=texts, rng=3)
    assert obj.truncated == 1
    rows = np.array([2, 0, 1])
    r = _r(3, seed=4)
    ref = []
    for i, row in enumerate(rows):
        ids = obj.chars.ids[row].tolist()
        nll = _slow_char_nll(obj.generator, r[i], ids)
        ref.append(nll if reduction == "sum" else nll / (len(ids) - 1))
    assert obj.adversary_loss(r.detach(), rows).item() == pytest.approx(np.mean(ref), rel=1e-4)
    enc = obj.encoder_loss(r, rows)
    assert enc.item() == pytest.approx(-2.0 * np.mean(ref), rel=1e-4)  # the encoder MAXIMISES L_g
    enc.backward()
    assert all(p.grad is None for p in obj.generator.parameters())


def test_declustering_loss_equals_the_authors_formula():
    private = one_hot_variables({"speaker": ["A", "B", "A", "C", "B"], "party": ["x", "x", "y", "y", "x"]})
    obj = make_objective("decluster", alpha=0.1)
    obj.attach(width=W, private=private, rng=0)
    rows, partners = np.array([0, 1, 2, 3, 4]), np.array([2, 4, 3, 0, 1])
    r = _r()
    speaker = ["A", "B", "A", "C", "B"]
    party = ["x", "x", "y", "y", "x"]
    ref = 0.0
    for i, j in enumerate(partners):
        s = ((speaker[i] == speaker[j]) + (party[i] == party[j])) / 2  # fraction of AGREEING variables
        ref += 0.1 * (0.5 - s) * float(((r[i] - r[j]) ** 2).sum().detach())
    assert obj.encoder_loss(r, rows, partners).item() == pytest.approx(ref / 5, rel=1e-5)


def test_declustering_sign_pushes_agreeing_pairs_apart_and_pulls_opposite_pairs_together():
    private = entity_variables([{"a", "b"}, {"a", "b"}, set(), {"a"}], ["a", "b"])
    obj = make_objective("decluster", alpha=1.0)
    obj.attach(width=2, private=private, rng=0)
    r = torch.tensor([[0.0, 0.0], [1.0, 0.0]], requires_grad=True)
    same = obj.encoder_loss(r, np.array([0, 1]), np.array([1, 0]))  # z identical: s = 1
    assert same.item() == pytest.approx(-0.5 * 1.0)
    same.backward()
    # gradient descent moves r[1] away from r[0] (its gradient points back towards r[0])
    assert r.grad[1, 0] < 0 and r.grad[0, 0] > 0
    opposite = obj.encoder_loss(r.detach(), np.array([0, 2]), np.array([1, 0]))  # z = {a,b} vs {}: s = 0
    assert opposite.item() == pytest.approx(+0.5 * 1.0)
    half = obj.encoder_loss(r.detach(), np.array([0, 3]), np.array([1, 0]))  # agree on a only: s = 0.5
    assert half.item() == pytest.approx(0.0)


def test_declustering_partners_are_other_examples_of_the_batch():
    obj = make_objective("decluster", rng=5)
    obj.attach(width=2, private=_private(), rng=0)
    for n in (2, 3, 17):
        p = obj.partners(n)
        assert (p != np.arange(n)).all() and p.min() >= 0 and p.max() < n


def test_leace_removes_linear_covariance_with_the_private_variables():
    from veil.defenses.adversarial.leace import LeaceErasure

    g = np.random.default_rng(0)
    private = _private()
    Z = np.repeat(private.Z, 40, axis=0)
    R = g.normal(size=(len(Z), 8)).astype(np.float32) + 3 * Z @ g.normal(size=(3, 8)).astype(np.float32)
    big = PrivateVariables(Z, private.names, private.groups, private.kind)
    erased = LeaceErasure().fit(R, big).protect(R)
    cov = (erased - erased.mean(0)).T @ (Z - Z.mean(0)) / len(Z)
    assert np.abs(cov).max() < 1e-4
    assert np.abs((R - R.mean(0)).T @ (Z - Z.mean(0)) / len(Z)).max() > 0.1
