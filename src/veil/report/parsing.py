"""Result page for privacy-preserving parsing (results/parsing/*.json): Hu et al. 2020, Table 1 and Table 2
(random substitution; the neural obfuscator against it, with computed verdicts), for veil's biaffine parser,
spaCy sm and spaCy md (unseen)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from veil.report.commands import parsing_commands
from veil.report.markdown import regenerate_section, register_renderer
from veil.results import Metric, ResultRecord

_LEVELS = ("none", "P1", "P2", "P3", "P4", "P5")
_ROWS = {"none": "no obfuscation", "P1": "NE (P1)", "P2": "+Nouns (P2)", "P3": "+Adj (P3)", "P4": "+Verbs (P4)",
         "P5": "+Adv (P5)"}
_TAGS = {"P1": "NNP NNPS", "P2": "NN NNS", "P3": "JJ JJR JJS", "P4": "VB VBD VBG VBN VBP VBZ", "P5": "RB RBR RBS"}
_PARSERS = {"biaffine": "veil's biaffine parser (trained on the silver trees)",
            "spacy-sm": "spaCy en_core_web_sm (the parser that made the silver trees)",
            "spacy-md": "spaCy en_core_web_md (not used to make anything: the unseen parser)"}
#: Hu et al. 2020 Table 2, random substitution: (UAS, LAS, prv trained, ratio, prv BERT, ratio);
#: (a) their trained biaffine parser (no obfuscation 95.0 / 93.5), (b) the AllenNLP parser (94.2 / 92.6)
PAPER_BIAFFINE = {"none": (95.0, 93.5), "P1": (94.1, 93.0, 68.3, 2.97, 66.9, 2.84),
                  "P2": (93.7, 92.9, 70.7, 3.20, 70.3, 3.15), "P3": (93.1, 92.4, 71.9, 3.31, 72.3, 3.36),
                  "P4": (85.2, 80.4, 68.1, 2.67, 80.2, 4.30), "P5": (86.4, 78.7, 67.2, 2.63, 81.2, 4.60)}
PAPER_ALLENNLP = {"none": (94.2, 92.6), "P1": (91.9, 89.7), "P2": (91.5, 89.2), "P3": (90.8, 88.5),
                  "P4": (78.2, 75.3), "P5": (76.7, 73.5)}
#: Hu et al. 2020 Table 2, neural obfuscator: (UAS, LAS, prv trained, prv BERT) with their biaffine parser, and
#: (UAS, LAS) with the AllenNLP parser (prv is the same for every parser)
PAPER_NEURAL_BIAFFINE = {"P1": (94.3, 92.9, 68.4, 66.4), "P2": (94.1, 92.4, 69.7, 69.4),
                         "P3": (93.6, 91.7, 70.5, 70.1), "P4": (87.3, 78.7, 65.3, 78.1), "P5": (88.6, 76.6, 64.2, 77.5)}
PAPER_NEURAL_ALLENNLP = {"P1": (92.2, 90.1), "P2": (91.5, 89.4), "P3": (91.2, 89.0), "P4": (82.2, 79.4),
                         "P5": (82.0, 78.9)}


def _f(m: Metric | None, digits: int = 1) -> str:
    if m is None:
        return "–"
    if m.ci_low is None or m.ci_high is None:
        return f"{m.mean:.{digits}f}"
    return f"{m.mean:.{digits}f} [{m.ci_low:.{digits}f}, {m.ci_high:.{digits}f}]"


def _table1(recs: list[ResultRecord]) -> list[str]:
    lines = ["## Table 1: the POS spectrum", "",
             "Each level hides its tags and every tag above it (cumulative). Share of test tokens hidden, veil's "
             "silver test split.", ""]
    if not recs:
        return lines + ["No results yet (`veil parse eval`).", ""]
    rec = recs[0]
    lines += ["| level | tags added | tokens hidden (%) |", "|---|---|---|"]
    for lv in _LEVELS[1:]:
        lines.append(f"| {_ROWS[lv]} | {_TAGS[lv]} | {_f(rec.metrics.get(f'share_{lv}'))} |")
    c = rec.config
    return lines + ["", f"{c.get('test_sentences')} test sentences, {c.get('test_words')} words "
                        f"(treebank {c.get('treebank')}).", ""]


def _table2(evals: dict[tuple[str, str], ResultRecord], attacks: dict[tuple[str, str], ResultRecord]) -> list[str]:
    lines = ["## Table 2 (random substitution)", "",
             "UAS/LAS (%, punctuation included as in the authors' code; 95% sentence-bootstrap intervals) of each "
             "parser on the test sentences obfuscated at each level, every tree compared by position with the "
             "silver tree of the original sentence. prv = 100 - 100 x MRR of the attacker (pessimistic ties, told "
             "which positions were replaced); ratio = UAS / (100 - prv), the paper's breach ratio (its footnote "
             "says LAS, its numbers are UAS: veil follows the numbers). MiniLM: a head "
             "trained over a frozen all-MiniLM-L6-v2 (the paper has no such column); masked LM: veil's earlier "
             "word-level BiLSTM masked LM. Strongest: the lowest prv of every attacker at that level (see "
             "*Attackers and floors*), with how its training ended. The paper's numbers (PTB, gold trees; BERT-base "
             "as the masked-LM attacker) are in parentheses.", ""]
    if not evals and not attacks:
        return lines + ["No results yet (`veil parse eval`, `veil attack word-recovery`).", ""]
    for parser, title in _PARSERS.items():
        if not any(p == parser for p, _ in evals):
            continue
        paper = PAPER_BIAFFINE if parser == "biaffine" else PAPER_ALLENNLP
        lines += [f"### {title}", "", "| obf. terms | UAS | LAS | UAS no punct | prv MiniLM | ratio | prv trained | "
                  "ratio | prv masked LM | ratio | prv strongest (which; how it ended) | ratio |", "|---" * 12 + "|"]
        for lv in _LEVELS:
            rec = evals.get((parser, lv))
            if rec is None:
                continue
            m = rec.metrics
            p = paper.get(lv, ())
            uas = m["uas"].mean
            cells = [f"{_f(m.get('uas'))} ({p[0]})" if p else _f(m.get("uas")),
                     f"{_f(m.get('las'))} ({p[1]})" if p else _f(m.get("las")), _f(m.get("uas_nopunct"))]
            for attacker, k in (("minilm", None), ("trained", 0), ("mlm", 1)):  # k: the paper's column, if any
                a = attacks.get((attacker, lv))
                if a is None or lv == "none":
                    cells += ["–", "–"]
                    continue
                prv = a.metrics["prv"].mean
                ratio = f"{uas / (100 - prv):.2f}" if prv < 100 else "inf"
                pp = PAPER_BIAFFINE.get(lv, ())
                if k is not None and len(pp) > 2:  # the paper's prv is shared by all parsers; its ratio uses this UAS
                    paper_prv = pp[2 + 2 * k]
                    cells += [f"{_f(a.metrics['prv'])} ({paper_prv})", f"{ratio} ({p[0] / (100 - paper_prv):.2f})"]
                else:
                    cells += [_f(a.metrics["prv"]), ratio]
            best = _strongest(attacks, lv) if lv != "none" else None
            if best is None:
                cells += ["–", "–"]
            else:
                prv = best[0].metrics["prv"].mean
                cells += [f"{_f(best[0].metrics['prv'])} ({best[0].config['attacker']}; {best[1]})",
                          f"{uas / (100 - prv):.2f}" if prv < 100 else "inf"]
            lines.append(f"| {_ROWS[lv]} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def _pattern(evals: dict[tuple[str, str], ResultRecord]) -> list[str]:
    """The paper's pattern, computed: UAS holds through P3 and drops sharply once verbs are hidden (P4)."""
    lines = ["## The paper's pattern", "", "Random substitution should leave UAS nearly intact through P1..P3 and cost "
             "it sharply once verbs are hidden. Checked per parser: the one-level drop P3 -> P4 against the mean "
             "per-level drop from no obfuscation to P3 (the paper, biaffine: 0.6 points per level, then 7.9).", ""]
    rows = []
    for parser in _PARSERS:
        uas = {lv: evals[(parser, lv)].metrics["uas"].mean for lv in ("none", "P3", "P4") if (parser, lv) in evals}
        if len(uas) < 3:
            continue
        early, verbs = (uas["none"] - uas["P3"]) / 3, uas["P3"] - uas["P4"]
        verdict = "holds" if verbs > 2 * max(early, 0.0) else "does not hold"
        rows.append(f"| {parser} | {early:.1f} | {verbs:.1f} | {verdict} |")
    if not rows:
        return []
    return lines + ["| parser | mean drop per level, none -> P3 | drop P3 -> P4 | pattern (P3 -> P4 more than twice "
                    "the early rate) |", "|---|---|---|---|", *rows, ""]


_ATTACKERS = ("veil-mlm-tuned", "veil-mlm", "trained", "minilm", "mlm", "tag-frequency", "keep-word")


def _ended(rec: ResultRecord) -> str:
    """How a learning attacker's training ended: "flattened" (its own dev MRR stopped rising), "cut short" (the
    minute budget, the step cap or the epochs ended it first), "no curve" (a fixed budget, no dev split) or "no
    training"."""
    attack = rec.config.get("attack", {})
    if rec.config.get("attacker") in ("veil-mlm", "tag-frequency", "keep-word"):
        return "no training"
    stopped = attack.get("stopped")
    if stopped is None:
        return "no curve"
    return "flattened" if stopped == "flattened" else "cut short"


def _strongest(attacks: dict[tuple[str, str], ResultRecord], lv: str) -> tuple[ResultRecord, str] | None:
    """The attacker with the lowest prv at ``lv`` and how its training ended."""
    ran = [(attacks[(n, lv)].metrics["prv"].mean, n) for n in _ATTACKERS if (n, lv) in attacks]
    if not ran:
        return None
    rec = attacks[(min(ran)[1], lv)]
    return rec, _ended(rec)


def _floors(attacks: dict[tuple[str, str], ResultRecord]) -> list[str]:
    names = _ATTACKERS
    if not attacks:
        return []
    lines = ["## Attackers and floors", "", "prv / top-1 (%) / coverage (share of true words the attacker can rank "
             "at all: in its vocabulary or candidate words; the rest count as misses) per level. veil-mlm and "
             "veil-mlm-tuned: veil's own masked LM, zero-shot and fine-tuned on the attacker's own obfuscations "
             "(their candidates are every word of the public text). Strongest: the attacker with the lowest prv "
             "at that level, and how its training ended: a verdict rests on it only when its learning curve "
             "flattened (or it does not train); \"cut short\" means the budget (minutes or a step cap) ended it while "
             "its own dev MRR "
             "still rose, so its prv is an upper bound on privacy, not a measurement of it; \"no curve\": an "
             "attacker of the earlier fixed-budget kind.", "",
             "| level | " + " | ".join(names) + " | strongest |", "|---" * (len(names) + 2) + "|"]
    for lv in _LEVELS[1:]:
        cells = []
        for n in names:
            a = attacks.get((n, lv))
            cells.append("–" if a is None else f"{a.metrics['prv'].mean:.1f} / {a.metrics['top1'].mean:.1f} / "
                                               f"{a.metrics['coverage'].mean:.0f}")
        best = _strongest(attacks, lv)
        if best is not None:
            rec, ended = best
            lines.append(f"| {_ROWS[lv]} | " + " | ".join(cells) + f" | {rec.config['attacker']} "
                         f"({rec.metrics['prv'].mean:.1f}; {ended}) |")
    return lines + [""]


def _curves(attacks: dict[tuple[str, str], ResultRecord], out_dir: Path) -> list[str]:
    """Learning curves of the attackers that record them: test prv against training steps, per level."""
    curved = {k: r for k, r in attacks.items() if (r.extra or {}).get("curve")}
    if not curved:
        return []
    levels = [lv for lv in _LEVELS[1:] if any(k[1] == lv for k in curved)]
    n = max(int((r.extra or {}).get("curve_sentences", 0)) for r in curved.values())
    lines = ["## Learning curves", "",
             f"Each learning attacker measures the MRR on a held-out share of its OWN public sentences at every "
             f"evaluation (it selects its weights and stops on that alone); at the same moments the experiment "
             f"scores it on the first {n} test sentences (prv, drawn here; the attacker never sees them). A curve "
             "that has flattened supports a verdict; one still falling when the budget ran out says the attacker "
             "was cut short. Dashed: attackers that do not train (veil's masked LM zero-shot, the tag-frequency "
             "floor), on all test sentences.", ""]
    png = out_dir / "parsing_learning_curves.png"
    _plot_curves(curved, attacks, levels, png)
    lines += [f"![word-recovery learning curves]({png.name})", "",
              "| attacker | level | ended | steps | minutes | evaluations | selected at (step) | own dev MRR there | "
              "test prv: start -> selected -> last | final prv (all test sentences) |", "|---" * 10 + "|"]
    for (who, lv), rec in sorted(curved.items(), key=lambda kv: (kv[0][0], _LEVELS.index(kv[0][1]))):
        curve = rec.extra["curve"]
        sel = rec.config.get("attack", {}).get("selected") or {}
        at = next((c for c in curve if c.get("step") == sel.get("step")), curve[-1])
        lines.append(f"| {who} | {lv} | {_ended(rec)} | {curve[-1].get('step', '–')} | {curve[-1]['minutes']:.1f} | "
                     f"{len(curve)} | {sel.get('step', '–')} | {sel.get('dev_mrr', float('nan')):.3f} | "
                     f"{curve[0]['test_prv']:.1f} -> {at['test_prv']:.1f} -> {curve[-1]['test_prv']:.1f} | "
                     f"{_f(rec.metrics['prv'])} |")
    return lines + [""]


def _plot_curves(curved: dict[tuple[str, str], ResultRecord], attacks: dict[tuple[str, str], ResultRecord],
                 levels: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from veil._io import atomic_write

    colors = {"veil-mlm-tuned": "tab:red", "trained": "tab:blue", "veil-mlm": "tab:red", "tag-frequency": "gray"}
    fig, axes = plt.subplots(1, len(levels), figsize=(3.2 * len(levels) + 0.6, 3.4), squeeze=False, sharey=True)
    for ax, lv in zip(axes[0], levels):
        for (who, level), rec in sorted(curved.items()):
            if level != lv:
                continue
            curve = rec.extra["curve"]
            ax.plot([c["step"] for c in curve], [c["test_prv"] for c in curve], marker="o", markersize=3,
                    color=colors.get(who, "black"), label=who)
        for who in ("veil-mlm", "tag-frequency"):
            if (who, lv) in attacks:
                ax.axhline(attacks[(who, lv)].metrics["prv"].mean, color=colors[who], linestyle="--", linewidth=1,
                           label=f"{who} (no training)")
        ax.set_title(_ROWS[lv])
        ax.set_xlabel("training steps (batches)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("test prv (lower: stronger attacker)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=100)
    plt.close(fig)


def _models(recs: list[ResultRecord], out_dir: Path) -> list[str]:
    """veil's masked LM: what it learned from, and its held-out accuracy against training time."""
    models = [r for r in recs if r.experiment.startswith("model-")]
    if not models:
        return []
    lines = ["## veil's masked LM", "",
             "The veil-mlm attackers use veil's own masked LM (`veil models train mlm`): all-MiniLM-L6-v2's weights "
             "with masked-LM training continued on the public train split of the silver treebank (whole words "
             "masked, open-class words at a rate drawn per sentence). Held-out accuracy: the share of masked "
             "subword tokens of the treebank's dev split predicted exactly (open-class words masked at 30%).", "",
             "| model | trained on | sentences | tokens seen | steps | minutes | device | ended | held-out accuracy "
             "(%) | sha256 |", "|---" * 10 + "|"]
    for r in sorted(models, key=lambda r: r.experiment):
        c = r.config
        lines.append(f"| {c['name']} | {c['data'].get('treebank')} train split ({', '.join(c['data'].get('sources') or [])}) "
                     f"| {c['train_sentences']} | {c['tokens_seen']:,} | {c['steps']} | {c['minutes']:.1f} | "
                     f"{c.get('device') or 'cpu'} | {c['stopped']} | {_f(r.metrics['heldout_accuracy'], 2)} (from "
                     f"{r.metrics['start_accuracy'].mean:.2f}) | {str(c['sha256'])[:12]} |")
    png = out_dir / "parsing_mlm_curve.png"
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from veil._io import atomic_write

    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    for r in sorted(models, key=lambda r: r.experiment):
        curve = r.extra.get("curve", [])
        ax.plot([c["minutes"] for c in curve], [c["accuracy"] for c in curve], marker="o", markersize=3,
                label=r.config["name"])
    ax.set_xlabel("training minutes")
    ax.set_ylabel("held-out masked-token accuracy (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    with atomic_write(png, "wb") as fh:
        fig.savefig(fh, format="png", dpi=100)
    plt.close(fig)
    return lines + ["", f"![held-out accuracy of veil's masked LM against training time]({png.name})", ""]


def _interval(values: list[float], ref: float) -> tuple[float, float | None, float | None]:
    """Mean of ``values - ref`` and its two-sided 95% t interval over the values (None with one value)."""
    import numpy as np
    from scipy import stats

    d = np.asarray(values, dtype=float) - ref
    if len(d) < 2:
        return float(d.mean()), None, None
    half = float(stats.t.ppf(0.975, len(d) - 1)) * float(d.std(ddof=1)) / np.sqrt(len(d))
    return float(d.mean()), float(d.mean()) - half, float(d.mean()) + half


def _verdict(mean: float, lo: float | None, hi: float | None, margin: float) -> str:
    if lo is None or hi is None:
        return f"{'met' if mean >= margin else 'not met'} (one seed: no interval)"
    return "met" if lo >= margin else "not met" if hi < margin else "inconclusive"


def _seeds(recs: list[ResultRecord], key: str) -> str:
    m = Metric.from_values([r.metrics[key].mean for r in recs])
    return f"{m.mean:.1f} ± {m.std:.1f} ({m.n})" if m.std is not None else f"{m.mean:.1f} (1)"


def _delta(recs: list[ResultRecord], ref: ResultRecord | None, key: str) -> str:
    if ref is None or not recs:
        return "–"
    mean, lo, hi = _interval([r.metrics[key].mean for r in recs], ref.metrics[key].mean)
    return f"{mean:+.1f}" + ("" if lo is None else f" [{lo:+.1f}, {hi:+.1f}]")


#: the attackers of the neural rows, strongest first (veil's masked LM fine-tuned on the attacker's own obfuscations)
_NEURAL_ATTACKERS = ("veil-mlm-tuned", "veil-mlm", "trained", "minilm", "tag-frequency", "keep-word")

_NEURAL_TARGETS = (("UAS: neural beats random by >= 2 points on the target parser", "eval", "biaffine", ("P4", "P5"),
                    "uas", 2.0),
                   ("UAS: neural at least as good as random on the unseen parser", "eval", "spacy-md",
                    ("P1", "P2", "P3", "P4", "P5"), "uas", 0.0),
                   ("prv: neural within 5 points of random (trained attacker)", "attack", "trained",
                    ("P1", "P2", "P3", "P4", "P5"), "prv", -5.0),
                   ("prv: neural within 5 points of random (MiniLM attacker)", "attack", "minilm",
                    ("P1", "P2", "P3", "P4", "P5"), "prv", -5.0),
                   ("prv: neural within 5 points of random (veil-mlm-tuned, the strongest attacker)", "attack",
                    "veil-mlm-tuned", ("P1", "P2", "P3", "P4", "P5"), "prv", -5.0))


def _neural(evals: dict[tuple[str, str], ResultRecord], attacks: dict[tuple[str, str], ResultRecord],
            n_evals: dict[tuple[str, str], list[ResultRecord]],
            n_attacks: dict[tuple[str, str], list[ResultRecord]]) -> list[str]:
    lines = ["## Table 2: the neural obfuscator against random substitution", "",
             "The neural obfuscator (Hu et al. Sec. 3-4; `veil.defenses.obfuscation.neural`) is trained through "
             "veil's biaffine parser, once per level and training seed; its test sentences are drawn with the same "
             "experiment seed as random substitution's. Neural: mean ± sd over training seeds (n). Δ = neural - "
             "random, with the 95% t interval over training seeds (random substitution is one draw on the same "
             "sentences; its draw-to-draw spread is not in the interval). The paper's numbers: random / neural.", ""]
    if not n_evals and not n_attacks:
        return lines + ["No neural-obfuscator records yet (`veil parse sweep --defense neural --training-seeds "
                        "0,1,2`).", ""]
    for parser, title in _PARSERS.items():
        if not any(p == parser for p, _ in n_evals):
            continue
        pr, pn = (PAPER_BIAFFINE, PAPER_NEURAL_BIAFFINE) if parser == "biaffine" else (PAPER_ALLENNLP,
                                                                                       PAPER_NEURAL_ALLENNLP)
        lines += [f"### {title}", "", "| obf. terms | UAS random | UAS neural | Δ UAS | LAS random | LAS neural | "
                  "Δ LAS | paper UAS | paper LAS |", "|---" * 9 + "|"]
        for lv in _LEVELS[1:]:
            recs, ref = n_evals.get((parser, lv), []), evals.get((parser, lv))
            if not recs:
                continue
            cells = [_f(ref.metrics["uas"]) if ref else "–", _seeds(recs, "uas"), _delta(recs, ref, "uas"),
                     _f(ref.metrics["las"]) if ref else "–", _seeds(recs, "las"), _delta(recs, ref, "las"),
                     f"{pr[lv][0]} / {pn[lv][0]}", f"{pr[lv][1]} / {pn[lv][1]}"]
            lines.append(f"| {_ROWS[lv]} | " + " | ".join(cells) + " |")
        lines.append("")
    if n_attacks:
        lines += ["### Attackers", "", "prv = 100 - 100 x MRR (higher: more private). Each attacker trains on its "
                  "own obfuscations of the public training split by the same mechanism (for the neural defense: "
                  "the same network, its own draws). Learning attackers' budgets and how their training ended are in "
                  "[Learning curves](#learning-curves) (random substitution) and in each record. The paper's trained "
                  "attacker and BERT: random / neural. The zero-shot masked LM (veil-mlm), tag-frequency and keep-word read "
                  "only which positions were replaced, their tags and the words left in place, which are the same "
                  "for both defenses at one level: their Δ is 0 by construction, and only the attackers that read "
                  "the substitutes (veil-mlm-tuned, trained, minilm) can tell the two apart.", "",
                  "| obf. terms | attacker | prv random | prv neural | Δ | paper trained | paper BERT |",
                  "|---" * 7 + "|"]
        for lv in _LEVELS[1:]:
            for atk in _NEURAL_ATTACKERS:
                recs, ref = n_attacks.get((atk, lv), []), attacks.get((atk, lv))
                if not recs:
                    continue
                pr, pn = PAPER_BIAFFINE[lv], PAPER_NEURAL_BIAFFINE[lv]
                lines.append(f"| {_ROWS[lv]} | {atk} | {_f(ref.metrics['prv']) if ref else '–'} | "
                             f"{_seeds(recs, 'prv')} | {_delta(recs, ref, 'prv')} | {pr[2]} / {pn[2]} | "
                             f"{pr[4]} / {pn[3]} |")
        lines.append("")
    return lines + _neural_verdicts(evals, attacks, n_evals, n_attacks) + _obfuscators(n_evals, n_attacks)


def _neural_verdicts(evals: dict[tuple[str, str], ResultRecord], attacks: dict[tuple[str, str], ResultRecord],
                     n_evals: dict[tuple[str, str], list[ResultRecord]],
                     n_attacks: dict[tuple[str, str], list[ResultRecord]]) -> list[str]:
    lines = ["### Targets", "", "Computed from the records. A target \"Δ >= m\" is **met** when the 95% t interval "
             "of Δ over training seeds lies at or above m, **not met** when it lies below m, **inconclusive** when "
             "it straddles m (with one seed the mean decides, marked so).", "",
             "| target | level | Δ [95% t] | seeds | m | verdict |", "|---|---|---|---|---|---|"]
    summary = []
    for title, kind, name, lvls, key, margin in _NEURAL_TARGETS:
        found = []
        for lv in lvls:
            recs = (n_evals if kind == "eval" else n_attacks).get((name, lv), [])
            ref = (evals if kind == "eval" else attacks).get((name, lv))
            if not recs or ref is None:
                continue
            mean, lo, hi = _interval([r.metrics[key].mean for r in recs], ref.metrics[key].mean)
            verdict = _verdict(mean, lo, hi, margin)
            found.append((lv, verdict))
            ci = "" if lo is None else f" [{lo:+.1f}, {hi:+.1f}]"
            lines.append(f"| {title} | {lv} | {mean:+.1f}{ci} | {len(recs)} | {margin:+g} | {verdict} |")
        if not found:
            summary.append(f"- {title}: no records (needs `{name}` at {', '.join(lvls)} for both defenses).")
        else:
            missing = [lv for lv in lvls if lv not in dict(found)]
            verdicts = {v.split(" (")[0] for _, v in found}
            overall = ("met" if verdicts == {"met"} and not missing else "not met" if "not met" in verdicts
                       else "inconclusive" if not missing else "incomplete")
            summary.append(f"- {title} ({', '.join(lvls)}): **{overall}**"
                           + (f" (no records at {', '.join(missing)})" if missing else ""))
    return lines + [""] + summary + [""]


def _obfuscators(n_evals: dict[tuple[str, str], list[ResultRecord]],
                 n_attacks: dict[tuple[str, str], list[ResultRecord]]) -> list[str]:
    seen: dict[tuple[str, int, float], dict[str, Any]] = {}
    for recs in [*n_evals.values(), *n_attacks.values()]:
        for r in recs:
            seen.setdefault((r.config["level"], r.config.get("training_seed", -1), _weight(r)),
                            r.config.get("obfuscator", {}))
    lines = ["### The obfuscators", "", "| level | training seed | K (cap on V_t) | λ (privacy weight) | minutes | "
             "steps | train sentences | dev UAS start -> best | fingerprint |", "|---" * 9 + "|"]
    for (lv, seed, _), ob in sorted(seen.items()):
        tr = ob.get("training", {})
        cfg = tr.get("training", {})
        lines.append(f"| {lv} | {seed} | {ob.get('max_candidates', '–')} | {cfg.get('privacy_weight', '–')} | "
                     f"{tr.get('minutes', '–')} | {tr.get('steps', '–')} | {tr.get('train_sentences', '–')} | "
                     f"{tr.get('start_dev_uas', '–')} -> {tr.get('best_dev_uas', '–')} | "
                     f"{str(ob.get('fingerprint', '–'))[:12]} |")
    return lines + [""]


def training_rule(rec: ResultRecord) -> str:
    """How a learning attacker's training was bounded and stopped, from its record alone: its training sentences,
    its minute cap (and step cap, ``attack_steps``, where the record has one) and its stopping rule: early stopping on its own dev MRR
    (the record's attack config has ``stopped``), whole epochs with the best on its own dev MRR kept
    (``selected_epoch``), or whole epochs with no dev selection (neither: the earlier fixed-budget kind). Two
    records trained alike have the same text."""
    c = rec.config
    attack = c.get("attack", {})
    caps = [f"{float(c['attack_minutes']):g}-minute cap"] if c.get("attack_minutes") is not None else []
    if c.get("attack_train") is not None:
        caps.insert(0, f"{int(c['attack_train']):,} training sentences")
    if c.get("attack_steps") is not None:
        caps.append(f"{int(c['attack_steps'])}-step cap")
    if "stopped" in attack:
        rule = "early stopping on its own dev MRR"
    elif "selected_epoch" in attack:
        rule = "whole epochs, the best on its own dev MRR kept"
    else:
        rule = "whole epochs, no dev selection"
    return ", ".join([*caps, rule])


def _weight(r: ResultRecord) -> float:
    """The privacy knob lambda a neural record's obfuscator was trained with (0: the paper's model)."""
    ob = r.config.get("obfuscator", {}).get("training", {}).get("training", {})
    return float(ob.get("privacy_weight") or 0.0)


def _knob(evals: dict[tuple[str, str], ResultRecord], attacks: dict[tuple[str, str], ResultRecord],
          neural: list[ResultRecord]) -> list[str]:
    """The privacy knob's measured effect: each lambda > 0 beside lambda = 0 at the same level and training seed."""
    knob = [r for r in neural if _weight(r) > 0]
    if not knob:
        return []
    lines = ["## The privacy knob (λ)", "",
             "The paper's loss has no privacy term. veil's optional one (`--privacy-weight` λ) subtracts λ x the "
             "mean entropy of each hidden position's distribution over V_t, pushing the obfuscator towards "
             "uniform draws from V_t (random substitution over the top-K candidates). Each λ > 0 is one obfuscator "
             "per level and training seed, compared with the λ = 0 obfuscator of the same level and seed on the "
             "same test sentences and with the same attacker budgets; random substitution is the top row of each "
             "level. One training seed per λ: the differences carry no interval, and the λ = 0 seed-to-seed sd in "
             "Table 2 above is the yardstick for how much of a difference is noise.", "",
             "| level | training seed | λ | UAS (biaffine) | prv veil-mlm-tuned | prv trained | prv MiniLM | ratio "
             "(trained) | Δ UAS vs λ = 0 | Δ prv veil-mlm-tuned | Δ prv trained | Δ prv MiniLM |", "|---" * 12 + "|"]
    cells: dict[tuple[str, int, float], dict[str, ResultRecord]] = {}
    for r in neural:
        what = r.config.get("parser") if r.experiment.startswith("eval-") else r.config.get("attacker")
        cells.setdefault((r.config["level"], r.config.get("training_seed", 0), _weight(r)), {})[what] = r
    wanted = sorted({(r.config["level"], r.config.get("training_seed", 0)) for r in knob})

    def value(row: dict[str, ResultRecord], what: str, key: str) -> float | None:
        return row[what].metrics[key].mean if what in row else None

    def text(v: float | None, signed: bool = False) -> str:
        return "–" if v is None else f"{v:+.1f}" if signed else f"{v:.1f}"

    summary = []
    for lv, seed in wanted:
        rand = {"biaffine": evals.get(("biaffine", lv)), "trained": attacks.get(("trained", lv)),
                "minilm": attacks.get(("minilm", lv)), "veil-mlm-tuned": attacks.get(("veil-mlm-tuned", lv))}
        rand = {k: v for k, v in rand.items() if v is not None}
        rows = [("random", rand)] + [(f"{w:g}", cells[(l2, s2, w)]) for (l2, s2, w) in sorted(cells)
                                     if (l2, s2) == (lv, seed)]
        base = cells.get((lv, seed, 0.0), {})
        for name, row in rows:
            uas, pt, pm = value(row, "biaffine", "uas"), value(row, "trained", "prv"), value(row, "minilm", "prv")
            pv = value(row, "veil-mlm-tuned", "prv")
            ratio = f"{uas / (100 - pt):.2f}" if uas is not None and pt is not None and pt < 100 else "–"
            deltas = ["–"] * 4
            if name not in ("random", "0"):
                deltas = [text(None if a is None or value(base, w, k) is None else a - value(base, w, k), True)
                          for a, w, k in ((uas, "biaffine", "uas"), (pv, "veil-mlm-tuned", "prv"),
                                          (pt, "trained", "prv"), (pm, "minilm", "prv"))]
            lines.append(f"| {_ROWS[lv]} | {seed if name != 'random' else '–'} | {name} | {text(uas)} | {text(pv)} | "
                         f"{text(pt)} | {text(pm)} | {ratio} | " + " | ".join(deltas) + " |")
        top = max(w for (l2, s2, w) in cells if (l2, s2) == (lv, seed))
        hi, lo = cells[(lv, seed, top)], base
        if lo and all(value(hi, w, k) is not None and value(lo, w, k) is not None
                      for w, k in (("biaffine", "uas"), ("trained", "prv"))):
            du = value(hi, "biaffine", "uas") - value(lo, "biaffine", "uas")
            dp = value(hi, "trained", "prv") - value(lo, "trained", "prv")
            spread = []
            for w, k, name in (("biaffine", "uas", "UAS"), ("trained", "prv", "prv")):
                vals = Metric.from_values([value(c, w, k) for (l2, _, w0), c in cells.items()
                                           if l2 == lv and w0 == 0 and value(c, w, k) is not None])
                if vals.std is not None:
                    spread.append(f"{name} sd {vals.std:.1f} over {vals.n} seeds")
            summary.append(f"- {_ROWS[lv]}, seed {seed}: λ = {top:g} moved UAS by {du:+.1f} and the trained "
                           f"attacker's prv by {dp:+.1f} against λ = 0"
                           + (f" (λ = 0's own spread: {', '.join(spread)})." if spread else "."))
    return lines + [""] + summary + [""]


@register_renderer("parsing")
def parsing_page(method: str, records: list[tuple[Path, ResultRecord]], out_dir: Path) -> str:
    recs = [r for _, r in records]
    rand = [r for r in recs if r.config.get("defense", "random") == "random"]
    neural = [r for r in recs if r.config.get("defense") == "neural"]
    evals = {(r.config["parser"], r.config["level"]): r for r in rand if r.experiment.startswith("eval-")}
    attacks = {(r.config["attacker"], r.config["level"]): r for r in rand if r.experiment.startswith("attack-")}
    n_evals: dict[tuple[str, str], list[ResultRecord]] = {}
    n_attacks: dict[tuple[str, str], list[ResultRecord]] = {}
    for r in sorted([r for r in neural if _weight(r) == 0], key=lambda r: r.config.get("training_seed", 0)):
        if r.experiment.startswith("eval-"):
            n_evals.setdefault((r.config["parser"], r.config["level"]), []).append(r)
        elif r.experiment.startswith("attack-"):
            n_attacks.setdefault((r.config["attacker"], r.config["level"]), []).append(r)
    lines: list[Any] = ["# Results: obfuscation for privacy-preserving parsing (Hu et al. 2020)", "",
                        "See [the user page](../parsing.md) for the threat model, the silver trees and every "
                        "departure from the paper.", ""]
    lines += _table1([r for r in recs if r.experiment == "table1"])
    lines += _table2(evals, attacks)
    lines += _neural(evals, attacks, n_evals, n_attacks)
    lines += _knob(evals, attacks, neural)
    lines += _pattern(evals)
    lines += _floors(attacks)
    lines += _curves(attacks, out_dir)
    lines += _models(recs, out_dir)
    lines += regenerate_section(parsing_commands(records), "parsing")
    return "\n".join(lines)
