"""Memorisation measures for a released language model (the ``generative-model`` kind): canary exposure (Carlini
et al. 2019, *The Secret Sharer*) and the zlib ranking of extraction (Carlini et al. 2021, *Extracting Training Data
from Large Language Models*).

**Exposure.** A canary is a format with a random secret, ``s[r]`` for ``r`` drawn uniformly from a space ``R``
(e.g. 9 random digits: ``|R| = 10^9``). The model scores every candidate ``s[t]`` by its log-perplexity (lower: the
model finds it likelier). The canary's rank is the number of candidates scored at most as low as it (ties count
against the attacker's claim: a tie does not lower the rank), and

    exposure = log2 |R| - log2 rank,

from 0 (every candidate scores at most as low as the canary) to log2 |R| (the canary is the likeliest of all); a
canary no likelier than a typical candidate ranks near |R| / 2, about 1 bit.
:func:`exact_exposure` ranks the canary among every candidate of a small space. For a space too large to enumerate,
:func:`sampled_exposure` estimates ``-log2 Pr_t[score(s[t]) <= score(s[r])]`` from ``n`` candidates drawn uniformly:
the plain estimate uses ``(k + 1) / (n + 1)`` for ``k`` sampled candidates at or below the canary, so it never
exceeds ``log2 (n + 1)`` (said in its result); ``extrapolate="skewnorm"`` fits a skew-normal distribution to the
sampled scores and reads the probability from its CDF (the paper's Sec. 4.3 extrapolation), which can go beyond
that cap and is an estimate of a model of the scores, not a count.

**zlib ratio.** A sample the model finds likely may simply be repetitive. Extraction therefore also ranks samples
by the ratio of the model's log-perplexity to the sample's zlib entropy (the number of bits zlib compresses it to):
a memorised sequence is likely for the model yet not compressible by zlib, so its ratio is low.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError

__all__ = ["exposure_from_rank", "exact_exposure", "sampled_exposure", "SampledExposure", "zlib_entropy",
           "zlib_ratio"]


def _scores(name: str, values: Any) -> np.ndarray:
    a = np.asarray(values, dtype=np.float64).reshape(-1)
    if a.size == 0:
        raise DataFormatError(f"{name}: no scores given")
    if not np.isfinite(a).all():
        raise DataFormatError(f"{name}: every score must be finite (log-perplexities), got a NaN or an infinity")
    return a


def exposure_from_rank(rank: int, space: int | float) -> float:
    """``log2 space - log2 rank`` for a canary ranked ``rank`` (1 = the likeliest) among ``space`` candidates."""
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)):
        raise InvalidTypeError(f"rank must be an int, got {type(rank).__name__}")
    if not (isinstance(space, (int, float, np.integer, np.floating)) and math.isfinite(space) and space >= 1):
        raise InvalidParameterError(f"space must be a finite number of candidates >= 1, got {space!r}")
    if not 1 <= rank <= space:
        raise InvalidParameterError(f"rank must lie in 1..{space:g} (the candidates), got {rank}")
    return math.log2(space) - math.log2(int(rank))


def exact_exposure(canary: float, candidates: Any) -> float:
    """Exposure of a canary scored ``canary`` (its log-perplexity) among ``candidates``, the scores of EVERY
    candidate of the randomness space (the canary's own included): rank = #{candidates scored <= the canary}."""
    c = _scores("canary", canary)
    if c.size != 1:
        raise DataFormatError("canary: give the one canary's score")
    space = _scores("candidates", candidates)
    rank = int(np.sum(space <= c[0]))
    if rank == 0:
        raise DataFormatError("the canary's score is below every candidate's: the candidates must include the "
                              "canary itself (every value of the randomness space)")
    return exposure_from_rank(rank, space.size)


@dataclass(frozen=True)
class SampledExposure:
    """An estimated exposure: ``value`` (bits), the ``n`` sampled candidates, ``k`` of them scored at or below the
    canary, ``method`` (``"count"`` or ``"skewnorm"``) and ``cap`` (the most a count can show: log2 (n + 1); a
    ``"count"`` value at the cap means the canary beat every sample, and the true exposure may be higher)."""

    value: float
    n: int
    k: int
    method: str
    cap: float

    @property
    def at_cap(self) -> bool:
        return self.method == "count" and self.k == 0


def sampled_exposure(canary: float, samples: Any, *, extrapolate: str = "none") -> SampledExposure:
    """Exposure estimated from ``samples``, the scores of candidates drawn uniformly from the randomness space
    (module docstring): ``-log2 ((k + 1) / (n + 1))``, or with ``extrapolate="skewnorm"`` ``-log2 F(canary)`` for
    ``F`` the CDF of a skew-normal fitted to the samples (scipy's maximum likelihood fit)."""
    c = _scores("canary", canary)
    if c.size != 1:
        raise DataFormatError("canary: give the one canary's score")
    s = _scores("samples", samples)
    if extrapolate not in ("none", "skewnorm"):
        raise InvalidParameterError(f"extrapolate must be 'none' or 'skewnorm', got {extrapolate!r}")
    n, k = int(s.size), int(np.sum(s <= c[0]))
    cap = math.log2(n + 1)
    if extrapolate == "none":
        return SampledExposure(value=-math.log2((k + 1) / (n + 1)), n=n, k=k, method="count", cap=cap)
    if n < 3 or np.ptp(s) == 0:
        raise DataFormatError("a skew-normal fit needs at least 3 samples that are not all equal")
    from scipy.stats import skewnorm

    a, loc, scale = skewnorm.fit(s)
    log_p = float(skewnorm.logcdf(c[0], a, loc=loc, scale=scale))
    return SampledExposure(value=-log_p / math.log(2), n=n, k=k, method="skewnorm", cap=cap)


def zlib_entropy(text: str) -> int:
    """The bits zlib (default level) compresses ``text`` (UTF-8) to."""
    if not isinstance(text, str):
        raise InvalidTypeError(f"text must be a str, got {type(text).__name__}")
    return 8 * len(zlib.compress(text.encode("utf-8")))


def zlib_ratio(log_perplexity: float, text: str) -> float:
    """The model's log-perplexity of ``text`` divided by its zlib entropy in bits (lower: likelier for the model
    than its compressibility explains; Carlini et al. 2021's zlib ranking)."""
    lp = _scores("log_perplexity", log_perplexity)
    if lp.size != 1:
        raise DataFormatError("log_perplexity: give one text's score")
    return float(lp[0]) / zlib_entropy(text)
