"""Membership inference experiments (docs: veil.attacks.membership): what a released classifier says about its
training set, plain and under DP-SGD.

* :mod:`.run`: every method against plain training and DP-SGD at each epsilon (:func:`run_membership`,
  ``veil attack membership``).
"""

from veil.experiments.membership.run import (DEFENSES, METHOD, METHODS, MembershipRun, log_roc, make_attack,
                                             planned_runs, record_path, run_membership)

__all__ = ["run_membership", "planned_runs", "record_path", "make_attack", "log_roc", "MembershipRun", "METHOD",
           "METHODS", "DEFENSES"]
