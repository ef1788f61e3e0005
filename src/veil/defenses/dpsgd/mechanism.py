"""DP-SGD (Abadi et al., CCS 2016) on Opacus, and plain training through the very same loop.

:class:`DPSGD` trains a classifier (by default veil's MLP head on frozen sentence embeddings) with per-example
clipping and Gaussian noise, at the noise level whose accounted epsilon is at most the target; :class:`PlainTraining`
is the non-private reference: the same lots, steps, optimizer and initial weights, no clipping and no noise. Both
release a :class:`TrainedModel` (release kind ``model``). The guarantee, and what it does not cover, is stated in
:mod:`veil.defenses.dpsgd` (the package docstring).

Departures from Abadi et al.: the lots are Poisson samples (each example independently with probability q = batch
size / n), as the accountants assume, rather than shuffled fixed-size batches; the noisy clipped sum is divided by
the expected lot size q n (Opacus' convention); the optimizer is Adam by default (a post-processing of the noisy
gradients, so the guarantee is the same as with SGD); accounting is Opacus' PRV (Gopi et al. 2021) with its RDP
beside it, not the moments accountant; the number of steps is ``round(epochs * n / batch_size)``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from veil.defenses.base import Guarantee, ModelDefense
from veil.defenses.dpsgd.accounting import ACCOUNTANTS, Accounting, account, calibrate_sigma
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError, VeilError
from veil.validation import check_choice, check_epsilon, check_int, check_real, check_rng, seeded_rng

__all__ = ["DPSGD", "PlainTraining", "TrainedModel", "Evaluation", "DEFAULT_HIDDEN", "BENCH_RECIPE", "BENCH_EPOCHS",
           "from_recipe"]

DEFAULT_HIDDEN = (128,)
#: what the bench trains (``model`` cells): the defaults of ``veil dpsgd train``, except the epochs, which each bench
#: setting names (:data:`BENCH_EPOCHS`)
BENCH_RECIPE: dict[str, Any] = {"epochs": 10, "batch_size": 256, "lr": 1e-3, "hidden": DEFAULT_HIDDEN}
#: the DP-SGD epsilons the bench runs: quick, full
BENCH_EPSILONS = ((8.0,), (1.0, 3.0, 8.0))
#: the epochs of every bench target (plain, DP-SGD, TextHide-trained), part of each cell's setting: at the recipe's
#: 10 epochs the DP-SGD and TextHide heads on the bench's 1,000-2,000 members predict the majority class
#: (docs/results/membership.md), and a target that learnt nothing says nothing about what a useful one leaks
BENCH_EPOCHS = 200


@dataclass(frozen=True)
class Evaluation:
    """Accuracy of a trained model on labelled examples, with which examples it got right (for paired tests)."""

    accuracy: float
    correct: np.ndarray = field(repr=False)
    n: int


@dataclass(frozen=True)
class TrainedModel:
    """What :class:`DPSGD` or :class:`PlainTraining` releases: the trained ``model`` (raw embeddings (n, d) ->
    logits (n, classes), in eval mode) and what it guarantees.

    ``accounting`` (DP-SGD only; None for plain training): both accountants' epsilon at ``delta``, sigma, the
    sampling rate and the number of steps. ``config``: the public configuration it was trained under.
    """

    model: Any
    guarantee: Guarantee
    accounting: Accounting | None
    num_classes: int
    n_train: int
    steps: int
    sample_rate: float
    config: dict[str, Any]
    seconds: float

    @property
    def epsilon(self) -> float | None:
        """The accounted epsilon (the chosen accountant's), None for plain training."""
        return None if self.accounting is None else self.accounting.epsilon

    @property
    def sigma(self) -> float | None:
        return None if self.accounting is None else self.accounting.sigma

    def logits(self, X: Any) -> np.ndarray:
        """Logits (n, classes) for embeddings ``X`` (n, d)."""
        import torch

        X = np.require(_embeddings(X), requirements=["W"])  # torch refuses read-only arrays (a copy if so)
        with torch.no_grad():
            out = [self.model(torch.from_numpy(X[i:i + 4096])) for i in range(0, len(X), 4096)]
        return torch.cat(out).numpy() if out else np.zeros((0, self.num_classes), dtype=np.float32)

    def predict(self, X: Any) -> np.ndarray:
        """Predicted classes (n,) for embeddings ``X``."""
        return self.logits(X).argmax(axis=1)

    def evaluate(self, X: Any, y: Any) -> Evaluation:
        """Accuracy on ``(X, y)``."""
        X = _embeddings(X)
        y = _labels(y, len(X), self.num_classes)
        correct = self.predict(X) == y
        return Evaluation(accuracy=float(correct.mean()), correct=correct, n=len(y))


def _embeddings(X: Any) -> np.ndarray:
    from veil.validation import as_vectors

    return np.ascontiguousarray(as_vectors("X", X), dtype=np.float32)


def _labels(y: Any, n: int, num_classes: int | None) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1 or len(y) != n:
        raise DataFormatError(f"labels must have shape ({n},) (one per embedding), got {y.shape}")
    if y.dtype.kind not in "iu":
        raise InvalidTypeError(f"labels must be integer class ids 0..classes-1, got dtype {y.dtype}")
    if len(y) and (y.min() < 0 or (num_classes is not None and y.max() >= num_classes)):
        top = "classes-1" if num_classes is None else num_classes - 1
        raise DataFormatError(f"labels must be in 0..{top}, got {y.min()}..{y.max()}")
    return y.astype(np.int64)


class _Trainer(ModelDefense):
    """What :class:`DPSGD` and :class:`PlainTraining` share: parameters, data checks, the head, the loop."""

    abstract: ClassVar[bool] = True
    tasks: ClassVar[tuple[str, ...]] = ("sentence-classification",)
    private: ClassVar[bool] = False
    #: the noise drawn, as a multiple of what is accounted: 1, except in negative controls (controls.py)
    _noise_scale: ClassVar[float] = 1.0
    #: the bound applied to each example's gradient, as a multiple of the accounted clip: 1, except in negative
    #: controls (controls.py: infinity, no clipping)
    _clip_scale: ClassVar[float] = 1.0

    def _init_common(self, *, epochs: Any, batch_size: Any, lr: Any, optimizer: Any, hidden: Any,
                     num_classes: Any, model: Any, init_seed: Any) -> None:
        from veil.defenses.dpsgd.engine import OPTIMIZERS, check_module

        self.epochs = check_int("epochs", epochs, minimum=1)
        self.batch_size = check_int("batch_size", batch_size, minimum=1,
                                    hint="; it is the expected lot size (sampling rate = batch_size / n)")
        self.lr = check_real("lr", lr, low=0.0, high=math.inf, low_open=True, high_open=True)
        self.optimizer = check_choice("optimizer", optimizer, OPTIMIZERS)
        if isinstance(hidden, (str, bytes)) or not isinstance(hidden, Sequence):
            raise InvalidTypeError(f"hidden must be a sequence of layer widths such as (128,) or (), not "
                                   f"{type(hidden).__name__}")
        self.hidden = tuple(check_int("hidden width", h, minimum=1) for h in hidden)
        self.num_classes = None if num_classes is None else check_int("num_classes", num_classes, minimum=2)
        if model is not None:
            check_module(model)
        self.model = model
        self.init_seed = None if init_seed is None else check_int("init_seed", init_seed, minimum=0)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "epochs": self.epochs, "batch_size": self.batch_size, "lr": self.lr,
                "optimizer": self.optimizer, "model": self._model_name(), "init_seed": self.init_seed}

    def recipe(self) -> dict[str, Any]:
        """The public training recipe as JSON-ready data: the registry name and the constructor's keywords (no
        ``rng``: the lots and noise are the defense's own). An attacker who knows it trains shadow models the same
        way (:func:`from_recipe`). A defense built with a ``model`` object has no JSON recipe
        (:class:`~veil.errors.InvalidParameterError`)."""
        spec = None
        if self.model is not None:
            spec = getattr(self.model, "spec", None)  # a model that describes itself as data (veil.models.top_layers)
            if not isinstance(spec, dict):
                raise InvalidParameterError("a defense built with a given torch model has no JSON recipe; use the "
                                            "default head (hidden=...) or a model with a public spec "
                                            "(veil.models.top_layers.build_top_layers) to describe it as data")
        return {"defense": self.name, "params": {"epochs": self.epochs, "batch_size": self.batch_size, "lr": self.lr,
                                                 "optimizer": self.optimizer, "hidden": list(self.hidden),
                                                 "num_classes": self.num_classes, "init_seed": self.init_seed,
                                                 **({"model": dict(spec)} if spec is not None else {}),
                                                 **self._recipe_extra()}}

    def _recipe_extra(self) -> dict[str, Any]:
        return {}

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        return [{"epochs": BENCH_EPOCHS}]

    @classmethod
    def bench_make(cls, setting: dict[str, Any], data: Any, rng: Any = None, **options: Any) -> "_Trainer":
        """The bench's recipe (:data:`BENCH_RECIPE`, the corpus' label set, ``init_seed`` from ``options``: the
        cell's seed) at the setting's parameters; ``rng`` None: lots and noise from the OS CSPRNG."""
        return cls(**{**BENCH_RECIPE, "num_classes": int(data.num_classes), **options, **setting}, rng=rng)

    def _model_name(self) -> str:
        if self.model is not None:
            return f"given: {type(self.model).__name__}"
        return f"MLPHead(hidden={list(self.hidden)}, dropout=0) on embeddings scaled by sqrt(d)"

    # ---------------------------------------------------------------- data
    def _data(self, data: Any, public_n: int | None = None) -> tuple[np.ndarray, np.ndarray, int]:
        if not isinstance(data, tuple) or len(data) != 2:
            raise InvalidTypeError("data must be a pair (X, y): embeddings (n, d) and integer labels (n,)")
        X = _embeddings(data[0])
        y = _labels(data[1], len(X), self.num_classes)
        num_classes = self.num_classes if self.num_classes is not None else max(2, int(y.max()) + 1)
        if public_n is None and self.batch_size > len(X):
            raise InvalidParameterError(f"batch_size={self.batch_size} is more than the {len(X)} training examples; "
                                        f"use batch_size <= {len(X)}")
        return X, y, num_classes

    def _build(self, dim: int, num_classes: int) -> Any:
        import copy

        from torch import nn

        from veil.defenses.dpsgd.engine import Scale
        from veil.models.heads import MLPHead
        from veil.random import torch_generator

        if self.model is not None:
            return copy.deepcopy(self.model)
        head = MLPHead(dim, num_classes, hidden=self.hidden, dropout=0.0, rng=torch_generator(self.init_seed))
        return nn.Sequential(Scale(math.sqrt(dim)), head)

    def _streams(self) -> tuple[np.random.Generator | None, np.random.Generator | None]:
        """(sampling, noise) generators: both None (OS CSPRNG) unless a seed was given."""
        if self._rng is None:
            return None, None
        a, b = self._rng.spawn(2)
        return a, b

    def _fit(self, X: np.ndarray, y: np.ndarray, num_classes: int, *, sigma: float, clip: float, q: float,
             accounted_q: float, steps: int, transcript: Any = None, public_n: int | None = None,
             encode: Any = None, min_lot: int = 1) -> tuple[Any, Any]:
        import torch

        from veil.defenses.dpsgd.engine import fit

        module = self._build(X.shape[1], num_classes)
        sampling, noise = self._streams()
        log = fit(module, torch.from_numpy(X), torch.from_numpy(y), private=self.private, sigma=sigma, clip=clip,
                  q=q, accounted_q=accounted_q, steps=steps, lr=self.lr, optimizer=self.optimizer,
                  sampling_rng=sampling, noise_rng=noise, noise_scale=self._noise_scale,
                  clip_applied=clip * self._clip_scale, transcript=transcript, public_n=public_n, encode=encode,
                  min_lot=min_lot)
        module.eval()
        return module, log

    def _steps(self, n: int) -> tuple[float, float, int]:
        from veil.defenses.dpsgd.noise import sampling_rate

        if self.batch_size > n:
            raise InvalidParameterError(f"batch_size={self.batch_size} is more than the {n} training examples; "
                                        f"use batch_size <= {n}")
        q = self.batch_size / n
        return q, sampling_rate(q), max(1, round(self.epochs * n / self.batch_size))


class DPSGD(_Trainer):
    """Train a classifier with DP-SGD at a target (epsilon, delta); releases the model (:meth:`train`).

    Parameters (keyword-only)
    -------------------------
    epsilon: the target; the noise multiplier is the smallest (to 0.01 in epsilon) whose accounted epsilon is at
        most this. Finite and > 0 (above 50 warns: nothing measurable is protected).
    delta: None (default) = 1 / (10 n), n the number of training examples; else in (0, 1 / n).
    clip: the L2 bound on every example's gradient (Opacus' ``max_grad_norm``).
    epochs, batch_size: steps = round(epochs * n / batch_size); sampling rate q = batch_size / n (the expected lot).
    lr, optimizer: ``"adam"`` (default) or ``"sgd"`` (momentum 0.9) on the noisy gradient.
    accountant: ``"prv"`` (default) or ``"rdp"``: which one sets sigma and :attr:`TrainedModel.epsilon`; both are
        reported.
    hidden: widths of the default head's hidden layers (``()``: a linear classifier); ignored with ``model``.
    num_classes: None = the largest label + 1 (the label set is treated as public).
    model: None (veil's MLP head) or a ``torch.nn.Module`` mapping embeddings (n, d) to logits, copied at every
        :meth:`train`; Opacus must be able to train it (BatchNorm, plain LSTMs, buffers:
        :class:`~veil.defenses.dpsgd.errors.UnsupportedModelError`).
    init_seed: the initial weights' seed (public: the guarantee holds for any initialisation chosen without the
        data); None draws them from OS entropy.
    rng: None (default): Poisson sampling and noise from the OS CSPRNG. An int seed or numpy Generator makes them
        reproducible, for experiments and tests only (warns :class:`~veil.errors.PrivacyLeakWarning`).
    """

    name = "dpsgd"
    citation = ("Abadi et al. 2016, Deep Learning with Differential Privacy (CCS); Opacus (Yousefpour et al. 2021); "
                "PRV accountant: Gopi, Lee and Wutschitz 2021")
    guarantee = Guarantee("epsilon-delta-dp", "(epsilon, delta)-DP of the trained model under adding or removing "
                          "one training example, for the epsilon it is built with and delta = 1/(10 n) by default")
    private: ClassVar[bool] = True

    def __init__(self, *, epsilon: float, delta: float | None = None, clip: float = 1.0, epochs: int = 10,
                 batch_size: int = 256, lr: float = 1e-3, optimizer: str = "adam", accountant: str = "prv",
                 hidden: Sequence[int] = DEFAULT_HIDDEN, num_classes: int | None = None, model: Any = None,
                 init_seed: int | None = None, rng: Any = None) -> None:
        self.epsilon = check_epsilon(epsilon, what="DP-SGD")
        self.delta = None if delta is None else check_real("delta", delta, low=0.0, high=1.0, low_open=True,
                                                           high_open=True, hint="; None gives 1/(10 n)")
        self.clip = check_real("clip", clip, low=0.0, high=math.inf, low_open=True, high_open=True,
                               hint="; clip is the L2 bound on each example's gradient")
        self.accountant = check_choice("accountant", accountant, ACCOUNTANTS)
        self._init_common(epochs=epochs, batch_size=batch_size, lr=lr, optimizer=optimizer, hidden=hidden,
                          num_classes=num_classes, model=model, init_seed=init_seed)
        self._rng = seeded_rng(rng, "DPSGD", "Poisson sampling and gradient noise")
        delta_text = "1/(10 n)" if self.delta is None else f"{self.delta:.3g}"
        self.guarantee = Guarantee(
            "epsilon-delta-dp", f"(epsilon <= {self.epsilon:g}, delta = {delta_text})-DP of the trained model (and "
            "of every intermediate model) under adding or removing one training example (one text and its label), "
            f"by the {self.accountant.upper()} accountant; n, the label set, the public encoder and the "
            "hyperparameters are public; real arithmetic (see veil.defenses.dpsgd)", epsilon=self.epsilon,
            delta=self.delta)

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        return [{"epsilon": e, "epochs": BENCH_EPOCHS} for e in BENCH_EPSILONS[0 if quick else 1]]

    @classmethod
    def bench_guarantee(cls, setting: dict[str, Any]) -> Guarantee:
        e = float(setting["epsilon"])
        return Guarantee("epsilon-delta-dp", f"(epsilon <= {e:g}, delta = 1/(10 n))-DP of the trained model under "
                         "adding or removing one training example (PRV accountant)", epsilon=e)

    def _recipe_extra(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "delta": self.delta, "clip": self.clip, "accountant": self.accountant}

    def __repr__(self) -> str:
        return (f"DPSGD(epsilon={self.epsilon:g}, delta={self.delta}, clip={self.clip:g}, epochs={self.epochs}, "
                f"batch_size={self.batch_size}, accountant={self.accountant!r})")

    def config(self) -> dict[str, Any]:
        return {**super().config(), "epsilon": self.epsilon, "delta": self.delta, "clip": self.clip,
                "accountant": self.accountant, "rng": "OS CSPRNG" if self._rng is None else "seeded (not private)"}

    def plan(self, n: int) -> Accounting:
        """The accounting of a run on ``n`` examples (sigma calibrated to the target), before any training."""
        n = check_int("n", n, minimum=1)
        delta = self._delta(n)
        _, accounted_q, steps = self._steps(n)
        sigma = calibrate_sigma(self.epsilon, delta, accounted_q, steps, accountant=self.accountant)
        acc = account(sigma, accounted_q, steps, delta, accountant=self.accountant)
        if not acc.epsilon <= self.epsilon:
            raise VeilError(f"internal error: sigma={sigma} accounts to epsilon {acc.epsilon} above the target "
                            f"{self.epsilon}; nothing was trained")
        return acc

    def _delta(self, n: int) -> float:
        if self.delta is None:
            return 1.0 / (10 * n)
        if self.delta >= 1.0 / n:
            raise InvalidParameterError(f"delta={self.delta:.3g} is >= 1/n = {1 / n:.3g}: a mechanism that releases "
                                        "one random training example outright meets it; use delta < 1/n "
                                        f"(None gives 1/(10 n) = {1 / (10 * n):.3g})")
        return self.delta

    def train(self, data: Any, *, public_n: int | None = None, transcript: Any = None) -> TrainedModel:
        """Train on ``data = (X, y)`` (embeddings (n, d), labels (n,)) with DP-SGD; the model and its accounting.

        Everything is checked and sigma calibrated before the first step; after the last, the accountant's history
        read from the optimizer's step hook must be exactly (sigma, q, steps), else :class:`~veil.errors.VeilError`
        and nothing is released.

        ``public_n`` (default: the number of examples given) is the n that sets the sampling rate, the steps and the
        default delta. The one-run audit fixes it in advance, because there the number of examples depends on
        which canaries were included, and the guarantee is accounted for a rate that does not. ``transcript``: a
        callable receiving every step's noisy gradients (see :func:`veil.defenses.dpsgd.engine.fit`); the
        white-box auditor's view, covered by the guarantee."""
        start = time.perf_counter()
        X, y, num_classes = self._data(data, public_n)
        n = len(X) if public_n is None else check_int("public_n", public_n, minimum=1)
        acc = self.plan(n)
        q, _, _ = self._steps(n)
        module, log = self._fit(X, y, num_classes, sigma=acc.sigma, clip=self.clip, q=q, accounted_q=acc.sample_rate,
                                steps=acc.steps, transcript=transcript, public_n=n)
        if log.history != [(acc.sigma, acc.sample_rate, acc.steps)]:
            raise VeilError(f"internal error: the optimizer stepped {log.history}, not the accounted "
                            f"{[(acc.sigma, acc.sample_rate, acc.steps)]}; the model is not released")
        g = Guarantee("epsilon-delta-dp", f"(epsilon={acc.epsilon:.4g}, delta={acc.delta:.3g})-DP by the "
                      f"{acc.accountant.upper()} accountant (RDP: {acc.epsilon_rdp:.4g}); sigma={acc.sigma:.4g}, "
                      f"q={acc.sample_rate:.6g}, {acc.steps} steps, clip={self.clip:g}; adding or removing one "
                      "training example; real arithmetic (see veil.defenses.dpsgd)", epsilon=acc.epsilon,
                      delta=acc.delta)
        return TrainedModel(model=module, guarantee=g, accounting=acc, num_classes=num_classes, n_train=len(X),
                            steps=acc.steps, sample_rate=acc.sample_rate, config=self.config(),
                            seconds=time.perf_counter() - start)


class PlainTraining(_Trainer):
    """The non-private reference of :class:`DPSGD`: the same loop (Poisson lots at q = batch_size / n, the same
    number of steps, optimizer and initial weights) with no clipping and no noise. No guarantee.

    Parameters as :class:`DPSGD`'s, without epsilon, delta, clip and accountant. ``rng`` seeds the lots (no
    warning: nothing private depends on it); None draws them from OS entropy.
    """

    name = "plain"
    undefended = True
    citation = "the non-private reference of DP-SGD (Abadi et al. 2016): the same loop without clipping and noise"
    guarantee = Guarantee("none", "no formal guarantee: trained on the private data without clipping or noise")

    def __init__(self, *, epochs: int = 10, batch_size: int = 256, lr: float = 1e-3, optimizer: str = "adam",
                 hidden: Sequence[int] = DEFAULT_HIDDEN, num_classes: int | None = None, model: Any = None,
                 init_seed: int | None = None, rng: Any = None) -> None:
        self._init_common(epochs=epochs, batch_size=batch_size, lr=lr, optimizer=optimizer, hidden=hidden,
                          num_classes=num_classes, model=model, init_seed=init_seed)
        check_rng(rng)
        from veil.random import as_generator

        self._rng = None if rng is None else as_generator(rng)

    def __repr__(self) -> str:
        return f"PlainTraining(epochs={self.epochs}, batch_size={self.batch_size}, lr={self.lr:g})"

    def train(self, data: Any) -> TrainedModel:
        """Train on ``data = (X, y)`` without privacy; the model (its ``accounting`` is None)."""
        start = time.perf_counter()
        X, y, num_classes = self._data(data)
        q, accounted_q, steps = self._steps(len(X))
        module, _ = self._fit(X, y, num_classes, sigma=0.0, clip=math.inf, q=q, accounted_q=accounted_q,
                              steps=steps)
        return TrainedModel(model=module, guarantee=self.guarantee, accounting=None, num_classes=num_classes,
                            n_train=len(X), steps=steps, sample_rate=accounted_q, config=self.config(),
                            seconds=time.perf_counter() - start)


def from_recipe(recipe: Any, *, rng: Any = None) -> _Trainer:
    """The defense a :meth:`_Trainer.recipe` describes (``plain`` or ``dpsgd``, or a control of theirs), with ``rng``
    for its lots and noise (None: the OS CSPRNG)."""
    from collections.abc import Mapping

    from veil.defenses.base import get_defense

    if not isinstance(recipe, Mapping) or not isinstance(recipe.get("params"), Mapping):
        raise InvalidTypeError("a recipe is a mapping {'defense': name, 'params': {...}}, as _Trainer.recipe() gives")
    cls = get_defense(str(recipe.get("defense")))
    if not issubclass(cls, _Trainer):
        raise InvalidParameterError(f"defense {recipe.get('defense')!r} is not trained by veil's DP-SGD loop; a "
                                    "recipe names 'plain' or 'dpsgd'")
    params = dict(recipe["params"])
    params["hidden"] = tuple(params.get("hidden", DEFAULT_HIDDEN))
    if isinstance(params.get("model"), Mapping):  # a model described as data: built fresh, as the owner built it
        from veil.models.top_layers import from_spec

        if params.get("num_classes") is None:
            raise InvalidParameterError("a recipe with a model spec must name num_classes")
        params["model"] = from_spec(params["model"], num_classes=int(params["num_classes"]),
                                    init_seed=params.get("init_seed"))
    return cls(**params, rng=rng)
