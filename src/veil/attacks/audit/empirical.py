"""Empirical lower bounds on epsilon: a distinguishing game scored with Clopper-Pearson confidence.

Jagielski, Ullman and Oprea, "Auditing Differentially Private Machine Learning: How Private is
Private SGD?" (NeurIPS 2020), Sec. 3; Nasr, Song, Thakurta, Papernot and Carlini, "Adversary
Instantiation: Lower Bounds for Differentially Private Machine Learning" (IEEE S&P 2021), Sec. 3.

The bound. If M is epsilon-DP for neighbours x, x', every set R of outputs has
``P[M(x') in R] <= e^eps P[M(x) in R]`` and ``P[M(x) not in R] <= e^eps P[M(x') not in R]``. A test
that answers "x'" on R has FPR = P[M(x) in R] and FNR = P[M(x') not in R], so
``eps >= log((1 - FNR) / FPR)`` and ``eps >= log((1 - FPR) / FNR)``. The game estimates both rates
from n independent runs on each input and replaces each by its one-sided Clopper-Pearson upper
limit at level ``1 - alpha/2``:

    eps_lb = max(0, log((1 - FNR_hi) / FPR_hi), log((1 - FPR_hi) / FNR_hi)).

Both limits hold together with probability at least ``1 - alpha`` (union bound), and then
``eps_lb <= eps``: for an epsilon-DP mechanism ``P[eps_lb > eps] <= alpha``, so a bound above the
stated epsilon is a violation shown at confidence ``1 - alpha``. It is a LOWER bound: a small value
says only that this game found no more, never that the mechanism is private.

The game (:class:`DistinguishingGame`), in three groups of independent runs of the mechanism on
each input of each candidate pair (x, x'):

* fit runs: learned statistics (histograms of the outputs) are fitted on them;
* selection runs: the pair, the statistic, its orientation and the threshold are chosen on them,
  maximising the bound each test gets on these runs (at their size, the same confidence);
* scoring runs (fresh, of the chosen pair only): the one chosen test is applied, and only these
  runs enter eps_lb. The test is fixed before they are drawn, so no correction for the selection
  is needed (the selection only decides how strong the test is, not whether the bound is valid).

:mod:`veil.attacks.audit.pairs` builds the pairs and statistics for DeepCandidate,
truncation and word-level metric DP; this module knows nothing about them.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from veil.attacks.base import _jsonable
from veil.validation import check_int, check_real
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError

__all__ = ["clopper_pearson_upper", "clopper_pearson_lower", "epsilon_lower_bound", "EpsilonBound",
           "predicted_bounds", "Statistic", "lookup_statistic", "projection_statistic", "histogram_statistic",
           "GamePair", "GameResult", "DistinguishingGame"]

Outputs = Any  # what a sampler returns for n runs: an (n,) or (n, d) array, or a list of n objects
Scorer = Callable[[Outputs], np.ndarray]


# ---------------------------------------------------------------- Clopper-Pearson and the bound
def clopper_pearson_upper(k: Any, n: Any, alpha: float) -> np.ndarray | float:
    """One-sided Clopper-Pearson upper limit at level ``1 - alpha`` for k successes in n trials.

    The p with ``P[Binomial(n, p) <= k] = alpha`` (1 when k = n). ``k`` may be fractional (a rate
    times a planned n, for :func:`predicted_bounds`); arrays broadcast.
    """
    from scipy.stats import beta

    k, n = np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64)
    full = k >= n
    out = beta.ppf(1.0 - alpha, k + 1.0, np.where(full, 1.0, n - k))
    out = np.where(full, 1.0, out)
    return float(out) if out.ndim == 0 else out


def clopper_pearson_lower(k: Any, n: Any, alpha: float) -> np.ndarray | float:
    """One-sided Clopper-Pearson lower limit at level ``1 - alpha`` (0 when k = 0)."""
    from scipy.stats import beta

    k, n = np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64)
    none = k <= 0
    out = np.where(none, 0.0, beta.ppf(alpha, np.where(none, 1.0, k), n - k + 1.0))
    return float(out) if out.ndim == 0 else out


def _raw_bounds(fp: Any, n_x: Any, fn: Any, n_x2: Any, alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Both directions' log terms (unfloored) and the two upper limits, each limit at ``1 - alpha/2``."""
    fpr_hi = np.asarray(clopper_pearson_upper(fp, n_x, alpha / 2.0))
    fnr_hi = np.asarray(clopper_pearson_upper(fn, n_x2, alpha / 2.0))
    with np.errstate(divide="ignore"):
        flag_x2 = np.log1p(-np.minimum(fnr_hi, 1.0)) - np.log(fpr_hi)  # log((1 - FNR_hi) / FPR_hi)
        flag_x = np.log1p(-np.minimum(fpr_hi, 1.0)) - np.log(fnr_hi)   # log((1 - FPR_hi) / FNR_hi)
    return np.stack([flag_x2, flag_x]), fpr_hi, fnr_hi


@dataclass(frozen=True)
class EpsilonBound:
    """eps_lb from the counts of one test (see the module docstring), at confidence ``1 - alpha``.

    ``direction`` names the inequality that gave the bound; ``point_estimate`` is the same
    expression with the observed rates (no confidence; None when an observed rate is 0, where it
    is infinite), for context only.
    """

    epsilon: float
    false_positives: int
    false_negatives: int
    n_x: int
    n_x2: int
    alpha: float
    fpr_upper: float
    fnr_upper: float
    direction: str
    point_estimate: float | None

    @property
    def confidence(self) -> float:
        return 1.0 - self.alpha

    @property
    def fpr(self) -> float:
        return self.false_positives / self.n_x

    @property
    def fnr(self) -> float:
        return self.false_negatives / self.n_x2

    def to_dict(self) -> dict[str, Any]:
        return {"epsilon_lower_bound": self.epsilon, "confidence": self.confidence, "alpha": self.alpha,
                "false_positives": self.false_positives, "false_negatives": self.false_negatives,
                "n_x": self.n_x, "n_x2": self.n_x2, "fpr": self.fpr, "fnr": self.fnr,
                "fpr_upper": self.fpr_upper, "fnr_upper": self.fnr_upper, "direction": self.direction,
                "point_estimate": self.point_estimate}


def _check_alpha(alpha: Any) -> float:
    return check_real("alpha", alpha, low=0.0, high=1.0, low_open=True, high_open=True,
                      hint="; e.g. 0.05 for 95% confidence")


def epsilon_lower_bound(false_positives: int, n_x: int, false_negatives: int, n_x2: int, *,
                        alpha: float = 0.05) -> EpsilonBound:
    """eps_lb of a test with these error counts over ``n_x`` runs on x and ``n_x2`` runs on x'."""
    n_x, n_x2 = check_int("n_x", n_x, minimum=1), check_int("n_x2", n_x2, minimum=1)
    fp = check_int("false_positives", false_positives, minimum=0, maximum=n_x)
    fn = check_int("false_negatives", false_negatives, minimum=0, maximum=n_x2)
    alpha = _check_alpha(alpha)
    terms, fpr_hi, fnr_hi = _raw_bounds(fp, n_x, fn, n_x2, alpha)
    which = int(np.argmax(terms))
    fpr, fnr = fp / n_x, fn / n_x2
    with np.errstate(divide="ignore"):
        point = max(float(np.log1p(-fnr) - np.log(fpr)) if fnr < 1 else -np.inf,
                    float(np.log1p(-fpr) - np.log(fnr)) if fpr < 1 else -np.inf)
    point = None if np.isinf(point) and point > 0 else max(0.0, point)
    return EpsilonBound(epsilon=max(0.0, float(terms[which])), false_positives=fp, false_negatives=fn, n_x=n_x,
                        n_x2=n_x2, alpha=alpha, fpr_upper=float(fpr_hi), fnr_upper=float(fnr_hi),
                        direction=("P[test says x' | x'] <= e^eps P[test says x' | x]" if which == 0 else
                                   "P[test says x | x] <= e^eps P[test says x | x']"),
                        point_estimate=point)


def predicted_bounds(fpr: Any, tpr: Any, n: int, alpha: float) -> np.ndarray:
    """The (floored) eps_lb that tests with these rates would get from ``n`` scoring runs per input.

    Fractional counts ``rate * n`` go into the Clopper-Pearson limits: a planning number, used to
    choose a test and to rank candidate pairs, never as a result.
    """
    fpr, tpr = np.asarray(fpr, dtype=np.float64), np.asarray(tpr, dtype=np.float64)
    terms, _, _ = _raw_bounds(fpr * n, n, (1.0 - tpr) * n, n, alpha)
    return np.maximum(terms.max(axis=0), 0.0)


def _best_threshold(s_x: np.ndarray, s_x2: np.ndarray, alpha: float) -> tuple[float, float]:
    """The threshold t of the test "x' when score >= t" with the largest bound on these (selection) runs.

    The bound is computed at the selection runs' own size: a region seen rarely in them gets
    the wide interval it deserves (plugging its observed rates into the larger scoring size
    instead would favour rare regions whose rates are mostly noise).
    """
    t = np.unique(np.concatenate([s_x, s_x2]))
    fp = len(s_x) - np.searchsorted(np.sort(s_x), t, side="left")
    fn = np.searchsorted(np.sort(s_x2), t, side="left")
    terms, _, _ = _raw_bounds(fp, len(s_x), fn, len(s_x2), alpha)
    b = np.maximum(terms.max(axis=0), 0.0)
    i = int(np.argmax(b))
    return float(t[i]), float(b[i])


# ---------------------------------------------------------------- statistics
@dataclass(frozen=True)
class Statistic:
    """A function of the released output that the test thresholds (higher: more like x').

    Fixed statistics have ``score`` (outputs -> (n,) floats); learned ones have ``fit``
    ((outputs on x, outputs on x') -> a scorer), called on the fit runs only.
    """

    name: str
    score: Scorer | None = None
    fit: Callable[[Outputs, Outputs], Scorer] | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if (self.score is None) == (self.fit is None):
            raise InvalidParameterError(f"statistic {self.name!r}: give exactly one of score= (fixed) or fit= "
                                        f"(learned)")

    @property
    def learned(self) -> bool:
        return self.fit is not None


def lookup_statistic(name: str, table: np.ndarray, description: str = "") -> Statistic:
    """For integer outputs (e.g. DeepCandidate's candidate index): ``table[output]``."""
    table = np.asarray(table, dtype=np.float64)
    return Statistic(name, score=lambda out: table[np.asarray(out, dtype=np.int64)], description=description)


def projection_statistic(name: str, direction: np.ndarray, description: str = "") -> Statistic:
    """For vector outputs (n, d): their projection on ``direction`` (d,)."""
    direction = np.asarray(direction, dtype=np.float64)
    return Statistic(name, score=lambda out: np.asarray(out, dtype=np.float64) @ direction, description=description)


def histogram_statistic(name: str = "histogram", *, key: Callable[[Any], tuple[Hashable, ...]] | None = None,
                        smoothing: float = 0.5, description: str = "") -> Statistic:
    """Learned: the empirical log-likelihood ratio of the outputs, from their counts on the fit runs.

    ``key`` maps one output to a tuple of features, each counted separately (a naive-Bayes sum
    of per-feature log ratios: exact when the features are independent given the input, as the
    words of a metric-DP rewrite are); by default the output itself is the one feature. Counts
    are smoothed by ``smoothing`` (outputs never seen score 0).
    """
    smoothing = check_real("smoothing", smoothing, low=0.0, high=np.inf, low_open=True, high_open=True)
    features = key or (lambda o: (o,))

    def rows(out: Outputs) -> list[tuple[Hashable, ...]]:
        items = out.tolist() if isinstance(out, np.ndarray) else list(out)
        return [tuple(features(o)) for o in items]

    def fit(out_x: Outputs, out_x2: Outputs) -> Scorer:
        c_x = [Counter(col) for col in zip(*rows(out_x))]
        c_x2 = [Counter(col) for col in zip(*rows(out_x2))]
        n_x, n_x2 = len(out_x), len(out_x2)
        logs = [{f: float(np.log((b.get(f, 0) + smoothing) / (n_x2 + smoothing))
                          - np.log((a.get(f, 0) + smoothing) / (n_x + smoothing))) for f in {*a, *b}}
                for a, b in zip(c_x, c_x2)]

        def score(out: Outputs) -> np.ndarray:
            return np.asarray([sum(table.get(f, 0.0) for table, f in zip(logs, r)) for r in rows(out)],
                              dtype=np.float64)
        return score

    return Statistic(name, fit=fit, description=description)


# ---------------------------------------------------------------- the game
@dataclass(frozen=True)
class GamePair:
    """Neighbouring inputs x, x' as samplers: ``sample_x(n)`` runs the mechanism n times on x."""

    name: str
    sample_x: Callable[[int], Outputs]
    sample_x2: Callable[[int], Outputs]
    statistics: tuple[Statistic, ...]
    info: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "statistics", tuple(self.statistics))
        object.__setattr__(self, "info", MappingProxyType(dict(self.info)))
        if not self.statistics or not all(isinstance(s, Statistic) for s in self.statistics):
            raise InvalidTypeError(f"pair {self.name!r}: statistics must be a non-empty sequence of Statistic")


@dataclass(frozen=True)
class GameResult:
    """The chosen test and its bound on fresh scoring runs; ``selection`` lists every test considered.

    ``selection_bound`` is the chosen test's bound on the selection runs (optimistic: the best of
    many tests).
    """

    bound: EpsilonBound
    pair: str
    pair_index: int
    statistic: str
    orientation: int
    threshold: float
    selection_bound: float
    selection: tuple[Mapping[str, Any], ...]
    trials: int
    selection_trials: int
    fit_trials: int
    wall_time_s: float
    info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def epsilon_lower_bound(self) -> float:
        return self.bound.epsilon

    def to_dict(self) -> dict[str, Any]:
        return {**self.bound.to_dict(), "pair": self.pair, "pair_index": self.pair_index,
                "statistic": self.statistic, "orientation": self.orientation, "threshold": self.threshold,
                "test": f"answer x' when {'' if self.orientation > 0 else '-'}{self.statistic} >= "
                        f"{self.threshold:.6g}",
                "selection_bound": self.selection_bound, "trials": self.trials,
                "selection_trials": self.selection_trials, "fit_trials": self.fit_trials,
                "wall_time_s": self.wall_time_s, "selection": [dict(r) for r in self.selection],
                "info": _jsonable(dict(self.info))}


def _length(out: Outputs) -> int:
    return int(out.shape[0]) if isinstance(out, np.ndarray) else len(out)


class DistinguishingGame:
    """Run the mechanism on neighbouring inputs and lower-bound its epsilon (see the module docstring).

    Parameters (keyword-only)
    -------------------------
    pairs: candidate :class:`GamePair` s (the selection runs choose one).
    trials: scoring runs per input (they alone set the confidence interval).
    selection_trials: runs per input of EVERY pair for the choice (default: ``trials``); when some
        statistic is learned, ``fit_fraction`` of them fit it and the rest choose.
    alpha: 1 - confidence; each Clopper-Pearson limit is taken at ``1 - alpha/2``.
    chunk: runs drawn per sampler call (bounds the memory of vector outputs).
    """

    def __init__(self, pairs: Sequence[GamePair], *, trials: int, selection_trials: int | None = None,
                 alpha: float = 0.05, fit_fraction: float = 0.5, chunk: int = 4096) -> None:
        if isinstance(pairs, GamePair) or not isinstance(pairs, Sequence) or not pairs \
                or not all(isinstance(p, GamePair) for p in pairs):
            raise InvalidTypeError("pairs must be a non-empty sequence of GamePair")
        self.pairs = tuple(pairs)
        self.trials = check_int("trials", trials, minimum=10)
        self.selection_trials = check_int("selection_trials", trials if selection_trials is None
                                          else selection_trials, minimum=10)
        self.alpha = _check_alpha(alpha)
        self.fit_fraction = check_real("fit_fraction", fit_fraction, low=0.0, high=1.0, low_open=True,
                                       high_open=True)
        self.chunk = check_int("chunk", chunk, minimum=1)

    def _draw(self, sampler: Callable[[int], Outputs], n: int, scorers: Sequence[Scorer]) -> list[np.ndarray]:
        """Scores of ``n`` fresh runs under every scorer (the outputs themselves are not kept)."""
        parts: list[list[np.ndarray]] = [[] for _ in scorers]
        for start in range(0, n, self.chunk):
            size = min(self.chunk, n - start)
            out = sampler(size)
            if _length(out) != size:
                raise DataFormatError(f"a sampler asked for {size} runs returned {_length(out)}")
            for part, scorer in zip(parts, scorers):
                part.append(np.asarray(scorer(out), dtype=np.float64).reshape(size))
        return [np.concatenate(p) for p in parts]

    def run(self) -> GameResult:
        start = time.perf_counter()
        learned = any(s.learned for p in self.pairs for s in p.statistics)
        n_fit = int(round(self.fit_fraction * self.selection_trials)) if learned else 0
        n_choose = self.selection_trials - n_fit
        if n_choose < 10 or (learned and n_fit < 10):
            raise InvalidParameterError(f"selection_trials={self.selection_trials} leaves {n_fit} fit and "
                                        f"{n_choose} selection runs; give at least 20 (10 each)")
        best: tuple[float, int, int, int, float] | None = None
        rows: list[dict[str, Any]] = []
        scorers_by_pair: list[list[Scorer]] = []
        for ip, pair in enumerate(self.pairs):
            fit_x = fit_x2 = None
            if n_fit:
                fit_x, fit_x2 = pair.sample_x(n_fit), pair.sample_x2(n_fit)
            scorers = [s.fit(fit_x, fit_x2) if s.learned else s.score for s in pair.statistics]
            scorers_by_pair.append(scorers)
            s_x = self._draw(pair.sample_x, n_choose, scorers)
            s_x2 = self._draw(pair.sample_x2, n_choose, scorers)
            for js, stat in enumerate(pair.statistics):
                for sign in (1, -1):
                    t, pred = _best_threshold(sign * s_x[js], sign * s_x2[js], self.alpha)
                    rows.append({"pair": pair.name, "statistic": stat.name, "orientation": sign, "threshold": t,
                                 "bound": pred})
                    if best is None or pred > best[0]:
                        best = (pred, ip, js, sign, t)
        pred, ip, js, sign, t = best
        pair, scorer = self.pairs[ip], scorers_by_pair[ip][js]
        (s_x,), (s_x2,) = self._draw(pair.sample_x, self.trials, [scorer]), self._draw(pair.sample_x2, self.trials,
                                                                                       [scorer])
        fp = int(np.count_nonzero(sign * s_x >= t))
        fn = int(np.count_nonzero(sign * s_x2 < t))
        bound = epsilon_lower_bound(fp, self.trials, fn, self.trials, alpha=self.alpha)
        return GameResult(bound=bound, pair=pair.name, pair_index=ip, statistic=pair.statistics[js].name,
                          orientation=sign, threshold=t, selection_bound=pred, selection=tuple(rows),
                          trials=self.trials, selection_trials=self.selection_trials, fit_trials=n_fit,
                          wall_time_s=time.perf_counter() - start, info=pair.info)
