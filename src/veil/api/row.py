"""``veil.evaluate``: one bench row in Python, for one defense and one dataset.

The plan is the bench's (:func:`veil.bench.plan.plan_cells` for one corpus and one defense: every setting the
defense declares, every selected attack that observes its release, and its utility) and every cell runs in this
process through :func:`veil.bench.runner.run_cell`, the function ``veil bench`` runs: the records are the bench's,
cell ids included. Nothing is written; :meth:`Evaluation.table` renders the row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veil.errors import InvalidParameterError, InvalidTypeError

__all__ = ["evaluate", "Evaluation"]


@dataclass(frozen=True)
class Evaluation:
    """One bench row: ``attacks`` (an :class:`~veil.api.score.AttackOutcome` per attack cell), ``utility`` (per
    setting: the utility metric, its value and interval), ``records`` (cell id -> the record, as JSON, that ``veil
    bench`` would write) and ``failed`` (cell id -> "Type: message" of each cell that raised; the others ran)."""

    corpus: str
    defense: str
    attacks: list[Any] = field(default_factory=list)
    utility: list[dict[str, Any]] = field(default_factory=list)
    records: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    failed: dict[str, str] = field(default_factory=dict)

    def table(self) -> str:
        """The row as a Markdown table: one line per cell (utility first), with its interval and its test."""

        def ci(low: Any, high: Any) -> str:
            return "" if low is None else f"[{low:.3f}, {high:.3f}]"

        lines = ["| setting | measure | metric | value | 95% interval | floor | p (vs floor) | above floor |",
                 "|---|---|---|---|---|---|---|---|"]
        for u in self.utility:
            lines.append(f"| {u['setting']} | utility | {u['metric']} | {u['value']:.3f} | {ci(*u['interval'])} "
                         "| | | |")
        for a in self.attacks:
            setting = a.record["config"]["cell"]["setting_label"]
            floor = "" if a.floor is None else f"{a.floor:.4f}"
            lines.append(f"| {setting} | {a.attack} | {a.metric} | {a.value:.3f} | {ci(*a.interval)} | {floor} | "
                         f"{a.test.get('p_value', float('nan')):.3g} | {'yes' if a.significant else 'no'} |")
        for cell, error in self.failed.items():
            lines.append(f"| {cell} | failed | {error} | | | | | |")
        return "\n".join(lines)

    to_markdown = table


def _corpus(data: Any, text: str, label: str | None) -> str:
    """The bench name of ``data``: a built-in bench corpus, or a user's file loaded as ``veil bench --data``."""
    from veil.bench.data import bench_names

    if isinstance(data, str) and data in bench_names():
        return data
    if isinstance(data, (str, Path)) and Path(data).exists():
        from veil.bench.data_files import use_data_file

        names = use_data_file(Path(data), text, label, None, 1, None, False)
        return names[0]
    if not isinstance(data, (str, Path)):
        raise InvalidTypeError(f"data: give a bench corpus name or a data file's path, got {type(data).__name__}")
    raise InvalidParameterError(f"data {str(data)!r} is neither a bench corpus nor a file; the bench corpora: "
                                f"{', '.join(bench_names())} (or a labelled CSV/TSV/JSONL file, as `veil bench "
                                "--data`)")


def evaluate(data: Any, defense: str, attacks: Any = "all", *, quick: bool = True, seed: int = 0,
             queries: int | None = None, limit: int | None = None, key_seed: int | None = None, text: str = "text",
             label: str | None = "label", log: Any = None) -> Evaluation:
    """One bench row: the defense registered as ``defense`` on ``data`` (a bench corpus name, ``veil bench
    --corpora``; or a labelled file's path, ``veil bench --data``, read with the ``text`` and ``label`` columns),
    every setting the bench declares for it, against ``attacks`` (``"all"``: every registered attack that observes
    its release; or a list of names) and its utility. ``quick``, ``seed``, ``queries``, ``limit`` and ``key_seed``
    are ``veil bench``'s options. Returns an :class:`Evaluation`; nothing is written.

    >>> import veil                                                                    # doctest: +SKIP
    >>> row = veil.evaluate("rt-polarity", "texthide-inference", attacks=["rss", "abs-rss"], limit=200)
    >>> print(row.table())
    """
    from veil.api.score import outcome
    from veil.bench.plan import UTILITY, BenchConfig, plan_cells
    from veil.bench.runner import ensure_models, run_cell
    from veil.defenses.base import defense_names, get_defense

    if not isinstance(defense, str):
        raise InvalidTypeError(f"defense must be a registered name (str), got {type(defense).__name__}")
    if defense not in defense_names():
        get_defense(defense)  # UnknownNameError naming the valid ones
        raise InvalidParameterError(f"{defense!r} is a negative control: the bench never plans it; choose from "
                                    f"{', '.join(defense_names())}")
    if isinstance(attacks, str):
        if attacks != "all":
            raise InvalidParameterError(f"attacks: 'all' or a list of attack names, got {attacks!r}")
        attacks = None
    corpus = _corpus(data, text, label)
    config = BenchConfig(quick=quick, seed=seed, queries=queries, key_seed=key_seed, limit=limit)
    cells = plan_cells([corpus], defenses=[defense], attacks=attacks, config=config)
    if not cells:
        raise InvalidParameterError(f"the bench plans no cell of {defense!r} on {corpus!r}: it serves "
                                    f"{', '.join(get_defense(defense).tasks)}, which {corpus!r} is not, or its "
                                    "release kind has no bench cells yet (`veil bench --list` shows a plan)")
    ensure_models(cells, log=log or print)  # as the bench: a missing quick model is made here, and said
    kind = get_defense(defense).releases
    row = Evaluation(corpus=corpus, defense=defense)
    for cell in cells:
        try:
            rec = run_cell(cell).to_dict()
        except Exception as exc:  # as the bench: one failing cell is reported, the others go on
            row.failed[cell.id] = f"{type(exc).__name__}: {exc}"
            continue
        row.records[cell.id] = rec
        bench = rec["extra"].get("bench", {})
        if cell.attack == UTILITY:
            m = bench["utility_metric"]
            row.utility.append({"setting": cell.setting_label, "metric": bench["utility"], "value": m["mean"],
                                "interval": (m.get("ci_low"), m.get("ci_high")), "cell": cell.id})
        else:
            row.attacks.append(outcome(cell.attack, defense, kind, rec))
    return row
