"""The Python front door to the defenses: :func:`protect` (``veil.protect``), what the CLI's defense options do.

``protect(data, defense, **settings)`` builds the defense registered as ``defense`` from its settings, named and
defaulted as the CLI's options for it (``m``, ``k``, ``epsilon``, ``level``, ``operator``, ...; :func:`settings_of`
lists them), with what it needs beyond them built by :mod:`veil.defenses.defaults` from the same public sources
(TextHide's mask pool from the OS CSPRNG, or a ``pool=`` you pass; DeepCandidate's and truncation's public
candidates and metric DP's word vectors from a public corpus, the obfuscator's vocabulary from the public
treebank), and applies it to ``data``. What comes back is a :class:`Protected`: the release, the defense (its
public ``config()``), and, where the defense has a secret key, a :class:`SecretKey` holding it (never in a repr).

What ``data`` is, and what the release is, follows the defense's release kind (``veil.kinds``):

| kind | data | release |
|---|---|---|
| ``vectors`` | (n, d) vectors, or texts (encoded by MiniLM) | (n, d) float32 protected vectors |
| ``training-encodings`` | vectors or texts, or ``(vectors or texts, labels)`` | a training run's encodings: ``epochs`` passes in shuffled batches of 64 (``Encrypted``: mixed vectors, mixed soft labels); the key holds the pool and the run's one-time mixing (``SecretKey.mixing``) |
| ``document-embeddings`` | documents (each a list of sentences), or a document corpus (its test split; ``public`` defaults to its train split) | (n, d) private document embeddings |
| ``text`` | texts, documents (lists of sentences), or a corpus (its test split) | the rewritten texts, or documents of rewritten sentences (one release over all of them; ``veil.attack`` reads a document as the mean of its sentences' MiniLM vectors, as the bench) |
| ``obfuscated-text`` | sentences: ``(words, tags)`` pairs, trees, or plain strings (tagged by spaCy sm) | ``(words, tags)`` per sentence (the key, positions and originals, apart) |
| ``model`` | ``(vectors or texts, labels)`` | the trained model |
| ``generative-model`` | texts (the private training texts) | the fine-tuned language model (``TrainedLM``; an attack reads it through ``LMAccess.of``) |
| ``representations`` | ``leace``: ``(R, private)``, representations and their private variables (one value per row, a dict attribute -> values, or ``PrivateVariables``); the objectives: None | ``leace``: R with the private variables linearly erased; the objectives: None (``Protected.defense`` is the configured objective, trained with ``veil adversarial train``) |

Negative controls are refused (:mod:`veil.controls` builds them); unknown settings raise
:class:`~veil.errors.InvalidParameterError` naming the valid ones.

:func:`attack` (``veil.attack``, :mod:`veil.api.score`) runs an attack on a :class:`Protected` release and scores
it with the bench cell's own functions; :func:`evaluate` (``veil.evaluate``, :mod:`veil.api.row`) runs one bench
row (one defense on one dataset) in this process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from veil.errors import InvalidParameterError, InvalidTypeError

__all__ = ["protect", "Protected", "SecretKey", "settings_of", "SETTINGS", "REQUIRED", "attack", "AttackOutcome",
           "resources_of", "evaluate", "Evaluation"]

_DOCUMENT = {"epsilon": 10.0, "public": None}  # `veil sentdp embed --epsilon 10 --public CORPUS`
_TRAINING = {"epochs": 10, "batch_size": 256, "lr": 1e-3, "optimizer": "adam"}  # `veil dpsgd train`

#: defense -> {setting: default}: the CLI's option names and defaults (``seed``: reproducible keys for experiments
#: only, it warns; None, the default, draws every key from the OS CSPRNG)
SETTINGS: dict[str, dict[str, Any]] = {
    "none": {},
    "texthide-inference": {"m": 256, "pool": None},  # `veil texthide eval --m 256`; pool: your own MaskPool
    # `veil texthide eval`; epochs: the passes a training run releases (`veil attack unmix --epochs`)
    "texthide": {"m": 256, "k": 4, "mode": "intra", "epochs": 5, "public": "health-tweets", "pool": None},
    "deepcandidate": {**_DOCUMENT, "n_projections": 50, "depth": "tukey-min"},  # `veil sentdp embed`
    "truncation": dict(_DOCUMENT),
    "metric-dp": dict(_DOCUMENT),
    "multidetask": {"alpha": None}, "grl": {"alpha": None},  # `veil adversarial train --alpha` (None: the paper's)
    "generation": {"alpha": None, "reduction": "sum"}, "decluster": {"alpha": None}, "leace": {},
    "obfuscation-random": {"level": "P3", "treebank": "silver-sm"},  # `veil obfuscate`
    "obfuscation-neural": {"level": "P3", "neural_model": None},  # `veil obfuscate --method neural --neural-model`
    "redaction": {"operator": "type", "entities": None, "model": "sm", "scope": "document", "threshold": 0.0},
    "plain": dict(_TRAINING),
    "dpsgd": {**_TRAINING, "epsilon": 8.0, "clip": 1.0, "accountant": "prv"},  # epsilon: the bench's (quick) target
    "texthide-model": {**_TRAINING, "m": 256, "k": 4},
    "lm-plain": {"steps": 200, "batch_size": 16, "lr": 1e-4, "max_tokens": 64},  # veil.defenses.lm
    "lm-scrub": {"operator": "type", "model": "sm", "steps": 200, "batch_size": 16, "lr": 1e-4, "max_tokens": 64},
    "lm-dedup": {"steps": 200, "batch_size": 16, "lr": 1e-4, "max_tokens": 64},
    "lm-dpsgd": {"epsilon": 8.0, "clip": 1.0, "layers": 2, "steps": 200, "batch_size": 16, "lr": 1e-3,
                 "max_tokens": 64},
}
_COMMON = {"seed": None}
#: how many public texts fill TextHide's inter-mode slots (the quick bench's)
PUBLIC_SIZE = 2000


class SecretKey:
    """A defense's secret key (TextHide's mask pool, the obfuscation keys, redaction's hash key): ``value`` holds
    it; its repr and str never show it. Keep it with its owner; ``save(path)`` writes it owner-only (mode 0600)."""

    __slots__ = ("_value", "kind", "_mixing")

    def __init__(self, value: Any, kind: str, mixing: Any = None) -> None:
        self._value, self.kind, self._mixing = value, kind, mixing

    @property
    def value(self) -> Any:
        return self._value

    @property
    def mixing(self) -> Any:
        """A TextHide training release's one-time mixing (which private rows and coefficients went into each
        encoding, and its mask: a :class:`~veil.attacks.texthide.observe.TextHideTruth`), kept only so that
        :func:`veil.attack` can score mask recovery and unmixing; None for other keys. ``save`` never writes it."""
        return self._mixing

    def save(self, path: Any) -> Any:
        """Write the key to ``path`` (mode 0600): a mask pool through ``MaskPool.save``, other keys as JSON."""
        save = getattr(self._value, "save", None)
        if callable(save):
            return save(path)
        import json

        from veil._io import atomic_write

        value = self._value
        if isinstance(value, bytes):
            value = value.hex()
        elif isinstance(value, list):
            value = [{"positions": list(k.positions), "originals": list(k.originals)} for k in value]
        with atomic_write(path, "w", perms=0o600) as fh:
            json.dump({"kind": self.kind, "key": value}, fh)
        return path

    def __repr__(self) -> str:
        return f"SecretKey({self.kind}: hidden)"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("a SecretKey is not pickled (it would leave its owner); save it with .save(path)")


@dataclass(frozen=True, repr=False)
class Protected:
    """What :func:`protect` returns: ``release`` (what leaves the owner; None for a training objective),
    ``defense`` (the built defense; ``defense.config()`` is its public configuration), ``kind`` (its release kind)
    and ``key`` (a :class:`SecretKey`, or None where the defense keeps no secret key)."""

    release: Any
    defense: Any
    kind: str
    key: SecretKey | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        r = getattr(self.release, "e", self.release)  # TextHide's Encrypted: its encodings
        n = None if r is None else (r.shape[0] if hasattr(r, "shape") else len(r) if hasattr(r, "__len__") else
                                    "a model" if self.kind in ("model", "generative-model") else "?")
        return (f"Protected(defense={getattr(self.defense, 'name', '?')!r}, kind={self.kind!r}, "
                f"released={n}, key={'hidden' if self.key is not None else None})")


class _Required:
    def __repr__(self) -> str:
        return "<required>"


#: the default of a setting that has none (a registered defense's own constructor parameter without a default)
REQUIRED = _Required()


def settings_of(defense: str) -> dict[str, Any]:
    """The settings :func:`protect` takes for ``defense``, with their defaults (the CLI's). A defense registered
    beyond veil's own (``register_defense``) takes its constructor's keyword parameters (``rng`` as ``seed``)."""
    _check_name(defense)
    if defense in SETTINGS:
        return {**SETTINGS[defense], **_COMMON}
    import inspect

    from veil.defenses.base import get_defense

    params = inspect.signature(get_defense(defense).__init__).parameters.values()
    own = {p.name: (REQUIRED if p.default is p.empty else p.default) for p in params
           if p.kind is p.KEYWORD_ONLY and p.name != "rng"}
    return {**own, **_COMMON}


def _check_name(name: str) -> None:
    from veil.defenses.base import defense_names, get_defense, is_control

    if not isinstance(name, str):
        raise InvalidTypeError(f"defense must be a registered name (str), got {type(name).__name__}")
    get_defense(name)  # UnknownNameError listing the valid names
    if is_control(name):
        raise InvalidParameterError(
            f"{name!r} is a negative control: it protects nothing, and veil.protect builds real defenses only "
            f"({', '.join(defense_names())}); to check that an audit catches it, build it with "
            f"veil.controls.make_control({name!r}, ...), which warns")


def _settings(name: str, given: dict[str, Any]) -> dict[str, Any]:
    valid = settings_of(name)
    bad = sorted(set(given) - set(valid))
    if bad:
        raise InvalidParameterError(f"{', '.join(bad)}: not {'a setting' if len(bad) == 1 else 'settings'} of "
                                    f"{name!r}; its settings (the CLI's options): "
                                    f"{', '.join(f'{k}={v!r}' for k, v in valid.items())}")
    out = {**valid, **given}
    missing = [k for k, v in out.items() if v is REQUIRED]
    if missing:
        raise InvalidParameterError(f"{name!r} needs {', '.join(missing)}; its settings: "
                                    f"{', '.join(f'{k}={v!r}' for k, v in valid.items())}")
    return out


def protect(data: Any, defense: str, **settings: Any) -> Protected:
    """Protect ``data`` with the defense registered as ``defense``, configured by ``settings`` (the CLI's option
    names and defaults; :func:`settings_of`). See the module docstring for what ``data`` and the release are for
    each release kind. Keys come from the OS CSPRNG unless ``seed`` is given (experiments only; it warns).

    >>> import numpy as np, veil
    >>> X = np.random.default_rng(0).normal(size=(8, 384)).astype(np.float32)
    >>> out = veil.protect(X, "texthide-inference", m=16)
    >>> out.release.shape, out.key
    ((8, 384), SecretKey(mask pool: hidden))
    """
    _check_name(defense)
    s = _settings(defense, settings)
    from veil.defenses.base import get_defense

    kind = get_defense(defense).releases
    from veil.api import kinds

    built, release, key = getattr(kinds, "protect_" + kind.replace("-", "_"))(data, defense, s)
    return Protected(release=release, defense=built, kind=kind, key=key, settings=s)



from veil.api.row import Evaluation, evaluate  # noqa: E402  (after Protected: they refer to it)
from veil.api.score import AttackOutcome, attack, resources_of  # noqa: E402
