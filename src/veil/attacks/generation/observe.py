"""What an attacker observes of a released language model (``generative-model``): black-box access.

:class:`LMAccess` holds two functions and the public recipe, nothing else: ``score(texts)`` gives each text's
log-perplexity under the model (its mean negative log-likelihood per predicted token, in nats; the per-token
log-probabilities a hosted model's API returns, averaged), and ``sample(n, prompt=..., ...)`` draws texts from it.
The texts the model was trained on are not part of the observation: an attack gets them from neither function, and
only a scorer (which holds the truth) reads them. :meth:`LMAccess.of` makes the access to a released
:class:`veil.defenses.lm.TrainedLM`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from veil.errors import DataFormatError, InvalidTypeError

__all__ = ["LMAccess"]


@dataclass(frozen=True)
class LMAccess:
    """Black-box access to a released language model (module docstring): ``score``, ``sample`` and the public
    ``recipe`` (``{"defense": name, "params": {...}}``: how it was trained, never on what)."""

    score: Callable[[list[str]], np.ndarray] = field(repr=False)
    sample: Callable[..., list[str]] = field(repr=False)
    recipe: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not callable(self.score) or not callable(self.sample):
            raise InvalidTypeError("score and sample must be callables: texts -> log-perplexities, and "
                                   "(n, prompt=..., ...) -> texts")
        if not isinstance(self.recipe, Mapping):
            raise InvalidTypeError("recipe must be a mapping {'defense': name, 'params': {...}}")

    @classmethod
    def of(cls, released: Any) -> "LMAccess":
        """The access an attacker has to ``released``, a :class:`~veil.defenses.lm.TrainedLM` (or a bare
        :class:`~veil.models.causal_lm.CausalLM`)."""
        from veil.models.causal_lm import CausalLM, log_perplexities, sample

        lm = getattr(released, "lm", released)
        if not isinstance(lm, CausalLM):
            raise InvalidTypeError(f"an LMAccess is made from a released language model (veil.defenses.lm.TrainedLM "
                                   f"or veil.models.causal_lm.CausalLM), not {type(released).__name__}")
        config = dict(getattr(released, "config", {}) or {})
        recipe = {"defense": config.pop("defense", "unknown"), "params": {k: v for k, v in config.items()
                                                                           if k != "guarantee"}}

        def score(texts: list[str]) -> np.ndarray:
            return log_perplexities(lm, texts)

        def draw(n: int, **options: Any) -> list[str]:
            return sample(lm, n, **options)

        return cls(score=score, sample=draw, recipe=recipe)

    def scores(self, texts: list[str]) -> np.ndarray:
        """``score(texts)`` checked: one finite log-perplexity per text."""
        out = np.asarray(self.score(list(texts)), dtype=np.float64).reshape(-1)
        if out.shape != (len(texts),) or not np.isfinite(out).all():
            raise DataFormatError(f"the model's score gave {out.shape[0]} values for {len(texts)} texts, or a value "
                                  "that is not finite")
        return out
