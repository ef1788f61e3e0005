"""Negative controls for the rewriting mechanisms: deliberately broken, caught by the empirical audit.

:class:`Greedy` is DP-MLM that forgets to sample: it outputs the masked LM's top word piece at every position (the
most likely of the clipped logits, ties to the first) while claiming epsilon per word piece. Two inputs whose top
word pieces differ at one position give outputs that never overlap there, so its real epsilon is unbounded.
``veil audit dp-mlm --control greedy`` (and the audit's test) must find a lower bound above its claim.

Why not a mechanism that overstates its privacy by a constant factor: on natural text a masked LM's logits rarely
move across the whole clipping range between two inputs, so the largest log ratio that real pairs reach
(``realized_epsilon`` in the audit's records) is a fraction of epsilon, and a mechanism drawing at twice (or even
four times, measured with the quick masked LM) the epsilon it claims still stays below its claim on such pairs. The
audit cannot catch what the pairs do not show; its records state that ceiling.

It protects nothing it claims (:class:`~veil.defenses.base.NegativeControl`: listed as a control, never planned by
the bench, refused by ``veil.make_defense``; :func:`veil.controls.make_control` builds it and warns).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from veil.defenses.base import NegativeControl
from veil.defenses.rewriting.dp_mlm import DPMLM

__all__ = ["Greedy"]


class Greedy(NegativeControl, DPMLM):
    """Negative control: DP-MLM outputting the top word piece at every position instead of sampling."""

    name = "dp-mlm-broken-greedy"
    broken = "DP-MLM taking the masked LM's top word piece instead of sampling, so its real epsilon is unbounded"
    citation = "veil negative control (DP-MLM without its sampling: greedy decoding)"
    control: ClassVar[bool] = True

    def _probabilities(self, logits: np.ndarray) -> np.ndarray:
        rows = np.asarray(logits, dtype=np.float64)
        out = np.zeros_like(rows)
        out[np.arange(len(rows)), np.argmax(rows, axis=1)] = 1.0
        return out
