"""The likelihood-ratio attack, LiRA (Carlini, Chien, Nasr, Song, Terzis and Tramer 2022, "Membership Inference
Attacks From First Principles", IEEE S&P, Sec. IV, Algorithm 1), online and offline.

The attacker trains ``shadows`` models with the target's public recipe and, for each candidate, fits Gaussians to
the shadows' logit-scaled confidence phi = log(p_y / (1 - p_y)) on it (Sec. IV-C):

* online: every shadow trains on a random half of the candidates (each candidate is IN for the shadows whose half
  held it, OUT for the others), topped up from the population to the target's training-set size; the score is
  log N(phi; mu_in, sigma_in^2) - log N(phi; mu_out, sigma_out^2);
* offline: every shadow trains on a random subset of the population only (every candidate OUT); the score is the
  one-sided (phi - mu_out) / sigma_out, ranked like the paper's 1 - Pr[Z > phi].

Departures: one query per candidate by default (no augmentations, Sec. IV-C's "multiple queries"; ``queries``
repeats the same query of a model that answers with fresh randomness and averages the logits); the variance is global
(one sigma_in, one sigma_out pooled over candidates) by default, as the paper recommends below 64 shadows (Sec.
VI-A), per candidate with ``variance="per-example"``; a candidate that no online shadow held IN (or OUT) is scored
offline (or by its IN fit alone); shadows reuse the target's initial weights when its recipe fixes them
(public, per the recipe).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from veil.attacks.membership.scoring import MembershipScores
from veil.attacks.membership.shadows import MembershipAttack, check_population, logit_confidence, train_shadow
from veil.errors import InvalidParameterError

__all__ = ["LiRA", "VARIANCES"]

VARIANCES = ("global", "per-example")
_EPS = 1e-6


class LiRA(MembershipAttack):
    """LiRA with ``shadows`` shadow models (module docstring).

    Parameters (keyword-only): ``population``: public (X, y) from the target's distribution, disjoint from the
    candidates; ``shadows`` (>= 2); ``online`` (default True); ``variance``: ``"global"`` or ``"per-example"``;
    ``rng``: an int seed or Generator for the attacker's own choices (shadow data and shadow lots), None = OS
    entropy.
    """

    name = "membership-lira"
    citation = ("Carlini et al. 2022, Membership Inference Attacks From First Principles (IEEE S&P), Sec. IV, "
                "Algorithm 1 (online and offline LiRA)")

    def __init__(self, *, population: Any, shadows: int = 16, online: bool = True, variance: str = "global",
                 queries: int = 1, rng: Any = None) -> None:
        from veil.random import as_generator
        from veil.validation import check_choice, check_int, check_rng

        self.population = check_population(population)
        self.shadows = check_int("shadows", shadows, minimum=2, hint="; LiRA fits a Gaussian per candidate")
        if not isinstance(online, bool):
            raise InvalidParameterError(f"online must be True or False, got {online!r}")
        self.online = online
        self.variance = check_choice("variance", variance, VARIANCES)
        self._set_queries(queries)
        check_rng(rng)
        self._rng_given = rng
        self._gen = as_generator(rng)

    @classmethod
    def for_bench(cls, resources: Any) -> "LiRA":
        return cls(population=resources.population, shadows=resources.shadows, online=True, rng=resources.seed)

    def config(self) -> dict[str, Any]:
        from veil.attacks.base import rng_description

        return {**super().config(), "shadows": self.shadows, "online": self.online, "variance": self.variance,
                "population": len(self.population[0]), "rng": rng_description(self._rng_given)}

    def _shadow_data(self, access: Any) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per shadow: its training X, y and which candidates it holds (IN)."""
        Xp, yp = self.population
        m, n = len(access), int(access.n_train)
        out = []
        for k in range(self.shadows):
            inside = np.zeros(m, dtype=bool)
            if self.online:
                half = min(m // 2, n)
                inside[self._gen.permutation(m)[:half]] = True
                fill = self._subset(self._gen, len(Xp), n - half, "population") if n > half else np.zeros(0, int)
                X = np.concatenate([access.X[inside], Xp[fill]])
                y = np.concatenate([access.y[inside], yp[fill]])
            else:
                pick = self._subset(self._gen, len(Xp), n, "population")
                X, y = Xp[pick], yp[pick]
            out.append((X, y, inside))
        return out

    def run(self, observation: Any) -> MembershipScores:
        access = self._access(observation)
        start = time.perf_counter()
        target = logit_confidence(self._ask(access.logits), access.y)
        phis, ins = [], []
        for X, y, inside in self._shadow_data(access):
            seed = int(self._gen.integers(0, 2**63 - 1))
            shadow = train_shadow(dict(access.recipe), X, y, seed)
            phis.append(logit_confidence(self._ask(shadow.logits, access.X), access.y))
            ins.append(inside)
        scores = lira_scores(target, np.array(phis), np.array(ins), variance=self.variance)
        return MembershipScores(attack=self.name, scores=scores, config=self.config(), defense=access.recipe,
                                wall_time_s=time.perf_counter() - start)


def _fit(phi: np.ndarray, mask: np.ndarray, variance: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per candidate: mean and std of ``phi`` (shadows, m) over the shadows where ``mask``; and how many."""
    count = mask.sum(axis=0)
    safe = np.maximum(count, 1)
    mu = np.where(mask, phi, 0.0).sum(axis=0) / safe
    resid = np.where(mask, phi - mu, 0.0)
    if variance == "global":
        dof = max(int(count.sum() - (count > 0).sum()), 1)
        sd = np.full(phi.shape[1], np.sqrt((resid ** 2).sum() / dof))
    else:
        sd = np.sqrt((resid ** 2).sum(axis=0) / np.maximum(count - 1, 1))
    return mu, np.maximum(sd, _EPS), count


def lira_scores(target: np.ndarray, phis: np.ndarray, ins: np.ndarray, *, variance: str = "global") -> np.ndarray:
    """LiRA's score per candidate from the target's phi (m,), the shadows' phis (shadows, m) and which shadows
    held each candidate (shadows, m) (all False: offline)."""
    from scipy.stats import norm

    mu_out, sd_out, n_out = _fit(phis, ~ins, variance)
    if not ins.any():
        return (target - mu_out) / sd_out
    mu_in, sd_in, n_in = _fit(phis, ins, variance)
    both = norm.logpdf(target, mu_in, sd_in) - norm.logpdf(target, mu_out, sd_out)
    only_out = (target - mu_out) / sd_out
    only_in = norm.logpdf(target, mu_in, sd_in)
    return np.where((n_in > 0) & (n_out > 0), both, np.where(n_in > 0, only_in, only_out))
