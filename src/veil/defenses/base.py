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

from dataclasses import dataclass
from typing import Any, ClassVar

from veil._registry import LazyRegistry
from veil.errors import VeilError

__all__ = ["Defense", "Guarantee", "DEFENSE_KINDS", "OBSERVATION_KINDS", "TASKS", "NO_GUARANTEE", "InsecureKeyFileError", "defense_names", "get_defense",
           "register_defense"]


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
