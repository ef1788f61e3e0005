"""Membership inference against a released language model (Carlini et al. 2021; Yeom et al. 2018): was a
given text in its training set?

The attacker holds candidate texts and the model's black-box likelihood (:class:`~veil.attacks.generation.observe.
LMAccess`), and scores each candidate, higher meaning "member":

* ``lm-membership-loss``: minus the text's log-perplexity (a text the model was trained on tends to be likelier);
* ``lm-membership-zlib``: minus its log-perplexity over its zlib entropy in bits (Carlini et al.'s zlib ratio,
  :func:`veil.metrics.memorization.zlib_ratio`: likely for the model yet not merely easy to compress);
* ``lm-membership-reference``: the released model's log-perplexity against a reference model's, which the attacker
  trains the same way on public text only (no candidate among it): minus their difference. A text that is easy for
  any model of the domain is easy for the reference too, so what is left is what the private training added (the
  reference ratio of Carlini et al. 2021, Sec. 5; Mireshghallah et al. 2022's likelihood ratio; one reference model,
  the offline LiRA's simplest case).

The scores are a :class:`~veil.attacks.membership.scoring.MembershipScores`, scored like every other membership
attack of veil (:func:`~veil.attacks.membership.scoring.score_membership`: AUC and TPR at low FPR with bootstrap
intervals; :func:`~veil.attacks.membership.scoring.membership_test`: the one-sided Mann-Whitney test, exact when
members and non-members are a random split of one pool).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from veil.attacks.base import Attack, ThreatModel
from veil.errors import InvalidParameterError, InvalidTypeError

__all__ = ["LMMembership", "LMMembershipZlib", "LMMembershipReference", "METRICS"]

#: the scores, by attack name
METRICS = {"lm-membership-loss": "loss", "lm-membership-zlib": "zlib", "lm-membership-reference": "reference"}


class LMMembership(Attack):
    """Score each candidate text by the released model's likelihood (module docstring). ``candidates``: the texts
    whose membership is asked (the attacker's; the truth stays with the scorer)."""

    name = "lm-membership-loss"
    observes = "generative-model"
    bench_cell = "veil.bench.cells.generative_model:lm_membership_cell"
    citation = ("Yeom et al. 2018 (the loss attack) and Carlini et al. 2021, Extracting Training Data from Large "
                "Language Models (its perplexity and zlib metrics)")
    threat = ThreatModel(observes="the released model's likelihood of given texts (black-box scoring)",
                         needs=("candidate texts, some of them members",), knows_key=False, trains=False)

    def __init__(self, candidates: Any, *, batch_size: int = 64) -> None:
        from veil.validation import check_int

        out = list(candidates) if isinstance(candidates, (list, tuple)) else None
        if not out or not all(isinstance(t, str) and t.strip() for t in out):
            raise InvalidTypeError("candidates must be a non-empty list of non-empty texts")
        if len(out) < 2:
            raise InvalidParameterError("give at least two candidate texts (members and non-members)")
        self.candidates = tuple(out)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "metric": METRICS[self.name], "candidates": len(self.candidates)}

    def run(self, observation: Any) -> Any:
        from veil.attacks.generation.observe import LMAccess
        from veil.attacks.membership.scoring import MembershipScores
        from veil.metrics.memorization import zlib_ratio

        if not isinstance(observation, LMAccess):
            raise InvalidTypeError(f"{self.name} observes a released language model (LMAccess.of(model)), not "
                                   f"{type(observation).__name__}")
        start = time.perf_counter()
        texts = list(self.candidates)
        logppl = np.concatenate([observation.scores(texts[i:i + self.batch_size])
                                 for i in range(0, len(texts), self.batch_size)])
        if METRICS[self.name] == "zlib":
            scores = -np.array([zlib_ratio(float(s), t) for s, t in zip(logppl, texts)])
        elif METRICS[self.name] == "reference":
            ref = np.concatenate([self.reference.scores(texts[i:i + self.batch_size])
                                  for i in range(0, len(texts), self.batch_size)])
            scores = -(logppl - ref)
        else:
            scores = -logppl
        return MembershipScores(self.name, scores, config=self.config(), defense=dict(observation.recipe),
                                wall_time_s=time.perf_counter() - start)


class LMMembershipZlib(LMMembership):
    """:class:`LMMembership` scored by the zlib ratio (module docstring)."""

    name = "lm-membership-zlib"


class LMMembershipReference(LMMembership):
    """:class:`LMMembership` calibrated by a ``reference`` model trained on public text only (module docstring):
    an :class:`~veil.attacks.generation.observe.LMAccess` or a model :meth:`LMAccess.of` takes."""

    name = "lm-membership-reference"
    citation = ("Carlini et al. 2021, Extracting Training Data from Large Language Models, Sec. 5 (the ratio to a "
                "reference model); Mireshghallah et al. 2022, Quantifying Privacy Risks of Masked Language Models "
                "Using Membership Inference Attacks (the likelihood ratio to a reference model)")
    threat = ThreatModel(observes="the released model's likelihood of given texts (black-box scoring)",
                         needs=("candidate texts, some of them members",
                                "a reference language model trained the same way on public text only"),
                         knows_key=False, trains=True)

    def __init__(self, candidates: Any, *, reference: Any, batch_size: int = 64) -> None:
        from veil.attacks.generation.observe import LMAccess

        super().__init__(candidates, batch_size=batch_size)
        if reference is None:
            raise InvalidParameterError("lm-membership-reference needs reference= (a language model trained on "
                                        "public text only); without one use lm-membership-loss")
        self.reference = reference if isinstance(reference, LMAccess) else LMAccess.of(reference)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "reference": dict(self.reference.recipe)}
