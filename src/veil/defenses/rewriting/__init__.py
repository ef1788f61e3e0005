"""Text rewritten with a formal guarantee (issue 53): the ``text`` release kind's DP mechanisms.

* :mod:`veil.defenses.rewriting.dp_mlm`: DP-MLM (Meisenbacher et al. 2024), every word piece drawn from veil's masked
  LM by the exponential mechanism, epsilon per word piece;
* :mod:`veil.defenses.rewriting.controls`: its negative control (greedy: the top word piece, no sampling), which
  the empirical audit (:mod:`veil.attacks.audit.rewriting`) must catch.
"""
