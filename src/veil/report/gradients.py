"""Result page for the gradient attacks (results/gradients/*.json): the Table 2 analogue and the attacks on
recorded federated runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from veil.report.markdown import register_renderer
from veil.results import Metric, ResultRecord

PAPER_TABLE2 = {0: {d: 0.82 for d in (4, 16, 64, 256, 1024)},
                1: {4: 0.76, 16: 0.56, 64: 0.30, 256: 0.22, 1024: 0.08},
                2: {d: 0.0 for d in (4, 16, 64, 256, 1024)}, 4: {d: 0.0 for d in (4, 16, 64, 256, 1024)}}


def _fmt(m: Metric | None) -> str:
    if m is None:
        return "–"
    if m.ci_low is None or m.ci_high is None:
        return f"{m.mean:.2f}"
    return f"{m.mean:.2f} [{m.ci_low:.2f}, {m.ci_high:.2f}]"


def _err(m: Metric | None) -> str:
    return "–" if m is None else f"{m.mean:.2g}"


def _row(k: int) -> str:
    return "baseline (no TextHide)" if k == 0 else f"k={k}"


def _table2(recs: list[ResultRecord]) -> list[str]:
    groups: dict[tuple, dict[tuple[int, int], ResultRecord]] = {}
    for rec in recs:
        c = rec.config.get("cell") or {}
        key = (c.get("corpus"), c.get("placement"), c.get("activation"), c.get("runs"), c.get("max_evals"),
               c.get("seed"), c.get("hidden_width") if c.get("placement") == "input" else None)
        groups.setdefault(key, {})[(int(c.get("k", 0)), int(c.get("d", 0)))] = rec
    if not groups:
        return ["No Table 2 runs yet (`veil attack gradmatch-table`).", ""]
    lines: list[str] = []
    for key in sorted(groups, key=lambda g: (g[1] != "hidden", g[2] != "sigmoid", str(g))):  # the paper's mimic first
        cells = groups[key]
        corpus, placement, activation, runs, evals, seed, width = key
        ds = sorted({d for _, d in cells})
        ks = sorted({k for k, _ in cells})
        where = ("mask on the head's d-wide hidden layer (the paper's mimic), MiniLM input" if placement == "hidden"
                 else f"mask on the head's d-dimensional input (veil's TextHide; fixed projection of MiniLM, hidden "
                      f"width {width})")
        lines += [f"### {corpus}, {where}, {activation}, {runs} attacks per cell, {evals} evaluations each "
                  f"(seed {seed})", "",
                  "Success rate (every source recovered with MSE <= 1e-3, sign-corrected) with 95% Wilson "
                  "intervals; the paper's Table 2 value in parentheses.", "",
                  "| row | " + " | ".join(f"d={d}" for d in ds) + " |", "|---" * (len(ds) + 1) + "|"]
        for k in ks:
            vals = []
            for d in ds:
                rec = cells.get((k, d))
                paper = PAPER_TABLE2.get(k, {}).get(d)
                vals.append("–" if rec is None else _fmt(rec.metrics.get("success"))
                            + ("" if paper is None else f" ({paper:.2f})"))
            lines.append(f"| {_row(k)} | " + " | ".join(vals) + " |")
        lines += ["", "What the gradient determined: the vector at the mask (sigma' o sum lambda' h(x')) within "
                  "relative squared error 1e-3 of the true encoding; mask bits right (mean [95% CI]).", "",
                  "| row | " + " | ".join(f"d={d} encoding | d={d} mask bits" for d in ds) + " |",
                  "|---" * (2 * len(ds) + 1) + "|"]
        for k in ks:
            vals = []
            for d in ds:
                rec = cells.get((k, d))
                vals += ["–", "–"] if rec is None else [_fmt(rec.metrics.get("encoding_recovered")),
                                                         _fmt(rec.metrics.get("mask_bits"))]
            lines.append(f"| {_row(k)} | " + " | ".join(vals) + " |")
        secs = [r.metrics["seconds_per_run"].mean for r in cells.values() if "seconds_per_run" in r.metrics]
        total = sum(r.wall_time_s for r in cells.values())
        lines += ["", f"Mean {sum(secs) / max(len(secs), 1):.1f} s per attack; {total / 60:.0f} min for these "
                      f"{len(cells)} cells.", ""]
    return lines


def _tap_tables(recs: list[ResultRecord]) -> list[str]:
    if not recs:
        return ["No attacks on recorded runs yet (`veil attack analytic --record DIR`).", ""]
    lines = ["Rows recovered: true head inputs (TextHide encodings times rep_scale) with a recovered vector within "
             "relative squared error 1e-3; 95% Wilson intervals over rows (rows of one update are not independent: "
             "read the intervals as indicative). Precision: recovered vectors that are true rows. Label errors: the largest "
             "absolute error of the batch's mean soft label and of each recovered row's soft label, averaged over "
             "updates.", "",
             "| tap | attack | client mode | defense | batch | updates | rows recovered | cosine >= 0.999 | "
             "precision | batch-label error | per-row label error |", "|---" * 11 + "|"]
    for rec in sorted(recs, key=lambda r: (r.config.get("batch_size", 0), r.experiment)):
        c = rec.config
        dfn = c.get("defense") or {}
        setting = "none" if dfn.get("name", "none") == "none" else f"texthide ({dfn.get('m')},{dfn.get('k')}) " \
                                                                   f"{dfn.get('mode', 'intra')}"
        m = rec.metrics
        updates = len(rec.extra.get("updates", []))
        lines.append(f"| {Path(str(c.get('tap', ''))).name} | {rec.experiment.removeprefix('tap-')} | "
                     f"{c.get('client_mode')} | {setting} | {c.get('batch_size')} | {updates} | "
                     f"{_fmt(m.get('rows_recovered')) if c.get('scored') else 'not scored'} | "
                     f"{_fmt(m.get('rows_recovered_cosine'))} | {_fmt(m.get('precision'))} | "
                     f"{_err(m.get('mean_label_error'))} | {_err(m.get('per_row_label_error'))} |")
    return lines + [""]


@register_renderer("gradients")
def gradients_page(method: str, records: list[tuple[Path, ResultRecord]], out_dir: Path) -> str:
    recs = [r for _, r in records]
    table2 = [r for r in recs if r.experiment == "table2"]
    taps = [r for r in recs if r.experiment.startswith("tap-")]
    lines: list[Any] = ["# Results: gradient attacks on federated TextHide", "",
                        "See [the attack page](../attacks-gradients.md) for the threat model and every departure "
                        "from the paper.", "", "## Table 2 analogue: Alg. 3 gradient matching with dummy masks", ""]
    lines += _table2(table2)
    lines += ["## Attacks on recorded federated runs", ""]
    lines += _tap_tables(taps)
    return "\n".join(lines)
