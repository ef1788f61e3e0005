"""Gradient attacks on federated training with TextHide (Huang et al. 2020, Alg. 2-3; PRIOR-ART B).

* :mod:`.tap`: the eavesdropper's recording of a federated run (the attacker's input);
* :mod:`.truth`: the ground truth beside a recording (scoring only);
* :mod:`.analytic`: the head's inputs (TextHide encodings) read off one client update, exactly at batch
  size 1 (first-layer row ratios), by ReLU sparsity at small batches, by matching for the rest;
* :mod:`.labels`: the batch's (mixed) labels from the last layer's gradient;
* :mod:`.chain`: updates -> encodings -> each client's masks -> sentences (inversion, mask recovery, unmixing);
* :mod:`.alg3`: Algorithm 3 (gradient matching with dummy masks), the paper's Table 2 attack.

Nothing heavy is imported until a name is used.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Tap": "veil.attacks.gradients.tap",
    "TapMeta": "veil.attacks.gradients.tap",
    "ModelSpec": "veil.attacks.gradients.tap",
    "ClientUpdate": "veil.attacks.gradients.tap",
    "TapTruth": "veil.attacks.gradients.truth",
    "read_truth": "veil.attacks.gradients.truth",
    "write_tap_meta": "veil.attacks.gradients.tap",
    "write_tap_round": "veil.attacks.gradients.tap",
    "write_tap_truth": "veil.attacks.gradients.truth",
    "AnalyticInversion": "veil.attacks.gradients.analytic",
    "RecoveredInputs": "veil.attacks.gradients.analytic",
    "invert_first_layer": "veil.attacks.gradients.analytic",
    "score_inputs": "veil.attacks.gradients.analytic",
    "EncodingMatch": "veil.attacks.gradients.matching",
    "LeakedLabels": "veil.attacks.gradients.labels",
    "leak_labels": "veil.attacks.gradients.labels",
    "score_labels": "veil.attacks.gradients.labels",
    "UpdateChain": "veil.attacks.gradients.chain",
    "ChainRecovery": "veil.attacks.gradients.chain",
    "GradMatch": "veil.attacks.gradients.alg3",
    "GradientObservation": "veil.attacks.gradients.alg3",
    "Alg3Truth": "veil.attacks.gradients.alg3",
    "simulate_step": "veil.attacks.gradients.alg3",
    "score_gradmatch": "veil.attacks.gradients.alg3",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'veil.attacks.gradients' has no attribute {name!r}")


__all__ = sorted(_LAZY)
