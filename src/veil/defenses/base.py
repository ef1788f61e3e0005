"""The shared contract of veil's defenses (mechanisms) and their one registry.

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
  (JSON-ready; never keys, masks or per-example randomness);
* declares the ONE release kind it lets out (:attr:`Defense.releases`, a key of
  :data:`veil.kinds.RELEASE_KINDS`) and implements that kind's one verb
  (:meth:`Defense.verb`): ``protect(X)`` (vectors), ``hook(task, num_classes)``
  (training-encodings), ``release_embeddings(documents)`` (document-embeddings),
  ``transform(texts)`` (text), ``transform(tagged sentences)`` (obfuscated-text),
  ``objective()`` (representations: the training objective, or None for plain
  training followed by ``protect``), ``train(data)`` (model: the trained model released),
  ``train_lm(texts)`` (generative-model: the fine-tuned language model released);
* declares :attr:`Defense.tasks` (keys of :data:`veil.kinds.TASKS`), which decide
  the corpora the bench plans it on, and :meth:`Defense.bench_settings` /
  :meth:`Defense.bench_make` (the settings the bench runs, and the defense for
  one of them built from a corpus' public data and a key source).

Every defense veil has is in the one registry below, by name (:func:`defense_names`,
:func:`get_defense`, :func:`defense_table`); the CLI, the experiments and the bench
ask it. A class marked ``control = True`` is a deliberately broken mechanism (a
negative control the audits must catch; :class:`NegativeControl` marks it so and
its repr says so): registered, listed as a control, never planned by the bench,
and never built by :func:`make_defense` (:func:`veil.controls.make_control`
builds it, with a :class:`~veil.errors.NegativeControlWarning`). A class marked
``abstract = True`` is a base class.
The registry imports the implementing module only when asked, so
``import veil.defenses`` does not import torch. This module imports nothing heavy.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from veil._registry import LazyRegistry
from veil.errors import VeilError

__all__ = ["Defense", "VectorsDefense", "TrainingEncodingsDefense", "DocumentEmbeddingsDefense", "TextDefense",
           "ObfuscatedTextDefense", "RepresentationsDefense", "ModelDefense", "GenerativeModelDefense", "KIND_BASES",
           "Guarantee", "NO_GUARANTEE", "InsecureKeyFileError", "NegativeControl", "defense_names", "get_defense",
           "register_defense", "defense_table", "make_defense", "is_control"]


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


class Defense(metaclass=ABCMeta):
    """Base class of veil's defenses (see the module docstring for the contract). A defense subclasses the base
    of the kind it releases (:data:`KIND_BASES`), whose abstract method is that kind's one verb."""

    name: ClassVar[str] = ""
    guarantee: Guarantee = NO_GUARANTEE
    releases: ClassVar[str] = ""
    tasks: ClassVar[tuple[str, ...]] = ()
    citation: ClassVar[str] = ""
    #: the attack its own paper measured it with (registry name; "" if none): the bench shows it beside the strongest
    paper_attack: ClassVar[str] = ""
    control: ClassVar[bool] = False
    abstract: ClassVar[bool] = False
    #: releases its kind without any protection (``none``, ``plain``): the bench's reference for that kind, never on
    #: its frontier
    undefended: ClassVar[bool] = False

    def config(self) -> dict[str, Any]:
        """Public, JSON-ready configuration (no secrets); subclasses extend it."""
        return {"defense": self.name, "guarantee": self.guarantee.to_dict()}

    @classmethod
    def verb(cls) -> str:
        """The method through which this defense releases what it releases (its kind's one verb)."""
        from veil.kinds import RELEASE_KINDS

        return RELEASE_KINDS[cls.releases].verb

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        """The parameter settings the bench runs (JSON-ready dicts; ``[]``: not benchmarked)."""
        return []

    @classmethod
    def bench_make(cls, setting: dict[str, Any], data: Any, rng: Any = None, **options: Any) -> "Defense":
        """The defense for one bench ``setting`` on a corpus (``data``: a :class:`veil.bench.data.BenchData`,
        whose public parts only may be used); ``rng``: None = OS CSPRNG keys (the default), an int = a
        reproducible key for checks only."""
        raise NotImplementedError(f"defense {cls.name!r} does not say how to build itself for the bench")

    @classmethod
    def bench_guarantee(cls, setting: dict[str, Any]) -> Guarantee:
        """The formal guarantee of one setting (default: the class' own)."""
        return cls.guarantee if isinstance(cls.guarantee, Guarantee) else NO_GUARANTEE

    @classmethod
    def describe(cls) -> dict[str, Any]:
        """What ``veil defenses list`` prints: name, release kind, verb, tasks, guarantee, citation, control."""
        g = cls.guarantee
        return {"name": cls.name, "releases": cls.releases, "verb": cls.verb(), "tasks": list(cls.tasks),
                "guarantee": str(g), "guarantee_kind": g.kind, "paper_attack": cls.paper_attack,
                "citation": cls.citation, "control": cls.control, "class": f"{cls.__module__}.{cls.__qualname__}"}


class NegativeControl:
    """Mixin (first base) of a negative control: a deliberately broken mechanism the audits must catch.

    ``broken`` says in a few words what is broken; the repr leads with it, so a control is never mistaken for the
    mechanism it breaks (``HalfNoise(...)`` does not print as ``DPSGD(...)``)."""

    control: ClassVar[bool] = True
    broken: ClassVar[str] = "deliberately broken"

    def __repr__(self) -> str:
        inner = super().__repr__()
        head, sep, rest = inner.partition("(")
        if sep and head.isidentifier():  # "DPSGD(epsilon=1, ...)" -> "HalfNoise(epsilon=1, ...)"
            inner = f"{type(self).__name__}({rest}"
        return (f"<BROKEN NEGATIVE CONTROL {getattr(self, 'name', type(self).__name__)!r}: {self.broken}; it "
                f"protects nothing> {inner}")


class VectorsDefense(Defense):
    """Releases one vector per text: ``protect(X) -> X~``."""

    releases: ClassVar[str] = "vectors"
    abstract: ClassVar[bool] = True

    @abstractmethod
    def protect(self, X: Any) -> Any:
        """The protected vectors (n, d) the owner releases for ``X`` (n, d)."""


class TrainingEncodingsDefense(Defense):
    """Releases the encodings of a training run: ``hook(task, num_classes)`` is applied between encoder and head."""

    releases: ClassVar[str] = "training-encodings"
    abstract: ClassVar[bool] = True

    @abstractmethod
    def hook(self, task: str = "classification", num_classes: int | None = None) -> Any:
        """A training hook: ``train(e, y)`` turns a batch into what is trained on (and observed), ``infer(e)``."""


class DocumentEmbeddingsDefense(Defense):
    """Releases one private embedding per document: ``release_embeddings(documents) -> (n, d)``."""

    releases: ClassVar[str] = "document-embeddings"
    abstract: ClassVar[bool] = True

    @abstractmethod
    def release_embeddings(self, documents: Any) -> Any:
        """One embedding per document (each document: its (k, d) sentence embeddings)."""


class TextDefense(Defense):
    """Releases rewritten text: ``transform(texts) -> texts``."""

    releases: ClassVar[str] = "text"
    abstract: ClassVar[bool] = True

    @abstractmethod
    def transform(self, texts: Any) -> list[str]:
        """The rewritten texts, one per input text."""


class ObfuscatedTextDefense(Defense):
    """Releases token-aligned substitutes: ``transform(tagged sentences) -> obfuscated sentences``."""

    releases: ClassVar[str] = "obfuscated-text"
    abstract: ClassVar[bool] = True

    @abstractmethod
    def transform(self, sentences: Any) -> list[Any]:
        """One obfuscated sentence (same length, same tags, a key for the owner) per (words, tags) sentence."""


class RepresentationsDefense(Defense):
    """Releases a trained encoder's r(x): ``objective()`` is what the main model trains with (None: plainly)."""

    releases: ClassVar[str] = "representations"
    abstract: ClassVar[bool] = True

    @abstractmethod
    def objective(self) -> Any:
        """The training objective (adversary and encoder losses), or None to train plainly."""


class ModelDefense(Defense):
    """Releases a trained model (its outputs or its weights): ``train(data)`` fits it on the owner's private
    training data and returns what is released."""

    releases: ClassVar[str] = "model"
    abstract: ClassVar[bool] = True

    @abstractmethod
    def train(self, data: Any) -> Any:
        """The trained model the owner releases, fitted on ``data`` (the private training examples)."""


class GenerativeModelDefense(Defense):
    """Releases a causal language model fine-tuned on private text: ``train_lm(texts)`` fine-tunes it on the owner's
    private texts and returns what is released (:class:`veil.defenses.lm.TrainedLM`)."""

    releases: ClassVar[str] = "generative-model"
    tasks: ClassVar[tuple[str, ...]] = ("language-modeling",)
    abstract: ClassVar[bool] = True

    @abstractmethod
    def train_lm(self, texts: Any, *, checkpoint: Any = None, log: Any = None) -> Any:
        """The language model the owner releases, fine-tuned on ``texts`` (the private training texts).
        ``checkpoint``: a file the training saves its state to and resumes from (None: not resumable); ``log``:
        a callable given progress lines."""


#: release kind -> the base class whose abstract method is the kind's verb (``updates`` has no registered defense
#: yet: federated DP lands as its own issue)
KIND_BASES: dict[str, type[Defense]] = {c.releases: c for c in (
    VectorsDefense, TrainingEncodingsDefense, DocumentEmbeddingsDefense, TextDefense, ObfuscatedTextDefense,
    RepresentationsDefense, ModelDefense, GenerativeModelDefense)}


# ---------------------------------------------------------------- registry
# name -> "module:attribute"; the module is imported on first use only.
_REGISTRY = LazyRegistry("defense", {
    "none": "veil.defenses.none:NoDefense",
    "texthide": "veil.defenses.texthide:TextHide",
    "texthide-inference": "veil.defenses.texthide.inference:TextHideInference",
    "deepcandidate": "veil.defenses.sentdp:DeepCandidate",
    "truncation": "veil.defenses.truncation:Truncation",
    "metric-dp": "veil.defenses.metric_dp:WordMetricDP",
    "multidetask": "veil.defenses.adversarial.objectives:MultiDetasking",
    "grl": "veil.defenses.adversarial.objectives:GradientReversal",
    "generation": "veil.defenses.adversarial.objectives:AdversarialGeneration",
    "decluster": "veil.defenses.adversarial.objectives:Declustering",
    "leace": "veil.defenses.adversarial.leace:LeaceErasure",
    "obfuscation-random": "veil.defenses.obfuscation.random_substitution:RandomSubstitution",
    "obfuscation-neural": "veil.defenses.obfuscation.neural:NeuralObfuscator",
    "redaction": "veil.defenses.redaction:PresidioRedaction",
    "plain": "veil.defenses.dpsgd:PlainTraining",
    "dpsgd": "veil.defenses.dpsgd:DPSGD",
    "texthide-model": "veil.defenses.texthide.model:TextHideTraining",
    "lm-plain": "veil.defenses.lm:PlainFineTuning",
    "lm-scrub": "veil.defenses.lm:ScrubbedFineTuning",
    "lm-dedup": "veil.defenses.lm:DeduplicatedFineTuning",
    "lm-dpsgd": "veil.defenses.lm:DPFineTuning",
}, controls={  # deliberately broken mechanisms the audits must catch; never planned by the bench
    "deepcandidate-broken-doubled-sensitivity": "veil.defenses.sentdp.controls:DoubledSensitivity",
    "deepcandidate-broken-doubled-epsilon": "veil.defenses.sentdp.controls:DoubledEpsilon",
    "dpsgd-broken-half-noise": "veil.defenses.dpsgd.controls:HalfNoise",
    "dpsgd-broken-no-clip": "veil.defenses.dpsgd.controls:NoClip",
    "lm-dpsgd-broken-half-noise": "veil.defenses.dpsgd.controls:LMHalfNoise",
})


def register_defense(name: str, target: str, *, control: bool = False) -> None:
    """Register ``name`` -> ``"package.module:ClassName"`` (imported lazily); ``control=True`` for a deliberately
    broken mechanism (listed as a control, never planned by the bench)."""
    _REGISTRY.register(name, target, control=control)


def get_defense(name: str) -> type[Defense]:
    """The defense class registered as ``name`` (raises UnknownNameError listing the valid names)."""
    return _REGISTRY.get(name)


def defense_names(releases: str | None = None, *, controls: bool = False) -> list[str]:
    """The registered defense names (controls only with ``controls=True``), optionally of one release kind."""
    names = _REGISTRY.names(controls=controls)
    return names if releases is None else [n for n in names if _REGISTRY.get(n).releases == releases]


def defense_table(*, controls: bool = True) -> list[dict[str, Any]]:
    """One row per registered defense (:meth:`Defense.describe`), controls included unless asked not to."""
    return [{**get_defense(n).describe(), "control": _REGISTRY.is_control(n)} for n in defense_names(controls=controls)]


def is_control(name: str) -> bool:
    """True when the defense registered as ``name`` is a negative control (a deliberately broken mechanism)."""
    return _REGISTRY.is_control(name) or bool(getattr(get_defense(name), "control", False))


def make_defense(name: str, **params: Any) -> Defense:
    """The front door: the defense registered as ``name`` built with ``params`` (validated by the defense).

    Negative controls (deliberately broken mechanisms) are refused: :func:`veil.controls.make_control` builds
    them, and warns.

    >>> import numpy as np, veil
    >>> veil.make_defense("truncation", lower=np.zeros(4), upper=np.ones(4), epsilon=10.0)
    Truncation(d=4, epsilon=10, coverage=None)
    """
    from veil.errors import InvalidParameterError

    cls = get_defense(name)
    if is_control(name):
        raise InvalidParameterError(
            f"{name!r} is a negative control ({getattr(cls, 'broken', 'deliberately broken')}): it protects nothing, "
            f"and make_defense builds real defenses only ({', '.join(defense_names())}); to check that an audit "
            f"catches it, build it with veil.controls.make_control({name!r}, ...), which warns")
    return cls(**params)
