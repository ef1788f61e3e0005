"""``veil bench``: every defense against every attack that applies, on the same corpora, in one report.

* :mod:`.plan`: the cells, built from what defenses declare (kind, releases, tasks, settings) and what attacks
  declare (the observation kind they need); nothing here names a defense or an attack;
* :mod:`.data`: each corpus' shared data (embeddings, the attacker's index, public sets) with its
  public/private split;
* :mod:`.cells`: how a cell of one observation kind is run and scored (and the utility of a task);
* :mod:`.runner`: resumable, fault-isolated runs, sequential or on a Ray cluster.

The bench sits above :mod:`veil.training`, :mod:`veil.attacks` and :mod:`veil.defenses`; the per-paper
experiment runners (:mod:`veil.experiments`) and the pages (:mod:`veil.report`) sit above it.
"""

from __future__ import annotations

from veil.bench.plan import Cell, plan_cells

__all__ = ["Cell", "plan_cells"]
