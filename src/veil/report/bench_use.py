"""The bench report's advice: "What to use", "TextHide or DP-SGD?" and the privacy-utility frontier.

A setting is **recommended** only when it passes both rules, each a stated test at ``ALPHA`` = 0.05 (one-sided, no
correction for the many settings tested: a rule can only pass by chance in the direction of "useful", and a page
that recommends asks both):

1. **Useful**: its utility beats the majority class. Accuracy: the exact one-sided binomial test of its hits on the
   test split against the majority rate (:func:`veil.metrics.stats.binomial_test`). Another utility whose cell records
   its one-class value (``majority_rate`` in that utility's unit, e.g. macro-F1 of predicting one class): the lower
   end of its 95% interval lies above that value. A utility whose cell records no trivial baseline (the parse's UAS)
   cannot be tested, and nothing is recommended on it.
2. **Private**: every attack the bench plans for it ran (:attr:`BenchPoint.missing` is empty: a setting that passes
   the attacks that ran, with a planned one not run, gets no verdict; one that fails an attack that ran fails), and
   every attack measured on it with a stated test (floor cells, which are the reference, and mask-bit
   recovery, which measures the key, aside) is not distinguishable from the floor it was tested against (the cell's
   own test: random guessing, the best constant predictor, the tag-frequency floor, the same attack on unrelated
   vectors); or, for a setting with a formal DP guarantee, the upper end of the attack's 95% interval stays within
   what the guarantee allows on that measure (:func:`dp_bound`): membership AUC under (epsilon, delta)-DP of one
   training example (:func:`~veil.attacks.membership.scoring.dp_auc_bound`), top-1 re-identification among N
   candidates under epsilon-DP of the whole item (e^epsilon / N). SentDP (one sentence) and word-level metric DP
   (a word-vector distance) bound neither of the bench's measures: they are held to the floor rule. An exact audit
   that finds the epsilon violated fails the rule.

Where even the undefended reference of a (corpus, kind) does not beat the majority class, nothing can be useful
there and the row says so (no verdict). Where no setting passes both, the row says so and names the least-bad
setting with the rule it fails. The frontier (the settings no other beats on both axes, by the means) stays as a
description, not advice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from veil.report.bench import BenchPoint, _kind, _paper_attack, _pct, _reference, _undefended

__all__ = ["ALPHA", "Check", "useful", "private", "dp_bound", "why_not", "both_releases", "frontier", "broken",
           "what_to_use", "frontier_rows",
           "texthide_or_dpsgd", "USE_HEAD", "USE_NOTE", "FRONTIER_HEAD", "FRONTIER_NOTE", "CHOICE_HEAD",
           "CHOICE_NOTE"]

#: the level of every test behind a recommendation
ALPHA = 0.05

USE_NOTE = (f"A setting is recommended only when it passes both rules (one-sided tests at alpha {ALPHA:g}, no "
            "correction for the many settings). Useful: its utility beats the majority class (accuracy: the exact "
            "one-sided binomial test of its test-split hits against the majority rate; another utility: the lower "
            "end of its 95% interval above its one-class value; a utility without a recorded trivial baseline, such "
            "as a parse's UAS, cannot be tested and is never recommended). Private: every attack the bench plans for "
            "it ran (else no verdict, unless one that ran already fails), and no attack measured on it beats "
            "the floor of its own stated test (random guessing, the best constant predictor, the tag-frequency floor, "
            "the same attack on unrelated vectors); or, with a formal DP guarantee, the upper end of each attack's "
            "95% interval stays within what the guarantee allows on that measure (membership AUC under "
            "(epsilon, delta)-DP of one training example; top-1 re-identification among N candidates under "
            "epsilon-DP of the whole item: e^epsilon / N). SentDP (one sentence) and word-level metric DP (a "
            "word-vector distance) bound neither measure and are held to the floor rule; an exact audit that finds "
            "the epsilon violated fails it. Where the undefended reference itself does not beat the majority class, "
            "no verdict is possible. Where nothing passes both, the least-bad setting is named with the rule it "
            "fails.")
USE_HEAD = ["corpus", "release kind", "recommended: passes both rules (guarantee: utility test; attack test)",
            "not recommended, and the rule each fails"]

FRONTIER_NOTE = ("A description, not advice: per corpus and release kind, the settings no other setting of that kind "
                 "beats on both utility and the strongest attack's success (by the means; the intervals are in the "
                 "tables below), whether or not they are useful or private, and the settings whose strongest attack "
                 "beats random with an interval wholly above what their own paper's attack found.")
FRONTIER_HEAD = ["corpus", "release kind", "on the privacy-utility frontier (guarantee: utility, strongest attack)",
                 "broken by a stronger attack than its paper's", "no defense (reference)"]

CHOICE_HEAD = ["corpus", "TextHide (m, k): its model's utility", "its training encodings: strongest attack",
               "its model: strongest attack",
               "DP-SGD at the same utility (smallest epsilon): utility, strongest attack",
               "by the rules of What to use"]
CHOICE_NOTE = ("TextHide's pitch is training on private text without DP-SGD's utility cost. Per corpus: the model "
               "trained on TextHide encodings (the model section), the strongest attack on the training encodings "
               "of the same (m, k) in intra mode (the training-encodings section; they leave the owner at every "
               "step), and DP-SGD at the smallest epsilon whose model is at least as accurate (by the means; the "
               "two models share the recipe, members and epochs). A TextHide user releases both the encodings and "
               "the model, so TextHide passes the privacy rule only if both do; a DP-SGD user releases only the "
               "model. The last column applies the two rules of What to use to each. docs/results/dpsgd.md has the "
               "same comparison at the experiments' budgets.")


@dataclass(frozen=True)
class Check:
    """One rule's outcome for one setting: ``passed`` (None where no test is possible) and what was found, with the
    numbers."""

    passed: bool | None
    text: str


def _p(p: float) -> str:
    return "p<1e-4" if p < 1e-4 else f"p={p:.2g}"


def _pv(p: float | None) -> str:
    """`` (p=0.021)``, `` (p<1e-4)``, or nothing where the test states no p-value."""
    return "" if p is None else f" ({_p(p)})"


def useful(utility: dict[str, Any] | None) -> Check:
    """Rule 1 on a utility block (``utility``, ``utility_metric``, ``majority_rate``): does it beat the majority
    class (or, for another utility, its one-class value)?"""
    if not utility or not utility.get("utility_metric"):
        return Check(None, "no utility measured")
    m, name, base = utility["utility_metric"], utility.get("utility", "utility"), utility.get("majority_rate")
    if base is None:
        return Check(None, f"{name} {_pct(m)} cannot be tested: its cells record no trivial baseline (such as a "
                           "majority class) to beat")
    if name == "accuracy" and m.get("n"):
        from veil.metrics.stats import binomial_test

        n = int(m["n"])
        v = binomial_test(min(n, round(m["mean"] * n)), n, float(base), alpha=ALPHA)
        return Check(v.reject, f"accuracy {_pct(m)} {'beats' if v.reject else 'does not beat'} the majority class "
                               f"{100 * base:.1f}% ({_p(v.p_value)}, exact one-sided binomial)")
    if m.get("ci_low") is None:
        return Check(None, f"{name} {_pct(m)} cannot be tested against its one-class value: no interval recorded")
    ok = m["ci_low"] > base
    return Check(ok, f"{name} {_pct(m)}: its 95% interval {'lies above' if ok else 'does not lie above'} the "
                     f"one-class value {100 * base:.1f}%")


#: why a formal guarantee of this kind bounds none of the bench's measures (the floor rule applies instead)
NO_BOUND = {"sentdp": "SentDP bounds replacing one sentence; two documents differ in all their sentences (a times "
                      "epsilon for a of them, which the records do not give), so it bounds no re-identification",
            "metric-dp": "metric DP scales epsilon by word-vector distance; without the documents' distances it "
                         "bounds no re-identification"}


def _dp_name(g: dict[str, Any]) -> str:
    """``(8, 0.0001)-DP`` or ``1-DP``: the guarantee's parameters as the rule's text names them."""
    delta = g.get("delta")
    return f"({g['epsilon']:.3g}, {delta:.2g})-DP" if delta else f"{g['epsilon']:.3g}-DP"


def dp_bound(guarantee: dict[str, Any], block: dict[str, Any]) -> tuple[float | None, str]:
    """The largest success the formal ``guarantee`` allows the attack of ``block`` on its measure, with its name;
    ``(None, why)`` where the guarantee bounds nothing on that measure (or is not formal)."""
    from veil.attacks.membership.scoring import dp_auc_bound

    kind, eps, success = guarantee.get("kind"), guarantee.get("epsilon"), block.get("success")
    if eps is None:
        return None, "no formal guarantee"
    if block.get("dp_bound") is not None:  # the cell computed the bound on its own measure (a language model's)
        return float(block["dp_bound"]), str(block.get("dp_bound_what") or f"bound its {_dp_name(guarantee)} allows")
    if kind in ("epsilon-dp", "epsilon-delta-dp") and success == "auc":
        delta = guarantee.get("delta") if kind == "epsilon-delta-dp" else 0.0
        if delta is None:
            return None, "its record states no delta, so its guarantee gives no AUC bound"
        return dp_auc_bound(float(eps), float(delta)), f"membership AUC its {_dp_name(guarantee)} allows"
    if kind == "epsilon-dp" and success == "identity" and block.get("random_rate"):
        n = round(1 / block["random_rate"])
        what = f"top-1 re-identification among {n:,} its {_dp_name(guarantee)} allows (e^epsilon / {n:,})"
        return min(1.0, math.exp(float(eps)) / n), what
    return None, NO_BOUND.get(kind, f"its {kind} guarantee gives no bound on {success}")


#: how a success measure is named after its attack in a rule's text
_SAY = {"identity": "re-identification", "identity_any": "any-source re-identification",
        "all_sources": "all-sources recovery", "top1": "top-1 word recovery", "auc": "AUC",
        "attribute accuracy": "accuracy", "token_f1": "token F1", "exposure": "canary exposure",
        "pii_inference": "PII inference", "pii_reconstruction": "PII reconstruction",
        "extraction_precision": "extraction precision"}


def _attack_check(p: BenchPoint, name: str, block: dict[str, Any]) -> Check | None:
    """Rule 2 on one attack of ``p`` (None for an attack the rule does not read: a floor cell, an untested one)."""
    m = block.get("success_metric")
    if m is None or block.get("floor"):
        return None
    if block.get("success") == "violation":  # the exact audit
        return Check(False, "the exact audit found its epsilon violated") if m["mean"] > 0 else None
    test = block.get("test") or {}
    if "reject" not in test:
        return None
    what = f"{name} {_SAY.get(block.get('success', ''), block.get('success', ''))} {_pct(m)}".replace("  ", " ")
    versus = block.get("versus") or "random guessing"
    guarantee = block.get("guarantee") if isinstance(block.get("guarantee"), dict) else p.guarantee
    bound, why = dp_bound(guarantee, block) if guarantee.get("epsilon") is not None else (None, "")
    if bound is not None:
        high = _pct_high(m)
        ok = high <= bound
        beats = f", beating {versus}{_pv(test.get('p_value'))}," if test["reject"] else ""
        said = f"{bound:.1f} {m['unit']}" if m.get("unit") else f"{100 * bound:.2f}%"
        return Check(ok, f"{what}{beats} {'within' if ok else 'reaching above'} the {said} {why}")
    if test["reject"]:
        return Check(False, f"{what} beats {versus}{_pv(test.get('p_value'))}" + (f"; {why}" if why else ""))
    return Check(True, f"{what} not distinguishable from {versus}{_pv(test.get('p_value'))}")


def _pct_high(m: dict[str, Any]) -> float:
    """The upper end of the interval the page shows for ``m`` (its mean where it has none)."""
    from veil.report.markdown import proportion_interval

    if m.get("ci_high") is None:
        return float(m["mean"])
    if m.get("unit"):  # not a share: its own interval
        return float(m["ci_high"])
    return float(proportion_interval(m["mean"], m.get("n"), m["ci_low"], m["ci_high"], m.get("ci_level"))[1])


def private(p: BenchPoint) -> Check:
    """Rule 2 on every attack measured on ``p``: passed when each is within its floor or its DP bound; the text
    names the strongest failing attack (or, passing, the strongest attack)."""
    checks = []
    for name, block in p.attacks.items():
        c = _attack_check(p, name, block)
        if c is not None:
            key = (bool(block.get("comparable")), (block.get("success_metric") or {}).get("mean", 0.0), name)
            checks.append((key, c))
    if not checks:
        return Check(None, "no attack with a stated test was measured on it" + _unmeasured(p))
    checks.sort(key=lambda kc: kc[0], reverse=True)
    fails = [c for _, c in checks if not c.passed]
    if fails:
        more = {1: "", 2: " (1 more attack fails)"}.get(len(fails), f" ({len(fails) - 1} more attacks fail)")
        return Check(False, fails[0].text + more)
    if p.missing:  # passing the attacks that ran says nothing of a stronger one that did not
        return Check(None, f"{checks[0][1].text}{_unmeasured(p)}")
    return Check(True, checks[0][1].text)


def _unmeasured(p: BenchPoint) -> str:
    """``; not run on it: A, B (no verdict until they are)``, for a setting whose planned attacks did not all run."""
    if not p.missing:
        return ""
    return f"; not run on it: {', '.join(p.missing)} (no verdict until they are)"


def frontier(points: list[BenchPoint]) -> list[BenchPoint]:
    """The points no other point beats on both axes (utility at least as high and leakage at least as low, one of
    them strictly), by the means; points without a utility or a comparable attack are left out."""
    full = [p for p in points if p.utility is not None and p.strongest is not None]

    def axes(p: BenchPoint) -> tuple[float, float]:
        return p.utility["utility_metric"]["mean"], p.strongest[1]["success_metric"]["mean"]

    def beaten(p: BenchPoint) -> bool:
        u, a = axes(p)
        return any((v >= u and b <= a) and (v > u or b < a) for v, b in map(axes, full))
    return [p for p in full if not beaten(p)]


def broken(p: BenchPoint) -> str | None:
    """How a stronger attack broke ``p``: the strongest attack beats random and its interval lies above the paper's
    attack's whole interval (the defense looks safe only against its paper's attack); None otherwise."""
    paper, s = _paper_attack(p.defense), p.strongest
    if s is None or paper is None or paper not in p.attacks or s[0] == paper:
        return None
    mine, theirs = s[1]["success_metric"], p.attacks[paper]["success_metric"]
    if not (s[1].get("test") or {}).get("reject") or mine.get("ci_low") is None or theirs.get("ci_high") is None:
        return None
    if mine["ci_low"] <= theirs["ci_high"]:
        return None
    return f"{s[0]} {_pct(mine)} where its paper's {paper} finds {_pct(theirs)}"


def _guarantee_short(p: BenchPoint) -> str:
    """The setting's guarantee in a few words: ``epsilon=8 epsilon-delta-dp``, ``heuristic``, ``linear-erasure``."""
    g = p.guarantee
    if g.get("epsilon") is not None:
        return f"epsilon={g['epsilon']:g} {g['kind']}"
    return "heuristic" if g.get("kind") in (None, "none") else g["kind"]


def _kinds(points: list[BenchPoint]) -> dict[str, list[BenchPoint]]:
    """The corpus's points per release kind (first-seen order), the ``none`` baseline left out."""
    kinds: dict[str, list[BenchPoint]] = {}
    for p in points:
        if p.defense != "none":
            kinds.setdefault(_kind(p.defense), []).append(p)
    return kinds


def _base(kind: str, points: list[BenchPoint], mine: list[BenchPoint]) -> BenchPoint | None:
    """The kind's undefended reference with a utility and a strongest attack: its own undefended defense (``plain``
    for a model), else the ``none`` baseline where the kind contains what it releases (vectors)."""
    from veil.kinds import observable

    own = [p for p in mine if _undefended(p.defense) and p.strongest and p.utility]
    if own:
        return own[0]
    return next((p for p in points if p.defense == "none" and p.strongest and p.utility
                 and observable(kind, _kind("none"))), None)


def _undefended_utility(kind: str, points: list[BenchPoint], mine: list[BenchPoint]
                        ) -> tuple[str, dict[str, Any]] | None:
    """The utility block measured without a defense for this (corpus, kind), with what it is: the kind's undefended
    point, else the reference a defended cell measured beside itself (an undefended training run; the parse of the
    original sentences); None where there is none."""
    base = _base(kind, points, mine)
    if base is not None:
        return base.name, base.utility
    for p in mine:
        u = p.utility or {}
        ref = u.get("reference")
        if isinstance(ref, dict) and isinstance(ref.get("utility"), dict):
            return (str(ref.get("defense", "no defense")),
                    {"utility": u.get("utility", "accuracy"), "utility_metric": ref["utility"],
                     "majority_rate": u.get("majority_rate")})
        if u.get("reference_metric"):
            return "the original inputs", {"utility": u.get("utility", "UAS"), "utility_metric": u["reference_metric"]}
    return None


def why_not(u: Check, v: Check) -> str:
    """Which rule(s) a setting fails, with the numbers."""
    parts = []
    if not u.passed:
        parts.append(("not useful: " if u.passed is False else "usefulness untested: ") + u.text)
    if not v.passed:
        parts.append(("leaks: " if v.passed is False else "privacy untested: ") + v.text)
    return "; ".join(parts)


def _how_it_fails(u: Check, v: Check) -> str:
    """The least-bad setting's verdict: the rule it passes and the one it fails, each with its numbers."""
    if u.passed:
        return f"useful ({u.text}) but {why_not(u, v)}"
    if v.passed:
        return f"private ({v.text}) but {why_not(u, v)}"
    return why_not(u, v)


def _least_bad(judged: list[tuple[BenchPoint, Check, Check]]) -> tuple[BenchPoint, Check, Check]:
    """The setting closest to passing: among the useful ones the least leaky (strongest attack's mean), else among
    the private ones the most useful, else the most useful."""
    def leak(j: tuple[BenchPoint, Check, Check]) -> float:
        s = j[0].strongest
        return s[1]["success_metric"]["mean"] if s else math.inf

    def util(j: tuple[BenchPoint, Check, Check]) -> float:
        return j[0].utility["utility_metric"]["mean"]

    if any(u.passed for _, u, _ in judged):
        return min((j for j in judged if j[1].passed), key=lambda j: (leak(j), -util(j)))
    if any(v.passed for _, _, v in judged):
        return max((j for j in judged if j[2].passed), key=util)
    return max(judged, key=util)


def what_to_use(by_corpus: dict[str, list[BenchPoint]]) -> list[list[str]]:
    """One row per (corpus, release kind) (:data:`USE_HEAD`): the settings that pass both rules (of those, the ones
    no other passing setting beats on both axes), or why nothing is recommended, and the rule each other fails."""
    rows = []
    for corpus, points in by_corpus.items():
        for kind, everything in _kinds(points).items():
            mine = [p for p in everything if not _undefended(p.defense) and p.utility is not None]
            ref = _undefended_utility(kind, points, everything)
            ref_check = useful(ref[1]) if ref else None
            if ref_check is not None and ref_check.passed is False:
                rows.append([corpus, kind, f"no verdict: even without a defense ({ref[0]}) {ref_check.text}, so no "
                                           "setting of this kind can be shown useful here", "n/a"])
                continue
            if ref_check is not None and ref_check.passed is None:
                rows.append([corpus, kind, f"no verdict: usefulness cannot be tested here ({ref[0]}: "
                                           f"{ref_check.text}), so no setting of this kind is recommended", "n/a"])
                continue
            if not mine:
                rows.append([corpus, kind, "n/a: no defended setting of this kind has a utility measured", "n/a"])
                continue
            judged = [(p, useful(p.utility), private(p)) for p in mine]
            good = [p for p, u, v in judged if u.passed and v.passed]
            best = frontier(good) if all(p.strongest for p in good) else good
            say = {p.name: (u, v) for p, u, v in judged}
            if best:
                use = "; ".join(f"{p.name} ({_guarantee_short(p)}): {say[p.name][0].text}; {say[p.name][1].text}"
                                for p in best)
                others = [p for p in mine if p not in best]
            else:
                lb, u, v = _least_bad(judged)
                use = ("nothing of this kind is both useful and private here. Least bad: "
                       f"{lb.name} ({_guarantee_short(lb)}), {_how_it_fails(u, v)}")
                others = [p for p in mine if p is not lb]
            rest = [f"{p.name}: {why_not(*say[p.name]) or 'passes both rules, but ' + _dominator(p, best)}"
                    for p in others]
            rows.append([corpus, kind, use, "; ".join(rest) or "none"])
    return rows


def _dominator(p: BenchPoint, best: list[BenchPoint]) -> str:
    """Which recommended setting beats ``p`` on both axes (``p`` passes both rules but is off their frontier)."""
    names = [q.name for q in best if q.utility["utility_metric"]["mean"] >= p.utility["utility_metric"]["mean"]]
    return f"{', '.join(names) or 'another recommended setting'} is at least as useful and leaks less"


def frontier_rows(by_corpus: dict[str, list[BenchPoint]]) -> list[list[str]]:
    """One row per (corpus, release kind) (:data:`FRONTIER_HEAD`): the defenses on the privacy-utility frontier with
    their guarantee and strongest attack, every setting a stronger attack broke, and the undefended reference."""
    rows = []
    for corpus, points in by_corpus.items():
        for kind, everything in _kinds(points).items():
            mine = [p for p in everything if not _undefended(p.defense)]
            base = _base(kind, points, everything)
            best = [f"{p.name} ({_guarantee_short(p)}): utility {_pct(p.utility['utility_metric'])}, "
                    f"{p.strongest[0]} {_pct(p.strongest[1]['success_metric'])}" for p in frontier(mine)]
            hit = [f"{p.name}: {why}" for p in mine if (why := broken(p))]
            ref = (f"{base.name}: utility {_pct(base.utility['utility_metric'])}, {base.strongest[0]} "
                   f"{_pct(base.strongest[1]['success_metric'])}") if base else _reference(mine)
            rows.append([corpus, kind, "; ".join(best) or "n/a", "; ".join(hit) or "none", ref])
    return rows


def _verdict(name: str, u: Check, v: Check) -> str:
    return f"{name}: passes both rules" if u.passed and v.passed else f"{name}: not recommended ({why_not(u, v)})"


def both_releases(model: Check, encodings: Check) -> Check:
    """TextHide's privacy: that of its model and of its training encodings together."""
    if model.passed and encodings.passed:
        return Check(True, f"its model: {model.text}; its training encodings: {encodings.text}")
    failing = [f"its {what}: {c.text}" for what, c in (("training encodings", encodings), ("model", model))
               if not c.passed]
    return Check(False if False in (model.passed, encodings.passed) else None, "; ".join(failing))


def texthide_or_dpsgd(by_corpus: dict[str, list[BenchPoint]]) -> list[list[str]]:
    """One row per corpus with a TextHide-trained model and DP-SGD models (:data:`CHOICE_HEAD`), each judged by the
    rules: TextHide's privacy is that of its model and of its training encodings together."""
    rows = []
    for corpus, points in by_corpus.items():
        hides = [p for p in points if p.defense == "texthide-model" and p.utility and p.strongest]
        dps = sorted((p for p in points if p.defense == "dpsgd" and p.utility and p.strongest),
                     key=lambda p: float(p.setting.get("epsilon", 0)))
        for th in hides:
            m, k = th.setting.get("m"), th.setting.get("k")
            enc = next((p for p in points if p.defense == "texthide" and p.strongest and str(p.setting.get("m")) ==
                        str(m) and p.setting.get("k") == k and p.setting.get("mode") == "intra"), None)
            goal = th.utility["utility_metric"]["mean"]
            same = next((p for p in dps if p.utility["utility_metric"]["mean"] >= goal), None)
            dp = ("none of the DP-SGD settings run reaches it" if same is None else
                  f"epsilon {float(same.setting['epsilon']):g}: {_pct(same.utility['utility_metric'])}, "
                  f"{same.strongest[0]} {_pct(same.strongest[1]['success_metric'])}")
            leak = both_releases(private(th), private(enc) if enc else
                                  Check(None, "not attacked"))
            verdicts = [_verdict(f"TextHide ({m}, {k})", useful(th.utility), leak)]
            if same is not None:
                eps = float(same.setting["epsilon"])
                verdicts.append(_verdict(f"DP-SGD epsilon {eps:g}", useful(same.utility), private(same)))
            rows.append([corpus, f"({m}, {k}): {_pct(th.utility['utility_metric'])}",
                         "not run" if enc is None else
                         f"{enc.strongest[0]} {_pct(enc.strongest[1]['success_metric'])}",
                         f"{th.strongest[0]} {_pct(th.strongest[1]['success_metric'])}", dp, "; ".join(verdicts)])
    return rows
