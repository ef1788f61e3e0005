"""veil: privacy-preserving NLP defenses and the attacks that measure them.

Heavy libraries (torch, transformers, spaCy, faiss) are imported lazily by the
functions that need them, so ``import veil`` stays fast.
"""

from __future__ import annotations

import importlib
import os as _os
from typing import Any

__version__ = "0.1.0"

# OpenMP threads that wait for work sleep instead of spinning (libgomp reads OMP_WAIT_POLICY once, when torch loads
# it, so this holds where veil is imported before torch; a value the user set is kept). On a shared machine the
# spinning threads fight the other processes for the cores: with two busy loops beside it, the default encoder ran
# several times slower spinning than sleeping, at a small cost on an idle machine (benchmarks/encode.py,
# benchmarks/RESULTS.md; docs/encoders.md)
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

_SUBMODULES = {"api", "attacks", "bench", "controls", "corpora", "defenses", "encoders", "errors", "experiments",
               "kinds", "metrics", "models", "random", "report", "training", "validation"}


def make_defense(name: str, **params: Any) -> Any:
    """The defense registered as ``name``, built with ``params`` (``veil defenses list`` shows every name).
    Negative controls are refused here: ``veil.controls.make_control`` builds them, and warns.

    >>> import numpy as np, veil
    >>> veil.make_defense("truncation", lower=np.zeros(4), upper=np.ones(4), epsilon=10.0)
    Truncation(d=4, epsilon=10, coverage=None)
    """
    from veil.defenses.base import make_defense as make

    return make(name, **params)


def protect(data: Any, defense: str, **settings: Any) -> Any:
    """Protect ``data`` with the defense registered as ``defense``: its settings take the CLI's option names and
    defaults (``veil.api.settings_of(defense)`` lists them), and what it needs beyond them (TextHide's mask pool,
    DeepCandidate's public candidates, metric DP's word vectors, the obfuscator's public vocabulary) is built as the
    bench builds it (:mod:`veil.defenses.defaults`). Returns a :class:`veil.api.Protected`: ``release``,
    ``defense``, ``kind`` and ``key`` (a :class:`veil.api.SecretKey`, never shown in a repr, where the defense has
    a secret key). Negative controls are refused (:mod:`veil.controls` builds them).

    >>> import numpy as np, veil
    >>> X = np.random.default_rng(0).normal(size=(8, 384)).astype(np.float32)
    >>> out = veil.protect(X, "texthide-inference", m=16)   # a fresh secret pool of 16 masks, OS CSPRNG
    >>> out.release.shape, out.key
    ((8, 384), SecretKey(mask pool: hidden))
    """
    from veil.api import protect as front

    return front(data, defense, **settings)


def attack(release: Any, attack: str, *, private: Any = None, **resources: Any) -> Any:
    """Run the attack registered as ``attack`` on ``release`` (what :func:`protect` returned) and score it as its
    bench cell does: ``private`` (the texts you protected, in order) is the scorer's truth and never reaches the
    attack; ``resources`` default to the bench's (``veil.api.resources_of(attack)`` lists them: the private texts
    as the index, the quick bench's public texts, the quick inverter). Returns a :class:`veil.api.AttackOutcome`:
    ``metric``, ``value``, ``interval``, ``test`` (against the floor) and the bench ``record``. In this process it
    scores retrieval and inversion attacks on releases read as vectors; :func:`evaluate` runs every other cell.

    >>> import veil                                                                  # doctest: +SKIP
    >>> texts = ["a gripping film", "a dull, lifeless plot", "the cast shines"]
    >>> out = veil.protect(texts, "texthide-inference", m=256)
    >>> print(veil.attack(out, "abs-rss", private=texts))
    """
    from veil.api import attack as front

    return front(release, attack, private=private, **resources)


def evaluate(data: Any, defense: str, attacks: Any = "all", **options: Any) -> Any:
    """One bench row in Python: the defense registered as ``defense`` on ``data`` (a bench corpus name, or a
    labelled file's path as ``veil bench --data`` takes it), against ``attacks`` (``"all"``: every attack that
    observes its release) and its utility, every cell run in this process by the bench's own cell functions.
    ``options``: ``quick``, ``seed``, ``queries``, ``limit``, ``key_seed`` (``veil bench``'s), ``text``, ``label``
    (a file's columns). Returns a :class:`veil.api.Evaluation`; ``.table()`` renders it.

    >>> import veil                                                                  # doctest: +SKIP
    >>> print(veil.evaluate("rt-polarity", "texthide-inference", attacks=["rss"], limit=200).table())
    """
    from veil.api import evaluate as row

    return row(data, defense, attacks, **options)


def run_attack(name: str, observation: Any, **resources: Any) -> Any:
    """Build the attack registered as ``name`` from ``resources`` and run it on ``observation`` (what its threat
    model observes, nothing else); ``veil attacks list`` shows every name and what each observes."""
    from veil.attacks.base import run_attack as run

    return run(name, observation, **resources)


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"veil.{name}")
    raise AttributeError(f"module 'veil' has no attribute {name!r}")


__all__ = ["__version__", "make_defense", "protect", "attack", "evaluate", "run_attack", *sorted(_SUBMODULES)]
