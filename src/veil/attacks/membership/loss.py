"""The loss-threshold attack (Yeom, Giacomelli, Fredrikson and Jha 2018, "Privacy Risk in Machine Learning:
Analyzing the Connection to Overfitting", CSF, Sec. 3.2): a candidate is called a member when the released model's
loss on it is low.

Departures: Yeom et al. threshold at the model's expected training loss; veil reports the whole ROC over every
threshold (AUC, TPR at low FPR), so no threshold is chosen. The score is minus the cross-entropy, log p_y.
"""

from __future__ import annotations

import time
from typing import Any

from veil.attacks.base import ThreatModel
from veil.attacks.membership.scoring import MembershipScores
from veil.attacks.membership.shadows import MembershipAttack, log_true_prob

__all__ = ["LossThreshold"]


class LossThreshold(MembershipAttack):
    """Score = -loss of the released model on each candidate (no shadow models, no population data)."""

    name = "membership-loss"
    citation = "Yeom et al. 2018, Privacy Risk in Machine Learning (CSF), Sec. 3.2: the loss-threshold adversary"
    threat = ThreatModel(observes="black-box queries of the released model (logits on the candidates) and the "
                                  "candidates with their labels", trains=False)

    def __init__(self, *, queries: int = 1) -> None:
        self._set_queries(queries)

    @classmethod
    def for_bench(cls, resources: Any) -> "LossThreshold":
        return cls()

    def run(self, observation: Any) -> MembershipScores:
        access = self._access(observation)
        start = time.perf_counter()
        scores = log_true_prob(self._ask(access.logits), access.y)
        return MembershipScores(attack=self.name, scores=scores, config=self.config(), defense=access.recipe,
                                wall_time_s=time.perf_counter() - start)
