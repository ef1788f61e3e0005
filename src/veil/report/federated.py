"""``docs/results/federated.md``: utility of federated TextHide on Flower against centralised training."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from veil.report.commands import federated_commands
from veil.report.markdown import beats_majority, regenerate_section, register_renderer
from veil.results import ResultRecord

__all__ = ["federated_page"]


def _setting(c: dict[str, Any]) -> str:
    from veil.defenses.none import is_no_defense

    setting = "none" if is_no_defense(c) else f"TextHide ({c['m']},{c['k']}) {c.get('mode', 'intra')}"
    dp = c.get("differential_privacy")
    if c.get("dp") and isinstance(dp, dict):  # veil.federated.dp: the placement, its parameters, its epsilon
        setting += (f"; {c['dp']} DP (C {c['dp_clip']:g}, z {c['dp_noise']:g}: epsilon {dp['epsilon']:.2f} at delta "
                    f"{dp['delta']:.2g} per client)")
    return setting


def _partition(c: dict[str, Any]) -> str:
    if c.get("clients") == 1:
        return "centralised"
    return "IID" if not c.get("alpha") else f"Dirichlet {c['alpha']:g}"


def _key(c: dict[str, Any]) -> tuple:
    return (c.get("corpus"), c.get("client_mode"), _setting(c), c.get("clients"), _partition(c), c.get("rounds"),
            c.get("batch_size"), c.get("engine"), "fine-tuned" if c.get("finetune") else "frozen",
            int(c.get("max_train") or 0))


def _main_grid(c: dict[str, Any]) -> bool:
    """The utility grid the plots show: frozen encoder on the whole train split."""
    return not c.get("finetune") and not c.get("max_train")


def _mean_ci(values: list[float]) -> str:
    if len(values) == 1:
        return f"{100 * values[0]:.1f}"
    from scipy import stats

    arr = np.asarray(values)
    half = stats.t.ppf(0.975, len(arr) - 1) * arr.std(ddof=1) / np.sqrt(len(arr))
    return f"{100 * arr.mean():.1f} ± {100 * half:.1f}"


def _save(fig: Any, path: Path) -> None:
    import matplotlib.pyplot as plt

    from veil._io import atomic_write

    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=110)
    plt.close(fig)


def _utility_plot(groups: dict[tuple, list[ResultRecord]], out_dir: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: dict[tuple[str, str], list[tuple[int, float]]] = {}
    central: dict[str, float] = {}
    for key, recs in groups.items():
        accs = [r.metrics["test_accuracy"].mean for r in recs]
        if key[4] == "centralised":
            central[key[2]] = float(np.mean(accs))
        elif key[5] == max(k[5] for k in groups):  # one round budget per line
            series.setdefault((key[2], key[4]), []).append((int(key[3]), float(np.mean(accs))))
    if not series:
        return []
    fig, ax = plt.subplots(figsize=(8.0, 3.8))
    colors = {"none": "tab:blue"}
    for (setting, part), pts in sorted(series.items()):
        pts.sort()
        color = colors.setdefault(setting, f"C{len(colors) + 1}")
        style = {"IID": "-", "Dirichlet 0.5": "--"}.get(part, ":")
        ax.plot([p[0] for p in pts], [100 * p[1] for p in pts], style, marker="o", color=color,
                label=f"{setting}, {part}")
    for setting, acc in central.items():
        ax.axhline(100 * acc, color=colors.get(setting, "grey"), lw=0.8, alpha=0.6)
    rates = {round(r.metrics["majority_rate"].mean, 4) for rs in groups.values() for r in rs
             if "majority_rate" in r.metrics}
    for rate in rates:
        ax.axhline(100 * rate, color="black", lw=0.8, ls=(0, (1, 3)))
        ax.annotate("one-class head", (ax.get_xlim()[0], 100 * rate), fontsize=7, va="bottom")
    ax.set_xlabel("clients (horizontal lines: centralised, same budget)")
    ax.set_ylabel("test accuracy % (mean over seeds)")
    ax.set_xticks(sorted({p[0] for pts in series.values() for p in pts}))
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title("Federated utility: plain vs TextHide")
    fig.tight_layout()
    path = out_dir / "federated_utility.png"
    _save(fig, path)
    return [f"![test accuracy against number of clients]({path.name})", ""]


def _curves_plot(recs: list[ResultRecord], out_dir: Path) -> list[str]:
    picked = [r for r in recs if r.config.get("clients") == 3 and not r.config.get("alpha") and r.config.get("seed") == 0
              and r.metrics.get("test_accuracy") is not None and _main_grid(r.config)]
    if not picked:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    for rec in sorted(picked, key=lambda r: r.experiment):
        rows = [row for row in rec.extra.get("rounds", []) if row.get("test_accuracy") is not None]
        ax.plot([row["round"] for row in rows], [100 * row["test_accuracy"] for row in rows],
                label=f"{_setting(rec.config)}, {rec.config['client_mode']}")
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy %")
    ax.legend(fontsize=7)
    ax.set_title("3 clients, IID, seed 0: accuracy after every round")
    fig.tight_layout()
    path = out_dir / "federated_rounds.png"
    _save(fig, path)
    return [f"![test accuracy after every round]({path.name})", ""]


ALPHA = 0.05


def _beats_majority(recs: list[ResultRecord]) -> str:
    """Seeds whose test accuracy beats the majority-class share (exact one-sided binomial test at ALPHA)."""
    verdicts = [beats_majority(r, ALPHA) for r in recs]
    if any(v is None for v in verdicts):
        return "–"
    return f"{sum(v.reject for v in verdicts)}/{len(recs)}"


@register_renderer("federated")
def federated_page(method: str, records: list[tuple[Path, ResultRecord]], out_dir: Path) -> str:
    recs = [r for _, r in records]
    done = [r for r in recs if "test_accuracy" in r.metrics]
    infeasible = [r for r in recs if r.extra.get("infeasible")]
    lines = ["# Results: federated TextHide on Flower", "",
             "A classifier head (one hidden layer) over MiniLM, trained across clients with Flower 1.41; the encoder is "
             "frozen unless the row says fine-tuned (then every client also trains MiniLM and sends it with the "
             "head). "
             "Every client encrypts its batches with its own TextHide mask pool (OS CSPRNG, never sent) and sends "
             "head weights; the server averages them (FedAvg). Centralised = the same code with one client "
             "holding the whole train split, so model, optimiser, epochs over the data and test set are the same. "
             "Test accuracy: every client scores its IID share of the test split through its own pool after the "
             "last round (nothing is selected on the test set). Seeds set the partition, head init and batch "
             "order; keys and mixing come from the OS CSPRNG in every run. ± is a t 95% interval over seeds.", ""]
    groups: dict[tuple, list[ResultRecord]] = {}
    for rec in done:
        groups.setdefault(_key(rec.config), []).append(rec)
    central = {(k[0], k[1], k[2], k[5], k[6], k[8], k[9]): float(np.mean([r.metrics["test_accuracy"].mean for r in v]))
               for k, v in groups.items() if k[4] == "centralised"}
    majority = sorted({round(r.metrics["majority_rate"].mean, 4) for r in done if "majority_rate" in r.metrics})
    if majority:
        lines += [f"The test split's most common class is {', '.join(f'{100 * m:.1f}%' for m in majority)} of it: a "
                  "head that predicts one class for everything scores exactly that. 'One class' counts the seeds "
                  "whose final head did (every test prediction the same class); 'beats one-class' counts the seeds "
                  "whose accuracy is above that share by an exact one-sided binomial test over the test examples "
                  f"(alpha = {ALPHA}; veil.metrics.stats.binomial_test).", ""]
    lines += ["| corpus | encoder | train examples | client mode | defense | clients | partition | rounds | batch | "
              "engine | seeds | test accuracy % | vs centralised (points) | one class | beats one-class | "
              "wall time / run |",
              "|---|---|---:|---|---|---:|---|---:|---:|---|---:|---|---:|---|---|---:|"]
    for key in sorted(groups, key=lambda k: (k[0], k[9] != 0, k[8], k[1], k[2], k[3] != 1, k[3], k[4], k[5])):
        rs = groups[key]
        accs = [r.metrics["test_accuracy"].mean for r in rs]
        if len(rs) == 1:
            m = rs[0].metrics["test_accuracy"]
            acc = f"{100 * m.mean:.1f} [{100 * m.ci_low:.1f}, {100 * m.ci_high:.1f}]"
        else:
            acc = _mean_ci(accs)
        ref = central.get((key[0], key[1], key[2], key[5], key[6], key[8], key[9]))
        gap = "–" if ref is None or key[4] == "centralised" else f"{100 * (np.mean(accs) - ref):+.1f}"
        wall = np.mean([r.wall_time_s for r in rs])
        flags = [r.extra.get("collapsed") for r in rs]
        one = "–" if any(f is None for f in flags) else f"{sum(bool(f) for f in flags)}/{len(flags)}"
        lines.append(f"| {key[0]} | {key[8]} | {key[9] or 'all'} | {key[1]} | {key[2]} | {key[3]} | {key[4]} | "
                     f"{key[5]} | {key[6]} | {key[7]} | "
                     f"{len(rs)} | {acc} | {gap} | {one} | {_beats_majority(rs)} | {wall:.0f} s |")
    lines.append("")
    if len(done) == 1:
        lines += ["(one run: the interval is Wilson 95% over test examples)", ""]
    # the plot shows the frozen-encoder grid: the rows on the largest training set (all, or the largest slice)
    frozen = {k: v for k, v in groups.items() if k[8] == "frozen"}
    if frozen:
        biggest = 0 if any(k[9] == 0 for k in frozen) else max(k[9] for k in frozen)
        frozen = {k: v for k, v in frozen.items() if k[9] == biggest}
    lines += _utility_plot(frozen, out_dir)
    lines += _curves_plot(done, out_dir)
    if infeasible:
        lines += ["## Infeasible cells", "",
                  "A per-class Dirichlet partition that cannot give every client a batch is reported, not changed:", ""]
        for rec in sorted(infeasible, key=lambda r: r.experiment):
            lines.append(f"- `{rec.experiment}`: {rec.extra['infeasible']}")
        lines.append("")
    commits = sorted({r.git_commit for r in recs})
    lines += [f"Commits: {', '.join(commits)}. The sweep is resumable; see docs/federated.md."]
    lines += regenerate_section(federated_commands(records), "federated", configs=[r.config for _, r in records])
    return "\n".join(lines)
