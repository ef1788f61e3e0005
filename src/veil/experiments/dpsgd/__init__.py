"""DP-SGD experiments (docs: veil.defenses.dpsgd): what differential privacy costs a classifier.

* :mod:`.utility`: accuracy at target epsilons {1, 3, 8} against the non-private run of the same setting
  (:func:`run_dpsgd`, ``veil dpsgd train``);
* :mod:`.audit`: the one-run audit of DP-SGD and its negative controls (``veil audit dpsgd``; imported by name).
"""

from veil.experiments.dpsgd.utility import EPSILONS, METHOD, SETTINGS, DPSGDRun, planned_runs, record_path, run_dpsgd

__all__ = ["run_dpsgd", "planned_runs", "record_path", "DPSGDRun", "EPSILONS", "SETTINGS", "METHOD"]
