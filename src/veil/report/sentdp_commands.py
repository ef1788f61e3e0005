"""The commands that regenerate the SentDP and audit pages' records, derived from the records' own configs."""

from __future__ import annotations

from pathlib import Path

from veil.report.commands import folder_of as _folder
from veil.results import ResultRecord


def _eps(values) -> str:
    return ",".join(f"{float(e):g}" for e in sorted({float(e) for e in values}))


def eval_commands(records: list[tuple[Path, ResultRecord]]) -> list[str]:
    """One ``veil sentdp eval`` per corpus, with the epsilons, methods and trials its records ran."""
    if not records:
        return []
    out, results = [], _folder(records)
    runs: dict[str, list[ResultRecord]] = {}
    for _, r in records:
        if "method" in r.config and "epsilon" in r.config and "test_macro_f1" in r.metrics:
            runs.setdefault(str(r.config["corpus"]), []).append(r)
    for corpus, rs in sorted(runs.items()):
        methods = [m for m in ("deepcandidate", "truncation", "metric-dp") if any(r.config["method"] == m for r in rs)]
        for trials in sorted({int(r.config.get("trials") or 0) for r in rs}):
            sel = [r for r in rs if int(r.config.get("trials") or 0) == trials]
            out.append(f"veil sentdp eval {corpus} --epsilons {_eps(r.config['epsilon'] for r in sel)} --methods "
                       f"{','.join(m for m in methods if any(r.config['method'] == m for r in sel))} "
                       f"--trials {trials} --results {results}")
    return out


def audit_commands(records: list[tuple[Path, ResultRecord]]) -> list[str]:
    """One ``veil audit sentdp`` per exact audit record, one ``veil audit empirical`` per corpus and settings."""
    if not records:
        return []
    out, results = [], _folder(records)
    for _, r in sorted(records, key=lambda x: x[0].name):
        c = r.config
        if not r.experiment.startswith("audit-"):
            continue
        eps = [k.removeprefix("max_abs_log_ratio_eps") for k in r.metrics if k.startswith("max_abs_log_ratio_eps")]
        parts = [f"veil audit sentdp {c['corpus']}"]
        if eps:
            parts.append(f"--epsilons {_eps(eps)}")
        # the command's default is a quick subsample: a record without fit_documents was fitted on the whole corpus
        if c.get("fit_documents"):
            parts.append(f"--documents {c.get('n_documents_requested') or 0} --fit-documents {c['fit_documents']}")
        else:
            parts.append("--full")
            if c.get("n_documents_requested"):
                parts.append(f"--documents {c['n_documents_requested']}")
        for opt, key in (("--neighbours", "neighbours_per_document"), ("--n-projections", "n_projections"),
                         ("--depth", "depth"), ("--control", "control")):
            if c.get(key) is not None:
                parts.append(f"{opt} {c[key]}")
        if "recoder" in c:
            parts.append("--recoder" if c["recoder"] else "--no-recoder")
        out.append(" ".join(parts + [f"--results {results}"]))
    groups: dict[tuple, list[ResultRecord]] = {}
    for _, r in records:
        c = r.config
        if r.experiment.startswith("empirical-") and "epsilon" in c:
            run = c.get("audit") or {}  # the run's own settings (counts of every game kind), as it was asked for
            key = (c["corpus"], run.get("trials", c.get("trials")), run.get("selection_trials"), run.get("mdp_trials"),
                   c.get("pairs"), c.get("confidence"), c.get("n_projections"), c.get("max_documents"), c.get("seed"))
            groups.setdefault(key, []).append(r)
    for (corpus, trials, sel, mdp_trials, pairs, conf, p, maxdocs, seed), rs in sorted(groups.items(), key=str):
        parts = [f"veil audit empirical --corpus {corpus}",
                 f"--mechanisms {','.join(sorted({str(r.config['mechanism']) for r in rs}))}",
                 f"--epsilons {_eps(r.config['epsilon'] for r in rs)}"]
        # --full: the whole corpus (the command's default is a quick subsample); the counts are stated explicitly
        parts.append("--full" if maxdocs is None else f"--max-documents {maxdocs}")
        for opt, value in (("--trials", trials), ("--selection-trials", sel), ("--mdp-trials", mdp_trials)):
            if value is not None:
                parts.append(f"{opt} {value}")
        parts += [f"--pairs {pairs}", f"--confidence {conf}"]
        if p is not None:
            parts.append(f"--n-projections {p}")
        if seed is not None:
            parts.append(f"--seed {seed}")
        out.append(" ".join(parts + [f"--results {results}"]))
    return out
