"""Canary exposure (Carlini et al. 2019, *The Secret Sharer*, Sec. 4) against a released language model.

The auditor plants canaries of a public format (:mod:`veil.corpora.canaries`) in the private texts before the model
is trained. The attack knows the format, not the secrets: it scores candidate values of the format through the
model's black-box likelihood (:class:`~veil.attacks.generation.observe.LMAccess`) and ranks them, its best guess
of a secret being the likeliest value. Every value of the randomness space when it is small enough
(:data:`EXHAUSTIVE_LIMIT`), else ``candidates`` values drawn uniformly with the attacker's own seed.

Scoring is separate and holds the truth (:func:`score_exposure`): each planted canary's exposure, ``log2 |R| -
log2 rank`` among every value (:func:`veil.metrics.memorization.exact_exposure`), or its estimate from the sampled
values (:func:`~veil.metrics.memorization.sampled_exposure`: a count, capped at log2 (n + 1), or the skew-normal
extrapolation), with the insertion count beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from veil.attacks.base import Attack, ThreatModel
from veil.errors import InvalidParameterError, InvalidTypeError

__all__ = ["CanaryExposure", "CandidateScores", "score_exposure", "EXHAUSTIVE_LIMIT"]

#: the largest randomness space scored value by value (larger ones are sampled)
EXHAUSTIVE_LIMIT = 100_000


@dataclass(frozen=True, repr=False)
class CandidateScores:
    """What the attack recovers: the candidate ``values`` it scored, their ``scores`` (log-perplexities, lower is
    likelier), whether they are the whole randomness space (``exhaustive``), its size ``space``, and its ``guess``
    (the likeliest value)."""

    template: str
    values: np.ndarray
    scores: np.ndarray
    exhaustive: bool
    space: int

    @property
    def guess(self) -> int:
        return int(self.values[int(np.argmin(self.scores))])

    def __repr__(self) -> str:
        how = "every value" if self.exhaustive else f"{len(self.values):,} sampled values"
        return f"CandidateScores({self.template!r}: {how} of {self.space:,})"


class CanaryExposure(Attack):
    """Rank the values of a canary format by the released model's likelihood (module docstring).

    ``template``: the public canary format (``{d}`` a digit, ``{a}`` a letter); ``candidates``: how many values to
    sample when the space is larger than :data:`EXHAUSTIVE_LIMIT` (None: the space must be small enough to score
    whole); ``seed``: the attacker's own draws of those values."""

    name = "canary-exposure"
    observes = "generative-model"
    bench_cell = "veil.bench.cells.generative_model:exposure_cell"
    citation = "Carlini et al. 2019, The Secret Sharer (USENIX Security), Sec. 4: the exposure of a planted canary"
    threat = ThreatModel(observes="the released model's likelihood of given texts (black-box scoring)",
                         needs=("the canary format: its template and randomness space, public to the auditor who "
                                "planted it",), knows_key=False, trains=False)

    def __init__(self, template: str, *, candidates: int | None = None, seed: int = 0, batch_size: int = 64) -> None:
        from veil.corpora.canaries import CanaryFormat
        from veil.validation import check_int

        self.format = template if isinstance(template, CanaryFormat) else CanaryFormat(template)
        self.seed = check_int("seed", seed, minimum=0)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        space = self.format.space
        if candidates is None:
            if space > EXHAUSTIVE_LIMIT:
                raise InvalidParameterError(f"the format's randomness space has {space:,} values, more than the "
                                            f"{EXHAUSTIVE_LIMIT:,} scored one by one: give candidates=N to score N "
                                            "values drawn uniformly (exposure is then estimated)")
            self.candidates = None
        else:
            self.candidates = check_int("candidates", candidates, minimum=2)
            if self.candidates >= space:
                self.candidates = None  # as many as the space holds: score it whole

    def config(self) -> dict[str, Any]:
        return {**super().config(), "template": self.format.template, "space": self.format.space,
                "candidates": "all" if self.candidates is None else self.candidates, "seed": self.seed}

    def run(self, observation: Any) -> CandidateScores:
        """Score the candidate values through ``observation`` (an :class:`LMAccess`)."""
        from veil.attacks.generation.observe import LMAccess

        if not isinstance(observation, LMAccess):
            raise InvalidTypeError(f"canary-exposure observes a released language model (LMAccess.of(model)), not "
                                   f"{type(observation).__name__}")
        space = self.format.space
        if self.candidates is None:
            values = np.arange(space, dtype=np.int64)
        else:
            values = np.sort(np.random.default_rng(self.seed).choice(space, size=self.candidates, replace=False))
        texts = [self.format.candidate(int(v)) for v in values]
        scores = np.concatenate([observation.scores(texts[i:i + self.batch_size])
                                 for i in range(0, len(texts), self.batch_size)])
        return CandidateScores(self.format.template, values, scores, self.candidates is None, space)


def score_exposure(found: CandidateScores, observation: Any, canaries: Any, *,
                   extrapolate: str = "none") -> list[dict[str, Any]]:
    """Each planted canary's exposure (bits) from the attack's ``found`` scores, with its insertion count: exact
    where every value was scored, else estimated from the sample (``extrapolate``: ``"none"`` counts, capped at
    log2 (n + 1); ``"skewnorm"`` the paper's extrapolation). A canary's own score is its entry among every value,
    or, beside a sample, comes from ``observation`` (the auditor holds the truth; the attack never saw it). Also
    says whether the attack's guess is the canary."""
    from veil.corpora.canaries import Canary
    from veil.metrics.memorization import exact_exposure, sampled_exposure

    canaries = list(canaries)
    if not canaries or not all(isinstance(c, Canary) for c in canaries):
        raise InvalidTypeError("canaries must be the planted veil.corpora.canaries.Canary objects")
    if any(c.format.template != found.template for c in canaries):
        raise InvalidParameterError("every canary must be of the format the attack scored")
    # every value scored: each canary's own score is its entry there (one scoring run, the same batches); sampled:
    # the canary is scored here, beside the sample
    own = (found.scores[[c.value for c in canaries]] if found.exhaustive
           else observation.scores([c.text() for c in canaries]))
    out = []
    for canary, score in zip(canaries, own):
        row: dict[str, Any] = {"count": canary.count, "guessed": found.guess == canary.value}
        if found.exhaustive:
            row.update(exposure=exact_exposure(float(score), found.scores), method="exact",
                       cap=float(np.log2(found.space)))
        else:
            est = sampled_exposure(float(score), found.scores, extrapolate=extrapolate)
            # a rank is at least 1, so no estimate exceeds log2 |R|; the skew-normal tail can (its log-CDF
            # underflows to -inf for a canary far below the fitted scores), and is cut there
            row.update(exposure=min(est.value, float(np.log2(found.space))), method=est.method, cap=est.cap,
                       sampled=est.n)
        out.append(row)
    return out
