"""The SentDP page's targets at epsilon = 10 and their verdicts: on the means, over trials and over test documents.

Meehan, Mrini and Chaudhuri 2022, Sec. 5.4: DeepCandidate beats truncation and word-level metric DP by a margin,
stays above a document-blind guesser and below non-private; the gap to non-private in the weak-privacy regime is
compared with the paper's 10-15% (not a pass/fail target).
"""

from __future__ import annotations

import numpy as np

from veil.report.sentdp_records import NAMES, _blind, _Corpus, _label, _primary_dc, _ref
from veil.results import Metric, ResultRecord

TARGET_EPSILON = 10.0
MARGINS = {"truncation": 0.15, "metric-dp": 0.05}  # DeepCandidate must beat each baseline by this at ε = 10
WEAK_EPSILON = 25.0
PAPER_GAP = (0.10, 0.15)  # "approximately 10-15% below the non-private approach" beyond ε = 25

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
