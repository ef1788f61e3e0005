"""The shared contract of veil's attacks.

An attack is built from parts (STYLE.md, practice 4):

* a threat model (:class:`ThreatModel`): what the attacker observes and what
  else it needs (public data, an index, the encoder, training pairs) and
  whether it knows the defense's secret key;
* an :class:`Observation`: the data the attacker actually sees (e.g. the
  protected query vectors) plus the public description of the defense that
  produced it. The ground truth used for scoring (which example each query
  came from) is never part of the observation;
* a search or training procedure (the attack class itself);
* scoring, which returns a frozen, typed :class:`AttackResult`: metrics with
  confidence intervals, the configuration (attack, defense, seeds), wall time
  and a few example rows, exportable with :meth:`AttackResult.to_dict` (JSON)
  and :meth:`AttackResult.to_rows` (one flat row per metric, for CSV/tables).

Every attack declares the ONE release kind it observes (:attr:`Attack.observes`, a key of
:data:`veil.kinds.RELEASE_KINDS`; :func:`veil.kinds.observable` says which releases it can read) and has one
verb, :meth:`Attack.run` (observation -> what it recovers); scoring against the truth is separate (each family's
``score_*`` / ``evaluate_*``). :meth:`Attack.build` makes it from the resources its threat model grants
(:func:`run_attack` is the front door). For the benchmark (:mod:`veil.bench`) it declares
:attr:`Attack.bench_cell` (``"module:function"`` that runs and scores one bench cell of it) and, if it is built
from bench resources, :meth:`Attack.for_bench`. An attack with ``floor = True`` (random guessing) is a reference,
run once per corpus against the undefended baseline; ``abstract = True`` marks a base class.

Every attack veil has is in the one registry below, found by name (:func:`attack_names`, :func:`get_attack`,
:func:`attack_table`); the registry imports the implementing module only when asked.
This module imports nothing heavy.
"""

from __future__ import annotations

import math
import numbers
from abc import ABCMeta, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from veil._registry import LazyRegistry
from veil.errors import InvalidParameterError, InvalidTypeError
from veil.results import Metric, ResultRecord
from veil.validation import as_vectors

__all__ = ["Attack", "ThreatModel", "Observation", "AttackResult", "attack_names", "get_attack", "register_attack",
           "attack_table", "run_attack",
           "rng_description"]


@dataclass(frozen=True)
class ThreatModel:
    """What an attacker observes and what it needs besides, as data.

    ``observes``: what it sees of the private data (e.g. "protected query
    representations"); ``needs``: other resources; ``knows_key``: whether it
    knows the defense's secret (TextHide's mask pool); ``trains``: whether it
    fits a model before attacking.
    """

    observes: str
    needs: tuple[str, ...] = ()
    knows_key: bool = False
    trains: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"observes": self.observes, "needs": list(self.needs), "knows_key": self.knows_key,
                "trains": self.trains}


@dataclass(frozen=True)
class Observation:
    """What the attacker sees: vectors (n, d), one per query, and the defense's public config.

    ``vectors`` is a read-only float32 copy. ``defense`` is public configuration
    only (e.g. ``TextHide.config()``; never keys). ``source`` says how the
    vectors were made: ``"original"`` (no defense, the paper's baseline),
    ``"defense"`` (a veil defense applied by :func:`veil.attacks.retrieval.observe.protect`)
    or ``"precomputed"`` (any array the caller supplies).
    """

    vectors: np.ndarray
    defense: Mapping[str, Any] = field(default_factory=lambda: {"defense": "none"})
    source: str = "precomputed"

    def __post_init__(self) -> None:
        v = np.array(as_vectors("vectors", self.vectors), dtype=np.float32, copy=True)
        v.flags.writeable = False
        object.__setattr__(self, "vectors", v)
        if not isinstance(self.defense, Mapping):
            raise InvalidTypeError("defense must be a mapping of public configuration, "
                                   f"not {type(self.defense).__name__}")
        bad = _not_plain(self.defense, "defense")
        if bad is not None:  # keeps keys, masks and mixing details (arrays, tensors, objects) out of the attacker's view
            raise InvalidTypeError(f"{bad}: an Observation's defense description holds public configuration only "
                                   "(strings, numbers, booleans, lists and mappings of them), never arrays or objects")
        object.__setattr__(self, "defense", MappingProxyType(dict(self.defense)))
        if self.source not in ("original", "defense", "precomputed"):
            raise InvalidParameterError(f"source must be 'original', 'defense' or 'precomputed', got {self.source!r}")

    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def describe(self) -> dict[str, Any]:
        """JSON-ready description (no vectors)."""
        return {"source": self.source, "n": len(self), "dim": self.dim, "defense": _jsonable(dict(self.defense))}


def _not_plain(x: Any, where: str) -> str | None:
    """None when ``x`` is plain JSON-like data, else where the first non-plain value is and what it is."""
    if x is None or isinstance(x, (str, bool, numbers.Number)) and not isinstance(x, np.ndarray):
        return None
    if isinstance(x, Mapping):
        for key, value in x.items():
            if not isinstance(key, str):
                return f"{where} has a non-string key {key!r}"
            found = _not_plain(value, f"{where}[{key!r}]")
            if found:
                return found
        return None
    if isinstance(x, (list, tuple)):
        for i, value in enumerate(x):
            found = _not_plain(value, f"{where}[{i}]")
            if found:
                return found
        return None
    return f"{where} is a {type(x).__name__}"


class Attack(metaclass=ABCMeta):
    """Base class of veil's attacks.

    Subclasses set ``name`` (registry name), ``citation`` (paper and section),
    ``threat`` (a :class:`ThreatModel`) and override :meth:`config`.
    """

    name: ClassVar[str] = ""
    citation: ClassVar[str] = ""
    threat: ClassVar[ThreatModel] = ThreatModel("nothing")
    observes: ClassVar[str] = ""
    bench_cell: ClassVar[str] = ""
    floor: ClassVar[bool] = False
    abstract: ClassVar[bool] = False

    def config(self) -> dict[str, Any]:
        """Public, JSON-ready configuration; subclasses extend it."""
        return {"attack": self.name, "citation": self.citation, "threat": self.threat.to_dict()}

    @abstractmethod
    def run(self, observation: Any) -> Any:
        """The one verb: what the attacker recovers from ``observation`` (the observation only: no truth, no
        keys). Scoring against the truth is separate."""

    @classmethod
    def build(cls, **resources: Any) -> "Attack":
        """The attack made from the resources its threat model grants (default: the constructor's keywords)."""
        return cls(**resources)

    @classmethod
    def describe(cls) -> dict[str, Any]:
        """What ``veil attacks list`` prints: name, observed kind, threat model, citation, floor."""
        return {"name": cls.name, "observes": cls.observes, "threat": cls.threat.to_dict(), "citation": cls.citation,
                "floor": cls.floor, "class": f"{cls.__module__}.{cls.__qualname__}"}

    @classmethod
    def bench_applies(cls, defense: str, setting: Mapping[str, Any]) -> bool:
        """Whether a bench setting of ``defense`` is one this attack can run on (default: every one)."""
        return True

    @classmethod
    def for_bench(cls, resources: Any) -> "Attack":
        """The attack built from what its threat model grants in one bench cell (``resources``: a
        :class:`veil.bench.cells.AttackResources`: the index, public statistics, the seed of the attacker's own
        choices, and for attacks that train, known pairs)."""
        raise NotImplementedError(f"attack {cls.name!r} does not say how to build itself for the bench")


def rng_description(rng: Any) -> str:
    """How ``rng`` was given, for records: ``"os-entropy"``, ``"seed <n>"`` or ``"generator"``."""
    if rng is None:
        return "os-entropy"
    if isinstance(rng, np.random.Generator):
        return "generator"
    if isinstance(rng, numbers.Integral) and not isinstance(rng, (bool, np.bool_)):
        return f"seed {int(rng)}"
    raise InvalidTypeError(f"rng must be None (OS entropy), an int seed or a numpy.random.Generator, "
                           f"not {type(rng).__name__}")


def _jsonable(x: Any) -> Any:
    """Convert numpy scalars/arrays, tuples and mapping proxies to JSON types; NaN/inf -> None."""
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return [_jsonable(v) for v in x.tolist()]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if x is None or isinstance(x, (str, int, float, bool)):
        return x
    if hasattr(x, "to_dict"):
        return _jsonable(x.to_dict())
    return str(x)


@dataclass(frozen=True)
class AttackResult:
    """A frozen attack result: metrics with CIs over ``n_queries`` queries, configuration, timing, examples.

    ``config`` holds the attack's public configuration (seeds as
    :func:`rng_description` strings); ``defense`` the observation's public
    defense configuration; ``examples`` a few JSON-ready example rows.
    """

    attack: str
    defense: Mapping[str, Any]
    n_queries: int
    metrics: Mapping[str, Metric]
    config: Mapping[str, Any] = field(default_factory=dict)
    wall_time_s: float = 0.0
    examples: tuple[Mapping[str, Any], ...] = ()

    def __post_init__(self) -> None:
        for name in ("defense", "metrics", "config"):
            value = getattr(self, name)
            if not isinstance(value, Mapping):
                raise InvalidTypeError(f"{name} must be a mapping, not {type(value).__name__}")
            object.__setattr__(self, name, MappingProxyType(dict(value)))
        for key, m in self.metrics.items():
            if not isinstance(m, Metric):
                raise InvalidTypeError(f"metrics[{key!r}] must be a veil Metric, not {type(m).__name__}")
        object.__setattr__(self, "examples", tuple(MappingProxyType(dict(e)) for e in self.examples))

    @property
    def defense_name(self) -> str:
        return str(self.defense.get("defense", "none"))

    def to_dict(self) -> dict[str, Any]:
        """The whole result as JSON-ready data."""
        return {"attack": self.attack, "defense": _jsonable(self.defense), "n_queries": self.n_queries,
                "metrics": {k: m.to_dict() for k, m in self.metrics.items()}, "config": _jsonable(self.config),
                "wall_time_s": self.wall_time_s, "examples": [_jsonable(e) for e in self.examples]}

    def to_rows(self) -> list[dict[str, Any]]:
        """One flat row per metric (attack, defense settings, metric, mean, std, n, CI) for CSV and tables."""
        d = self.defense
        base = {"attack": self.attack, "defense": self.defense_name, "m": _jsonable(d.get("m")),
                "k": _jsonable(d.get("k")), "n_queries": self.n_queries}
        return [{**base, "metric": name, "mean": m.mean, "std": m.std, "n": m.n, "ci_low": m.ci_low,
                 "ci_high": m.ci_high, "ci_level": m.ci_level} for name, m in self.metrics.items()]

    def to_record(self, method: str, experiment: str) -> ResultRecord:
        """A :class:`~veil.results.ResultRecord` (config = attack config + defense; examples in extra)."""
        return ResultRecord(method=method, experiment=experiment,
                            config={"attack": _jsonable(self.config), "defense": _jsonable(self.defense),
                                    "n_queries": self.n_queries},
                            metrics=dict(self.metrics), wall_time_s=self.wall_time_s,
                            extra={"examples": [_jsonable(e) for e in self.examples]})


# ---------------------------------------------------------------- registry
_REGISTRY = LazyRegistry("attack", {
    "rss": "veil.attacks.retrieval:RSS",
    "reprecon": "veil.attacks.retrieval:RepRecon",
    "random-guess": "veil.attacks.retrieval:RandomGuess",
    "abs-rss": "veil.attacks.retrieval:AbsRSS",
    "mask-recovery": "veil.attacks.texthide.mask_recovery:MaskRecovery",
    "unmix": "veil.attacks.texthide.unmix:Unmix",
    "exact-audit": "veil.attacks.audit:ExactAudit",
    "gradmatch": "veil.attacks.gradients.alg3:GradMatch",
    "analytic": "veil.attacks.gradients.analytic:AnalyticInversion",
    "update-chain": "veil.attacks.gradients.chain:UpdateChain",
    "encoding-match": "veil.attacks.gradients.matching:EncodingMatch",
    "attribute": "veil.attacks.attribute:AttributeAttack",
    "word-recovery-minilm": "veil.attacks.word_recovery.contextual:ContextualAttacker",
    "word-recovery-trained": "veil.attacks.word_recovery.neural:TrainedAttacker",
    "word-recovery-mlm": "veil.attacks.word_recovery.neural:MaskedLMAttacker",
    "word-recovery-veil-mlm": "veil.attacks.word_recovery.veil_mlm:ZeroShotMLMAttacker",
    "word-recovery-veil-mlm-tuned": "veil.attacks.word_recovery.veil_mlm:TunedMLMAttacker",
    "keep-word": "veil.attacks.word_recovery.floors:KeepWord",
    "tag-frequency": "veil.attacks.word_recovery.floors:TagFrequency",
    "infill": "veil.attacks.text.infilling:Infilling",
    "reidentify": "veil.attacks.text.reidentify:Reidentification",
    "membership-loss": "veil.attacks.membership.loss:LossThreshold",
    "membership-lira": "veil.attacks.membership.lira:LiRA",
    "membership-rmia": "veil.attacks.membership.rmia:RMIA",
    "invert": "veil.attacks.inversion.invert:Inversion",
    "invert-unmasked": "veil.attacks.inversion.unmasked:UnmaskedInversion",
    "invert-representations": "veil.attacks.inversion.mapped:MappedInversion",
    "invert-nearest-public": "veil.attacks.inversion.baselines:NearestPublic",
    "invert-bag-of-words": "veil.attacks.inversion.baselines:BagOfWords",
    "canary-exposure": "veil.attacks.generation.exposure:CanaryExposure",
    "extraction": "veil.attacks.generation.extraction:TrainingDataExtraction",
    "pii-inference": "veil.attacks.generation.pii:PIIInference",
    "pii-reconstruction": "veil.attacks.generation.pii:PIIReconstruction",
    "lm-membership-loss": "veil.attacks.generation.membership:LMMembership",
    "lm-membership-zlib": "veil.attacks.generation.membership:LMMembershipZlib",
    "lm-membership-reference": "veil.attacks.generation.membership:LMMembershipReference",
})


def register_attack(name: str, target: str) -> None:
    """Register ``name`` -> ``"package.module:ClassName"`` (imported lazily)."""
    _REGISTRY.register(name, target)


def attack_names(observes: str | None = None) -> list[str]:
    """The registered attack names, optionally only those observing one release kind."""
    names = _REGISTRY.names()
    return names if observes is None else [n for n in names if _REGISTRY.get(n).observes == observes]


def get_attack(name: str) -> type[Attack]:
    """The attack class registered as ``name`` (raises UnknownNameError listing the valid names)."""
    return _REGISTRY.get(name)


def attack_table() -> list[dict[str, Any]]:
    """One row per registered attack (:meth:`Attack.describe`)."""
    return [get_attack(n).describe() for n in attack_names()]


def run_attack(name: str, observation: Any, **resources: Any) -> Any:
    """The front door: build the attack registered as ``name`` from ``resources`` and run it on ``observation``.

    >>> import veil
    >>> veil.run_attack("rss", observation, index=index)       # doctest: +SKIP
    """
    return get_attack(name).build(**resources).run(observation)
