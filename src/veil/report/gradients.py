"""Result page for the gradient attacks (results/gradients/*.json): the Table 2 analogue and the attacks on
recorded federated runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from veil.report.commands import gradients_commands
from veil.report.markdown import proportion_interval, regenerate_section, register_renderer
from veil.results import Metric, ResultRecord

PAPER_TABLE2 = {0: {d: 0.82 for d in (4, 16, 64, 256, 1024)},
                1: {4: 0.76, 16: 0.56, 64: 0.30, 256: 0.22, 1024: 0.08},
                2: {d: 0.0 for d in (4, 16, 64, 256, 1024)}, 4: {d: 0.0 for d in (4, 16, 64, 256, 1024)}}


def _fmt(m: Metric | None) -> str:
    if m is None:
        return "–"
    if m.ci_low is None or m.ci_high is None:
        return f"{m.mean:.2f}"
    low, high = proportion_interval(m.mean, m.n, m.ci_low, m.ci_high, m.ci_level)  # every _fmt score is a share
    return f"{m.mean:.2f} [{low:.2f}, {high:.2f}]"


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


def _chain_label(c: dict[str, Any]) -> str:
    dfn = c.get("defense") or {}
    setting = "none" if dfn.get("name", "none") == "none" else f"TextHide ({dfn.get('m')},{dfn.get('k')})"
    drop = f", dropout {c.get('dropout'):g}" if c.get("dropout") else ""
    dp = (c.get("run") or {}).get("differential_privacy")
    dp_text = (f", {dp['mode']} DP (C {dp['clip']:g}, z {dp['noise_multiplier']:g}: epsilon {dp['epsilon']:.2f} at "
               f"delta {dp['delta']:.2g})") if isinstance(dp, dict) else ""
    corpus = c.get("corpus") or (c.get("run") or {}).get("corpus")
    return f"{corpus + ': ' if corpus and corpus != 'rt-polarity' else ''}{c.get('client_mode')}, {setting}{drop}{dp_text}"


def _chain_tables(recs: list[ResultRecord], out_dir: Path) -> list[str]:
    if not recs:
        return ["No end-to-end runs yet (`veil federated chain-sweep` or `veil attack chain --record DIR`).", ""]
    lines = ["The server's whole chain on recorded Flower runs: analytic inversion of every client update, then per "
             "client mask recovery and unmixing over an index of the whole corpus (see "
             "[the attack page](../attacks-gradients.md#the-end-to-end-chain)). Rows: head inputs trained on in the "
             "recorded rounds. *Encodings*: rows read off the updates exactly (relative squared error <= 1e-3). "
             "*Unmixed*: rows whose every private source the chain names. *Sentences*: distinct private training "
             "sentences mixed into any recorded step that the chain names, with the precision of what it names "
             "(chance: the precision of naming index entries at random). 95% Wilson intervals. Rows with DP "
             "(`veil federated dp-sweep`, veil.federated.dp): `server` and `client` DP protect the global models the "
             "server releases, not the replies it reads (raw, or clipped on the client); `local` DP noises every "
             "reply on the client. Epsilon: per client (its whole local data), over the recorded rounds.", "",
             "| run | batch | rounds x clients | rows | encodings | unmixed | sentences | precision (chance) | "
             "masks used |", "|---" * 9 + "|"]
    order = sorted(recs, key=lambda r: (str(r.config.get("corpus")) != "rt-polarity", str(r.config.get("corpus")),
                                        "differential_privacy" in (r.config.get("run") or {}),
                                        ((r.config.get("run") or {}).get("differential_privacy") or {}).get("mode", ""),
                                        r.config.get("client_mode") != "alg2", r.config.get("dropout") or 0,
                                        (r.config.get("defense") or {}).get("name") != "texthide",
                                        r.config.get("batch_size", 0)))
    for rec in order:
        c, m = rec.config, rec.metrics
        run = c.get("run") or {}
        rows = m["encodings_recovered"].n
        prec = m.get("sentence_precision")
        chance = m.get("sentence_precision_chance")
        used = ", ".join(f"{k} {v}" for k, v in sorted(rec.extra.get("mask_source", {}).items())) or "–"
        lines.append(f"| {_chain_label(c)} | {c.get('batch_size')} | {run.get('rounds')} x "
                     f"{len(run.get('clients', []))} | {rows} | {_fmt(m.get('encodings_recovered'))} | "
                     f"{_fmt(m.get('encodings_unmixed'))} | {_fmt(m.get('sentences_recovered'))} | "
                     f"{'–' if prec is None or not prec.n else _fmt(prec)}"
                     f"{'' if chance is None else f' ({chance.mean:.3f})'} | {used} |")
    lines.append("")
    lines += _chain_plot([r for r in order if r.config.get("client_mode") == "alg2" and not r.config.get("dropout")
                          and (r.config.get("defense") or {}).get("name") == "texthide"], out_dir)
    return lines


def _chain_plot(recs: list[ResultRecord], out_dir: Path) -> list[str]:
    if len(recs) < 2:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from veil.report.federated import _save

    recs = sorted(recs, key=lambda r: r.config.get("batch_size", 0))
    bs = [int(r.config["batch_size"]) for r in recs]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for key, label, style in (("encodings_recovered", "encodings read off the updates", "o-"),
                              ("encodings_unmixed", "encodings unmixed (all sources named)", "s--"),
                              ("sentences_recovered", "private sentences named", "^-"),
                              ("sentence_precision", "precision of the names", "x:")):
        ms = [r.metrics.get(key) for r in recs]
        y = [100 * (mm.mean if mm is not None else float("nan")) for mm in ms]
        err = [[100 * (mm.mean - mm.ci_low) if mm is not None and mm.ci_low is not None else 0 for mm in ms],
               [100 * (mm.ci_high - mm.mean) if mm is not None and mm.ci_high is not None else 0 for mm in ms]]
        ax.errorbar(bs, y, yerr=err, fmt=style, capsize=2, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks(bs)
    ax.set_xticklabels([str(b) for b in bs])
    ax.set_xlabel("client batch size (alg2: one SGD step per round)")
    ax.set_ylabel("% (95% Wilson intervals)")
    ax.set_ylim(-3, 103)
    ax.legend(fontsize=7, loc="lower left")
    ax.set_title("Federated TextHide: what the server reads from the updates")
    fig.tight_layout()
    path = out_dir / "gradients_chain.png"
    _save(fig, path)
    return [f"![end-to-end recovery against batch size]({path.name})", ""]


@register_renderer("gradients")
def gradients_page(method: str, records: list[tuple[Path, ResultRecord]], out_dir: Path) -> str:
    recs = [r for _, r in records]
    table2 = [r for r in recs if r.experiment == "table2"]
    taps = [r for r in recs if r.experiment.startswith("tap-") and r.experiment != "tap-chain"]
    chain = [r for r in recs if r.experiment == "tap-chain"]
    lines: list[Any] = ["# Results: gradient attacks on federated TextHide", "",
                        "See [the attack page](../attacks-gradients.md) for the threat model and every departure "
                        "from the paper.", "", "## Table 2 analogue: Alg. 3 gradient matching with dummy masks", ""]
    lines += _table2(table2)
    lines += ["## Attacks on recorded federated runs", ""]
    lines += _tap_tables(taps)
    lines += ["## End to end: from the updates to the private sentences", ""]
    lines += _chain_tables(chain, out_dir)
    lines += regenerate_section(gradients_commands(records), "gradients", configs=[r.config for _, r in records])
    return "\n".join(lines)
