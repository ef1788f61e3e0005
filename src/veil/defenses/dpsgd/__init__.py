"""DP-SGD (Abadi et al., CCS 2016) on Opacus 1.6: a classifier trained with differential privacy (release kind
``model``), and its non-private reference.

* :mod:`.mechanism`: :class:`DPSGD` (registry ``dpsgd``), :class:`PlainTraining` (``plain``) and what they release,
  :class:`TrainedModel`;
* :mod:`.engine`: the one loop both run (Opacus ghost clipping, veil's noise); :mod:`.errors`:
  :class:`UnsupportedModelError`;
* :mod:`.accounting`: PRV (default) and RDP epsilons, sigma calibration;
* :mod:`.noise`: Poisson lots and Gaussian noise from the OS CSPRNG;
* :mod:`.controls`: a deliberately broken DP-SGD (half the noise it accounts for) that the noise test must catch.

What is guaranteed
------------------
A model released by :meth:`DPSGD.train` on a training set D of n examples (one example = one text's frozen
embedding and its label) is (epsilon, delta)-differentially private under adding or removing one example, for the
``epsilon`` in its :attr:`TrainedModel.accounting` (the PRV accountant's upper bound by default; the RDP bound is
reported beside it and is larger) and ``delta`` = 1/(10 n) unless given. It covers the final weights and every
intermediate model, and anything computed from them. The mechanism accounted for is ``steps`` rounds of: a
Poisson lot (each example in with probability q, exactly the rate accounted:
:func:`~veil.defenses.dpsgd.noise.sampling_rate`), the sum over the lot of per-example gradients each scaled to L2
norm at most ``clip``, plus N(0, (sigma clip)^2) in every coordinate.

Public, i.e. not protected: n (it sets q and the default delta), the label set, the pretrained encoder (trained on
other data), the architecture, the hyperparameters and the initial weights. A person who wrote k texts is
protected as a group of k, at a larger epsilon (group privacy). Nothing is spent on, or guards: choosing
hyperparameters by looking at private data (do it on public data), test accuracy (computed on the test split and
released as such), and what a seeded ``rng`` makes reproducible (seeds are for experiments and tests only).

Floating point. The guarantee is proved for real arithmetic. In the implementation: (1) each per-example
gradient is scaled by ``min(1, clip / (norm + 1e-6))`` in float32 (Opacus), so its norm after scaling may exceed
``clip`` by float32 rounding (a relative 1e-6 or so), which the accounting ignores; (2) the noise is float64
Box-Muller on 53-bit OS CSPRNG uniforms, in Opacus' secure-mode form (sum of 4 draws / 2, Holohan and Braghin
2021, against the floating-point attacks of Mironov 2012 and Jin et al. 2022), then rounded to float32 and added
to the float32 sum; that this leaks nothing beyond the real-valued mechanism is not proved; (3) PRV's bound is
computed numerically (its stated error, ``eps_error`` 0.01 and ``delta_error`` delta/1000, is included in the
bound). Opacus' own ``secure_mode`` needs torchcsprng, which does not exist for torch 2.x; veil does not use it.
"""

from veil.defenses.dpsgd.accounting import ACCOUNTANTS, Accounting, account, calibrate_sigma
from veil.defenses.dpsgd.errors import UnsupportedModelError
from veil.defenses.dpsgd.mechanism import (BENCH_RECIPE, DEFAULT_HIDDEN, DPSGD, Evaluation, PlainTraining,
                                           TrainedModel, from_recipe)

__all__ = ["DPSGD", "PlainTraining", "TrainedModel", "Evaluation", "Accounting", "account", "calibrate_sigma",
           "ACCOUNTANTS", "DEFAULT_HIDDEN", "BENCH_RECIPE", "UnsupportedModelError", "from_recipe"]

