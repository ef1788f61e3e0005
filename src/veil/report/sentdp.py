"""Result page for SentDP (DeepCandidate): Fig. 4 analogues, the privacy audit and the targets.

Meehan, Mrini and Chaudhuri 2022, Sec. 5.4 and Fig. 4, rendered from
``results/sentdp/*.json`` (``method`` is always ``"sentdp"``). Records are
told apart by name and config, never by file name:

* ``<corpus>-reference``: ``non_private_test_macro_f1``, ``random_guess``
  (sum of q_i^2), optionally ``non_private_recoded_test_macro_f1``;
* ``<corpus>-<method>-eps<e>`` (config ``method`` in deepcandidate, truncation,
  metric-dp, ``epsilon``, ``trials``, ...): ``test_macro_f1`` over trials,
  ``dev_macro_f1``; ``extra["k_bins"]`` (macro-F1 per sentence-count bin) and
  ``extra["p_selection"]`` (dev macro-F1 per number of projections);
* ``audit-<corpus>[-<depth>][-control-<name>]``: ``max_abs_log_ratio[_eps<e>]`` and ``pairs`` (config
  ``recoder`` and ``control``: a negative control must FAIL);
* ``empirical-<corpus>-<mechanism>-<kind>-eps<e>`` (config ``mechanism``, ``epsilon``, ``neighbours``,
  ``confidence``, ``trials``): ``epsilon_lower_bound``, ``formal_epsilon``, ``fpr``/``fnr`` with their
  Clopper-Pearson upper limits; ``extra["game"]`` describes the chosen test. The page works without them.

When several records describe the same run, the newest (``created``) is shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from veil.results import Metric, ResultRecord
from veil.report.markdown import regenerate_section, register_renderer

EPSILONS = (1.0, 3.0, 6.0, 10.0, 15.0, 23.0, 30.0)
METHODS = ("deepcandidate", "truncation", "metric-dp")
NAMES = {"deepcandidate": "DeepCandidate", "truncation": "Truncation", "metric-dp": "Word-level metric DP"}
COLORS = {"deepcandidate": "tab:blue", "truncation": "tab:orange", "metric-dp": "tab:green"}
# Sec. 5.4 and Fig. 4 (20 News, GoodReads, IMDB; SBERT, d=768). The paper gives curves, not numbers.
PAPER = {"deepcandidate": "best of the three methods at every ε on all three datasets",
         "truncation": "near random guessing at every ε",
         "metric-dp": "not competitive until the weak-privacy regime (ε ≥ 25), itself a weaker guarantee"}
TARGET_EPSILON = 10.0
MARGINS = {"truncation": 0.15, "metric-dp": 0.05}  # DeepCandidate must beat each baseline by this at ε = 10
WEAK_EPSILON = 25.0
PAPER_GAP = (0.10, 0.15)  # "approximately 10-15% below the non-private approach" beyond ε = 25
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


def _order(series: tuple[str, str]) -> tuple[int, str, str]:
    return (METHODS.index(series[0]) if series[0] in METHODS else len(METHODS), *series)


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


def _f1(m: Metric | None) -> str:
    if m is None:
        return "–"
    return f"{m.mean:.3f} ± {m.std:.3f}" if m.std is not None else f"{m.mean:.3f}"


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


DOCS_NOTE = ("The records keep each trial's macro-F1 over the whole test split, not per-document predictions, so "
             "no interval over test documents (a bootstrap) can be formed: the intervals here cover the mechanism's "
             "randomness over trials only, on a fixed test split, and a verdict resting on them is not established "
             "for documents the split did not hold. A re-run that stores per-document predictions would settle it.")


def _trial_diff(a: Metric, b: Metric, level: float = 0.95) -> tuple[float | None, str]:
    """(low, text) of Welch's interval of a - b over trials (None when fewer than 2 values each)."""
    import warnings

    from scipy import stats

    with warnings.catch_warnings():  # near-identical trials: scipy warns of precision loss; the interval says so
        warnings.filterwarnings("ignore", "Precision loss", RuntimeWarning)
        return _trial_diff_inner(a, b, level, stats)


def _trial_diff_inner(a: Metric, b: Metric, level: float, stats) -> tuple[float | None, str]:
    spread = max(a.values or [0.0]) - min(a.values or [0.0]) + max(b.values or [0.0]) - min(b.values or [0.0])
    if spread <= 1e-12 * max(1.0, abs(a.mean)):
        return None, "no interval over trials (the trials agree exactly)"
    if len(a.values) >= 2 and not b.values:  # against a constant (a bound, not a measurement)
        res = stats.ttest_1samp(a.values, b.mean).confidence_interval(level)
        res = type(res)(res.low - b.mean, res.high - b.mean)
        return float(res.low), f"{level:.0%} CI over trials [{res.low:+.3f}, {res.high:+.3f}] (one-sample t)"
    if len(a.values) < 2 or len(b.values) < 2:
        return None, "no interval over trials (fewer than 2 trials each)"
    res = stats.ttest_ind(a.values, b.values, equal_var=False).confidence_interval(level)
    if res.low != res.low:  # nan: the trials agree exactly
        return None, "no interval over trials (the trials agree exactly)"
    return float(res.low), f"{level:.0%} CI over trials [{res.low:+.3f}, {res.high:+.3f}] (Welch)"


def _primary_dc(c: _Corpus) -> tuple[str, str] | None:
    dcs = sorted(s for s in c.runs if s[0] == "deepcandidate")
    return ("deepcandidate", "tukey-min") if ("deepcandidate", "tukey-min") in dcs else (dcs[0] if dcs else None)


def _docs_trials(c: _Corpus, s: Any) -> set[tuple[Any, Any]]:
    """(test documents, trials) of every record of row ``s``; records before issue 16 lack ``test_docs`` and ran
    on the whole test split (the reference's ``n_test``), except metric DP's, which record their subsample."""
    n_test = c.reference.config.get("n_test") if c.reference is not None else None
    return {(r.config.get("test_docs", n_test), r.config.get("trials")) for r in c.runs[s].values()}


def _eps_table(c: _Corpus) -> list[str]:
    eps = sorted({*EPSILONS, *(e for runs in c.runs.values() for e in runs)})
    lines = ["| method | test docs × trials | " + " | ".join(f"ε={e:g}" for e in eps) + " | paper (Sec. 5.4, Fig. 4) |",
             "|---" * (len(eps) + 3) + "|"]
    shared: set[tuple[Any, Any]] = set()
    for s in sorted(c.runs, key=_order):
        dt = _docs_trials(c, s)
        shared |= dt
        lines.append(f"| {_label(s)} | " + ", ".join(f"{'–' if d is None else d} × {t}" for d, t in sorted(dt, key=str)) + " | "
                     + " | ".join(_f1(c.runs[s][e].metrics["test_macro_f1"]) if e in c.runs[s] else "–" for e in eps)
                     + f" | {PAPER.get(s[0], '')} |")
    for name, label, paper in (
            ("non_private_test_macro_f1", "Non-private (mean embedding, C_nonpriv)",
             "upper line; DeepCandidate ends about 10-15% below it beyond ε = 25"),
            ("non_private_recoded_test_macro_f1", "Non-private, recoded (C_dc)", ""),
            ("blind", "Best document-blind guesser (1/C)", "bottom line (random guessing)")):
        m = _blind(c) if name == "blind" else _ref(c, name)
        if m is not None:
            n_test = c.reference.config.get("n_test") if c.reference is not None else "–"
            lines.append(f"| {label} | {n_test} | " + " | ".join(_f1(m) for _ in eps) + f" | {paper} |")
    for s in sorted(s for s in c.runs if s[0] == "deepcandidate"):
        ps = [c.runs[s][e].config.get("n_projections") if e in c.runs[s] else None for e in eps]
        if any(p is not None for p in ps):
            lines.append(f"| p chosen on dev, {_label(s)} | | "
                         + " | ".join("–" if p is None else str(p) for p in ps) + " | 10..100 on dev, per ε |")
    if not shared:
        return lines + [""]
    if len(shared) == 1:
        (d, t), = shared
        note = f"Like for like: every private row ran on the same {d} test documents with {t} trials per ε."
    else:
        note = ("**Not like for like:** the rows ran on different test sets or trial counts ("
                + "; ".join(f"{d} documents × {t} trials" for d, t in sorted(shared, key=str))
                + "); compare them with care until the re-run.")
    return lines + ["", note, ""]


def _p_table(c: _Corpus) -> list[str]:
    dc = _primary_dc(c)
    sel = {e: r.extra.get("p_selection") or {} for e, r in sorted(c.runs.get(dc, {}).items())} if dc else {}
    sel = {e: v for e, v in sel.items() if v}
    if not sel:
        return []
    ps = sorted({int(p) for v in sel.values() for p in v})
    lines = [f"Choice of p on dev, {_label(dc)} (dev macro-F1 per number of projections; chosen in bold):", "",
             "| ε | " + " | ".join(f"p={p}" for p in ps) + " |", "|---" * (len(ps) + 1) + "|"]
    for e, v in sel.items():
        chosen = c.runs[dc][e].config.get("n_projections")
        f1s = {int(p): float(f1["mean"] if isinstance(f1, dict) else f1) for p, f1 in v.items()}  # float or Metric
        cells = {p: (f"**{f1:.3f}**" if p == chosen else f"{f1:.3f}") for p, f1 in f1s.items()}
        lines.append(f"| {e:g} | " + " | ".join(cells.get(p, "–") for p in ps) + " |")
    return lines + [""]


def _k_bins(rec: ResultRecord) -> dict[tuple[int, int | None], tuple[int, Metric]]:
    return {(int(b["low"]), None if b.get("high") is None else int(b["high"])):
            (int(b["n_docs"]), Metric.from_dict(b["macro_f1"])) for b in rec.extra.get("k_bins") or []}


def _bin_label(low: int, high: int | None) -> str:
    return f"≥ {low}" if high is None else (str(low) if low == high else f"{low}–{high}")


def _k_section(corpus: str, c: _Corpus, out_dir: Path) -> list[str]:
    at = {s: _k_bins(runs[TARGET_EPSILON]) for s, runs in c.runs.items() if TARGET_EPSILON in runs}
    at = {s: bins for s, bins in at.items() if bins}
    if not at:
        return [f"No k bins at ε = {TARGET_EPSILON:g} yet (`extra['k_bins']` of the ε = {TARGET_EPSILON:g} runs).",
                ""]
    series = sorted(at, key=_order)
    bins = sorted({b for bs in at.values() for b in bs}, key=lambda b: (b[0], b[1] is None, b[1] or 0))
    lines = ["| k (sentences) | test docs | " + " | ".join(_label(s) for s in series) + " |",
             "|---" * (len(series) + 2) + "|"]
    for b in bins:
        n = next(at[s][b][0] for s in series if b in at[s])
        lines.append(f"| {_bin_label(*b)} | {n} | "
                     + " | ".join(_f1(at[s][b][1]) if b in at[s] else "–" for s in series) + " |")
    png = out_dir / f"sentdp_{_safe(corpus)}_k.png"
    _plot(corpus, {s: [(_bin_label(*b), at[s][b][1]) for b in bins if b in at[s]] for s in series}, c, png,
          xlabel="k (sentences per document)", title=f"macro-F1 by sentence count at ε = {TARGET_EPSILON:g}",
          categorical=[_bin_label(*b) for b in bins])
    lines = [f"![{corpus}: macro-F1 against k at ε = {TARGET_EPSILON:g}]({png.name})", "", *lines, ""]
    dc = _primary_dc(c)
    if dc in at and len(at[dc]) >= 2:
        ordered = [(b, at[dc][b][0], at[dc][b][1].mean) for b in bins if b in at[dc]]
        rising = all(x[2] <= y[2] for x, y in zip(ordered, ordered[1:]))
        lines.append(f"- {_label(dc)}: {ordered[0][2]:.3f} at k {_bin_label(*ordered[0][0])} → {ordered[-1][2]:.3f} "
                     f"at k {_bin_label(*ordered[-1][0])} ({'non-decreasing' if rising else 'not monotone'} in k).")
        many = [(n, f) for (lo, _), n, f in ordered if lo >= 10]
        few = [(n, f) for (lo, hi), n, f in ordered if hi is not None and hi < 10]
        if many and few:
            mean = lambda xs: sum(n * f for n, f in xs) / max(1, sum(n for n, _ in xs))  # noqa: E731
            lines.append(f"- Paper: documents with more than 10-15 sentences get high-quality embeddings. Ours: "
                         f"{mean(many):.3f} on documents with ≥ 10 sentences vs {mean(few):.3f} with < 10 "
                         f"(doc-weighted over bins).")
        lines.append("")
    return lines


def _verdict(ok: bool, interval_ok: bool = False, docs: str | None = None) -> str:
    """A target on the means, whether the interval over trials clears it too, and ``docs``: the verdict over test
    documents when the records allow one (else "unproven", see DOCS_NOTE)."""
    if not ok:
        return "**MISSED** on the means" + (f"; {docs}" if docs else "")
    tail = f"; {docs}" if docs else "; over test documents unproven"
    return ("**met** on the means and over trials" if interval_ok else
            "**met on the means only**: the interval over trials does not clear it") + tail


def _per_doc(rec: ResultRecord | None, key: str | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """(labels, predictions (T, n)) a record kept per test document, or None (records made before they were kept)."""
    if rec is None:
        return None
    extra = rec.extra.get(key, {}) if key else rec.extra
    if not isinstance(extra, dict) or "test_predictions" not in extra or "test_labels" not in extra:
        return None
    return np.asarray(extra["test_labels"], dtype=np.int64), np.asarray(extra["test_predictions"], dtype=np.int64)


BOOT = 2000


def _doc_verdict(ours: tuple[np.ndarray, np.ndarray], other: tuple[np.ndarray, np.ndarray] | None, margin: float,
                 *, baseline: float = 0.0, above: bool = True) -> str | None:
    """The verdict over test documents (paired percentile bootstrap, BOOT resamples, fixed seed), or None when
    the two records did not predict the same documents."""
    from veil.metrics.utility import macro_f1_bootstrap

    y, a = ours
    if other is not None:
        if not np.array_equal(other[0], y):
            return None
        b = other[1]
        est, low, high = macro_f1_bootstrap(y, a, b, n_boot=BOOT) if above else macro_f1_bootstrap(y, b, a, n_boot=BOOT)
    else:
        est, low, high = macro_f1_bootstrap(y, a, baseline=baseline, n_boot=BOOT)
    ok = low >= margin if margin > 0 else low > 0
    verdict = "**established over test documents**" if ok else "**not established over test documents**"
    return f"95% CI over test documents [{low:+.3f}, {high:+.3f}] (paired bootstrap, {BOOT} resamples): {verdict}"


def _over_docs(body: list[str]) -> str:
    """How many of a corpus' targets the bootstrap over test documents establishes (read off its target lines)."""
    targets = [ln for ln in body if ln.startswith(("- beats ", "- above ", "- below "))]
    shown = [ln for ln in targets if "over test documents [" in ln]
    if not shown:
        return "over test documents unproven (the records keep no per-document predictions)"
    held = sum("**established over test documents**" in ln for ln in shown)
    return (f"{held} of {len(targets)} established over test documents (paired bootstrap)"
            + ("" if len(shown) == len(targets) else f"; {len(targets) - len(shown)} without per-document records"))


def _targets(c: _Corpus) -> tuple[list[str], list[str]]:
    """Lines for the page and the names of missed targets (for the summary)."""
    dc = _primary_dc(c)
    lines, missed = [], []
    dc_run = c.runs.get(dc, {}).get(TARGET_EPSILON) if dc else None
    if dc_run is None:
        return [f"- not checked: no DeepCandidate run at ε = {TARGET_EPSILON:g}"], ["no DeepCandidate run at ε=10"]
    ours = dc_run.metrics["test_macro_f1"].mean
    ours_docs = _per_doc(dc_run)
    for base, margin in MARGINS.items():
        rec = c.runs.get((base, ""), {}).get(TARGET_EPSILON)
        if rec is None:
            lines.append(f"- beats {NAMES[base]} by ≥ {margin:.2f}: not checked (no {base} run at ε = "
                         f"{TARGET_EPSILON:g})")
            missed.append(f"{base} run missing")
            continue
        diff = ours - rec.metrics["test_macro_f1"].mean
        low, ci = _trial_diff(dc_run.metrics["test_macro_f1"], rec.metrics["test_macro_f1"])
        docs = _doc_verdict(ours_docs, _per_doc(rec), margin) if ours_docs is not None else None
        verdict = _verdict(diff >= margin, low is not None and low >= margin, docs)
        lines.append(f"- beats {NAMES[base]} by ≥ {margin:.2f}: {ours:.3f} − "
                     f"{rec.metrics['test_macro_f1'].mean:.3f} = {diff:+.3f} ({ci}): {verdict}")
        if diff < margin:
            missed.append(f"margin over {base}")
    for name, label, above in (("blind", "above a document-blind guesser (1/C)", True),
                               ("non_private_test_macro_f1", "below non-private", False)):
        m = _blind(c) if name == "blind" else _ref(c, name)
        if m is None:
            lines.append(f"- {label}: not checked (no `{'label_names' if name == 'blind' else name}` in the "
                         f"reference record)")
            missed.append(f"{name} missing")
            continue
        ok = ours > m.mean if above else ours < m.mean
        if name == "blind":
            low, ci = _trial_diff(dc_run.metrics["test_macro_f1"], m)
            docs = _doc_verdict(ours_docs, None, 0.0, baseline=m.mean) if ours_docs is not None else None
            lines.append(f"- {label}: {ours:.3f} vs {m.mean:.3f} ({ci}): "
                         f"{_verdict(ok, low is not None and low > 0, docs)}")
        else:
            low, ci = _trial_diff(m, dc_run.metrics["test_macro_f1"])
            ref_docs = _per_doc(c.reference, "non_private")
            docs = (_doc_verdict(ours_docs, ref_docs, 0.0, above=False)
                    if ours_docs is not None and ref_docs is not None else None)
            lines.append(f"- {label}: {ours:.3f} vs {m.mean:.3f} (non-private minus ours, {ci}): "
                         f"{_verdict(ok, low is not None and low > 0, docs)}")
        if not ok:
            missed.append(label)
    nonpriv = _ref(c, "non_private_test_macro_f1")
    weak = sorted(e for e in c.runs.get(dc, {}) if e >= WEAK_EPSILON)
    if nonpriv is not None and weak:
        for e in weak:
            f1 = c.runs[dc][e].metrics["test_macro_f1"].mean
            gap, rel = nonpriv.mean - f1, (nonpriv.mean - f1) / nonpriv.mean if nonpriv.mean else float("nan")
            where = ("inside" if PAPER_GAP[0] <= rel <= PAPER_GAP[1] else
                     "smaller than" if rel < PAPER_GAP[0] else "larger than")
            lines.append(f"- gap to non-private at ε = {e:g}: {gap:.3f} in macro-F1, {rel:.1%} of non-private "
                         f"({where} the paper's 10-15%; not a pass/fail target)")
    else:
        lines.append(f"- gap to non-private at ε ≥ {WEAK_EPSILON:g}: not computed (needs the reference record and "
                     f"a DeepCandidate run at ε ≥ {WEAK_EPSILON:g})")
    note = DOCS_NOTE if ours_docs is None else (
        "These records keep every trial's prediction for every test document, so each target also gets a paired "
        "bootstrap over test documents (the documents resampled, the trials' mean macro-F1 of both sides computed on "
        "each resample): that interval is the one that covers documents the split did not hold. \"Over trials\" "
        "covers the mechanism's randomness on this split only.")
    return [f"At ε = {TARGET_EPSILON:g} ({_label(dc)}, means over trials). {note}", "", *lines], missed


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


def _num(x: object) -> str:
    return f"{x:g}" if isinstance(x, (int, float)) and not isinstance(x, bool) else str(x)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def _plot(corpus: str, series: dict, c: _Corpus, path: Path, *, xlabel: str, title: str,
          categorical: list[str] | None = None) -> None:
    """Mean line and ±1 sd envelope per series; horizontal non-private and random lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from veil._io import atomic_write

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for s, points in series.items():
        xs = [categorical.index(x) if categorical else x for x, _ in points]
        mean = [m.mean for _, m in points]
        sd = [m.std or 0.0 for _, m in points]
        color = COLORS.get(s[0])
        ax.plot(xs, mean, marker="o", label=_label(s), color=color)
        ax.fill_between(xs, [a - b for a, b in zip(mean, sd)], [a + b for a, b in zip(mean, sd)],
                        alpha=0.2, color=color)
    for name, label, style in (("non_private_test_macro_f1", "non-private", "-"),
                               ("blind", "document-blind guesser (1/C)", "--")):
        m = _blind(c) if name == "blind" else _ref(c, name)
        if m is not None:
            ax.axhline(m.mean, color="black", linestyle=style, linewidth=1, label=label)
    if categorical:
        ax.set_xticks(range(len(categorical)), categorical)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("test macro-F1")
    ax.set_title(f"{corpus}: {title}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=110)
    plt.close(fig)


def _corpus_section(corpus: str, c: _Corpus, out_dir: Path) -> tuple[list[str], list[str]]:
    ref = c.reference
    head = [f"## {corpus}", ""]
    if ref is not None:
        cfg = ref.config
        head += [f"Task: {cfg.get('task')} ({len(cfg.get('label_names') or [])} labels); train/dev/test "
                 f"{cfg.get('n_train')}/{cfg.get('n_dev')}/{cfg.get('n_test')} documents; encoder "
                 f"{cfg.get('encoder')}.", ""]
    any_run = next((r for runs in c.runs.values() for r in runs.values()), None)
    if any_run is not None:
        cfg = any_run.config
        head += ["Test macro-F1, mean ± sd over the trials of the mechanism (test documents and trials per row below)"
                 + (f"; DeepCandidate over m = {cfg.get('m')} public candidates" if cfg.get("m") else "")
                 + ".", ""]
    old_sampler = [f"{e:g}" for e in sorted({e for s, runs in c.runs.items() if s[0] == "deepcandidate"
                                             for e, r in runs.items() if "sampler" not in r.config})]
    if old_sampler:
        head += [f"DeepCandidate at ε = {', '.join(old_sampler)} was run before the exact sampler (issue 16): its "
                 "draws came from the float64 inverse CDF, which is only (ε, δ)-SentDP with a δ veil never bounded "
                 "(see docs/sentdp.md). The utilities, and so the accuracy, are the same; the re-run is pending.", ""]
    missing = []
    if ref is None:
        missing.append("the reference record (non-private and random guess)")
    for method in METHODS:
        have = {e for s, runs in c.runs.items() if s[0] == method for e in runs}
        absent = [f"{e:g}" for e in EPSILONS if e not in have]
        if absent:
            missing.append(f"{NAMES[method]} at ε = {', '.join(absent)}")
    if not c.audits:
        missing.append("the audit")
    lines = [*head, "### Macro-F1 against ε (Fig. 4 top row)", ""]
    if c.runs:
        png = out_dir / f"sentdp_{_safe(corpus)}_epsilon.png"
        _plot(corpus, {s: sorted((e, r.metrics["test_macro_f1"]) for e, r in runs.items())
                       for s, runs in sorted(c.runs.items(), key=lambda x: _order(x[0]))}, c, png,
              xlabel="ε (SentDP; word-level metric DP is a weaker guarantee)", title="macro-F1 against ε")
        lines += [f"![{corpus}: macro-F1 against ε]({png.name})", ""]
    lines += _eps_table(c) + _p_table(c)
    if missing:
        lines += ["Missing: " + "; ".join(missing) + ".", ""]
    targets, missed = _targets(c)
    lines += ["### Targets", "", *targets, "",
              f"### Macro-F1 against k at ε = {TARGET_EPSILON:g} (Fig. 4 bottom row)", "",
              *_k_section(corpus, c, out_dir),
              "### Privacy audit", "", *_audit(c),
              "### Empirical epsilon lower bounds", "", *_empirical(c)]
    return lines, missed


def _run_order(item: tuple[Path, ResultRecord]) -> tuple:
    path, rec = item
    cfg, exp = rec.config, rec.experiment
    kind = (0 if exp.endswith("-reference") else 2 if exp.startswith("audit-") else
            3 if exp.startswith("empirical-") else 1)
    method = str(cfg.get("method", ""))
    eps = cfg.get("epsilon")
    return (str(cfg.get("corpus", "")), kind, METHODS.index(method) if method in METHODS else len(METHODS), method,
            str(cfg.get("depth", "")), float(eps) if isinstance(eps, (int, float)) else 0.0, path.name)


@register_renderer("sentdp")
def sentdp_page(method: str, records: list[tuple[Path, ResultRecord]], out_dir: Path) -> str:
    corpora, unknown = _index(records)
    lines = ["# SentDP: DeepCandidate document embeddings",
             "",
             "Meehan, Mrini and Chaudhuri 2022, Sec. 5.4 and Fig. 4, re-run on veil's document corpora. "
             "DeepCandidate (ε-SentDP: replacing any one sentence changes every output probability by at most e^ε) "
             "against truncation (Li and Clifton 2021, Laplace noise on clipped mean embeddings) and word-level "
             "metric DP (Feyisetan et al. 2019). The paper reports curves for 20 News, GoodReads and IMDB with "
             "SBERT (d=768), not numbers; its findings are quoted beside ours. Every number below is read from "
             "`results/sentdp/*.json`.",
             ""]
    if not corpora:
        return "\n".join([*lines, "No SentDP runs yet.", ""])
    sections, summary = [], []
    for corpus in sorted(corpora):
        body, missed = _corpus_section(corpus, corpora[corpus], out_dir)
        sections += body
        summary.append(f"- {corpus}: " + (f"every ε = 10 target met on the means over trials; {_over_docs(body)}"
                                          if not missed else "not met: " + ", ".join(missed)))
    lines += ["## Summary", "", *summary, "", *sections, "## Runs", "",
              "| file | corpus | method | ε | trials | p | depth | m | wall time | commit |",
              "|---|---|---|---:|---:|---:|---|---:|---:|---|"]
    for path, rec in sorted(records, key=_run_order):
        g = rec.config.get
        lines.append(f"| `{path.name}` | {g('corpus', '')} | {g('method', rec.experiment)} | {_num(g('epsilon', ''))} | "
                     f"{g('trials', '')} | {g('n_projections', '')} | {g('depth', '')} | {g('m', '')} | "
                     f"{rec.wall_time_s:.0f} s | {rec.git_commit} |")
    if unknown:
        lines += ["", "Records not in the SentDP schema (listed, not rendered): "
                  + ", ".join(f"`{n}`" for n in unknown)]
    lines += ["", "## Discussion", "", DISCUSSION.rstrip()]
    from veil.report.sentdp_commands import eval_commands

    lines += regenerate_section(eval_commands(records), "sentdp")
    return "\n".join(lines)


DISCUSSION = """\
Known departures from the paper that can move our numbers (check each against the run configs above):

- **Encoder.** veil uses all-MiniLM-L6-v2 (d=384) with mean pooling, the paper SBERT on BERT-base (d=768).
  Truncation's Laplace scale is d·w/(kε) per coordinate, so halving d halves its noise: our truncation
  baseline is expected to do better than the paper's, and a smaller margin over it does not by itself mean
  DeepCandidate is weaker.
- **Corpora.** 20 News, GoodReads and IMDB are not available offline; veil's document corpora differ in size,
  label sets and sentence counts, so the random-guess line and the share of documents in each k bin differ too.
  The k bins show how much of each corpus is short: DeepCandidate cannot do well on documents with few
  sentences at small ε (Sec. 4.2), whatever the corpus.
- **Depth.** The default utility is Tukey's minimum one-dimensional depth (Sec. 4.4); the paper's App. A.1
  pseudo-code takes a maximum of -|h - k/2| instead (`depth="appendix"`). Both have sensitivity 1; where both
  were run they appear as separate rows.
- **Candidates and recoder.** The paper samples 5k candidates from training documents with at least 8
  sentences and recodes sentences with a cluster-preserving recoder trained on the training split. A smaller
  candidate set (m in the run table) makes the deepest candidate a coarser stand-in for the document, which
  widens the gap to non-private at large ε; the recoded non-private row shows what the recoder alone costs.
- **Metric DP** is a weaker guarantee per word than SentDP is per sentence at the same ε (Fig. 4 caption), so
  it is expected to catch up only at large ε.
- **Trials and selection.** Each trial repeats the mechanism's randomness (the paper: 5 trials, ±1 sd envelopes);
  p is chosen on the dev split for each ε (the paper: 10..100 on validation), never on test.
"""
