"""The SentDP records read into corpora, and the privacy-audit sections both SentDP pages render.

Shared by the SentDP utility page (:mod:`veil.report.sentdp`, which describes the records' schema) and the audit
page (:mod:`veil.report.audit`): the index of ``results/sentdp/*.json`` by corpus, the defenses' display names
and colours, and the exact-audit and empirical-lower-bound tables.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from veil.results import Metric, ResultRecord

METHODS = ("deepcandidate", "truncation", "metric-dp")  # the pages' column order of the defenses, not a registry
NAMES = {"deepcandidate": "DeepCandidate", "truncation": "Truncation", "metric-dp": "Word-level metric DP"}
COLORS = {"deepcandidate": "tab:blue", "truncation": "tab:orange", "metric-dp": "tab:green"}
TOLERANCE = 1e-9  # absolute float64 allowance for an audited log ratio vs ε, unless the record states one


@dataclass
class _Corpus:
    reference: ResultRecord | None = None
    audits: dict[str, ResultRecord] = field(default_factory=dict)  # by variant (depth, recoder, control)
    empirical: dict[tuple[str, str, float], ResultRecord] = field(default_factory=dict)  # (mechanism, kind, eps)
    runs: dict[tuple[str, str], dict[float, ResultRecord]] = field(default_factory=dict)


def _series(rec: ResultRecord) -> tuple[str, str]:
    method = str(rec.config["method"])
    return method, str(rec.config.get("depth", "tukey-min")) if method == "deepcandidate" else ""


def _label(series: tuple[str, str]) -> str:
    method, variant = series
    return NAMES.get(method, method) + (f" ({variant})" if variant else "")


def _index(records: list[tuple[Path, ResultRecord]]) -> tuple[dict[str, _Corpus], list[str]]:
    corpora: dict[str, _Corpus] = {}
    unknown = []
    for path, rec in sorted(records, key=lambda x: (x[1].created, x[0].name)):  # newest last, so it wins
        exp, cfg = rec.experiment, rec.config
        if exp.startswith("audit-"):
            audits = corpora.setdefault(str(cfg.get("corpus", exp.removeprefix("audit-"))), _Corpus()).audits
            audits[_audit_variant(cfg)] = rec
        elif exp.startswith("empirical-") and "epsilon_lower_bound" in rec.metrics and "corpus" in cfg:
            empirical = corpora.setdefault(str(cfg["corpus"]), _Corpus()).empirical
            empirical[(str(cfg.get("mechanism", "")), str(cfg.get("neighbours", "")), float(cfg["epsilon"]))] = rec
        elif exp.endswith("-reference"):
            corpora.setdefault(str(cfg.get("corpus", exp.removesuffix("-reference"))), _Corpus()).reference = rec
        elif "method" in cfg and "epsilon" in cfg and "corpus" in cfg and "test_macro_f1" in rec.metrics:
            runs = corpora.setdefault(str(cfg["corpus"]), _Corpus()).runs
            runs.setdefault(_series(rec), {})[float(cfg["epsilon"])] = rec
        else:
            unknown.append(path.name)
    return corpora, unknown


def _ref(c: _Corpus, name: str) -> Metric | None:
    return c.reference.metrics.get(name) if c.reference is not None else None


def _blind(c: _Corpus) -> Metric | None:
    """The macro-F1 ceiling of any guesser that ignores the document: 1/C for C classes.

    Guessing class i with probability p_i, whatever the document, scores F1_i = 2 q_i p_i / (q_i + p_i) on a class
    of test share q_i (population values): the harmonic mean of q_i and p_i, at most their average. The macro
    average is then at most (sum q_i + sum p_i) / (2C) = 1/C, reached by guessing with the class shares; a uniform
    guess scores exactly 1/C when the classes are balanced and less otherwise. So 1/C needs no label counts and is
    the highest bar a blind guesser sets. (The record's ``random_guess``, Σ q_i², is a prior-matched guesser's
    accuracy, not a macro-F1.)"""
    names = c.reference.config.get("label_names") if c.reference is not None else None
    return Metric(mean=1.0 / len(names)) if names else None


def _primary_dc(c: _Corpus) -> tuple[str, str] | None:
    dcs = sorted(s for s in c.runs if s[0] == "deepcandidate")
    return ("deepcandidate", "tukey-min") if ("deepcandidate", "tukey-min") in dcs else (dcs[0] if dcs else None)


def _audit_variant(cfg: dict) -> str:
    """``<depth>[, pipeline with recoder H | , without recoder][, negative control <name>]`` (each part if stated)."""
    label = str(cfg.get("depth", ""))
    if "recoder" in cfg:
        label += ", pipeline with recoder H" if cfg["recoder"] else ", without recoder"
    if cfg.get("control"):
        label += f", negative control {cfg['control']}"
    return label


def _audit(c: _Corpus) -> list[str]:
    if not c.audits:
        return ["No audit record yet (`audit-<corpus>`).", ""]
    lines = []
    for variant, rec in sorted(c.audits.items(), key=lambda x: (bool(x[1].config.get("control")),
                                                                not x[0].startswith("tukey-min"), x[0])):
        lines += _audit_table(variant, rec)
    return lines


def _audit_table(variant: str, rec: ResultRecord) -> list[str]:
    rows = sorted((float(k.removeprefix("max_abs_log_ratio_eps")), m) for k, m in rec.metrics.items()
                  if k.startswith("max_abs_log_ratio_eps"))
    if not rows and "max_abs_log_ratio" in rec.metrics and "epsilon" in rec.config:
        rows = [(float(rec.config["epsilon"]), rec.metrics["max_abs_log_ratio"])]
    tol = float(rec.config.get("tolerance", TOLERANCE))
    pairs = rec.metrics.get("pairs")
    settings = ", ".join(f"{k}={v}" for k, v in rec.config.items() if not isinstance(v, (dict, list)))
    lines = [f"Depth {variant or 'not stated'} (`{rec.experiment}`). Exact output distributions of neighbouring "
             f"documents (one sentence replaced) under the same projections; {settings}.", "",
             "| ε | largest observed \\|log P(z\\|x) − log P(z\\|x')\\| | observed / ε | pairs | verdict |",
             "|---:|---:|---:|---:|---|"]
    control = rec.config.get("control")
    for e, m in rows:
        ok = m.mean <= e + tol
        verdict = ('pass (≤ ε)' if ok else '**FAIL (> ε)**') if not control else ('≤ ε' if ok else 'caught (> ε)')
        lines.append(f"| {e:g} | {m.mean:.6g} | {m.mean / e:.4f} | {'' if pairs is None else f'{pairs.mean:,.0f}'} "
                     f"| {verdict} |")
    if not rows:
        lines.append("| – | – | – | – | no per-ε metric in the record |")
    lines += ["", f"Pass means observed ≤ ε + {tol:g} (the audit's float64 tolerance)."]
    if control:
        caught = rec.metrics.get("passed") is not None and rec.metrics["passed"].mean < 1
        derivation = float(rec.extra.get("derivation_error", 0.0))
        over = [f"{e:g}" for e, m in rows if m.mean > e + tol]
        how = [f"log ratio above ε at ε = {', '.join(over)}" if over else "the log ratios alone did NOT catch it"]
        if derivation > tol:
            how.append(f"its log-probabilities differ from the exponential mechanism at the stated ε by up to "
                       f"{derivation:.3g}")
        lines.append(f"Negative control `{control}`: a deliberately broken mechanism over the same candidates; the "
                     f"audit must fail it: {'**caught**' if caught else '**NOT CAUGHT**'}"
                     + (f" ({'; '.join(how)})" if caught else "") + ".")
    du = rec.metrics.get("max_utility_change")
    if du is not None:
        lines.append(f"Largest change of any candidate's depth between neighbours: {du.mean:g} (sensitivity bound 1: "
                     f"{'pass' if du.mean <= 1 + tol else '**FAIL**'}).")
    return lines + [""]


EMPIRICAL_NOTE = (
    "A distinguishing game (Jagielski et al. 2020; Nasr et al. 2021): the mechanism runs many times on a document "
    "x and on a neighbour x' (one sentence replaced, chosen adversarially), a test decides from each release "
    "which input produced it, and its error rates give ε_lb = max(0, log((1 − FNR⁺)/FPR⁺), log((1 − FPR⁺)/FNR⁺)), "
    "with FPR⁺, FNR⁺ one-sided Clopper-Pearson upper limits at 1 − α/2 each, so that ε_lb ≤ the true ε with "
    "probability ≥ 1 − α (the confidence column). The pair, the statistic and the threshold are chosen on separate "
    "selection runs; only fresh scoring runs enter ε_lb. It is a **lower** bound: ε_lb above the formal ε would "
    "prove a violation; ε_lb below it proves nothing about privacy (a stronger test might get closer). For "
    "word-level metric DP the formal ε is that of the changed sentence: ε per word times the summed word-vector "
    "distances of the changed words.")


def _empirical(c: _Corpus) -> list[str]:
    if not c.empirical:
        return ["No empirical lower bounds yet (`veil audit empirical`).", ""]
    lines = [EMPIRICAL_NOTE, "",
             "| mechanism | neighbours | ε | formal ε (changed sentence) | empirical ε_lb | confidence | ε_lb / formal "
             "| test (statistic) | FPR / FNR | runs per input | verdict |",
             "|---|---|---:|---:|---:|---:|---:|---|---|---:|---|"]
    order = {m: i for i, m in enumerate(METHODS)}
    for (mech, kind, eps), rec in sorted(c.empirical.items(), key=lambda x: (order.get(x[0][0], 9), x[0][1], x[0][2])):
        m, cfg = rec.metrics, rec.config
        lb, formal = m["epsilon_lower_bound"].mean, m["formal_epsilon"].mean
        game = rec.extra.get("game") or {}
        fpr, fnr = m.get("fpr"), m.get("fnr")
        rates = "–" if fpr is None or fnr is None else f"{fpr.mean:.3g} / {fnr.mean:.3g}"
        verdict = "consistent (ε_lb ≤ formal)" if lb <= formal else "**VIOLATION (ε_lb > formal)**"
        lines.append(f"| {NAMES.get(mech, mech)} | {kind} | {eps:g} | {formal:.4g} | {lb:.3f} | "
                     f"{100 * float(cfg.get('confidence', 0.95)):g}% | {lb / formal:.3f} | "
                     f"{game.get('statistic', '–')} | {rates} | {int(cfg.get('trials', 0)):,} | {verdict} |")
    dc1 = [r.metrics["epsilon_lower_bound"].mean for (mech, _, e), r in c.empirical.items()
           if mech == "deepcandidate" and e == 1.0]
    if dc1:
        best = max(dc1)
        lines += ["", f"Tightness at ε = 1 (DeepCandidate, best neighbour kind): ε_lb = {best:.3f}, "
                      f"{'within' if best >= 0.5 else 'not within'} a factor 2 of ε."]
    return lines + [""]


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)
