"""The eavesdropper: what it sees, how it is scored, and the typed errors on bad input."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from veil.attacks.attribute import (THRESHOLDS, AttackerSplits, AttributeAttack, evaluate_attribute, floor_predictions,
                                    observe_splits, predict_sets, score)
from veil.attacks.base import Observation
from veil.corpora.attributes import AttributeCorpus, PrivateVariables, entity_variables, one_hot_variables
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError


def _toy(n: int = 240, seed: int = 0):
    """r(x) whose first coordinate carries a binary private variable; the second variable is noise."""
    g = np.random.default_rng(seed)
    z = g.integers(0, 2, size=(n, 2)).astype(np.float32)
    R = g.normal(size=(n, 4)).astype(np.float32)
    R[:, 0] += 3 * z[:, 0]
    private = PrivateVariables(z, ("a", "b"), (("a", (0,)), ("b", (1,))), "attributes")
    idx = {"train": np.arange(0, 160), "dev": np.arange(160, 200), "test": np.arange(200, n)}
    return R, private, idx


def test_the_attacker_sees_only_representations_of_its_own_splits():
    from veil.training.adversarial import representations
    from veil.models.lstm import LSTMEncoder, TokenInputs, Vocabulary

    texts = ["a b c", "b c d", "c d e", "d e f", "e f g", "f g h"]
    vocab = Vocabulary(texts[:2])
    enc = LSTMEncoder(vocab, width=3, rng=0)
    R_all = representations(enc, TokenInputs(texts, vocab))
    private = one_hot_variables({"who": ["x", "y", "x", "y", "x", "y"]})
    idx = {"train": np.array([0, 1]), "dev": np.array([2, 3]), "test": np.array([4, 5])}
    R = {s: torch.from_numpy(R_all[i]).requires_grad_(True) for s, i in idx.items()}
    splits, truth = observe_splits(R, {s: private.select(i) for s, i in idx.items()}, ids=idx)
    # exactly r(x) of each split, as read-only numpy copies (no graph back into the encoder)
    for s, i in idx.items():
        obs = getattr(splits, s)
        assert isinstance(obs, Observation) and np.array_equal(obs.vectors, R_all[i])
        assert not obs.vectors.flags.writeable
    # the test labels are not part of what the attacker gets; they stay with the scorer
    assert {f.name for f in dataclasses.fields(splits)} == {"train", "z_train", "dev", "z_dev", "test", "groups",
                                                           "kind", "ids"}
    assert np.array_equal(truth.Z, private.Z[4:])
    # no encoder, model or raw text where r(x) is expected
    with pytest.raises(InvalidTypeError, match="Observation of r"):
        AttackerSplits(enc, splits.z_train, splits.dev, splits.z_dev, splits.test, splits.groups, splits.kind)
    with pytest.raises(InvalidTypeError):
        AttributeAttack().fit({"train": R_all})
    # splits that share examples are refused
    with pytest.raises(InvalidParameterError, match="share 1 examples"):
        observe_splits(R, {s: private.select(i) for s, i in idx.items()},
                       ids={"train": [0, 1], "dev": [2, 3], "test": [1, 5]})


def test_attack_beats_the_floor_on_an_informative_representation_and_not_on_noise():
    R, private, idx = _toy()
    splits, truth = observe_splits({s: R[i] for s, i in idx.items()}, {s: private.select(i) for s, i in idx.items()})
    res = evaluate_attribute(AttributeAttack(epochs=12, rng=0), splits, truth, rng=0)
    assert res.metrics["acc[a]"].mean > 0.85
    assert res.config["threshold"] in THRESHOLDS  # an entity-set attacker picks its threshold on dev
    assert res.metrics["advantage"].ci_low > 0
    assert res.metrics["privacy"].mean == pytest.approx(1 - res.metrics["score"].mean)
    noise = np.random.default_rng(1).normal(size=R.shape).astype(np.float32)
    splits, truth = observe_splits({s: noise[i] for s, i in idx.items()}, {s: private.select(i) for s, i in idx.items()})
    res = evaluate_attribute(AttributeAttack(architecture="linear", epochs=8, rng=0), splits, truth, rng=0)
    assert res.metrics["advantage"].ci_low <= 0  # nothing to find in noise: the interval reaches below zero


def test_scores_and_floors_by_hand():
    groups = (("a", (0,)), ("b", (1,)), ("c", (2,)))
    Z = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1]], dtype=np.float32)
    P = np.array([[0.9, 0.2, 0.6], [0.4, 0.7, 0.1], [0.1, 0.1, 0.8]])
    pred = predict_sets(P, groups, "entities")
    # TP = 1 + 1 + 1, FP = 1 (row 0, c), FN = 1 (row 1, a): F = 2*3 / (2*3 + 1 + 1)
    assert score(pred, Z, groups, "entities") == pytest.approx(6 / 8)
    # floor on these labels: "every entity" (TP 4, FP 5: F = 8/13) beats "entities in most examples" ({a}: F = 4/7)
    floor = floor_predictions(Z, groups, "entities", 3)
    assert floor[0].tolist() == [1, 1, 1] and score(floor, Z, groups, "entities") == pytest.approx(8 / 13)
    dominant = np.array([[1, 0, 0], [1, 1, 0], [1, 0, 1], [1, 0, 0]], dtype=np.float32)
    floor = floor_predictions(dominant, groups, "entities", 4)  # {a} (F = 8/10) beats everything (F = 12/18)
    assert floor[0].tolist() == [1, 0, 0] and score(floor, dominant, groups, "entities") == pytest.approx(0.8)
    # a middle prefix can win: a in 6/10, b in 5/10, c in 1/10 -> {a, b} (F = 22/32) beats {a} (12/22) and all (24/42)
    middle = np.zeros((10, 3), dtype=np.float32)
    middle[:6, 0], middle[4:9, 1], middle[9, 2] = 1, 1, 1
    floor = floor_predictions(middle, groups, "entities", 10)
    assert floor[0].tolist() == [1, 1, 0] and score(floor, middle, groups, "entities") == pytest.approx(22 / 32)
    one_hot = one_hot_variables({"s": ["x", "y", "z", "x"]})
    P = np.array([[0.6, 0.7, 0.1], [0.1, 0.9, 0.2], [0.3, 0.2, 0.1], [0.2, 0.1, 0.3]])
    pred = predict_sets(P, one_hot.groups, "attributes")  # arg-max per multi-class variable
    assert pred.tolist() == [[0, 1, 0], [0, 1, 0], [1, 0, 0], [0, 0, 1]]
    assert score(pred, one_hot.Z, one_hot.groups, "attributes") == pytest.approx(1 / 4)
    floor = floor_predictions(one_hot.Z, one_hot.groups, "attributes", 4)
    assert score(floor, one_hot.Z, one_hot.groups, "attributes") == pytest.approx(2 / 4)  # majority class x


def test_bad_input_raises_typed_errors():
    with pytest.raises(DataFormatError, match="no private attributes"):
        PrivateVariables(np.zeros((3, 0)), (), (), "entities")
    with pytest.raises(DataFormatError, match="no private attributes"):
        one_hot_variables({})
    with pytest.raises(DataFormatError, match="one value only"):
        one_hot_variables({"gender": ["F", "F", "F"]})
    with pytest.raises(DataFormatError, match="mismatched lengths"):
        one_hot_variables({"a": ["x", "y"], "b": ["u", "v", "w"]})
    with pytest.raises(DataFormatError, match="no private attributes"):
        entity_variables([{"x"}], [])
    private = one_hot_variables({"a": ["x", "y", "x"]})
    with pytest.raises(DataFormatError, match="3 texts but"):
        AttributeCorpus("t", ["a", "b", "c"], np.array([0, 1]), ("n", "p"), np.array(["train"] * 3), private)
    R, priv, idx = _toy()
    with pytest.raises(DataFormatError, match="representations but"):
        observe_splits({"train": R[:10], "dev": R[:5], "test": R[:5]},
                       {"train": priv.select(np.arange(9)), "dev": priv.select(np.arange(5)),
                        "test": priv.select(np.arange(5))})
    same = PrivateVariables(np.ones((10, 1)), ("a",), (("a", (0,)),), "entities")
    with pytest.raises(DataFormatError, match="one value only"):
        observe_splits({s: R[:10] for s in ("train", "dev", "test")}, {s: same for s in ("train", "dev", "test")})
    with pytest.raises(InvalidParameterError):
        AttributeAttack(architecture="transformer")


def test_attacker_is_reproducible_from_its_seed():
    R, private, idx = _toy(seed=3)
    splits, truth = observe_splits({s: R[i] for s, i in idx.items()}, {s: private.select(i) for s, i in idx.items()})
    a = evaluate_attribute(AttributeAttack(epochs=3, rng=7), splits, truth, rng=0).metrics["score"].mean
    b = evaluate_attribute(AttributeAttack(epochs=3, rng=7), splits, truth, rng=0).metrics["score"].mean
    assert a == b
