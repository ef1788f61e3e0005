"""The shared contract of veil's defenses (mechanisms).

Every defense

* is constructed with keyword-only parameters, validated on the way in
  (wrong type -> :class:`~veil.errors.InvalidTypeError`, value out of range ->
  :class:`~veil.errors.InvalidParameterError`, each message saying what to do);
* states what it guarantees as data: :attr:`Defense.guarantee` is a
  :class:`Guarantee` (``str(g)`` reads e.g. ``"none: heuristic (no formal
  guarantee)"``, and DP-style defenses fill ``epsilon``/``delta``);
* takes ``rng`` (None = OS CSPRNG, the default wherever privacy depends on the
  randomness; an int seed or a ``numpy.random.Generator`` = reproducible, for
  experiments and tests only);
* reports its public, non-secret configuration with :meth:`Defense.config`
  (JSON-ready; never keys, masks or per-example randomness).

For the benchmark (:mod:`veil.bench`), every defense also declares

* :attr:`Defense.kind`: ``"representation"`` (vectors in, protected vectors
  out), ``"training-hook"`` (applied between encoder and head while training,
  TextHide), ``"document-release"`` (one private embedding per document,
  SentDP) or ``"text-transform"`` (rewritten text, word-level metric DP);
* :attr:`Defense.releases`: what an eavesdropper gets to see, as observation
  kinds (:data:`OBSERVATION_KINDS`); the bench pairs the defense with every
  attack whose :attr:`~veil.attacks.base.Attack.observes_kind` is among them;
* :attr:`Defense.tasks`: the tasks it serves (``"sentence-classification"``,
  ``"document-classification"``), which decide the corpora and the utility
  measure;
* by kind, how it releases: a ``representation`` defense has ``protect(X) -> X~``, a ``training-hook``
  defense is TextHide-like (``encrypt`` in batches), a ``document-release`` defense has
  ``release_embeddings(documents) -> (n, d)``;
* :meth:`Defense.bench_settings` (the parameter settings the bench runs) and
  :meth:`Defense.bench_make` (the defense for one setting, built from a
  corpus' public data and a key source).

Defenses are found by name through a registry (:func:`defense_names`,
:func:`get_defense`) that imports the implementing module only when asked, so
``import veil.defenses`` does not import torch.

This module imports nothing heavy.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from veil._registry import LazyRegistry
from veil.errors import InvalidParameterError, InvalidTypeError, VeilError

__all__ = ["Defense", "Guarantee", "DEFENSE_KINDS", "OBSERVATION_KINDS", "TASKS", "NO_GUARANTEE", "InsecureKeyFileError", "defense_names", "get_defense",
           "register_defense", "check_int", "check_real", "check_choice", "check_rng", "seeded_rng",
           "check_sentence_embeddings", "check_documents"]


class InsecureKeyFileError(VeilError, PermissionError):
    """A file holding a secret key is readable or writable by group/others."""


@dataclass(frozen=True)
class Guarantee:
    """What a defense guarantees, as data.

    ``kind`` is a short machine-readable tag (``"none"``, ``"epsilon-dp"``,
    ``"epsilon-delta-dp"``, ``"sentdp"``, ...), ``statement`` says in words what
    holds (or that nothing formal does), and ``epsilon``/``delta`` carry the
    numbers for DP-style guarantees.
    """

    kind: str
    statement: str
    epsilon: float | None = None
    delta: float | None = None

    def __str__(self) -> str:
        return f"{self.kind}: {self.statement}"

    @property
    def formal(self) -> bool:
        """True unless the defense is a heuristic without a formal guarantee."""
        return self.kind != "none"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "statement": self.statement, "epsilon": self.epsilon, "delta": self.delta}


NO_GUARANTEE = Guarantee("none", "heuristic (no formal guarantee)")


#: what a defense can be (see the module docstring)
DEFENSE_KINDS = ("representation", "training-hook", "document-release", "text-transform")
#: what an eavesdropper can observe of a defended pipeline:
#: ``vectors``: one protected vector per private item (a query at inference, an encoding in training);
#: ``training-encodings``: every encoding of one client's training run (TextHide: the same examples re-mixed
#: and re-masked each epoch); ``dp-mechanism``: white-box access to a DP mechanism (for exact audits);
#: ``text``: rewritten text; ``model-updates``: the weights (or gradients) a federated client sends the server
#: each round (what the server, or anyone on the wire, records)
OBSERVATION_KINDS = ("vectors", "training-encodings", "dp-mechanism", "text", "model-updates")
#: the tasks a defense serves; a corpus offers one of them (sentences with labels, or documents with labels)
TASKS = ("sentence-classification", "document-classification")


class Defense:
    """Base class of veil's defenses.

    Subclasses set the class attribute ``name`` (their registry name) and
    ``guarantee`` (class or instance attribute), and override :meth:`config`.
    For the benchmark they also declare ``kind``, ``releases`` and ``tasks``
    and implement :meth:`bench_settings` and :meth:`bench_make`.
    """

    name: ClassVar[str] = ""
    guarantee: Guarantee = NO_GUARANTEE
    kind: ClassVar[str] = ""
    releases: ClassVar[tuple[str, ...]] = ()
    tasks: ClassVar[tuple[str, ...]] = ()

    def config(self) -> dict[str, Any]:
        """Public, JSON-ready configuration (no secrets); subclasses extend it."""
        return {"defense": self.name, "guarantee": self.guarantee.to_dict()}

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        """The parameter settings the bench runs (JSON-ready dicts; ``[]``: not benchmarked)."""
        return []

    @classmethod
    def bench_make(cls, setting: dict[str, Any], data: Any, rng: Any = None) -> "Defense":
        """The defense for one bench ``setting`` on a corpus (``data``: a :class:`veil.bench.data.BenchData`,
        whose public parts only may be used); ``rng``: None = OS CSPRNG keys (the default), an int = a
        reproducible key for checks only."""
        raise NotImplementedError(f"defense {cls.name!r} does not say how to build itself for the bench")

    @classmethod
    def bench_guarantee(cls, setting: dict[str, Any]) -> Guarantee:
        """The formal guarantee of one setting (default: the class' own)."""
        return cls.guarantee if isinstance(cls.guarantee, Guarantee) else NO_GUARANTEE


# ---------------------------------------------------------------- registry
# name -> "module:attribute"; the module is imported on first use only.
_REGISTRY = LazyRegistry("defense", {
    "none": "veil.defenses.none:NoDefense",
    "texthide": "veil.defenses.texthide:TextHide",
    "deepcandidate": "veil.defenses.sentdp:DeepCandidate",
    "truncation": "veil.defenses.truncation:Truncation",
    "metric-dp": "veil.defenses.metric_dp:WordMetricDP",
})


def register_defense(name: str, target: str) -> None:
    """Register ``name`` -> ``"package.module:ClassName"`` (imported lazily)."""
    _REGISTRY.register(name, target)


def defense_names() -> list[str]:
    """The registered defense names."""
    return _REGISTRY.names()


def get_defense(name: str) -> type[Defense]:
    """The defense class registered as ``name`` (raises UnknownNameError listing the valid names)."""
    return _REGISTRY.get(name)


# ---------------------------------------------------------------- validation helpers
def check_int(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None,
              hint: str = "") -> int:
    """``value`` as an int (bools refused), within [minimum, maximum]."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise InvalidTypeError(f"{name} must be an int, got {type(value).__name__} {value!r}{hint}")
    value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        lo = "-inf" if minimum is None else minimum
        hi = "inf" if maximum is None else maximum
        raise InvalidParameterError(f"{name} must be in [{lo}, {hi}], got {value}{hint}")
    return value


def check_real(name: str, value: Any, *, low: float, high: float, low_open: bool = False, high_open: bool = False,
               hint: str = "") -> float:
    """``value`` as a finite float within the interval (bools refused)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise InvalidTypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}{hint}")
    value = float(value)
    ok = np.isfinite(value) and (value > low if low_open else value >= low) and \
        (value < high if high_open else value <= high)
    if not ok:
        interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        raise InvalidParameterError(f"{name} must be in {interval}, got {value!r}{hint}")
    return value


#: Above this epsilon a DP guarantee bounds likelihood ratios by more than e^50 (~5e21): it constrains nothing an
#: attacker could measure. The SentDP paper's experiments stop at epsilon = 35 (Fig. 4); docs/sentdp.md says so.
MEANINGFUL_EPSILON = 50.0


def check_epsilon(epsilon: Any, *, what: str = "SentDP") -> float:
    """A finite epsilon > 0; warns (:class:`PrivacyLeakWarning`) above :data:`MEANINGFUL_EPSILON`."""
    value = check_real("epsilon", epsilon, low=0.0, high=np.inf, low_open=True, high_open=True,
                       hint=f"; {what} needs a finite epsilon > 0")
    if value > MEANINGFUL_EPSILON:
        import warnings

        from veil.errors import PrivacyLeakWarning

        warnings.warn(f"epsilon={value:g} is above {MEANINGFUL_EPSILON:g}: the {what} guarantee bounds likelihood "
                      f"ratios only by e^{value:g}, which protects nothing measurable; use epsilon <= "
                      f"{MEANINGFUL_EPSILON:g} for a meaningful guarantee", PrivacyLeakWarning, stacklevel=3)
    return value


def check_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    """``value`` must be one of ``choices`` (strings)."""
    choices = list(choices)
    if not isinstance(value, str):
        raise InvalidTypeError(f"{name} must be one of {', '.join(map(repr, choices))}, got {type(value).__name__}")
    if value not in choices:
        raise InvalidParameterError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def check_rng(rng: Any) -> None:
    """``rng`` must be None (OS entropy), a non-negative int seed or a numpy Generator."""
    if rng is None or isinstance(rng, np.random.Generator):
        return
    if isinstance(rng, (bool, np.bool_)) or not isinstance(rng, numbers.Integral):
        raise InvalidTypeError("rng must be None (OS entropy), an int seed or a numpy.random.Generator, "
                               f"got {type(rng).__name__}")
    if rng < 0:
        raise InvalidParameterError(f"rng seed must be >= 0, got {rng}")


def seeded_rng(rng: Any, owner: str, what: str) -> np.random.Generator | None:
    """Validate ``rng``; None stays None (the caller draws from the OS CSPRNG), a seed warns and becomes a Generator.

    ``owner`` names the mechanism and ``what`` its randomness in the
    :class:`~veil.errors.PrivacyLeakWarning` (e.g. ``"Truncation"``, ``"noise"``).
    """
    import warnings

    from veil.errors import PrivacyLeakWarning
    from veil.random import as_generator

    check_rng(rng)
    if rng is None:
        return None
    warnings.warn(f"{owner} with a seeded rng: its {what} is reproducible by anyone who knows the seed; "
                  f"use rng=None for releases", PrivacyLeakWarning, stacklevel=3)
    return as_generator(rng)


def check_sentence_embeddings(S: Any, dim: int, *, against: str, index: int | None = None) -> np.ndarray:
    """One document's sentence embeddings: a finite real array (k >= 1, dim).

    ``against`` names what fixes ``dim`` in the mismatch message (e.g.
    ``"the candidates have"``); ``index`` prefixes messages with
    ``documents[index]``.
    """
    from veil.errors import DataFormatError

    where = "" if index is None else f"documents[{index}]: "
    if not isinstance(S, np.ndarray):
        raise InvalidTypeError(f"{where}a document's sentence embeddings must be a numpy array (k, d), "
                               f"not {type(S).__name__}")
    if S.ndim != 2:
        raise DataFormatError(f"{where}sentence embeddings must be 2-D (k, d), got shape {S.shape}")
    if S.shape[0] < 1:
        raise DataFormatError(f"{where}the document has no sentences; SentDP needs at least one sentence embedding")
    if S.shape[1] != dim:
        raise DataFormatError(f"{where}sentence embeddings have dimension {S.shape[1]} but {against} {dim}; "
                              f"encode the documents and the public data with the same encoder (and recoder)")
    real = (np.issubdtype(S.dtype, np.floating) or np.issubdtype(S.dtype, np.integer)) and S.dtype != np.bool_
    if not real or not np.isfinite(S).all():
        raise DataFormatError(f"{where}sentence embeddings contain NaN, infinite or non-real values; re-encode "
                              f"the document")
    return S


def check_documents(documents: Any, dim: int, *, against: str) -> list[np.ndarray]:
    """A sequence of documents' sentence embeddings, each checked with :func:`check_sentence_embeddings`."""
    if isinstance(documents, np.ndarray) or not isinstance(documents, Sequence):
        raise InvalidTypeError("documents must be a sequence (list) of (k, d) arrays, one per document")
    return [check_sentence_embeddings(S, dim, against=against, index=i) for i, S in enumerate(documents)]
