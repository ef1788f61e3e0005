"""``docs/results/rewriting.md``: text rewritten with a formal guarantee (issue 53), from the records of ``veil rewrite
utility`` (:mod:`veil.experiments.rewriting.utility`) and ``veil audit dp-mlm``
(:mod:`veil.experiments.rewriting.audit`), which share ``results/rewriting/``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from veil.report.markdown import register_renderer
from veil.results import ResultRecord

__all__ = ["rewriting_page"]


def _ci(m: Any, scale: float = 100.0, digits: int = 1) -> str:
    if m.ci_low is None or m.ci_high is None:
        return f"{scale * m.mean:.{digits}f}"
    return f"{scale * m.mean:.{digits}f} [{scale * m.ci_low:.{digits}f}, {scale * m.ci_high:.{digits}f}]"


def _mlm(config: dict[str, Any]) -> str:
    m = config.get("mlm") or {}
    acc = m.get("heldout_accuracy")
    return f"{m.get('name')}" + (f" (held-out masked-token accuracy {100 * acc:.1f}%)" if acc is not None else "")


def _real(value: float) -> str:
    return "unbounded" if value > 700 else f"{value:.3f}"  # a probability of 0 (floored at the smallest double)


@register_renderer("rewriting")
def rewriting_page(method: str, records: list[tuple[Path, ResultRecord]], out_dir: Path) -> str:
    recs = [r for _, r in records]
    utility = sorted((r for r in recs if r.method == "rewriting"), key=lambda r: (r.config["corpus"],
                                                                                 r.config["epsilon"]))
    audits = sorted((r for r in recs if r.method == "rewriting-audit"), key=lambda r: (r.config["mechanism"],
                                                                                      r.config["epsilon"]))
    lines = ["# Results: text rewritten with a formal guarantee", "",
             "DP-MLM (Meisenbacher et al. 2024) rewrites every word piece by the exponential mechanism over a masked "
             "LM's clipped logits, epsilon per word piece ([docs/rewriting.md](../rewriting.md) says what that "
             "guarantees for a whole text). Intervals are 95%: Wilson over test texts (accuracy), bootstrap over "
             "test texts (cosine).", ""]
    if utility:
        lines += ["## Utility", "",
                  "A logistic regression on MiniLM vectors of the clean public train split, tested on the test split "
                  "rewritten by DP-MLM; *clean* is the same classifier on the clean test texts; *majority* always "
                  "answers the train split's most frequent label, and the p-value is the one-sided binomial test "
                  "of the accuracy against it. *Cosine* is that of each test text's MiniLM vector and its "
                  "rewrite's; *kept* is the share of word pieces drawn unchanged.", "",
                  "| corpus | epsilon per word piece | test texts | accuracy % | clean % | majority % | p (beats "
                  "majority) | cosine | kept % | masked LM | clip |",
                  "|---|---:|---:|---|---|---:|---:|---|---:|---|---|"]
        for r in utility:
            m, c = r.metrics, r.config
            lines.append(f"| {c['corpus']} | {c['epsilon']:g} | {c['n_test_used']:,} | {_ci(m['accuracy'])} | "
                         f"{_ci(m['accuracy_clean'])} | {100 * m['majority_rate'].mean:.1f} | "
                         f"{m['p_beats_majority'].mean:.2g} | {_ci(m['cosine'], scale=1.0, digits=3)} | "
                         f"{100 * m['kept'].mean:.1f} | {_mlm(c)} | [{c['clip'][0]:.2f}, {c['clip'][1]:.2f}] |")
        lines += ["", "### Examples", "",
                  "The first test texts of the corpus (public), each rewritten once at each epsilon.", ""]
        for r in utility:
            lines += [f"**epsilon {r.config['epsilon']:g}** ({r.config['corpus']}):", ""]
            for ex in r.extra.get("examples", [])[:3]:
                lines += [f"- `{ex['original']}`", f"  → `{ex['rewritten']}`"]
            lines += [""]
    if audits:
        lines += ["## Empirical epsilon (lower bounds)", "",
                  "The distinguishing game on pairs of public sentences that differ in one word piece, at that "
                  "position ([veil.attacks.audit.rewriting](../api/attacks/audit.md)): the screened pairs' "
                  "likelihood-ratio test, and only fresh scoring runs enter the Clopper-Pearson bound. A bound above "
                  "the claim is a violation at the stated confidence; a bound below it says only that this game "
                  "found no more. The negative control takes the top word piece instead of sampling and must be "
                  "caught. *Realized* is the largest log ratio of the exact output probabilities over the pairs "
                  "played: the most any game on them could show.", "",
                  "| mechanism | claimed epsilon per word piece | lower bound | realized | violation | confidence | "
                  "scoring runs per input | pair (kind; position: from → to) | masked LM |",
                  "|---|---:|---:|---:|---|---:|---:|---|---|"]
        for r in audits:
            c, m, a = r.config, r.metrics, r.extra["audit"]
            pair = a["pair"]
            lines.append(f"| {c['mechanism']}{' (control)' if r.extra.get('control') else ''} | {c['epsilon']:g} | "
                         f"{m['epsilon_lower_bound'].mean:.3f} | {_real(a['realized_epsilon'])} | "
                         f"{'yes' if m['violation'].mean > 0 else 'no'} | {100 * c['confidence']:.0f}% | "
                         f"{c['trials']:,} | `{pair['x']}` / `{pair['x2']}` ({pair['kind']}; {pair['position']}: "
                         f"{pair['from']} → {pair['to']}) | "
                         f"{_mlm(c)} |")
        lines += [""]
    commands = sorted({f"`veil rewrite utility --corpus {r.config['corpus']}`" for r in utility}
                      | ({"`veil audit dp-mlm` (and `--control greedy`)"} if audits else set()))
    if commands:
        lines += ["Made by " + ", ".join(commands) + " at the commits in each record.", ""]
    return "\n".join(lines)
