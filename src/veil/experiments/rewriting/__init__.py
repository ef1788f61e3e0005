"""Experiments on text rewritten with a formal guarantee (issue 53): :mod:`veil.experiments.rewriting.audit`, the
empirical epsilon audit of DP-MLM and its negative control (``veil audit dp-mlm``)."""
