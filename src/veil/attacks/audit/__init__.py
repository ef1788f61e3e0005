"""Privacy audits: does an implementation keep the epsilon it states?

* :mod:`.exact`: the exact audit of DeepCandidate (:class:`ExactAudit`, :func:`audit_sentdp`,
  :func:`audit_document`): its output distribution is known, so the SentDP bound is checked on
  neighbour pairs with no sampling;
* :mod:`.empirical`: empirical lower bounds on epsilon from a distinguishing game scored with
  Clopper-Pearson confidence (:class:`~.empirical.DistinguishingGame`), for any mechanism that runs;
* :mod:`.pairs`: the neighbouring inputs and test statistics of that game for DeepCandidate,
  truncation and word-level metric DP;
* :mod:`.one_run`: the one-run lower bound of Steinke, Nasr and Jagielski (2023) from canary guesses,
  and :mod:`.canaries`: the Dirac canaries and white-box / black-box scores with which ``veil audit
  dpsgd`` audits DP-SGD in one training run (the controls it must catch live in
  :mod:`veil.defenses.dpsgd.controls`).

The deliberately broken mechanisms the audits must catch live with the mechanism they break, in
:mod:`veil.defenses.sentdp.controls`; they are re-exported here because this is where they were
first imported from.

Importing this package loads the exact audit only (numpy and :mod:`veil.defenses.sentdp`, no
scipy, torch or encoder); the other modules are imported by name when needed.
"""

from veil.attacks.audit.exact import (NEIGHBOUR_KINDS, TOLERANCE, ExactAudit, Neighbour, SentDPAudit, SentDPAuditSweep,
                                      WhiteBox, WorstPair, audit_document, audit_sentdp, make_neighbours)
from veil.defenses.sentdp.controls import NEGATIVE_CONTROLS, DoubledEpsilon, DoubledSensitivity

__all__ = ["ExactAudit", "WhiteBox", "NEIGHBOUR_KINDS", "TOLERANCE", "Neighbour", "WorstPair", "SentDPAudit",
           "SentDPAuditSweep",
           "make_neighbours", "audit_document", "audit_sentdp", "DoubledSensitivity", "DoubledEpsilon",
           "NEGATIVE_CONTROLS"]
