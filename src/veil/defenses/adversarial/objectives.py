"""Training-time defenses of Coavoux, Narayan & Cohen (2018), Sec. 3, as objectives added to the main loss.

Notation (paper, Sec. 2): an example is (x, y, z); r(x) is the encoder's representation (parameters theta_r), the
main head has parameters theta_p, z is a vector of K binary private variables. Every objective here

* ``attach(...)`` builds its adversary (if any) for an encoder of width W and the training split's private
  variables (and texts, for generation);
* ``adversary_loss(r.detach(), rows)``: the adversary's own loss on the training rows of a batch, minimised by
  the adversary's optimiser (None when there is no separate adversary step);
* ``encoder_loss(r, rows)``: the term added to ``main_weight * (-log P(y | x))``, minimised over theta_r and
  theta_p only (the adversary's parameters are used, never updated, by it).

Per batch the trainer first takes the adversary step, then the main step; losses are means over the batch of the
paper's per-example losses. Departures from the authors' code (DyNet, one example per update, main step then
defense step per example): mini-batches, and one combined main step per batch, which is the paper's equation.

Every objective is a heuristic (:data:`~veil.defenses.base.NO_GUARANTEE`): none bounds what an attacker trained
after the fact can recover, which is why the attackers of :mod:`veil.attacks.attribute` are always run.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from veil.defenses.base import NO_GUARANTEE, RepresentationsDefense
from veil.validation import check_choice, check_int, check_real
from veil.errors import InvalidParameterError

__all__ = ["AdversarialObjective", "MultiDetasking", "GradientReversal", "AdversarialGeneration",
           "Declustering", "complement_targets", "binary_log_loss", "grad_reverse"]


def complement_targets(z: torch.Tensor) -> torch.Tensor:
    """The complement label set of multidetasking: variable j is "on" iff it is off in z (1 - z)."""
    return 1.0 - z


def binary_log_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """-log P(targets | r) with independent sigmoid outputs, summed over the K variables: shape (B,)."""
    return F.binary_cross_entropy_with_logits(logits, targets, reduction="none").sum(dim=1)


def _frozen_call(module: nn.Module, *args: Any, **kwargs: Any) -> Any:
    """``module(*args)`` with its parameters detached: gradients reach the inputs only."""
    params = {k: v.detach() for k, v in module.named_parameters()}
    return functional_call(module, params, args, kwargs)


class _GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return -ctx.scale * grad, None


def grad_reverse(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """Identity forward; multiplies the gradient by ``-scale`` backward (Ganin & Lempitsky 2015)."""
    return _GradReverse.apply(x, scale)


class AdversarialObjective(RepresentationsDefense):
    """Base class: a training hook that changes the main model's objective (module docstring)."""

    tasks: ClassVar[tuple[str, ...]] = ("private-attributes",)
    abstract: ClassVar[bool] = True
    guarantee = NO_GUARANTEE
    uses_private: ClassVar[bool] = True
    main_weight: float = 1.0

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        """The paper's parameters (each objective's defaults)."""
        return [{}]

    def objective(self) -> "AdversarialObjective":
        """The release verb of a representations defense: the objective the main model trains with (this one)."""
        return self

    def attach(self, *, width: int, private: Any, texts: list[str] | None = None, rng: Any = None) -> None:
        """Build the adversary for width ``width`` and the training split's :class:`PrivateVariables`."""
        self.width = width
        self.private = private
        if private is not None:
            self._z = torch.from_numpy(np.asarray(private.Z, dtype=np.float32))

    def z(self, rows: np.ndarray) -> torch.Tensor:
        return self._z[torch.as_tensor(np.asarray(rows, dtype=np.int64))]

    def adversary_parameters(self) -> list[nn.Parameter]:
        return []

    def joint_parameters(self) -> list[nn.Parameter]:
        """Parameters trained by the MAIN optimiser besides encoder and head (gradient reversal's adversary)."""
        return []

    def adversary_loss(self, r_detached: torch.Tensor, rows: np.ndarray) -> torch.Tensor | None:
        return None

    def encoder_loss(self, r: torch.Tensor, rows: np.ndarray) -> torch.Tensor:
        return r.new_zeros(())

    def config(self) -> dict[str, Any]:
        return {**super().config(), "main_weight": self.main_weight}


def _adversary(width: int, k: int, hidden: int, rng: Any) -> nn.Module:
    from veil.models.heads import MLPHead

    return MLPHead(width, k, hidden=(hidden,), dropout=0.0, rng=rng)


class MultiDetasking(AdversarialObjective):
    """Adversarial classification / multidetasking (paper, Sec. 3.1.1).

    A duplicate attacker theta'_a (the attacker's MLP: one hidden layer of 64 ReLU units, sigmoid outputs) is
    trained on the fly on detached representations:

        L_a'(x, y, z; theta'_a) = -log P(z | r(x); theta'_a) = - sum_j log P(z_j | r(x); theta'_a)

    while the main model minimises

        L_m(x, y, z; theta_r, theta_p) = -alpha log P(y | x; theta_r, theta_p) - beta log P(not z | r(x); theta'_a)

    where ``not z`` is the complement label set (:func:`complement_targets`): the encoder is pushed to make the
    adversary predict the opposite of every private variable. This is not gradient reversal (see
    :class:`GradientReversal`). The paper uses alpha = beta = 1.
    """

    name = "multidetask"
    citation = "Coavoux, Narayan & Cohen 2018, Sec. 3.1.1 (multidetasking)"

    def __init__(self, *, alpha: float = 1.0, beta: float = 1.0, hidden: int = 64, lr: float = 1e-3) -> None:
        self.alpha = check_real("alpha", alpha, low=0.0, high=np.inf, low_open=True, high_open=True)
        self.beta = check_real("beta", beta, low=0.0, high=np.inf, low_open=True, high_open=True)
        self.hidden = check_int("hidden", hidden, minimum=1)
        self.lr = check_real("lr", lr, low=0.0, high=1.0, low_open=True)
        self.main_weight = self.alpha

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        """The paper's parameters (each objective's defaults)."""
        return [{}]

    def objective(self) -> "AdversarialObjective":
        """The release verb of a representations defense: the objective the main model trains with (this one)."""
        return self

    def attach(self, *, width: int, private: Any, texts: list[str] | None = None, rng: Any = None) -> None:
        super().attach(width=width, private=private, texts=texts, rng=rng)
        self.adversary = _adversary(width, private.Z.shape[1], self.hidden, rng)

    def adversary_parameters(self) -> list[nn.Parameter]:
        return list(self.adversary.parameters())

    def adversary_loss(self, r_detached: torch.Tensor, rows: np.ndarray) -> torch.Tensor:
        return binary_log_loss(self.adversary(r_detached), self.z(rows)).mean()

    def encoder_loss(self, r: torch.Tensor, rows: np.ndarray) -> torch.Tensor:
        logits = _frozen_call(self.adversary, r)
        return self.beta * binary_log_loss(logits, complement_targets(self.z(rows))).mean()

    def config(self) -> dict[str, Any]:
        return {**super().config(), "alpha": self.alpha, "beta": self.beta, "hidden": self.hidden, "lr": self.lr}


class GradientReversal(MultiDetasking):
    """Gradient-reversal variant of adversarial classification (not in the paper; Ganin & Lempitsky 2015, as
    used for text by Li, Baldwin & Cohn 2018).

    One adversary, trained jointly by the main optimiser through a gradient-reversal layer:

        min_{theta_a} max_{theta_r}  beta * (-log P(z | GRL(r(x)); theta_a)),   plus alpha * (-log P(y | x))

    Forward, the added term equals the adversary's own loss beta * L_a; backward, theta_a gets +beta dL_a and the
    encoder gets -beta dL_a (it maximises the adversary's loss instead of targeting the complement labels).
    """

    name = "grl"
    citation = "Ganin & Lempitsky 2015 (gradient reversal), a variant beside Coavoux et al. 2018"

    def adversary_parameters(self) -> list[nn.Parameter]:
        return []

    def joint_parameters(self) -> list[nn.Parameter]:
        return list(self.adversary.parameters())

    def adversary_loss(self, r_detached: torch.Tensor, rows: np.ndarray) -> None:
        return None

    def encoder_loss(self, r: torch.Tensor, rows: np.ndarray) -> torch.Tensor:
        logits = self.adversary(grad_reverse(r, 1.0))
        return self.beta * binary_log_loss(logits, self.z(rows)).mean()


class AdversarialGeneration(AdversarialObjective):
    """Adversarial generation (paper, Sec. 3.1.2): a character LM reconstructs x from r(x).

    The generator (:class:`veil.models.char_lm.CharLM`, initial cell state r(x), hidden state 0) minimises

        L_g(x; theta_l, r) = -log P(x | r(x); theta_l) = - sum_{i=1}^{C} log P(x_i | x_{<i}, r(x); theta_l)

    on detached r(x), and the main model minimises

        L_m(x, y; theta_r, theta_p) = -alpha log P(y | x; theta_r, theta_p) - beta L_g(x; theta_l, r)

    (it maximises the generator's loss; the term is unbounded below, as in the paper). It needs no private
    variables, so it is attribute-agnostic. ``reduction="sum"`` (the paper) sums over characters; ``"mean"``
    averages, so long texts do not dominate. Only the first ``max_chars`` characters are read.
    """

    name = "generation"
    citation = "Coavoux, Narayan & Cohen 2018, Sec. 3.1.2 (adversarial generation)"
    uses_private = False

    def __init__(self, *, alpha: float = 1.0, beta: float = 1.0, reduction: str = "sum", max_chars: int = 300,
                 lr: float = 1e-3) -> None:
        self.alpha = check_real("alpha", alpha, low=0.0, high=np.inf, low_open=True, high_open=True)
        self.beta = check_real("beta", beta, low=0.0, high=np.inf, low_open=True, high_open=True)
        self.reduction = check_choice("reduction", reduction, ("sum", "mean"))
        self.max_chars = check_int("max_chars", max_chars, minimum=1)
        self.lr = check_real("lr", lr, low=0.0, high=1.0, low_open=True)
        self.main_weight = self.alpha
        self.truncated = 0

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        """The paper's parameters (each objective's defaults)."""
        return [{}]

    def objective(self) -> "AdversarialObjective":
        """The release verb of a representations defense: the objective the main model trains with (this one)."""
        return self

    def attach(self, *, width: int, private: Any, texts: list[str] | None = None, rng: Any = None) -> None:
        import warnings

        from veil.errors import DataWarning
        from veil.models.char_lm import CharInputs, CharLM, CharVocabulary

        super().attach(width=width, private=private, texts=texts, rng=rng)
        if texts is None:
            raise InvalidParameterError("adversarial generation needs the training texts: attach(texts=...)")
        vocab = CharVocabulary(texts, max_chars=self.max_chars)
        self.chars = CharInputs(texts, vocab)
        self.truncated = self.chars.truncated
        if self.truncated:
            warnings.warn(f"adversarial generation reads the first {self.max_chars} characters only: "
                          f"{self.truncated} of {len(texts)} training texts were cut", DataWarning, stacklevel=2)
        self.generator = CharLM(len(vocab), width=width, rng=rng)

    def adversary_parameters(self) -> list[nn.Parameter]:
        return list(self.generator.parameters())

    def adversary_loss(self, r_detached: torch.Tensor, rows: np.ndarray) -> torch.Tensor:
        return self.generator(r_detached, self.chars.batch(rows), reduction=self.reduction).mean()

    def encoder_loss(self, r: torch.Tensor, rows: np.ndarray) -> torch.Tensor:
        nll = _frozen_call(self.generator, r, self.chars.batch(rows), reduction=self.reduction)
        return -self.beta * nll.mean()

    def config(self) -> dict[str, Any]:
        return {**super().config(), "alpha": self.alpha, "beta": self.beta, "reduction": self.reduction,
                "max_chars": self.max_chars, "lr": self.lr}


class Declustering(AdversarialObjective):
    """Declustering (paper, Sec. 3.2): keep examples with similar private variables apart in r-space.

    For an example x and another example x' drawn uniformly:

        L_m(x, y, z) = -log P(y | x; theta_r, theta_p) + alpha * (0.5 - s(z, z')) * ||r(x) - r(x')||_2^2

    with s(z, z') in [0, 1] the FRACTION OF PRIVATE VARIABLES ON WHICH x AND x' AGREE (the authors' code,
    ``compute_hamming``). Erratum: the paper's text calls this term a "normalised Hamming distance", which would
    flip the sign and pull same-attribute pairs together; veil follows the code: pairs that agree on every variable
    get -0.5 alpha ||.||^2 (pushed apart), pairs that disagree on every variable +0.5 alpha ||.||^2 (pulled
    together). A multi-class variable agrees when its class agrees. The paper uses alpha = 0.1; the term is
    unbounded below.

    Departure: x' is drawn uniformly among the OTHER examples of the same mini-batch (itself a uniform sample of
    the training set) instead of from the whole training set, so r(x') needs no extra encoder pass.
    """

    name = "decluster"
    citation = "Coavoux, Narayan & Cohen 2018, Sec. 3.2 (declustering)"

    def __init__(self, *, alpha: float = 0.1, rng: Any = None) -> None:
        from veil.validation import check_rng

        self.alpha = check_real("alpha", alpha, low=0.0, high=np.inf, low_open=True, high_open=True)
        check_rng(rng)
        self._rng = rng

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        """The paper's parameters (each objective's defaults)."""
        return [{}]

    def objective(self) -> "AdversarialObjective":
        """The release verb of a representations defense: the objective the main model trains with (this one)."""
        return self

    def attach(self, *, width: int, private: Any, texts: list[str] | None = None, rng: Any = None) -> None:
        from veil.random import as_generator

        super().attach(width=width, private=private, texts=texts, rng=rng)
        self._pairs = as_generator(self._rng if self._rng is not None else rng)
        self._values = torch.from_numpy(private.values())

    def partners(self, batch_size: int) -> np.ndarray:
        """For each position i of a batch, a uniformly drawn other position j != i."""
        if batch_size < 2:
            return np.zeros(batch_size, dtype=np.int64)
        shift = self._pairs.integers(1, batch_size, size=batch_size)
        return (np.arange(batch_size) + shift) % batch_size

    def agreement(self, rows: np.ndarray, partners: np.ndarray) -> torch.Tensor:
        vals = self._values[torch.as_tensor(np.asarray(rows, dtype=np.int64))]
        return (vals == vals[torch.as_tensor(partners)]).float().mean(dim=1)

    def encoder_loss(self, r: torch.Tensor, rows: np.ndarray, partners: np.ndarray | None = None) -> torch.Tensor:
        if len(rows) < 2:
            return r.new_zeros(())
        partners = self.partners(len(rows)) if partners is None else np.asarray(partners, dtype=np.int64)
        s = self.agreement(rows, partners)
        dist = ((r - r[torch.as_tensor(partners)]) ** 2).sum(dim=1)
        return (self.alpha * (0.5 - s) * dist).mean()

    def config(self) -> dict[str, Any]:
        return {**super().config(), "alpha": self.alpha}
