"""The eavesdropper's attribute-inference attack on hidden representations (Coavoux et al. 2018, Sec. 2.2, 4.2).

Threat model: the attacker taps r(x) on its way to the server. After the main model is trained and frozen it
gets r(x) of its OWN examples: a training and a dev split with their private variables z, and the test split's
r(x) without z. It trains a feedforward network with sigmoid outputs

    P(z | r(x); theta_a) = sigmoid(FeedForward(r(x))),   L_a(theta_a) = - sum_i sum_{j=1}^{K} log P(z_j^(i) | r(x^(i)))

(the summed binary log loss over the K binary variables; a multi-class attribute is one-hot), keeps the epoch whose
dev score is best (the most successful attacker) and predicts the test split. That separation is an API fact:
:class:`AttackerSplits` holds only :class:`~veil.attacks.base.Observation` objects (read-only float32 copies of
r(x): no encoder, no texts, no gradients) for train/dev/test, refuses overlapping example ids, and carries z for
train and dev only; the test z stays with the scorer (:func:`evaluate_attribute`).

Scores (Sec. 4.2): for ``kind="attributes"`` the mean per-variable accuracy X (privacy = 1 - X; a multi-class
variable is predicted by its arg-max column); for ``kind="entities"`` the micro-F over the entity sets
(privacy = 1 - F; entity j is predicted when P(z_j) > t, the threshold t chosen with the epoch on the attacker's
dev split from :data:`THRESHOLDS`: 0.5 is the paper's rule, lower thresholds suit micro-F on rare entities).
The floor is the best constant predictor on the attacker's training labels: the most frequent class per
variable or, for entities, the best constant entity set (the authors' baseline, predicting every entity, is one
candidate and is reported too; one dominant entity makes "always that one" much stronger). Both come with
percentile-bootstrap 95% intervals over test examples, and the attacker's advantage over the floor with a paired
bootstrap interval.

Attackers (:data:`ARCHITECTURES`): ``mlp`` (the paper: one hidden layer of 64 ReLU units), ``mlp-wide`` (two
hidden layers of 256, a stronger post-hoc attacker) and ``linear`` (a logistic-regression probe). Departures:
mini-batches of 32 (the authors update per example); inputs are standardised with the attacker's training
statistics (centred per dimension, divided by one overall standard deviation: an attacker's free choice
that helps on badly scaled representations without blowing up near-constant dimensions).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from veil.attacks.base import Attack, AttackResult, Observation, ThreatModel, rng_description
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.results import Metric

__all__ = ["AttackerSplits", "AttributeAttack", "ARCHITECTURES", "THRESHOLDS", "observe_splits", "evaluate_attribute",
           "predict_sets", "score", "floor_predictions", "bootstrap_metric"]

ARCHITECTURES: dict[str, tuple[int, ...]] = {"mlp": (64,), "mlp-wide": (256, 256), "linear": ()}
#: decision thresholds an entity-set attacker may pick on its dev split (micro-F rewards predicting an entity
#: below P = 0.5: the F-optimal threshold is about F / 2); 0.5 first, so ties keep the paper's rule
THRESHOLDS = (0.5, 0.45, 0.4, 0.35, 0.3, 0.25, 0.2, 0.15, 0.1)
SPLITS = ("train", "dev", "test")


def _z(name: str, z: Any, n: int, k: int | None = None) -> np.ndarray:
    z = np.asarray(z)
    if z.ndim != 2 or len(z) != n or (k is not None and z.shape[1] != k):
        raise DataFormatError(f"{name} must be (n={n}, K{'' if k is None else '=' + str(k)}) 0/1 private "
                              f"variables, got shape {z.shape}; give one row per representation")
    if not np.isin(z, (0, 1)).all():
        raise DataFormatError(f"{name} must hold only 0 and 1")
    return z.astype(np.float32)


@dataclass(frozen=True)
class AttackerSplits:
    """What the eavesdropper gets: r(x) of its own train/dev/test examples and z of train and dev only."""

    train: Observation
    z_train: np.ndarray
    dev: Observation
    z_dev: np.ndarray
    test: Observation
    groups: tuple[tuple[str, tuple[int, ...]], ...]
    kind: str
    ids: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("train", "dev", "test"):
            if not isinstance(getattr(self, name), Observation):
                raise InvalidTypeError(f"{name} must be an Observation of r(x) (veil.attacks.base.Observation): "
                                       "the attacker sees representations only, never the encoder or the texts; "
                                       "build it with observe_splits(...)")
        if len({self.train.dim, self.dev.dim, self.test.dim}) != 1:
            raise DataFormatError("train, dev and test representations must have the same width")
        k = sum(len(g) for _, g in self.groups)
        object.__setattr__(self, "z_train", _z("z_train", self.z_train, len(self.train), k))
        object.__setattr__(self, "z_dev", _z("z_dev", self.z_dev, len(self.dev), k))
        if len(self.z_train) and len(np.unique(self.z_train, axis=0)) < 2:
            raise DataFormatError("the attacker's training labels take one value only; it has nothing to learn")
        ids = {s: tuple(int(i) for i in self.ids.get(s, ())) for s in SPLITS}
        for s in SPLITS:
            if ids[s] and len(ids[s]) != len(getattr(self, s)):
                raise DataFormatError(f"{len(ids[s])} ids for {len(getattr(self, s))} {s} representations")
        for a, b in (("train", "dev"), ("train", "test"), ("dev", "test")):
            both = set(ids[a]) & set(ids[b])
            if both:
                raise InvalidParameterError(f"the attacker's {a} and {b} splits share {len(both)} examples (e.g. id "
                                            f"{min(both)}); an attacker is scored on examples it never trained on")
        object.__setattr__(self, "ids", ids)


def observe_splits(R: Mapping[str, np.ndarray], private: Mapping[str, Any], *,
                   ids: Mapping[str, Any] | None = None, defense: Mapping[str, Any] | None = None
                   ) -> tuple[AttackerSplits, Any]:
    """(what the attacker sees, the test truth for the scorer) from r(x) and private variables per split.

    ``R``: split -> (n, width) representations (numpy or torch; copied, detached); ``private``: split ->
    :class:`~veil.corpora.attributes.PrivateVariables`. The returned truth (the test split's private variables)
    must go to :func:`evaluate_attribute` only.
    """
    missing = [s for s in SPLITS if s not in R or s not in private]
    if missing:
        raise InvalidParameterError(f"observe_splits needs train, dev and test; missing {missing}")
    for s in SPLITS:
        if len(R[s]) != len(private[s]):
            raise DataFormatError(f"{s}: {len(R[s])} representations but {len(private[s])} private rows")
    obs = {s: Observation(R[s], defense=dict(defense or {"defense": "none"}), source="precomputed") for s in SPLITS}
    splits = AttackerSplits(obs["train"], private["train"].Z, obs["dev"], private["dev"].Z, obs["test"],
                            private["train"].groups, private["train"].kind,
                            {s: tuple(np.asarray(ids[s]).tolist()) for s in SPLITS} if ids else {})
    return splits, private["test"]


# ---------------------------------------------------------------- scoring
def predict_sets(P: np.ndarray, groups: Any, kind: str, threshold: float = 0.5) -> np.ndarray:
    """0/1 predictions from probabilities: P > ``threshold`` per binary variable, arg-max one-hot per multi-class
    one (the threshold only matters for binary variables; the attacker picks it on dev for entity sets)."""
    out = (P > threshold).astype(np.float32)
    if kind == "attributes":
        for _, g in groups:
            if len(g) > 1:
                cols = list(g)
                block = np.zeros((len(P), len(g)), dtype=np.float32)
                block[np.arange(len(P)), P[:, cols].argmax(axis=1)] = 1.0
                out[:, cols] = block
    return out


def _per_example(pred: np.ndarray, Z: np.ndarray, groups: Any, kind: str) -> np.ndarray:
    """Per test example: (correct variables / V) for attributes; (TP, FP, FN) for entities."""
    if kind == "entities":
        return np.stack([(pred * Z).sum(1), (pred * (1 - Z)).sum(1), ((1 - pred) * Z).sum(1)], axis=1)
    correct = [np.all(pred[:, list(g)] == Z[:, list(g)], axis=1) for _, g in groups]
    return np.stack(correct, axis=1).mean(axis=1, keepdims=True)


def _aggregate(rows: np.ndarray, kind: str) -> float:
    if kind == "entities":
        tp, fp, fn = rows.sum(axis=0)
        return float(2 * tp / (2 * tp + fp + fn)) if tp + fp + fn else 0.0
    return float(rows.mean())


def score(pred: np.ndarray, Z: np.ndarray, groups: Any, kind: str) -> float:
    """Mean per-variable accuracy (attributes) or micro-F (entities) of 0/1 predictions."""
    return _aggregate(_per_example(pred, np.asarray(Z), groups, kind), kind)


def floor_predictions(z_train: np.ndarray, groups: Any, kind: str, n: int) -> np.ndarray:
    """The floor: the best constant predictor chosen on the training labels.

    Attributes: each variable's most frequent training class. Entities: the constant entity set with the best
    micro-F on the training split (exact: the best is always the m most frequent entities for some m, so every m
    is tried; m = K is the authors' "predict every entity" baseline). On news passages "always Trump" beats
    "everyone" by far.
    """
    K = z_train.shape[1]
    if kind == "entities":
        # A constant set S scores micro-F 2 sum_{j in S} p_j / (|S| + sum_j p_j) (p_j: training frequency), so the
        # best S is a prefix of the entities sorted by frequency: try every prefix (K + 1 candidates, exact).
        order = np.argsort(-z_train.mean(axis=0), kind="stable")
        candidates = [np.ones(K, dtype=np.float32)]
        for m in range(1, K + 1):
            row = np.zeros(K, dtype=np.float32)
            row[order[:m]] = 1.0
            candidates.append(row)
        pick = max(candidates, key=lambda row: score(np.tile(row, (len(z_train), 1)), z_train, groups, kind))
        return np.tile(pick, (n, 1))
    row = np.zeros(K, dtype=np.float32)
    for _, g in groups:
        if len(g) == 1:
            row[g[0]] = float(z_train[:, g[0]].mean() > 0.5)
        else:
            row[list(g)[int(z_train[:, list(g)].sum(axis=0).argmax())]] = 1.0
    return np.tile(row, (n, 1))


def bootstrap_metric(rows: np.ndarray, kind: str, *, base: np.ndarray | None = None, rng: Any = 0,
                     resamples: int = 1000, level: float = 0.95) -> Metric:
    """Score (or, with ``base``, score minus the base's score, paired) with a percentile bootstrap interval."""
    from veil.random import as_generator

    g = as_generator(rng)
    point = _aggregate(rows, kind) - (0.0 if base is None else _aggregate(base, kind))
    n = len(rows)
    stats = np.empty(resamples)
    for b in range(resamples):
        idx = g.integers(0, n, size=n)
        stats[b] = _aggregate(rows[idx], kind) - (0.0 if base is None else _aggregate(base[idx], kind))
    lo, hi = np.quantile(stats, [(1 - level) / 2, (1 + level) / 2])
    return Metric(mean=point, n=n, ci_low=float(lo), ci_high=float(hi), ci_level=level)


# ---------------------------------------------------------------- the attack
class AttributeAttack(Attack):
    """Train an MLP (or linear probe) from r(x) to z on the attacker's own splits; score it on test."""

    name: ClassVar[str] = "attribute"
    citation: ClassVar[str] = "Coavoux, Narayan & Cohen 2018, Privacy-preserving Neural Representations of Text, Sec. 2.2"
    threat: ClassVar[ThreatModel] = ThreatModel(
        observes="r(x) of its own train/dev/test examples, from the frozen encoder",
        needs=("private variables of its own training and dev examples",), trains=True)
    observes: ClassVar[str] = "representations"
    bench_cell: ClassVar[str] = "veil.bench.cells.representations:attribute_cell"

    def run(self, observation: Any) -> Any:
        """The attack's one verb: :meth:`predict_proba` of the private variables from observed r(x)."""
        return self.predict_proba(observation)

    def __init__(self, *, architecture: str = "mlp", epochs: int = 16, batch_size: int = 32, lr: float = 1e-3,
                 rng: Any = None) -> None:
        from veil.validation import check_choice, check_int, check_real, check_rng

        self.architecture = check_choice("architecture", architecture, ARCHITECTURES)
        self.epochs = check_int("epochs", epochs, minimum=1)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.lr = check_real("lr", lr, low=0.0, high=1.0, low_open=True)
        check_rng(rng)
        self.rng = rng
        self.model: Any = None
        self.best_epoch = -1
        self.threshold = 0.5

    def config(self) -> dict[str, Any]:
        return {**super().config(), "architecture": self.architecture, "hidden": list(ARCHITECTURES[self.architecture]),
                "epochs": self.epochs, "batch_size": self.batch_size, "lr": self.lr, "rng": rng_description(self.rng)}

    def fit(self, splits: AttackerSplits) -> "AttributeAttack":
        """Train on ``splits.train``, keep the epoch with the best dev score. Sees nothing of the test labels."""
        import torch
        import torch.nn.functional as F

        from veil.models.heads import MLPHead
        from veil.random import as_generator

        if not isinstance(splits, AttackerSplits):
            raise InvalidTypeError(f"fit takes AttackerSplits (observe_splits(...)), not {type(splits).__name__}")
        g = as_generator(self.rng)
        gen = torch.Generator().manual_seed(int(g.integers(0, 2**62)))
        X = splits.train.vectors
        self._mu, self._sd = X.mean(axis=0), float(X.std()) + 1e-8  # one scale: near-constant dims stay small
        Xt, Zt = torch.from_numpy(self._scale(X)), torch.from_numpy(splits.z_train)
        Xd = torch.from_numpy(self._scale(splits.dev.vectors))
        model = MLPHead(X.shape[1], Zt.shape[1], hidden=ARCHITECTURES[self.architecture], dropout=0.0, rng=gen)
        opt = torch.optim.Adam(model.parameters(), lr=self.lr)
        best, best_score = None, -1.0
        for epoch in range(self.epochs):
            model.train()
            perm = torch.randperm(len(Xt), generator=gen)
            for s in range(0, len(perm), self.batch_size):
                idx = perm[s:s + self.batch_size]
                loss = F.binary_cross_entropy_with_logits(model(Xt[idx]), Zt[idx], reduction="none").sum(1).mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
                opt.step()
            model.eval()
            with torch.no_grad():
                P = torch.sigmoid(model(Xd)).numpy()
            for t in (THRESHOLDS if splits.kind == "entities" else (0.5,)):
                dev_score = score(predict_sets(P, splits.groups, splits.kind, t), splits.z_dev, splits.groups,
                                  splits.kind)
                if dev_score > best_score:
                    best_score, best = dev_score, (epoch, t, copy.deepcopy(model.state_dict()))
        self.best_epoch, self.threshold, state = best
        model.load_state_dict(state)
        self.model, self.dev_score = model.eval(), best_score
        return self

    def _scale(self, X: np.ndarray) -> np.ndarray:
        return ((X - self._mu) / self._sd).astype(np.float32)

    def predict_proba(self, obs: Observation) -> np.ndarray:
        import torch

        if self.model is None:
            raise InvalidParameterError("predict before fit: call fit(splits) first")
        if not isinstance(obs, Observation):
            raise InvalidTypeError(f"predict_proba takes an Observation of r(x), not {type(obs).__name__}")
        with torch.no_grad():
            return torch.sigmoid(self.model(torch.from_numpy(self._scale(obs.vectors)))).numpy()


def evaluate_attribute(attack: AttributeAttack | None, splits: AttackerSplits, truth: Any, *,
                       probabilities: np.ndarray | None = None, rng: Any = 0) -> AttackResult:
    """Fit ``attack`` on ``splits`` (or score given test ``probabilities``, e.g. the training-time adversary's),
    then score its test predictions against ``truth`` (the test split's private variables).

    Metrics: ``score`` (accuracy or micro-F), ``privacy`` (1 - score), ``floor_score``, ``floor_privacy``,
    ``advantage`` (score - floor, paired bootstrap), per-variable accuracies ``acc[<variable>]`` and, for entities,
    ``paper_floor_privacy`` / ``paper_advantage`` against the authors' "predict every entity" baseline.
    """
    start = time.perf_counter()
    Z = np.asarray(truth.Z, dtype=np.float32)
    if len(Z) != len(splits.test):
        raise DataFormatError(f"{len(Z)} truth rows for {len(splits.test)} test representations")
    if probabilities is None:
        if attack is None:
            raise InvalidParameterError("give an attack or test probabilities")
        attack.fit(splits)
        probabilities = attack.predict_proba(splits.test)
    threshold = attack.threshold if attack is not None else 0.5
    pred = predict_sets(np.asarray(probabilities), splits.groups, splits.kind, threshold)
    floor = floor_predictions(splits.z_train, splits.groups, splits.kind, len(Z))
    rows = _per_example(pred, Z, splits.groups, splits.kind)
    base = _per_example(floor, Z, splits.groups, splits.kind)
    s = bootstrap_metric(rows, splits.kind, rng=rng)
    f = bootstrap_metric(base, splits.kind, rng=rng)
    metrics = {"score": s, "privacy": Metric(1 - s.mean, n=s.n, ci_low=1 - s.ci_high, ci_high=1 - s.ci_low,
                                             ci_level=s.ci_level),
               "floor_score": f, "floor_privacy": Metric(1 - f.mean, n=f.n),
               "advantage": bootstrap_metric(rows, splits.kind, base=base, rng=rng)}
    if splits.kind == "entities":  # the authors' own baseline, kept beside the stronger constant floor
        every = _per_example(np.ones_like(Z), Z, splits.groups, splits.kind)
        metrics["paper_floor_privacy"] = Metric(1 - _aggregate(every, splits.kind), n=len(Z))
        metrics["paper_advantage"] = bootstrap_metric(rows, splits.kind, base=every, rng=rng)
    for name, g in splits.groups:
        acc = float(np.all(pred[:, list(g)] == Z[:, list(g)], axis=1).mean())
        metrics[f"acc[{name}]"] = Metric(acc, n=len(Z))
    config = attack.config() if attack is not None else {"attack": "given-probabilities"}
    if attack is not None:
        config = {**config, "best_epoch": attack.best_epoch, "dev_score": attack.dev_score, "threshold": threshold}
    return AttackResult(attack=config["attack"], defense=dict(splits.test.defense), n_queries=len(Z),
                        metrics=metrics, config={**config, "kind": splits.kind}, wall_time_s=time.perf_counter() - start)
