"""Companion page ``docs/results/audit.md``: formal against empirical epsilon for every DP defense, with plots.

Drawn from the same ``results/sentdp/*.json`` records as the SentDP page (the records' schema is in
:mod:`veil.report.sentdp`): the empirical lower bounds of ``veil audit empirical`` beside each defense's
formal epsilon, and the exact audit of ``veil audit sentdp`` (largest observed log ratio against epsilon,
and its negative controls). Every number is read from a record; the verdicts are the ones each record's test
states (Clopper-Pearson for the empirical bound, exact arithmetic with a float64 tolerance for the audit).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from veil.report.markdown import regenerate_section, register_renderer
from veil.report.sentdp_records import COLORS, EMPIRICAL_NOTE, METHODS, NAMES, TOLERANCE, _audit, _Corpus, _index, _safe
from veil.results import ResultRecord

MARKERS = {"reflect": "o", "extreme": "s", "corner": "D", "one-word": "^", "all-words": "v"}


def _empirical_rows(c: _Corpus) -> list[tuple[str, str, float, ResultRecord]]:
    order = {m: i for i, m in enumerate(METHODS)}
    return [(mech, kind, eps, rec) for (mech, kind, eps), rec in
            sorted(c.empirical.items(), key=lambda x: (order.get(x[0][0], 9), x[0][1], x[0][2]))]


def _side_by_side(c: _Corpus) -> list[str]:
    lines = ["| defense | neighbours | stated ε | formal ε of the change | empirical ε_lb (95%) | ε_lb / formal | "
             "verdict |", "|---|---|---:|---:|---:|---:|---|"]
    for mech, kind, eps, rec in _empirical_rows(c):
        lb, formal = rec.metrics["epsilon_lower_bound"].mean, rec.metrics["formal_epsilon"].mean
        verdict = "consistent" if lb <= formal else "**VIOLATION: ε_lb > formal ε**"
        lines.append(f"| {NAMES.get(mech, mech)} | {kind} | {eps:g} | {formal:.4g} | {lb:.3f} | {lb / formal:.3f} | "
                     f"{verdict} |")
    return lines + [""]


def _findings(c: _Corpus) -> list[str]:
    out = []
    rows = _empirical_rows(c)
    violations = [(m, k, e) for m, k, e, r in rows
                  if r.metrics["epsilon_lower_bound"].mean > r.metrics["formal_epsilon"].mean]
    out.append(f"- Violations (ε_lb above the formal ε at 95% confidence): "
               + ("none" if not violations else ", ".join(f"{NAMES.get(m, m)} {k} ε={e:g}" for m, k, e in violations))
               + f" in {len(rows)} games.")
    dc1 = [(r.metrics["epsilon_lower_bound"].mean, k) for m, k, e, r in rows if m == "deepcandidate" and e == 1.0]
    if dc1:
        lb, kind = max(dc1)
        out.append(f"- Tightness, DeepCandidate at ε = 1: best ε_lb = {lb:.3f} ({kind} neighbours), "
                   + ("within a factor 2 of the formal ε (a tight audit)." if lb >= 0.5 else
                      "NOT within a factor 2 of the formal ε: the game cannot certify the guarantee is tight."))
    for m, k, e, r in rows:
        if m == "metric-dp":
            formal = r.metrics["formal_epsilon"].mean
            out.append(f"- Word-level metric DP at ε = {e:g} per word, {k} neighbours: changing one sentence costs "
                       f"ε = {formal:.4g} by its own guarantee ({formal / e:.1f} × the per-word ε); the game "
                       f"certifies at least {r.metrics['epsilon_lower_bound'].mean:.3f}.")
    return out + [""]


def _finish(fig: Any, ax: Any, path: Path, xlabel: str, ylabel: str, title: str) -> None:
    """Log-log axes, labels and legend; the PNG written atomically."""
    import matplotlib.pyplot as plt
    from veil._io import atomic_write

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=110)
    plt.close(fig)


ZERO_AT = 1e-2  # where the log-scale plot draws an empirical bound of 0


def _plot_empirical(corpus: str, c: _Corpus, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.2, 4.6))
    seen = set()
    hi = 1.0
    for mech, kind, eps, rec in _empirical_rows(c):
        lb, formal = rec.metrics["epsilon_lower_bound"].mean, rec.metrics["formal_epsilon"].mean
        hi = max(hi, formal, lb)
        label = f"{NAMES.get(mech, mech)}, {kind}"
        ax.scatter([formal], [max(lb, ZERO_AT)], color=COLORS.get(mech, "gray"), marker=MARKERS.get(kind, "x"), s=40,
                   label=None if label in seen else label, zorder=3)
        seen.add(label)
    ax.plot([1e-3, hi * 1.5], [1e-3, hi * 1.5], color="black", linewidth=1, label="ε_lb = formal ε (a tight audit)")
    ax.plot([1e-3, hi * 1.5], [5e-4, hi * 0.75], color="black", linewidth=1, linestyle=":", label="factor 2 below")
    ax.set_xlim(0.5, hi * 1.5)
    ax.set_ylim(ZERO_AT / 2, hi * 1.5)  # a bound of 0 sits visibly at ZERO_AT, inside the axes
    _finish(fig, ax, path, "formal ε of the one-sentence change",
            f"empirical ε lower bound (95%; 0 drawn at {ZERO_AT:g})", f"{corpus}: formal against empirical ε")


def _plot_exact(corpus: str, c: _Corpus, path: Path) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = []
    for variant, rec in sorted(c.audits.items()):
        pts = sorted((float(k.removeprefix("max_abs_log_ratio_eps")), m.mean) for k, m in rec.metrics.items()
                     if k.startswith("max_abs_log_ratio_eps"))
        if pts:
            series.append((variant, bool(rec.config.get("control")), pts))
    if not series:
        return False
    fig, ax = plt.subplots(figsize=(6.2, 4.2))
    hi = max(max(e, o) for _, _, pts in series for e, o in pts)
    for variant, control, pts in series:
        ax.plot([e for e, _ in pts], [o for _, o in pts], marker="o", linestyle="--" if control else "-",
                label=variant + (" (must exceed ε)" if control else ""))
    ax.plot([0.5, hi * 1.5], [0.5, hi * 1.5], color="black", linewidth=1, label="observed = ε (the bound)")
    _finish(fig, ax, path, "ε", "largest observed |log P(z|x) − log P(z|x')|", f"{corpus}: exact audit")
    return True


@register_renderer("sentdp", page="audit")
def audit_page(method: str, records: list[tuple[Path, ResultRecord]], out_dir: Path) -> str:
    corpora, _ = _index(records)
    lines = ["# Privacy audits: formal against empirical ε",
             "",
             "Each DP defense veil ships states an ε; this page checks it two ways, from `results/sentdp/*.json`. "
             "The **exact audit** (`veil audit sentdp`) computes DeepCandidate's output distributions for a document "
             "and its neighbours (one sentence replaced) and reports the largest log ratio: it must stay ≤ ε, and "
             "deliberately broken mechanisms (negative controls) must exceed it. The **empirical lower bound** "
             "(`veil audit empirical`) runs the released mechanism itself, unseeded, and turns a distinguishing "
             "test's error rates into an ε it certifies with 95% confidence: it must stay ≤ the formal ε, and the "
             "closer it gets, the less room the guarantee leaves unexplained. The SentDP utility results are on "
             "[sentdp.md](sentdp.md).",
             ""]
    shown = {k: c for k, c in sorted(corpora.items()) if c.empirical or c.audits}
    if not shown:
        return "\n".join([*lines, "No audit records yet (`veil audit sentdp`, `veil audit empirical`).", ""])
    lines += ["## How the empirical bound is computed", "", EMPIRICAL_NOTE, ""]
    for corpus, c in shown.items():
        lines += [f"## {corpus}", ""]
        if c.empirical:
            png = out_dir / f"audit_{_safe(corpus)}_empirical.png"
            _plot_empirical(corpus, c, png)
            lines += ["### Formal against empirical ε", "", f"![{corpus}: formal against empirical ε]({png.name})",
                      "", *_side_by_side(c), *_findings(c)]
        else:
            lines += ["No empirical lower bounds yet (`veil audit empirical`).", ""]
        lines += ["### Exact audit (DeepCandidate)", ""]
        png = out_dir / f"audit_{_safe(corpus)}_exact.png"
        if _plot_exact(corpus, c, png):
            lines += [f"![{corpus}: exact audit]({png.name})", ""]
        lines += _audit(c)
    lines += ["## What these audits do not cover", "",
              "- Truncation and word-level metric DP draw Laplace and Gamma noise in float64: like every textbook "
              "floating-point mechanism they are exposed in principle to Mironov's (CCS 2012) attack on the "
              "low-order bits, and their guarantee is stated for real arithmetic. Only DeepCandidate's sampler is "
              "exact (docs/sentdp.md). The empirical game here does not look at low-order bits.",
              f"- The exact audit's pass threshold is ε + {TOLERANCE:g} unless a record states its own tolerance; "
              "the empirical bound's confidence is per game (no correction across the games on this page).",
              ""]
    from veil.report.sentdp_commands import audit_commands

    lines += regenerate_section(audit_commands(records), "audit", configs=[r.config for _, r in records])
    return "\n".join(lines)
