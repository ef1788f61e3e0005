"""The bench page's provenance: veil version, commits, cells, how much of the plan has records, machine, corpora."""

from __future__ import annotations

from typing import Any

from veil.results import ResultRecord

__all__ = ["provenance", "completeness"]


def provenance(records: list[ResultRecord], run: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, value) lines: veil's version, the records' commits, the cells and their summed wall time, how much of
    the plan has records, the last run's engine and counts (``run``: the run summary, or {}), the machine, and each
    corpus with its slice and checksums."""
    import veil

    commits = sorted({r.git_commit for r in records})
    corpora = {}
    for r in records:
        c = r.config.get("corpus")
        if isinstance(c, dict):
            corpora[c["corpus"]] = c
    env = records[0].environment if records else {}
    cell_time = sum(r.wall_time_s for r in records)
    out = [("veil", getattr(veil, "__version__", "?")), ("commit(s)", ", ".join(commits)),
           ("cells", str(len(records))), ("sum of cell wall times", f"{cell_time / 60:.1f} min")]
    done = completeness(records)
    if done:
        out.append(("cells of the plan", done))
    if run:
        out.append(("last run", f"{run.get('engine')} with {run.get('workers')} worker(s), "
                                f"{run.get('wall_time_s', 0) / 60:.1f} min wall, counts {run.get('counts')}"))
    out.append(("machine", ", ".join(f"{k}={v}" for k, v in env.items() if k in
                                     ("platform", "python", "torch", "cpu_count", "machine"))))
    for name, c in corpora.items():
        prov = "; ".join(f"{p['package']} {p['file']} sha256 {p['sha256'][:16]}..." for p in c.get("provenance", []))
        out.append((f"corpus {name}", f"{c.get('slice')} slice, {c.get('n')} items {c.get('splits')}; {prov}"))
    return out


def completeness(records: list[ResultRecord]) -> str | None:
    """How many of the cells the bench plans on these corpora (every registered defense and attack, the records'
    own budget) have records, and per corpus what is missing: a run that is still resuming says so."""
    import json

    from veil.bench.plan import BenchConfig, plan_cells

    cells = [r.config.get("cell") for r in records if isinstance(r.config.get("cell"), dict)]
    configs = {json.dumps(c.get("config"), sort_keys=True) for c in cells}
    tasks = {c["corpus"]: (r.config.get("corpus") or {}).get("task") for c, r in zip(cells, records)}
    if len(configs) != 1 or not all(tasks.values()):
        return None
    c = cells[0]["config"]
    try:
        config = BenchConfig(quick=c["quick"], seed=c["seed"], queries=c.get("queries"), epochs=c.get("epochs"),
                             key_seed=c.get("key_seed"), limit=c.get("limit"))
        planned = plan_cells(list(tasks), config=config, corpus_tasks=tasks)
    except Exception:  # noqa: BLE001 - a folder from another veil: no plan to compare with
        return None
    have = {c["id"] for c in cells}
    missing: dict[str, int] = {}
    for cell in planned:
        if cell.id not in have:
            missing[cell.corpus] = missing.get(cell.corpus, 0) + 1
    text = f"{len(planned) - sum(missing.values())} of the {len(planned)} cells planned on these corpora"
    if missing:
        text += (" (not run yet: " + ", ".join(f"{n} on {k}" for k, n in missing.items())
                 + "; `veil bench` on the same folder resumes them)")
    if not c["quick"]:
        from veil.bench.plan import FULL_CORPORA

        absent = [k for k in FULL_CORPORA if k not in tasks]
        if absent and set(tasks) <= set(FULL_CORPORA):
            text += f"; the full bench's other corpora have no cells yet: {', '.join(absent)}"
    return text
