"""Negative controls: deliberately broken DeepCandidate variants that every SentDP audit must catch.

Each breaks the epsilon-SentDP guarantee of :class:`~veil.defenses.sentdp.DeepCandidate` on purpose,
by a known factor, so that a passing audit means something: an audit that passes a control is broken
itself. They are never meant to protect anything (``control = True``; the defense registry lists
them as controls, apart from the real defenses).

* :class:`DoubledSensitivity`: every utility doubled (sensitivity 2) with epsilon left as stated;
* :class:`DoubledEpsilon`: releases (samples and reports probabilities) at ``2 * epsilon`` while
  claiming epsilon.

:data:`NEGATIVE_CONTROLS` maps the short names used by ``veil audit sentdp --control`` and
``veil.experiments.sentdp.audit.run_sentdp_audit(..., control=...)`` to the classes. The exact audit
(:mod:`veil.attacks.audit.exact`) must fail both, on synthetic and on real documents.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from veil.defenses.base import NegativeControl
from veil.defenses.sentdp.mechanism import DeepCandidate
from veil.defenses.sentdp.sampling import ExactSampler

__all__ = ["DoubledSensitivity", "DoubledEpsilon", "NEGATIVE_CONTROLS"]


class DoubledSensitivity(NegativeControl, DeepCandidate):
    """Negative control: every utility doubled (sensitivity 2) with epsilon left as stated.

    Its log ratios reach ``2 * epsilon`` wherever a neighbour moves a candidate's depth, so the
    exact audit must fail it; ``run_sentdp_audit(..., control="doubled-sensitivity")`` checks that
    it does on real documents.
    """

    name = "deepcandidate-broken-doubled-sensitivity"
    broken = "DeepCandidate with every utility doubled (sensitivity 2) while claiming epsilon"
    citation = "veil negative control (DeepCandidate with sensitivity 2 while claiming 1)"
    control: ClassVar[bool] = True

    def _utilities_of_depths(self, depths: np.ndarray) -> np.ndarray:
        return 2.0 * depths  # both what the audit reads (utilities) and what release() samples by


class DoubledEpsilon(NegativeControl, DeepCandidate):
    """Negative control: releases (samples and reports probabilities) at ``2 * epsilon`` while claiming epsilon.

    The exact audit catches it two independent ways: the log ratios, read through the mechanism's
    own :meth:`log_probabilities_of` at every audited epsilon, reach twice that epsilon
    (:func:`~veil.attacks.audit.audit_document` and :func:`~veil.attacks.audit.audit_sentdp`), and its
    log-probabilities disagree with the exponential mechanism at the stated epsilon (``derivation_error``).
    """

    name = "deepcandidate-broken-doubled-epsilon"
    broken = "DeepCandidate sampling at twice the epsilon it claims"
    citation = "veil negative control (DeepCandidate sampling at 2 epsilon while claiming epsilon)"
    control: ClassVar[bool] = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._sampler = ExactSampler(2.0 * self.epsilon)

    def log_probabilities_of(self, utilities: np.ndarray, epsilon: float | None = None) -> np.ndarray:
        return super().log_probabilities_of(utilities, 2.0 * (self.epsilon if epsilon is None else float(epsilon)))


#: short name (the registry name without ``deepcandidate-broken-``) -> class; derived from the classes' names
NEGATIVE_CONTROLS: Mapping[str, type[DeepCandidate]] = MappingProxyType(
    {c.name.removeprefix("deepcandidate-broken-"): c for c in (DoubledSensitivity, DoubledEpsilon)})
