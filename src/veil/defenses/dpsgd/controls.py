"""Negative controls: deliberately broken DP-SGD that the noise test and the one-run audit must catch.

:class:`HalfNoise` draws Gaussian noise at half the standard deviation it accounts for (sigma / 2 while the
accountant and :attr:`~veil.defenses.dpsgd.TrainedModel.accounting` say sigma), so the epsilon it reports is far
too small. Everything else (lots, clipping, accounting, the record) is :class:`~veil.defenses.dpsgd.DPSGD`'s. The
test of the noise actually added (tests/defenses/test_dpsgd.py: the noise recovered from one full-batch step,
Kolmogorov-Smirnov against N(0, (sigma clip)^2) at alpha = 1e-6) passes DPSGD and must reject this control; a test
that passes it is broken itself.

:class:`NoClip` clips nothing (each example's gradient enters the sum at its full norm) while the noise and the
accountant assume the clip bound: its sensitivity is unbounded. ``veil audit dpsgd --control no-clip`` must fail it.

:class:`LMHalfNoise` is :class:`HalfNoise` for the language model (:class:`~veil.defenses.lm.DPFineTuning`): half
the noise it accounts for; tests/defenses/test_lm_dpsgd.py recovers the noise of one full-lot step and must reject
it.

None protects anything (:class:`~veil.defenses.base.NegativeControl`: listed as a control, never planned by
the bench, refused by ``veil.make_defense``; :func:`veil.controls.make_control` builds them and warns).
"""

from __future__ import annotations

import math
from typing import ClassVar

from veil.defenses.base import NegativeControl
from veil.defenses.dpsgd.mechanism import DPSGD
from veil.defenses.lm import DPFineTuning

__all__ = ["HalfNoise", "NoClip", "LMHalfNoise"]


class HalfNoise(NegativeControl, DPSGD):
    """Negative control: DP-SGD adding noise of standard deviation sigma clip / 2 while accounting sigma clip."""

    name = "dpsgd-broken-half-noise"
    broken = "DP-SGD drawing half the noise it accounts for, so its epsilon is far too small"
    citation = "veil negative control (DP-SGD drawing half the noise it accounts for)"
    control: ClassVar[bool] = True
    _noise_scale: ClassVar[float] = 0.5


class NoClip(NegativeControl, DPSGD):
    """Negative control: DP-SGD that does not clip (bound infinity) while its noise and accountant assume ``clip``."""

    name = "dpsgd-broken-no-clip"
    broken = "DP-SGD that clips nothing while its noise and accountant assume the clip bound: unbounded sensitivity"
    citation = "veil negative control (DP-SGD without clipping, accounting the clip bound)"
    control: ClassVar[bool] = True
    _clip_scale: ClassVar[float] = math.inf


class LMHalfNoise(NegativeControl, DPFineTuning):
    """Negative control: DP-SGD language-model fine-tuning adding noise sigma clip / 2 while accounting sigma clip."""

    name = "lm-dpsgd-broken-half-noise"
    broken = "DP-SGD fine-tuning drawing half the noise it accounts for, so its epsilon is far too small"
    citation = "veil negative control (DP-SGD language-model fine-tuning drawing half the noise it accounts for)"
    control: ClassVar[bool] = True
    _noise_scale: ClassVar[float] = 0.5
