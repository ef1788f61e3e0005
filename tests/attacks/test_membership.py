"""Membership inference (veil.attacks.membership): scoring against slow references, calibration on a model that saw
none of the candidates, a planted leak the same harness must catch, LiRA against the loss threshold, typed errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veil.attacks.membership import (RMIA, LiRA, LossThreshold, MembershipScores, MembershipTruth, ModelAccess,
                                     membership_game, score_membership)
from veil.attacks.membership.lira import lira_scores
from veil.attacks.membership.rmia import rmia_scores
from veil.attacks.membership.scoring import (auc, auc_reference, dp_auc_bound, membership_test, roc, roc_reference,
                                            tpr_at_fpr)
from veil.attacks.membership.shadows import log_true_prob, logit_confidence
from veil.defenses.dpsgd import PlainTraining
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError


# --------------------------------------------------------------------------- scoring: fast against slow
@st.composite
def _scored(draw):
    n = draw(st.integers(2, 40))
    scores = draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n))  # small range: many ties
    members = draw(st.lists(st.booleans(), min_size=n, max_size=n).filter(lambda m: any(m) and not all(m)))
    return np.array(scores, dtype=float), np.array(members)


@settings(max_examples=200, deadline=None)
@given(_scored())
def test_roc_and_auc_match_the_slow_references(case):
    s, m = case
    fast, slow = roc(s, m), roc_reference(s, m)
    np.testing.assert_allclose(fast.fpr, slow.fpr, atol=1e-12)
    np.testing.assert_allclose(fast.tpr, slow.tpr, atol=1e-12)
    assert auc(s, m) == pytest.approx(auc_reference(s, m), abs=1e-12)
    for f in (0.0, 0.01, 0.25, 0.5, 1.0):  # the largest TPR with FPR <= f, read off the slow curve
        assert tpr_at_fpr(s, m, f) == pytest.approx(max(t for x, t in zip(slow.fpr, slow.tpr) if x <= f + 1e-12))


def test_auc_of_perfect_reversed_and_tied_scores():
    m = np.array([True, True, False, False])
    assert auc([3, 2, 1, 0], m) == 1.0 and auc([0, 1, 2, 3], m) == 0.0 and auc([1, 1, 1, 1], m) == 0.5
    assert tpr_at_fpr([3, 2, 1, 0], m, 0.0) == 1.0 and tpr_at_fpr([0, 1, 2, 3], m, 0.4) == 0.0


def test_the_dp_auc_bound_is_tight_for_randomized_response_and_caught_when_epsilon_is_understated():
    # hand derivation: with delta = 0 the two lines cross at FPR 1 / (1 + e^eps); the area is e^eps / (1 + e^eps)
    for eps in (0.1, 1.0, 3.0):
        assert dp_auc_bound(eps) == pytest.approx(np.exp(eps) / (1 + np.exp(eps)), abs=1e-12)
    x = np.linspace(0.0, 1.0, 1_000_001)  # slow reference: the bound's area by trapezoids
    for eps, delta in ((0.3, 0.2), (1.0, 5e-5), (3.0, 1e-3)):
        tpr = np.minimum.reduce([np.exp(eps) * x + delta, 1 - np.exp(-eps) * (1 - delta - x), np.ones_like(x)])
        assert dp_auc_bound(eps, delta) == pytest.approx(np.sum(np.diff(x) * (tpr[1:] + tpr[:-1]) / 2), abs=1e-9)
    assert dp_auc_bound(1e-6) == pytest.approx(0.5, abs=1e-6) and dp_auc_bound(1e4) == 1.0
    assert dp_auc_bound(1.0, 1e-3) > dp_auc_bound(1.0) and dp_auc_bound(2.0) > dp_auc_bound(1.0)
    # randomized response at eps says "member" truthfully with probability e^eps / (1 + e^eps): eps-DP, and its
    # ROC (one point) reaches the bound; a guarantee that claims a smaller epsilon for it is caught
    rng = np.random.default_rng(0)
    members = rng.random(200_000) < 0.5
    keep = rng.random(members.size) < np.exp(2.0) / (1 + np.exp(2.0))
    said = np.where(keep, members, ~members).astype(float)
    assert auc(said, members) == pytest.approx(dp_auc_bound(2.0), abs=3e-3)
    assert auc(said, members) > dp_auc_bound(1.5) + 0.02
    for bad in ({"epsilon": 0.0}, {"epsilon": float("inf")}, {"epsilon": 1.0, "delta": 1.0}):
        with pytest.raises(InvalidParameterError):
            dp_auc_bound(**bad)


def test_statistics_of_logits_are_stable_and_exact():
    z = np.array([[0.0, 0.0], [1000.0, -1000.0], [2.0, 1.0]])  # the second overflows a naive softmax
    y = np.array([0, 0, 1])
    np.testing.assert_allclose(log_true_prob(z, y), [np.log(0.5), 0.0, 1.0 - 2.0 - np.log1p(np.exp(-1.0))])
    np.testing.assert_allclose(logit_confidence(z, y), [0.0, 2000.0, -1.0])
    z3 = np.random.default_rng(0).normal(size=(50, 4))
    y3 = np.random.default_rng(1).integers(0, 4, 50)
    p3 = np.exp(z3)[np.arange(50), y3] / np.exp(z3).sum(1)
    np.testing.assert_allclose(logit_confidence(z3, y3), np.log(p3 / (1 - p3)), rtol=1e-10)


def test_lira_and_rmia_scores_match_per_example_references():
    from scipy.stats import norm

    gen = np.random.default_rng(3)
    target, phis = gen.normal(size=7), gen.normal(size=(6, 7))
    ins = np.array([gen.permutation(6) < 3 for _ in range(7)]).T  # each candidate IN for 3 of 6 shadows
    got = lira_scores(target, phis, ins, variance="per-example")
    for i in range(7):
        a, b = phis[ins[:, i], i], phis[~ins[:, i], i]
        want = norm.logpdf(target[i], a.mean(), a.std(ddof=1)) - norm.logpdf(target[i], b.mean(), b.std(ddof=1))
        assert got[i] == pytest.approx(want, rel=1e-9)
    offline = lira_scores(target, phis, np.zeros_like(ins), variance="per-example")
    np.testing.assert_allclose(offline, (target - phis.mean(0)) / phis.std(0, ddof=1))
    p_x, r_x, p_z, r_z = gen.random(9), gen.random(9), gen.random(30), gen.random(30)
    fast = rmia_scores(p_x, r_x, p_z, r_z, a=0.3, gamma=1.5)
    for i in range(9):
        ratio_x = p_x[i] / ((1.3 * r_x[i] + 0.7) / 2)
        hits = [ratio_x / (p_z[j] / ((1.3 * r_z[j] + 0.7) / 2)) >= 1.5 for j in range(30)]
        assert fast[i] == pytest.approx(np.mean(hits))


# --------------------------------------------------------------------------- the game on synthetic embeddings
D, N = 16, 2400


@pytest.fixture(scope="module")
def corpus():
    gen = np.random.default_rng(0)
    X = gen.normal(size=(N, D)).astype(np.float32)
    y = ((X @ gen.normal(size=D) + 4.0 * gen.normal(size=N)) > 0).astype(np.int64)  # noisy labels: memorised
    return X, y


def _target(corpus, *, exclude: bool):
    X, y = corpus
    game = membership_game(np.arange(N), members=200, rng=1, exclude_members=exclude)
    # an overfit head: many epochs on few examples (seeded lots: PlainTraining's rng protects nothing)
    defense = PlainTraining(epochs=200, batch_size=32, hidden=(64,), num_classes=2, init_seed=0, rng=3)
    model = defense.train((X[game.train], y[game.train]))
    access = ModelAccess.of(model, defense, X[game.candidates], y[game.candidates])
    return game, access, (X[game.population], y[game.population])


def _attacks(population):
    return {"loss": LossThreshold(), "lira": LiRA(population=population, shadows=6, rng=2),
            "lira-offline": LiRA(population=population, shadows=6, online=False, rng=2),
            "rmia": RMIA(population=population, rng=2)}


@pytest.fixture(scope="module")
def targets(corpus):
    """The two targets, trained once per module: the calibration game's (True: it saw no candidate) and the
    planted leak's (False)."""
    return {exclude: _target(corpus, exclude=exclude) for exclude in (True, False)}


@pytest.fixture(scope="module")
def scored(targets):
    out = {}
    for exclude in (True, False):
        game, access, population = targets[exclude]
        out[exclude] = {name: (score_membership(a.run(access), game.truth, level=0.999, resamples=400, rng=0),
                               a, game) for name, a in _attacks(population).items()}
    return out


@pytest.mark.parametrize("name", ["loss", "lira", "lira-offline", "rmia"])
def test_calibration_a_model_that_saw_no_candidate_scores_auc_one_half(scored, name):
    """The target trained on examples outside the candidates: AUC's 99.9% interval holds 0.5 (a false failure rate
    of about 1e-3 per attack, were the draws not seeded), and the exact one-sided U test does not reject at
    alpha = 1e-3."""
    res, _, _ = scored[True][name]
    a = res.result.metrics["auc"]
    assert a.ci_low <= 0.5 <= a.ci_high, (name, a)


@pytest.mark.parametrize("name", ["loss", "lira", "lira-offline", "rmia"])
def test_the_same_harness_catches_a_planted_leak(scored, name):
    """The positive control of the calibration test: a head trained on the members for 200 epochs leaks; every
    attack's AUC interval lies above 0.5 and the U test rejects. A harness (or attack) that always answered 0.5
    fails here; one that read the truth fails the calibration above."""
    res, _, _ = scored[False][name]
    a = res.result.metrics["auc"]
    assert a.ci_low > 0.5, (name, a)


def test_u_test_is_calibrated_on_the_null_and_rejects_the_leak(targets):
    for exclude, reject in ((True, False), (False, True)):
        game, access, _ = targets[exclude]
        v = membership_test(LossThreshold().run(access).scores, game.truth.members, alpha=1e-3)
        assert v.reject is reject and v.alpha == 1e-3


def test_lira_beats_the_loss_threshold_on_an_overfit_head(scored):
    loss = scored[False]["loss"][0].result.metrics
    lira = scored[False]["lira"][0].result.metrics
    assert lira["auc"].mean > loss["auc"].ci_high
    assert lira["tpr@1%fpr"].mean >= loss["tpr@1%fpr"].mean


def test_results_are_typed_records_with_roc_and_intervals(scored):
    res, attack, game = scored[False]["lira"]
    d = res.result.to_dict()
    assert set(d["metrics"]) == {"auc", "tpr@1%fpr", "tpr@0.1%fpr"}
    assert d["config"]["online"] is True and d["config"]["shadows"] == 6 and d["config"]["rng"] == "seed 2"
    assert d["defense"]["defense"] == "plain" and d["n_queries"] == len(game.candidates) == 400
    for m in d["metrics"].values():
        assert m["ci_low"] <= m["mean"] <= m["ci_high"] and m["ci_level"] == 0.999
    assert res.roc.fpr[0] == res.roc.tpr[0] == 0.0 and res.roc.fpr[-1] == res.roc.tpr[-1] == 1.0


def test_the_game_keeps_members_non_members_and_population_apart():
    g = membership_game(np.arange(100), members=20, rng=0)
    cand = set(g.candidates.tolist())
    assert set(g.train.tolist()) == set(g.candidates[g.truth.members].tolist())
    assert len(cand) == 40 and not cand & set(g.population.tolist()) and len(g.population) == 60
    null = membership_game(np.arange(100), members=20, rng=0, exclude_members=True)
    assert not set(null.train.tolist()) & set(null.candidates.tolist())
    again = membership_game(np.arange(100), members=20, rng=0)
    assert np.array_equal(again.candidates, g.candidates)  # the experiment's seed makes the game reproducible


# --------------------------------------------------------------------------- typed errors
def test_typed_errors(corpus):
    X, y = corpus
    pop = (X[:50], y[:50])
    with pytest.raises(InvalidTypeError, match="callable"):
        ModelAccess(query=None, X=X[:4], y=y[:4], recipe={"defense": "plain", "params": {}}, n_train=4)
    with pytest.raises(InvalidTypeError, match="public configuration"):
        ModelAccess(query=len, X=X[:4], y=y[:4], recipe={"defense": "plain", "params": {"w": X[:1]}}, n_train=4)
    with pytest.raises(DataFormatError):
        ModelAccess(query=len, X=X[:4], y=y[:3], recipe={"defense": "plain", "params": {}}, n_train=4)
    with pytest.raises(InvalidParameterError, match="n_train"):
        ModelAccess(query=len, X=X[:4], y=y[:4], recipe={"defense": "plain", "params": {}}, n_train=0)
    with pytest.raises(InvalidParameterError, match="shadows"):
        LiRA(population=pop, shadows=1)
    with pytest.raises(InvalidTypeError, match="population"):
        LiRA(population=X[:50])
    with pytest.raises(InvalidParameterError, match="variance"):
        LiRA(population=pop, variance="local")
    with pytest.raises(InvalidParameterError, match="1 or 2"):
        RMIA(population=pop, references=3)
    with pytest.raises(InvalidTypeError, match="ModelAccess"):
        LossThreshold().run(X[:4])
    with pytest.raises(InvalidParameterError, match="both members and non-members"):
        MembershipTruth(np.ones(4, bool))
    with pytest.raises(InvalidTypeError, match="boolean"):
        MembershipTruth(np.array([0, 1]))
    with pytest.raises(InvalidTypeError, match="MembershipScores"):
        score_membership(np.zeros(4), np.array([True, False, True, False]))
    with pytest.raises(InvalidTypeError, match="level"):
        score_membership(MembershipScores("x", np.zeros(4)), np.array([True, False, True, False]), level="95%")
    with pytest.raises(InvalidParameterError, match="lower members"):
        membership_game(np.arange(10), members=5)
    with pytest.raises(DataFormatError, match="finite"):
        MembershipScores("x", np.array([0.0, np.nan]))


def test_shadows_need_a_population_as_large_as_the_training_set(corpus):
    X, y = corpus
    defense = PlainTraining(epochs=1, batch_size=32, num_classes=2, init_seed=0, rng=0)
    model = defense.train((X[:200], y[:200]))
    access = ModelAccess.of(model, defense, X[200:240], y[200:240])
    with pytest.raises(InvalidParameterError, match="larger population"):
        LiRA(population=(X[300:350], y[300:350]), shadows=2, online=False, rng=0).run(access)
    with pytest.raises(InvalidParameterError, match="RMIA needs more population"):
        RMIA(population=(X[300:450], y[300:450]), rng=0).run(access)


def test_repeated_queries_average_a_randomized_models_answers_and_are_recorded():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 8)).astype(np.float32), rng.integers(0, 2, 40)
    calls = []

    def query(Z):  # a model that answers with fresh noise every time (as a TextHide-trained head does)
        calls.append(len(Z))
        return np.stack([np.zeros(len(Z)), rng.normal(0, 1, len(Z))], axis=1)

    access = ModelAccess(query=query, X=X, y=y, recipe={"defense": "plain", "params": {}}, n_train=20)
    once = LossThreshold().run(access)
    many = LossThreshold(queries=64).run(access)
    assert len(calls) == 65 and "queries" not in once.config and many.config["queries"] == 64
    # the average of 64 answers is close to the noise-free logits (0, 0): log p(y) near log 1/2 for every candidate
    assert np.abs(many.scores - np.log(0.5)).max() < np.abs(once.scores - np.log(0.5)).max()
    assert np.abs(many.scores - np.log(0.5)).max() < 0.3  # the mean of 64 has sd 1/8: 0.3 is 4.8 sd in log p
    with pytest.raises(InvalidTypeError):
        LossThreshold(queries=1.5)
    with pytest.raises(InvalidParameterError):
        LossThreshold(queries=0)
