"""Exact sampling of DeepCandidate's exponential mechanism.

DeepCandidate releases candidate i with probability
``P(i) = exp(epsilon * u_i / 2) / sum_j exp(epsilon * u_j / 2)`` (McSherry and
Talwar 2007; Meehan et al. 2022, Sec. 4.2). Its privacy proof is about these
real numbers. :class:`ExactSampler` releases exactly this distribution, for
the utilities as computed (float64 numbers, i.e. exact dyadic rationals:
integers for ``depth="tukey-min"``; multiples of 1/2 for
``depth="appendix"``, which is ``-|ge - k/2|`` and so NOT an integer when k
is odd) and epsilon as given (a float, i.e. an exact rational), provided the
random bits are uniform and independent. No probability is ever rounded, so
the guarantee, epsilon-SentDP, holds for the implementation and not only for
the real-number algorithm.

What it replaces. Until this sampler, DeepCandidate exponentiated the
log-sum-exp-normalised scores in float64, summed them with ``cumsum`` and
inverted that CDF at a uniform on the 2^-53 grid. Its realised probabilities
are multiples of 2^-53 computed from rounded numbers, so a candidate can
have probability exactly 0 on one document and a positive one on a
neighbour: the realised ratio is then infinite
(``tests/defenses/test_sentdp_sampling.py`` builds such a pair and computes
the old sampler's realised distribution exactly). It was only (epsilon,
delta)-SentDP with a delta veil never bounded; a rounding-error estimate
(not a proof) gives ``delta <= (1 + e^epsilon) E``, where E bounds how far
the realised probability of any set of outputs is from the exact one; the
worst-case float64 ``cumsum`` error on both CDF boundaries of up to m
candidates, plus the uniform's 2^-53 grid, gives E of about
``4 m^2 2^-53``, so delta is at most about 4e-8 at epsilon = 1 and
m = 5000, 2e-4 at epsilon = 10, and unbounded (above 1) from epsilon of
about 18. It is not kept as a fast variant because it is not faster (this
2-core machine, OMP_NUM_THREADS=1,
best of 3 passes over 200 synthetic documents of 8-30 sentences, d = 384,
tukey-min utilities with 5-13 levels and 2-5 candidates at the top, epsilon
in {1, 10, 30}, p in {10, 50}):
one draw costs 24-58 us exact against 21-60 us float64 (exact / float64
time 0.7-1.0 at m = 5000, 0.6-2.0 at m = 1000); a whole ``release`` at
m = 5000 cost 0.3-0.4 ms per document at p = 10 and 1.3-1.6 ms at p = 50
when it computed the depth document by document (the histogram path, before
:mod:`veil.defenses.sentdp.levels`), of which the exact draw was 3-14%; the
batched depth is faster, so the draw's share is now larger
(``benchmarks/sentdp_sampler.py`` measures it). With 31 levels and a single candidate at
the top the exact draw costs 45-85 us (float64: 20-80 us).

How it works (veil's own; the alternatives are below). The utilities take
few distinct values (at most k + 1 depths for a k-sentence document), so the
candidates fall into levels t = 0..T-1, level t holding ``c_t`` candidates
whose gap to the top utility gives ``gamma_t = epsilon * (u_max - u_t) / 2``,
an exact :class:`fractions.Fraction`. The mechanism is: pick level t with
probability ``c_t e^{-gamma_t} / W`` (``W = sum_s c_s e^{-gamma_s}``), then
one of its c_t candidates uniformly. The level is picked by inverting the
level CDF at a uniform real V whose binary digits are read lazily (64 bits,
then 32 more at a time): with integer bounds
``lo_t <= e^{-gamma_t} 2^P <= hi_t`` (:func:`exp_neg_bounds`: alternating
Taylor series with exact rational partial sums, directed rounding), level t
is returned only once the known digits of V prove ``A_t <= V W < A_{t+1}``
for every value the bounds allow (``A_t = sum_{s<t} c_s e^{-gamma_s}``);
otherwise more digits of V and a higher precision P are used. The result is
the same function of V as the exact inverse CDF, so its distribution is
exact. The boundaries ``A_t / W`` are irrational for 0 < t < T (e^{-q} is
transcendental for rational q > 0), so refinement ends with probability 1;
the first 64 bits decide unless V lands within about 3 m 2^-64 of a
boundary (the bounds' slack), probability below 1e-12 for m = 5000 and 30
levels. Random
integers come from ``secrets`` (the OS CSPRNG) by default, or from a seeded
numpy Generator (``Generator.bytes`` and ``Generator.integers``, exact
uniform integers) for experiments: the same code path either way.

Alternatives evaluated (opendp 0.16.0, on this machine):

* OpenDP's report-noisy-max (``dp.m.make_noisy_max``, a contrib
  constructor that needs ``dp.enable_features("contrib")``) samples exactly,
  but with ``output_measure=dp.max_divergence()`` (its pure-DP option) it
  adds exponential noise: that is permute-and-flip, a DIFFERENT distribution
  from the paper's exponential mechanism, from
  :meth:`DeepCandidate.probabilities` and from what the exact audit checks.
  Gumbel noise (the exponential mechanism, with scale ``2 / epsilon``) comes
  only with ``dp.zero_concentrated_divergence()``, whose privacy map states
  rho = epsilon^2 / 8, not epsilon-DP. It cannot be seeded (OS randomness
  only), so the seeded path would need a second sampler; it took 1.5 ms per
  draw at m = 1000 and 6-8 ms at m = 5000 (integer scores with many ties),
  over 100 times veil's; and it is a 47 MB wheel plus two packages.
* Rejection sampling (propose a candidate uniformly, accept with an exact
  Bernoulli(e^{-gamma_i}) built as in Canonne, Kamath and Steinke 2020) is
  exact too, but needs m / W proposals on average, up to about m = 5000 per
  document at epsilon = 10 when few candidates are deep; the level CDF needs
  one 64-bit read.
"""

from __future__ import annotations

import bisect
import math
import secrets
from fractions import Fraction
from typing import Protocol

import numpy as np

from veil.errors import InvalidParameterError

__all__ = ["BitSource", "OSBits", "GeneratorBits", "ExactSampler", "exp_neg_bounds"]

FIRST_BITS = 64  # digits of V read at once; they decide unless V is within ~3 m 2^-64 of a level boundary
MORE_BITS = 32  # digits (and bits of precision) added per refinement
_CACHE_LIMIT = 4096  # bounds kept per sampler (levels repeat across documents)


class BitSource(Protocol):
    """Uniform random integers: ``randbits(k)`` in [0, 2^k), ``randbelow(n)`` in [0, n)."""

    def randbits(self, k: int) -> int: ...

    def randbelow(self, n: int) -> int: ...


class OSBits:
    """Uniform integers from the OS CSPRNG (``secrets``, i.e. ``os.urandom``): the default for releases."""

    def randbits(self, k: int) -> int:
        return secrets.randbits(k)

    def randbelow(self, n: int) -> int:
        return secrets.randbelow(n)


class GeneratorBits:
    """Uniform integers from a numpy Generator (reproducible; for experiments and tests only)."""

    def __init__(self, generator: np.random.Generator) -> None:
        self.generator = generator

    def randbits(self, k: int) -> int:
        nbytes = (k + 7) // 8
        return int.from_bytes(self.generator.bytes(nbytes), "little") >> (8 * nbytes - k)

    def randbelow(self, n: int) -> int:
        if n <= 2**62:
            return int(self.generator.integers(0, n))  # numpy's bounded integers are exactly uniform
        k = n.bit_length()
        while True:  # rejection from k bits, for completeness
            x = self.randbits(k)
            if x < n:
                return x


def _series_bounds(f: Fraction, q: int) -> tuple[int, int]:
    """floor/ceil of e^{-f} 2^q for 0 <= f <= 1: two consecutive partial sums of the alternating series."""
    if f == 0:
        return 1 << q, 1 << q
    total, term, j = Fraction(1), Fraction(1), 0
    limit = Fraction(1, 1 << (q + 2))
    while True:  # |term_j| = f^j / j! is non-increasing for f <= 1: e^{-f} lies between consecutive sums
        j += 1
        term = -term * f / j
        previous, total = total, total + term
        if abs(term) < limit:
            break
    low, high = min(previous, total), max(previous, total)
    scale = 1 << q
    return math.floor(low * scale), math.ceil(high * scale)


def exp_neg_bounds(gamma: Fraction, precision: int) -> tuple[int, int]:
    """Integers ``lo <= e^{-gamma} 2^precision <= hi`` for a rational ``gamma >= 0`` (hi - lo is a few units).

    ``e^{-gamma} = (e^{-1})^n e^{-f}`` with ``n = floor(gamma)``: both factors
    are bracketed by exact rational partial sums of their alternating Taylor
    series, and the product is rounded down (lower bound) and up (upper
    bound) at every step, with guard bits. When ``e^{-gamma} < 2^-precision``
    is certain (``n >= precision``, as ``e^{-1} < 1/2``) the bounds are 0 and 1.
    """
    if not isinstance(gamma, Fraction) or gamma < 0:
        raise InvalidParameterError(f"gamma must be a Fraction >= 0, got {gamma!r}")
    n = math.floor(gamma)
    if n >= precision:
        return 0, 1
    f = gamma - n
    q = precision + 2 * n.bit_length() + 32  # guard bits: n directed roundings lose at most n units
    low, high = _series_bounds(f, q)
    if n:
        low1, high1 = _series_bounds(Fraction(1), q)
        for _ in range(n):
            low = (low * low1) >> q
            high = -((-high * high1) >> q)  # ceiling division
    shift = q - precision
    return low >> shift, -((-high) >> shift)


class ExactSampler:
    """Exact sampling of ``P(i) ∝ exp(epsilon * u_i / 2)`` (see the module docstring).

    ``draw(utilities, bits)`` returns a candidate index in a few tens of
    microseconds at m = 1000-5000 (see the module docstring), mostly the O(m)
    numpy passes that group the candidates into levels. The bounds of
    each level's ``e^{-gamma}`` are cached per sampler (levels recur across
    documents).
    """

    def __init__(self, epsilon: float) -> None:
        if not isinstance(epsilon, float) or not math.isfinite(epsilon) or epsilon <= 0:
            raise InvalidParameterError(f"epsilon must be a finite float > 0, got {epsilon!r}")
        self.epsilon = epsilon
        self._epsilon = Fraction(epsilon)  # exact: a float is a dyadic rational
        # bounds per (level, precision); a level is an int s (utility gap s / 2) or a Fraction gamma
        self._by_steps: dict[tuple[int, int], tuple[int, int]] = {}
        self._by_gamma: dict[tuple[Fraction, int], tuple[int, int]] = {}

    def gamma(self, level: int | Fraction) -> Fraction:
        """``epsilon * (u_max - u) / 2`` of a level: an int s is the utility gap s / 2, a Fraction is gamma itself."""
        return self._epsilon * level / 4 if isinstance(level, int) else level

    def bounds(self, level: int | Fraction, precision: int) -> tuple[int, int]:
        """:func:`exp_neg_bounds` of the level's gamma, cached."""
        cache = self._by_steps if isinstance(level, int) else self._by_gamma
        key = (level, precision)
        out = cache.get(key)
        if out is None:
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()
            out = cache[key] = exp_neg_bounds(self.gamma(level), precision)
        return out

    def group(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[int], list[int | Fraction]]:
        """Candidates grouped by utility, from the top down: (key per candidate, level keys, counts, levels).

        The level of ``levels[t]`` holds the candidates with ``keys ==
        present[t]``. Utilities on the 1/2 grid (both depths) give int levels
        (the gap to the top in halves); any other finite floats give
        Fraction gammas (exact, via ``np.unique``).
        """
        top = float(u.max())
        twice = 2.0 * u
        if np.all(twice == np.rint(twice)) and float(np.abs(twice).max()) < 2.0**52:
            steps = (2.0 * top - twice).astype(np.int64)  # exact: integers below 2^53
            if int(steps.max()) < 1 << 20:
                counts = np.bincount(steps)
                present = np.flatnonzero(counts)
                return steps, present, counts[present].tolist(), present.tolist()
        values, inverse, counts = np.unique(u, return_inverse=True, return_counts=True)
        order = np.arange(len(values))[::-1]  # from the top utility down
        top_q = Fraction(top)
        gammas: list[int | Fraction] = [self._epsilon * (top_q - Fraction(float(values[i]))) / 2 for i in order]
        return inverse.astype(np.int64).ravel(), order, [int(counts[i]) for i in order], gammas

    def select_level(self, counts: list[int], levels: list[int | Fraction], bits: BitSource) -> int:
        """The level t with probability ``c_t e^{-gamma_t} / sum_s c_s e^{-gamma_s}``, exactly."""
        n_levels = len(counts)
        if n_levels == 1:
            return 0
        precision, nbits = FIRST_BITS, FIRST_BITS
        v = bits.randbits(FIRST_BITS)  # V in [v / 2^nbits, (v + 1) / 2^nbits)
        while True:
            a_lo, a_hi = [0], [0]  # A_t * 2^precision bracketed; A_0 = 0 exactly
            lo_sum = hi_sum = 0
            for c, level in zip(counts, levels):
                lo, hi = self.bounds(level, precision)
                lo_sum += c * lo
                hi_sum += c * hi
                a_lo.append(lo_sum)
                a_hi.append(hi_sum)
            # largest t with V W >= A_t certain: A_t^hi 2^nbits <= v W^lo (a prefix of t, as A_t increases)
            t = bisect.bisect_right(a_hi, (v * lo_sum) >> nbits, 0, n_levels) - 1
            # V W < A_{t+1} certain: (v + 1) W^hi <= A_{t+1}^lo 2^nbits (always true for the last level: V < 1)
            if t == n_levels - 1 or (v + 1) * hi_sum <= a_lo[t + 1] << nbits:
                return t
            v = (v << MORE_BITS) | bits.randbits(MORE_BITS)
            nbits += MORE_BITS
            precision += MORE_BITS

    def draw(self, utilities: np.ndarray, bits: BitSource) -> int:
        """One candidate index from the exponential mechanism over ``utilities`` (finite float64, (m,))."""
        u = np.asarray(utilities, dtype=np.float64)
        if u.ndim != 1 or u.size == 0 or not np.isfinite(u).all():
            raise InvalidParameterError("utilities must be a non-empty 1-D array of finite numbers")
        keys, present, counts, levels = self.group(u)
        t = self.select_level(counts, levels, bits)
        r = bits.randbelow(counts[t])
        return int(np.flatnonzero(keys == present[t])[r])

