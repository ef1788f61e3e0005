"""``docs/results/attributes.md``: private attributes in hidden representations (Coavoux et al. 2018, Tables 2-5).

Rendered from ``results/attributes/*.json`` (one record per corpus, encoder, defense, width and seed, written by
:mod:`veil.experiments.adversarial.attributes`). Renders a "no results yet" page when there are no records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from veil.report.commands import attributes_commands
from veil.report.markdown import regenerate_section, register_renderer
from veil.results import ResultRecord

__all__ = ["attributes_page", "PAPER_FINDINGS"]

ORDER = ("none", "multidetask", "grl", "generation", "decluster", "leace")
ATTACKERS = ("mlp", "mlp-wide", "linear", "adversary")
PAPER_FINDINGS = (
    "Undefended models leak: the attacker beats the most-frequent-class baseline on private variables (Table 2; "
    "on blogs, 14 points for gender and 5 for age).",
    "The defenses improve privacy on every dataset except the France Trustpilot subcorpus, usually for a small "
    "change in accuracy, sometimes a gain (Tables 3-4).",
    "News (AG, DW; Table 5): multidetasking and declustering give large privacy gains but cost accuracy (z is "
    "correlated with y); adversarial generation improves accuracy, substantially on DW.",
    "Multidetasking is the most stable and the cheapest defense; generation needs no private variables.",
)


def _pm(values: list[float], scale: float = 100.0) -> str:
    if not values:
        return "–"
    arr = scale * np.asarray(values, dtype=float)
    return f"{arr.mean():.1f}" if len(arr) == 1 else f"{arr.mean():.1f} ± {arr.std(ddof=1):.1f}"


def _values(recs: list[ResultRecord], key: str) -> list[float]:
    return [r.metrics[key].mean for r in recs if key in r.metrics]


def _welch(a: list[float], b: list[float]) -> str:
    """Mean difference a - b in points with a Welch 95% interval over seeds."""
    if len(a) < 2 or len(b) < 2:
        return f"{100 * (np.mean(a) - np.mean(b)):+.1f} (n/a: < 2 seeds)" if a and b else "–"
    from scipy import stats

    diff = 100 * (np.mean(a) - np.mean(b))
    if np.std(a) == 0 and np.std(b) == 0:
        return f"{diff:+.1f} (seeds agree exactly)"
    # Welch by hand: scipy's ttest_ind warns (precision loss) when one group is constant, e.g. a main model
    # collapsed to the majority class in every seed; the interval is still defined by the other group's spread.
    x, y = 100 * np.asarray(a, dtype=np.float64), 100 * np.asarray(b, dtype=np.float64)
    va, vb = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    df = (va + vb) ** 2 / ((va ** 2 / (len(x) - 1) if va else 0.0) + (vb ** 2 / (len(y) - 1) if vb else 0.0))
    half = float(stats.t.ppf(0.975, df)) * np.sqrt(va + vb)
    return f"{diff:+.1f} [{diff - half:+.1f}, {diff + half:+.1f}]"


def _floor_line(corpus: str, recs: list[ResultRecord]) -> str:
    adv = [r.metrics["advantage[mlp]"] for r in recs if "advantage[mlp]" in r.metrics]
    if not adv:
        return f"- {corpus}: no undefended run."
    beat = sum(1 for m in adv if m.ci_low is not None and m.ci_low > 0)
    means = [m.mean for m in adv]
    across = ""
    if len(means) >= 2:
        from scipy import stats

        t = stats.t.ppf(0.975, len(means) - 1) * np.std(means, ddof=1) / np.sqrt(len(means))
        lo, hi = 100 * (np.mean(means) - t), 100 * (np.mean(means) + t)
        verdict = "excludes 0" if lo > 0 or hi < 0 else "includes 0"
        across = f"; over seeds {100 * np.mean(means):+.1f} points [{lo:+.1f}, {hi:+.1f}] (t 95%, {verdict})"
    return (f"- {corpus}: the undefended attacker's score minus the floor's: bootstrap 95% CI above 0 in {beat}/"
            f"{len(adv)} seeds{across}.")


def _plots(groups: dict[tuple, dict[str, list[ResultRecord]]], out_dir: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from veil.report.federated import _save

    lines: list[str] = []
    for (corpus, encoder, width), by_def in sorted(groups.items()):
        fig, ax = plt.subplots(figsize=(5.6, 3.8))
        for i, d in enumerate(ORDER):
            recs = by_def.get(d, [])
            acc, priv = _values(recs, "test_accuracy"), _values(recs, "privacy[mlp]")
            if not acc or not priv:
                continue
            ax.errorbar(100 * np.mean(acc), 100 * np.mean(priv), xerr=100 * np.std(acc), yerr=100 * np.std(priv),
                        fmt="o", color=f"C{i}", label=d, capsize=3)
        floor = _values([r for rs in by_def.values() for r in rs], "floor_privacy")
        if floor:
            ax.axhline(100 * np.mean(floor), color="black", ls=":", lw=0.8, label="floor")
        ax.set_xlabel("main-task test accuracy %")
        ax.set_ylabel("privacy % (1 - attacker score)")
        ax.set_title(f"{corpus}, {encoder}, W={width}")
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = out_dir / f"attributes_{corpus}_{encoder}_w{width}.png"
        _save(fig, path)
        lines += [f"![privacy against accuracy, {corpus} {encoder} W={width}]({path.name})", ""]
    return lines


def _strongest_privacy(r: ResultRecord) -> float | None:
    """Privacy under the strongest post-hoc attacker of one run (the lowest of mlp, mlp-wide and linear)."""
    vals = [r.metrics[k].mean for k in ("privacy[mlp]", "privacy[mlp-wide]", "privacy[linear]") if k in r.metrics]
    return min(vals) if vals else None


def _width_plot(recs: list[ResultRecord], out_dir: Path) -> list[str]:
    groups: dict[tuple[str, str], list[ResultRecord]] = {}
    for r in recs:
        groups.setdefault((r.config["corpus"], r.config.get("encoder", "lstm")), []).append(r)
    swept = {g: rs for g, rs in sorted(groups.items()) if len({r.config["width"] for r in rs}) > 1}
    if not swept:
        return ["Privacy and accuracy against W: only one width has been run so far (the sweep uses W=64).", ""]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from veil.report.federated import _save

    lines = []
    for (corpus, encoder), rs in swept.items():
        widths = sorted({r.config["width"] for r in rs})
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
        for i, d in enumerate(ORDER):
            for ax, value in zip(axes, (lambda r: r.metrics["test_accuracy"].mean, _strongest_privacy)):
                pts = []
                for w in widths:
                    vals = [v for v in (value(r) for r in rs if r.config["defense"] == d and r.config["width"] == w)
                            if v is not None]
                    pts.append((w, float(np.mean(vals)) if vals else np.nan))
                if any(np.isfinite(p[1]) for p in pts):
                    ax.plot([p[0] for p in pts], [100 * p[1] for p in pts], marker="o", color=f"C{i}", label=d)
        for ax, name in zip(axes, ("main accuracy %", "privacy % (strongest post-hoc attacker)")):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("W")
            ax.set_ylabel(name)
        axes[1].legend(fontsize=7)
        fig.suptitle(f"{corpus}, {encoder}: mean over seeds", fontsize=9)
        fig.tight_layout()
        path = out_dir / f"attributes_width_{corpus}_{encoder}.png"
        _save(fig, path)
        lines += [f"![accuracy and privacy against W, {corpus} {encoder}]({path.name})", ""]
    return lines


@register_renderer("attributes")
def attributes_page(method: str, records: list[tuple[Path, ResultRecord]], out_dir: Path) -> str:
    recs = [r for _, r in records]
    lines = ["# Results: private attributes in hidden representations (Coavoux et al. 2018)", "",
             "An eavesdropper reads r(x), the representation a text classifier sends to a server, and trains a model "
             "to predict private variables z (named people, correspondents, a health condition, the speaker). "
             "Privacy = 1 - the attacker's test score (mean per-variable accuracy, or micro-F over entity sets for "
             "news). Attackers are trained after the main model on the frozen r(x) of the training split and chosen "
             "on dev: `mlp` (the paper's), `mlp-wide` (two layers of 256) and `linear` (a probe); `adversary` is the "
             "training-time duplicate attacker of multidetasking / gradient reversal, scored on the same test r(x). "
             "Floor = the best constant predictor on the training labels (most frequent class per variable; for "
             "entities the better of 'every entity', the authors' baseline, and 'the entities in most examples'). "
             "Main models are selected on "
             "dev accuracy. Numbers are mean ± sd over seeds, in points; see docs/attributes.md.", ""]
    if not recs:
        return "\n".join(lines + ["No results yet: run `veil adversarial sweep --corpus news-articles --results "
                                  "results/attributes`.", ""])
    groups: dict[tuple, dict[str, list[ResultRecord]]] = {}
    for r in recs:
        c = r.config
        groups.setdefault((c["corpus"], c.get("encoder", "lstm"), c["width"]), {}).setdefault(c["defense"], []).append(r)
    lines += ["## Main accuracy and privacy per defense (Tables 3-5 layout)", "",
              "| corpus | encoder | W | defense | seeds | main acc. | majority | privacy: mlp | mlp-wide | linear | "
              "adversary | floor |", "|---|---|---:|---|---:|---|---|---|---|---|---|---|"]
    for (corpus, encoder, width), by_def in sorted(groups.items()):
        for d in [*ORDER, *sorted(set(by_def) - set(ORDER))]:
            rs = by_def.get(d)
            if not rs:
                continue
            cells = [_pm(_values(rs, f"privacy[{a}]")) for a in ATTACKERS]
            lines.append(f"| {corpus} | {encoder} | {width} | {d} | {len(rs)} | {_pm(_values(rs, 'test_accuracy'))} | "
                         f"{_pm(_values(rs, 'majority_accuracy'))} | " + " | ".join(cells)
                         + f" | {_pm(_values(rs, 'floor_privacy'))} |")
    lines += ["", "## Each defense against the undefended model", "",
              "Differences in points, Welch 95% interval over seeds: privacy gain (+ = more private) under each "
              "attacker, and accuracy cost (- = less accurate).", "",
              "| corpus | encoder | W | defense | accuracy change | privacy gain: mlp | mlp-wide | linear |",
              "|---|---|---:|---|---|---|---|---|"]
    for (corpus, encoder, width), by_def in sorted(groups.items()):
        base = by_def.get("none", [])
        for d in ORDER[1:]:
            rs = by_def.get(d)
            if not rs or not base:
                continue
            gains = [_welch(_values(rs, f"privacy[{a}]"), _values(base, f"privacy[{a}]")) for a in ATTACKERS[:3]]
            lines.append(f"| {corpus} | {encoder} | {width} | {d} | "
                         f"{_welch(_values(rs, 'test_accuracy'), _values(base, 'test_accuracy'))} | "
                         + " | ".join(gains) + " |")
    lines += ["", "## Does the undefended attacker beat the floor?", ""]
    for (corpus, encoder, width), by_def in sorted(groups.items()):
        lines.append(_floor_line(f"{corpus} ({encoder}, W={width})", by_def.get("none", [])))
    lines += ["", "## Privacy against accuracy", ""]
    lines += _plots(groups, out_dir)
    lines += _width_plot(recs, out_dir)
    lines += ["## The paper's findings beside ours", "",
              "Our copy of the paper lost Tables 1-5, so its numbers are missing here; these are the findings its "
              "text states (Sec. 4.3), to compare with the tables above (different corpora: AG/DW news, Trustpilot "
              "and blogs are not available offline):", ""]
    lines += [f"- {f}" for f in PAPER_FINDINGS]
    commits = sorted({r.git_commit for r in recs})
    lines += ["", f"Commits: {', '.join(commits)}. The sweeps are resumable."]
    lines += regenerate_section(attributes_commands(records), "attributes", configs=[r.config for _, r in records])
    return "\n".join(lines)
