"""What ``veil bench`` runs, chosen before any work: the built-in corpora asked for (or the quick or full default)
and the runnable cells of their plan. Arguments that cannot go together, or a selection that plans no cell, raise
:class:`~veil.errors.OptionError` naming the CLI's options (``--corpora``, ``--defenses``, ``--attacks``), which the
CLI shows as a usage error; nothing has been written by then."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from veil.errors import OptionError

__all__ = ["Selection", "builtin_corpora", "select_cells", "demo_cells", "DEMO_LEFT_OUT", "DEMO_MINUTES",
           "QUICK_REST_MINUTES", "LM_MINUTES", "demo_plan_line"]


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
    #: ``--demo``: why -> the ids of the quick plan's cells it leaves out (a bench run without ``--demo``: empty)
    left_out: dict[str, list[str]] = field(default_factory=dict)


def select_cells(corpus_list: list[str], defenses: list[str] | None, attacks: list[str] | None,
                 config: Any, *, demo: bool = False) -> Selection:
    """Plan the bench once on ``corpus_list``: what runs, and what cannot yet; a selection that plans no cell (or,
    with ``attacks`` named, no attack cell) is refused before any work. ``demo``: without the cells
    :func:`demo_cells` leaves out (recorded in :attr:`Selection.left_out`)."""
    from veil.bench.plan import UTILITY, not_runnable, plan_cells, runnable

    full = plan_cells(corpus_list, defenses=defenses, attacks=attacks, config=config, runnable_only=False)
    cells, pending = runnable(full), not_runnable(full)  # planned once: what runs, and what cannot yet
    left_out: dict[str, list[str]] = {}
    if demo:
        cells, left_out = demo_cells(cells)
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
    return Selection(cells, pending_note, left_out)


#: the TextHide setting ``--demo`` keeps: the paper's default (k = 4 encodings mixed, a pool of m = 256 masks,
#: mixing within the private set)
_TEXTHIDE_DEMO = {"k": 4, "m": 256, "mode": "intra"}


def _releases_lm(cell: Any) -> bool:
    from veil.bench.runner import releases_lm

    return releases_lm(cell)


#: the quick bench's generative-model section on 2 idle cores from an empty language-model cache, in minutes: 7.27
#: measured by benchmarks/bench_generation.py at 4d9f877 (benchmarks/RESULTS.md, "The quick bench's generative-model
#: section", 2026-12-07T21:25: the two models with their reference models 3.8, the 16 cells 3.5)
LM_MINUTES = 7


def _trains_model_first(cell: Any) -> bool:
    from veil.bench.runner import cell_models

    return bool(cell_models(cell))


#: what ``veil bench --demo`` leaves out of the quick plan, and why: the cells that train a model for minutes on 2
#: cores. Times: the quick bench's first run from a fresh VEIL_HOME (benchmarks/RESULTS.md, "make demo from a fresh
#: clone", at fba7c91: quick masked LM 3.5 min, quick inverter 8.0 min, cells as named).
DEMO_LEFT_OUT: tuple[tuple[str, Any], ...] = (
    ("fine-tunes a language model on the planted corpus, and the attacker's reference model, before its attacks "
     f"(about {LM_MINUTES} min on 2 cores for the quick bench's two settings)", _releases_lm),
    ("needs a model veil trains on first use (the quick inverter, about 8 min on 2 cores, or the quick masked LM, "
     "about 3.5 min), and then inverts, infills or fine-tunes for 0.2-4 min a cell", _trains_model_first),
    ("trains a learned word-recovery attacker for the cell (0.3-2.5 min a cell)",
     lambda c: c.attack in ("word-recovery-minilm", "word-recovery-trained")),
    ("Coavoux et al.'s generation objective trains a decoder (3.8 min)", lambda c: c.defense == "generation"),
    ("a TextHide setting other than the paper's default (k=4, m=256, intra): each trains its own classifier head "
     "(0.7-1.4 min)", lambda c: c.defense in ("texthide", "texthide-inference") and c.setting != _TEXTHIDE_DEMO),
)

#: ``--demo``'s cells on 2 idle cores from a fresh VEIL_HOME (the corpora pulled), in minutes: 6.15 measured by
#: benchmarks/demo.py at 2dd1e6f (benchmarks/RESULTS.md, "make demo from a fresh clone", 2026-12-07T03:29)
DEMO_MINUTES = 6
#: the rest of the quick bench after ``--demo`` (its left-out cells and the two quick models), in minutes: the cells
#: left out took 32.9 min and the two quick models 11.4 in the quick bench's first run (benchmarks/RESULTS.md at
#: fba7c91), the re-run of silver-sm at the quick attackers' step budgets (results/bench, 2026-12-07) added 6.1
#: to its learned and fine-tuned word-recovery cells, and the generative-model section adds :data:`LM_MINUTES`
QUICK_REST_MINUTES = 57


def demo_cells(cells: list[Any]) -> tuple[list[Any], dict[str, list[str]]]:
    """``--demo``: the quick plan's ``cells`` without those :data:`DEMO_LEFT_OUT` names, and the ids left out per
    reason. The kept cells are the quick bench's own (same ids and records), so ``veil bench --quick`` into the same
    folder adds only what the demo left out."""
    kept, left = [], {}
    for cell in cells:
        why = next((reason for reason, test in DEMO_LEFT_OUT if test(cell)), None)
        if why is None:
            kept.append(cell)
        else:
            left.setdefault(why, []).append(cell.id)
    return kept, left


def demo_plan_line(left_out: dict[str, list[str]], out: Any) -> str:
    """What ``--demo`` prints before its cells: how long they take, what it leaves out and how to add that."""
    n = sum(map(len, left_out.values()))
    return (f"veil bench --demo: about {DEMO_MINUTES} minutes on 2 idle cores; {n} cells of the quick bench that "
            f"train a model for minutes are left out (the report names them): `veil bench --quick --out {out}` "
            f"adds them later (about {QUICK_REST_MINUTES} minutes more), reusing these cells")
