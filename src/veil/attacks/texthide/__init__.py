"""Adaptive attacks on TextHide (veil issue 11): what an eavesdropper collects, mask-pool recovery, unmixing.

* :mod:`.observe`: :func:`observe_training_run` / :func:`observe_inference` return what the attacker sees (an
  :class:`~veil.attacks.base.Observation`) and, separately, the :class:`TextHideTruth` used only for scoring;
  :class:`PublicStats`: what the attacker computes from a public corpus;
* :mod:`.mask_recovery`: :class:`MaskRecovery` ("mask-recovery"), recovering the secret mask pool from the
  encodings alone, and its scoring (:func:`score_mask_recovery`);
* :mod:`.unmix`: :class:`Unmix` ("unmix"), unmasking encodings with recovered masks and solving for their k
  sources over an index, and its scoring (:func:`score_unmix`).
"""

from veil.attacks.texthide.mask_recovery import (MaskRecovery, MaskRecoveryResult, RecoveredMasks,
                                                 evaluate_mask_recovery, score_mask_recovery)
from veil.attacks.texthide.observe import PublicStats, TextHideTruth, observe_inference, observe_training_run
from veil.attacks.texthide.unmix import Unmix, Unmixed, evaluate_unmix, score_unmix

__all__ = ["MaskRecovery", "MaskRecoveryResult", "PublicStats", "RecoveredMasks", "TextHideTruth",
           "evaluate_mask_recovery", "observe_inference", "observe_training_run", "score_mask_recovery", "Unmix",
           "Unmixed", "evaluate_unmix", "score_unmix"]
