"""What ``veil bench`` runs, chosen before any work: the built-in corpora asked for (or the quick or full default)
and the runnable cells of their plan. Arguments that cannot go together, or a selection that plans no cell, raise
:class:`~veil.errors.OptionError` naming the CLI's options (``--corpora``, ``--defenses``, ``--attacks``), which the
CLI shows as a usage error; nothing has been written by then."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from veil.errors import OptionError

__all__ = ["Selection", "builtin_corpora", "select_cells"]


def builtin_corpora(names: list[str] | None, *, quick: bool, encoding: str | None = None,
                    cache_embeddings: bool = False) -> list[str]:
    """The built-in corpora the bench runs on: ``names``, or the quick or full default; ``encoding`` and
    ``cache_embeddings`` apply to a file of your own only (:func:`veil.bench.data_files.use_data_file`)."""
    from veil.bench.data import TASK_CORPORA, bench_names
    from veil.bench.plan import FULL_CORPORA, QUICK_CORPORA

    given = [opt for opt, on in (("--encoding", encoding is not None), ("--cache-embeddings", cache_embeddings))
             if on]
    if given:
        raise OptionError(f"{'/'.join(given)} {'applies' if len(given) == 1 else 'apply'} to --data (your "
                          "own file; built-in corpora are UTF-8 and always cached): leave "
                          f"{'/'.join(given)} out, or add --data FILE")
    corpus_list = names or list(QUICK_CORPORA if quick else FULL_CORPORA)
    unknown = [c for c in corpus_list if c not in bench_names()]
    if unknown:
        raise OptionError(f"unknown corpus {', '.join(unknown)}; see `veil corpora list` (the bench also "
                          f"takes {', '.join(TASK_CORPORA)})")
    return corpus_list


@dataclass(frozen=True)
class Selection:
    """The runnable cells of a plan, and a note naming the defenses whose release kinds have no cells yet ("")."""

    cells: list[Any]
    pending_note: str


def select_cells(corpus_list: list[str], defenses: list[str] | None, attacks: list[str] | None,
                 config: Any) -> Selection:
    """Plan the bench once on ``corpus_list``: what runs, and what cannot yet; a selection that plans no cell (or,
    with ``attacks`` named, no attack cell) is refused before any work."""
    from veil.bench.plan import UTILITY, not_runnable, plan_cells, runnable

    full = plan_cells(corpus_list, defenses=defenses, attacks=attacks, config=config, runnable_only=False)
    cells, pending = runnable(full), not_runnable(full)  # planned once: what runs, and what cannot yet
    pending_note = "; ".join(f"{', '.join(names)} (releases {kind})" for kind, names in pending.items())
    attack_cells = [c for c in cells if c.attack != UTILITY]
    if not cells or (attacks is not None and not attack_cells):  # before any work, nothing written
        chosen = [f"{opt} {','.join(v)}" for opt, v in (("--defenses", defenses), ("--attacks", attacks))
                  if v is not None]
        what = "0 cells" if not cells else f"0 attack cells (only {len(cells)} utility cells)"
        raise OptionError(
            f"this selection plans {what} on {', '.join(corpus_list)}: "
            + (f"{' with '.join(chosen)} pairs no attack with a defense whose release it observes (or that "
               "serves the corpus' task)" if chosen else "no defense serves these corpora's tasks")
            + (f"; the bench cannot run {pending_note} yet: their release kinds have no bench cells (docs/bench.md)"
               if pending else "")
            + "; `veil bench --list` shows every cell of the full plan")
    return Selection(cells, pending_note)
