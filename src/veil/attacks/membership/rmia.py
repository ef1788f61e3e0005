"""The robust membership inference attack, RMIA (Zarifzadeh, Liu, Mao and Shokri 2024, "Low-Cost High-Power
Membership Inference Attacks", ICML, Sec. 3, offline variant of Sec. 4 / Appendix B.2), with 1-2 reference models.

For a candidate x and population samples z (public, disjoint from the candidates and from the reference models'
training data), with p(. | theta) the released model's probability of the true label:

    LR(x, z) = [p(x | theta) / p(x)] / [p(z | theta) / p(z)],   score(x) = Pr_z[ LR(x, z) >= gamma ],

where p(x) is the reference models' average of p(x | theta_ref). The reference models are OUT for every candidate
(trained with the target's recipe on random subsets of the rest of the population, offline), so p(x) is corrected
with the linear approximation of Appendix B.2: p(x) = ((1 + a) p_OUT(x) + (1 - a)) / 2, the same for z.

Departures: offline only (references never hold candidates); ``a`` is a parameter (default 0.3, not tuned on the
references as the paper does); ``gamma`` = 1 by default; one query per example (no augmentations).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from veil.attacks.membership.scoring import MembershipScores
from veil.attacks.membership.shadows import MembershipAttack, check_population, log_true_prob, train_shadow

__all__ = ["RMIA", "rmia_scores"]


class RMIA(MembershipAttack):
    """RMIA offline (module docstring).

    Parameters (keyword-only): ``population``: public (X, y), disjoint from the candidates; ``references`` (1 or
    2, default 2): reference models; ``z_samples`` (default 1000): population samples z, held out of the
    references' training data; ``a`` in [0, 1] (default 0.3); ``gamma`` > 0 (default 1); ``rng``: the attacker's
    own choices (None: OS entropy).
    """

    name = "membership-rmia"
    citation = ("Zarifzadeh et al. 2024, Low-Cost High-Power Membership Inference Attacks (ICML), Sec. 3 and "
                "Appendix B.2 (offline RMIA)")

    def __init__(self, *, population: Any, references: int = 2, z_samples: int = 1000, a: float = 0.3,
                 gamma: float = 1.0, queries: int = 1, rng: Any = None) -> None:
        import math

        from veil.random import as_generator
        from veil.validation import check_int, check_real, check_rng

        self.population = check_population(population)
        self.references = check_int("references", references, minimum=1)
        if self.references > 2:
            from veil.errors import InvalidParameterError

            raise InvalidParameterError(f"references={references}: veil's RMIA is the low-cost attack with 1 or 2 "
                                        "reference models; use LiRA (membership-lira) for many shadow models")
        self.z_samples = check_int("z_samples", z_samples, minimum=1)
        self.a = check_real("a", a, low=0.0, high=1.0)
        self.gamma = check_real("gamma", gamma, low=0.0, high=math.inf, low_open=True, high_open=True)
        self._set_queries(queries)
        check_rng(rng)
        self._rng_given = rng
        self._gen = as_generator(rng)

    @classmethod
    def for_bench(cls, resources: Any) -> "RMIA":
        return cls(population=resources.population, references=2, rng=resources.seed)

    def config(self) -> dict[str, Any]:
        from veil.attacks.base import rng_description

        return {**super().config(), "references": self.references, "z_samples": self.z_samples, "a": self.a,
                "gamma": self.gamma, "population": len(self.population[0]), "rng": rng_description(self._rng_given)}

    def run(self, observation: Any) -> MembershipScores:
        access = self._access(observation)
        start = time.perf_counter()
        Xp, yp = self.population
        order = self._gen.permutation(len(Xp))
        nz = min(self.z_samples, len(Xp) - int(access.n_train))  # the rest trains the references
        if nz < 1:
            from veil.errors import InvalidParameterError

            raise InvalidParameterError(f"RMIA needs more population examples than the target's {access.n_train} "
                                        f"training examples (for z samples beside the references'), got {len(Xp)}")
        z, rest = order[:nz], order[nz:]
        p_x = np.exp(log_true_prob(self._ask(access.logits), access.y))
        p_z = np.exp(log_true_prob(self._ask(access.logits, Xp[z]), yp[z]))
        ref_x, ref_z = [], []
        for _ in range(self.references):
            pick = rest[self._subset(self._gen, len(rest), int(access.n_train), "population (less the z samples)")]
            ref = train_shadow(dict(access.recipe), Xp[pick], yp[pick], int(self._gen.integers(0, 2**63 - 1)))
            ref_x.append(np.exp(log_true_prob(self._ask(ref.logits, access.X), access.y)))
            ref_z.append(np.exp(log_true_prob(self._ask(ref.logits, Xp[z]), yp[z])))
        scores = rmia_scores(p_x, np.mean(ref_x, axis=0), p_z, np.mean(ref_z, axis=0), a=self.a, gamma=self.gamma)
        return MembershipScores(attack=self.name, scores=scores, config={**self.config(), "z_used": int(nz)},
                                defense=access.recipe, wall_time_s=time.perf_counter() - start)


def rmia_scores(p_x: np.ndarray, ref_x: np.ndarray, p_z: np.ndarray, ref_z: np.ndarray, *, a: float,
                gamma: float) -> np.ndarray:
    """score(x) = fraction of z with LR(x, z) >= gamma (module docstring); p_*: the target's probabilities of the
    true label, ref_*: the references' average (OUT)."""
    ratio_x = p_x / (((1 + a) * ref_x + (1 - a)) / 2)
    ratio_z = np.sort(p_z / (((1 + a) * ref_z + (1 - a)) / 2))
    # LR(x, z) >= gamma  <=>  ratio_z <= ratio_x / gamma
    return np.searchsorted(ratio_z, ratio_x / gamma, side="right") / len(ratio_z)
