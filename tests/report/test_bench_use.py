"""The bench report's advice (veil.report.bench_use): "What to use" recommends a setting only when it passes both
stated rules (useful: beats the majority class; private: no attack beats its floor, or within its DP bound), says why
nothing is recommended otherwise, and keeps the privacy-utility frontier as a description; the settings a stronger
attack broke."""

from __future__ import annotations

import math

from veil.report.bench import BenchPoint
from veil.report.bench_use import broken, frontier, frontier_rows, what_to_use


def _metric(mean, low, high):
    return {"mean": mean, "ci_low": low, "ci_high": high, "n": 500, "ci_level": 0.95}


def _point(name, utility, attacks):
    p = BenchPoint("c", "texthide", {}, name, {"kind": "none"})
    p.utility = {"utility_metric": _metric(utility, utility - 0.02, utility + 0.02)}
    for attack, (mean, low, high, reject) in attacks.items():
        p.attacks[attack] = {"comparable": True, "success_metric": _metric(mean, low, high),
                             "test": {"reject": reject, "p_value": 0.0 if reject else 0.5}}
    return p


def test_the_frontier_keeps_the_settings_nothing_beats_on_both_axes():
    a = _point("a", 0.80, {"rss": (0.90, 0.88, 0.92, True)})  # most useful
    b = _point("b", 0.70, {"rss": (0.10, 0.08, 0.12, True)})  # less leakage
    c = _point("c", 0.65, {"rss": (0.20, 0.18, 0.22, True)})  # beaten by b on both axes
    d = _point("d", 0.80, {"rss": (0.95, 0.93, 0.97, True)})  # as useful as a, leaks more
    assert [p.label for p in frontier([a, b, c, d])] == ["a", "b"]


def test_broken_needs_a_stronger_attack_whose_interval_clears_the_papers():
    hidden = _point("h", 0.7, {"rss": (0.002, 0.0, 0.011, True), "unmix": (1.0, 0.992, 1.0, True)})
    assert broken(hidden).startswith("unmix 100.0%")
    close = _point("c", 0.7, {"rss": (0.10, 0.05, 0.15, True), "unmix": (0.14, 0.12, 0.16, True)})
    assert broken(close) is None  # intervals overlap: not clearly stronger
    safe = _point("s", 0.7, {"rss": (0.0, 0.0, 0.01, False), "unmix": (0.02, 0.015, 0.03, False)})
    assert broken(safe) is None  # the stronger attack does not beat random
    own = _point("o", 0.7, {"rss": (0.9, 0.88, 0.92, True)})
    assert broken(own) is None  # the paper's attack is the strongest


def test_the_provenance_says_how_much_of_the_plan_has_records(tmp_path):
    """A resuming run (the full bench over several sessions) says what is missing; the committed quick run is whole."""
    import shutil
    from pathlib import Path

    from veil.report.bench import load_bench
    from veil.report.bench_provenance import completeness as _completeness

    committed = Path(__file__).resolve().parents[2] / "results" / "bench"
    records, _ = load_bench(committed)
    assert _completeness(records) == f"{len(records)} of the {len(records)} cells planned on these corpora"
    (tmp_path / "cells").mkdir()
    kept = sorted((committed / "cells").glob("rt-polarity--*.json"))[:-3]  # three cells not run yet
    for p in kept:
        shutil.copy(p, tmp_path / "cells" / p.name)
    partial, _ = load_bench(tmp_path)
    assert _completeness(partial).endswith("(not run yet: 3 on rt-polarity; `veil bench` on the same folder "
                                           "resumes them)")


def test_attacks_not_comparable_with_the_strongest_still_show_their_measurement():
    from veil.report.bench import _rows

    p = BenchPoint("c", "plain", {}, "default", {"kind": "none"})
    p.utility = {"utility_metric": _metric(0.74, 0.72, 0.76)}
    p.attacks["membership-lira"] = {"comparable": False, "success": "auc", "success_metric": _metric(0.66, 0.64, 0.68),
                                    "test": {"reject": True, "p_value": 1e-30}}
    (row,) = _rows([p])
    assert row[3] == "n/a" and "membership-lira auc 66.0% [64.0, 68.0], p=1e-30" in row[-1]


def _model(defense, label, utility, aucs):
    p = BenchPoint("rt-polarity", defense, {}, label, {"kind": "none"})
    p.utility = {"utility_metric": _metric(utility, utility - 0.02, utility + 0.02)}
    for attack, auc in aucs.items():
        p.attacks[attack] = {"comparable": True, "success": "auc", "test": {"reject": True, "p_value": 1e-9},
                             "success_metric": _metric(auc, auc - 0.01, auc + 0.01)}
    return p


def test_a_model_is_compared_with_plain_training_not_with_the_vectors_baseline():
    from veil.report.bench import _by_kind, _rows

    none = BenchPoint("rt-polarity", "none", {}, "default", {"kind": "none"})
    none.utility = {"utility_metric": _metric(0.77, 0.75, 0.79)}
    none.attacks["rss"] = {"comparable": True, "success_metric": _metric(1.0, 0.99, 1.0), "test": {"reject": True}}
    plain = _model("plain", "ep200", 0.74, {"membership-lira": 0.88, "membership-loss": 0.70})
    dp = _model("dpsgd", "ep200-eps1", 0.72, {"membership-rmia": 0.54, "membership-loss": 0.52})
    hide = _model("texthide-model", "ep200", 0.70, {"membership-lira": 0.57})
    points = {"rt-polarity": [none, dp, hide, plain]}
    sections = {kind: [p.defense for p in pts] for kind, _, pts in _by_kind(points)}
    assert sections["model"] == ["plain", "dpsgd", "texthide-model"]  # its own reference first, no vectors baseline
    assert sections["vectors"] == ["none"]
    (row,) = [r for r in frontier_rows(points) if r[1] == "model"]
    # TextHide is beaten on both axes, and plain is no defense: neither is on the frontier
    assert row[2].startswith("dpsgd ep200-eps1") and "texthide" not in row[2]
    assert row[4] == "plain ep200: utility 74.0% [72.0, 76.0], membership-lira 88.0% [87.0, 89.0]"
    rows = {r[0]: r for r in _rows([plain, dp])}
    assert rows["plain ep200"][1] == "none" and rows["plain ep200"][3] == "membership-lira"
    assert rows["dpsgd ep200-eps1"][3] == "membership-rmia"


def test_texthide_or_dpsgd_joins_the_model_and_the_encodings_of_one_texthide_setting():
    from veil.report.bench_use import texthide_or_dpsgd as _texthide_or_dpsgd

    hide = _model("texthide-model", "ep200-k4-m256", 0.70, {"membership-rmia": 0.57})
    hide.setting = {"epochs": 200, "m": 256, "k": 4}
    enc = BenchPoint("rt-polarity", "texthide", {"m": 256, "k": 4, "mode": "intra"}, "k4-m256-intra", {})
    enc.attacks["unmix"] = {"comparable": True, "success_metric": _metric(1.0, 0.996, 1.0), "test": {"reject": True}}
    other = BenchPoint("rt-polarity", "texthide", {"m": 16, "k": 4, "mode": "intra"}, "k4-m16-intra", {})
    other.attacks["unmix"] = {"comparable": True, "success_metric": _metric(0.5, 0.4, 0.6), "test": {"reject": True}}
    dps = []
    for eps, acc, auc in ((1.0, 0.66, 0.52), (3.0, 0.72, 0.55), (8.0, 0.76, 0.59)):
        p = _model("dpsgd", f"ep200-eps{eps:g}", acc, {"membership-rmia": auc})
        p.setting = {"epochs": 200, "epsilon": eps}
        dps.append(p)
    (row,) = _texthide_or_dpsgd({"rt-polarity": [other, enc, dps[2], hide, dps[0], dps[1]]})
    assert row[:5] == ["rt-polarity", "(256, 4): 70.0% [68.0, 72.0]", "unmix 100.0% [99.6, 100.0]",
                       "membership-rmia 57.0% [56.0, 58.0]", "epsilon 3: 72.0% [70.0, 74.0], membership-rmia 55.0% "
                       "[54.0, 56.0]"]
    # the rules: TextHide leaks through its encodings (and its model); these records carry no majority rate, so no
    # utility test is possible and neither passes
    assert row[5].startswith("TextHide (256, 4): not recommended (usefulness untested: ")
    assert "leaks: its training encodings: unmix 100.0% [99.6, 100.0] beats random guessing; its model: " in row[5]
    assert "DP-SGD epsilon 3: not recommended (usefulness untested" in row[5]
    (row,) = _texthide_or_dpsgd({"rt-polarity": [hide, dps[0]]})
    assert row[2] == "not run" and row[4] == "none of the DP-SGD settings run reaches it"
    assert "its training encodings: not attacked" in row[5]


# ------------------------------------------------------------------------------------- the rules of "What to use"
def _setting(defense, label, accuracy, attacks, *, majority=0.6, n=500, guarantee=None, corpus="rt-polarity"):
    """A hand-built point: its accuracy on ``n`` test items against ``majority``, and per attack (success, mean,
    low, high, reject) with that cell's stated test."""
    p = BenchPoint(corpus, defense, {}, label, guarantee or {"kind": "none"})
    p.utility = {"utility": "accuracy", "utility_metric": {**_metric(accuracy, accuracy - 0.04, accuracy + 0.04),
                                                           "n": n}, "majority_rate": majority}
    for attack, (success, mean, low, high, reject) in attacks.items():
        p.attacks[attack] = {"comparable": True, "success": success, "success_metric": _metric(mean, low, high),
                             "test": {"reject": reject, "p_value": 1e-9 if reject else 0.4}, "random_rate": 0.5,
                             "versus": "random guessing"}
    return p


def _model_row(*points):
    (row,) = [r for r in what_to_use({"rt-polarity": list(points)}) if r[1] == "model"]
    return row


PLAIN = _setting("plain", "ep200", 0.75, {"membership-lira": ("auc", 0.88, 0.87, 0.89, True)})


def test_a_setting_that_passes_both_rules_is_recommended_with_its_tests():
    dp = _setting("dpsgd", "eps1", 0.72, {"membership-rmia": ("auc", 0.54, 0.52, 0.56, True)},
                  guarantee={"kind": "epsilon-delta-dp", "epsilon": 1.0, "delta": 1e-5})
    row = _model_row(PLAIN, dp)
    # 360 of 500 against 60%: p far below 0.05; the AUC beats random but stays under e/(1+e) = 73.1% (delta 1e-5)
    assert row[2].startswith("dpsgd eps1 (epsilon=1 epsilon-delta-dp): accuracy 72.0% [68.0, 76.0] beats the "
                             "majority class 60.0% (p<1e-4, exact one-sided binomial)")
    assert "membership-rmia AUC 54.0% [52.0, 56.0], beating random guessing (p<1e-4), within the 73.11% " \
           "membership AUC its (1, 1e-05)-DP allows" in row[2]
    assert row[3] == "none"


def test_a_setting_at_the_majority_class_is_not_recommended_and_the_page_says_why():
    hide = _setting("texthide-model", "k4", 0.61, {"membership-loss": ("auc", 0.50, 0.48, 0.52, False)})
    row = _model_row(PLAIN, hide)
    assert row[2].startswith("nothing of this kind is both useful and private here. Least bad: texthide-model k4 "
                             "(heuristic), private (membership-loss AUC 50.0% [48.0, 52.0] not distinguishable from "
                             "random guessing (p=0.4)) but not useful: accuracy 61.0% [57.0, 65.0] does not beat the "
                             "majority class 60.0% (p=0.34, exact one-sided binomial)")


def test_an_attack_beating_its_floor_without_dp_blocks_the_recommendation():
    hide = _setting("texthide-model", "k4", 0.70, {"membership-loss": ("auc", 0.54, 0.52, 0.56, True),
                                                   "membership-lira": ("auc", 0.50, 0.48, 0.52, False)})
    dp = _setting("dpsgd", "eps1", 0.71, {"membership-rmia": ("auc", 0.53, 0.51, 0.55, True)},
                  guarantee={"kind": "epsilon-delta-dp", "epsilon": 1.0, "delta": 1e-5})
    row = _model_row(PLAIN, hide, dp)
    # the same AUC that passes under DP-SGD's bound fails TextHide, which has no guarantee: the floor rule applies
    assert row[2].startswith("dpsgd eps1 ")
    assert row[3] == ("texthide-model k4: leaks: membership-loss AUC 54.0% [52.0, 56.0] beats random guessing "
                      "(p<1e-4)")


def test_a_dp_setting_whose_attack_exceeds_its_bound_is_not_private():
    # epsilon 0.1 allows AUC e^0.1 / (1 + e^0.1) = 52.5%: an interval reaching 62% contradicts the guarantee
    dp = _setting("dpsgd", "eps0.1", 0.70, {"membership-rmia": ("auc", 0.60, 0.58, 0.62, True)},
                  guarantee={"kind": "epsilon-dp", "epsilon": 0.1})
    row = _model_row(PLAIN, dp)
    assert "nothing of this kind is both useful and private here" in row[2]
    assert ("but leaks: membership-rmia AUC 60.0% [58.0, 62.0], beating random guessing (p<1e-4), reaching above "
            "the 52.50% membership AUC its 0.1-DP allows") in row[2]


def test_a_dp_guarantee_without_a_bound_on_the_measure_is_held_to_the_floor_rule():
    from veil.report.bench_use import dp_bound, private

    block = {"success": "identity", "random_rate": 1 / 200}
    assert dp_bound({"kind": "sentdp", "epsilon": 3.0}, block)[0] is None  # one sentence, not the document
    assert dp_bound({"kind": "metric-dp", "epsilon": 10.0}, block)[0] is None
    # epsilon-DP of the whole item bounds top-1 re-identification among N candidates by e^epsilon / N
    bound, what = dp_bound({"kind": "epsilon-dp", "epsilon": 1.0}, block)
    assert math.isclose(bound, math.e / 200) and what.startswith("top-1 re-identification among 200")
    doc = _setting("deepcandidate", "eps3", 0.7, {"rss": ("identity", 0.03, 0.015, 0.06, True)},
                   guarantee={"kind": "sentdp", "epsilon": 3.0})
    verdict = private(doc)
    assert verdict.passed is False and "rss re-identification 3.0% [1.5, 6.0] beats random guessing" in verdict.text
    assert "SentDP bounds replacing one sentence" in verdict.text
    audited = _setting("deepcandidate", "eps3", 0.7, {"rss": ("identity", 0.005, 0.0, 0.02, False)},
                       guarantee={"kind": "sentdp", "epsilon": 3.0})
    assert private(audited).passed is True
    audited.attacks["exact-audit"] = {"success": "violation", "success_metric": {"mean": 1.0, "n": 80}}
    assert private(audited) == private(audited).__class__(False, "the exact audit found its epsilon violated")


def test_no_verdict_where_even_the_undefended_utility_does_not_beat_the_majority_class():
    weak = _setting("plain", "ep200", 0.68, {"membership-lira": ("auc", 0.7, 0.68, 0.72, True)}, majority=0.65,
                    n=200)
    dp = _setting("dpsgd", "eps1", 0.66, {"membership-rmia": ("auc", 0.5, 0.48, 0.52, False)}, majority=0.65, n=200,
                  guarantee={"kind": "epsilon-delta-dp", "epsilon": 1.0, "delta": 1e-5})
    row = _model_row(weak, dp)
    assert row[2] == ("no verdict: even without a defense (plain ep200) accuracy 68.0% [64.0, 72.0] does not beat the "
                      "majority class 65.0% (p=0.21, exact one-sided binomial), so no setting of this kind can be "
                      "shown useful here")


def test_no_verdict_where_the_utility_has_no_baseline_to_test_against():
    p = BenchPoint("silver-sm", "obfuscation-random", {}, "P3", {"kind": "none"})
    p.utility = {"utility": "UAS", "utility_metric": _metric(0.88, 0.87, 0.89),
                 "reference_metric": _metric(0.94, 0.93, 0.95)}
    p.attacks["word-recovery-mlm"] = {"comparable": True, "success": "top1", "success_metric": _metric(0.02, 0.01, 0.03),
                                      "test": {"reject": False, "p_value": 0.2}}
    (row,) = what_to_use({"silver-sm": [p]})
    assert row[2].startswith("no verdict: usefulness cannot be tested here (the original inputs: UAS 94.0% "
                             "[93.0, 95.0] cannot be tested: its cells record no trivial baseline")


def test_the_committed_quick_bench_recommends_nothing_the_issue_found_wrong(tmp_path):
    """Issue 48: LEACE on debates at the majority class, metric DP and DeepCandidate on drug-reviews (where even no
    defense does not beat the majority class) and TextHide (4, 0) intra (re-identified 100%) were on the page as
    what to use. The page now states the rules, recommends DP-SGD for the model, and keeps the frontier apart."""
    from pathlib import Path

    from veil.report.bench import bench_points, load_bench

    records, _ = load_bench(Path(__file__).resolve().parents[2] / "results" / "bench")
    rows = {(r[0], r[1]): r for r in what_to_use(bench_points(records))}
    debates = rows[("debates-2016-speaker", "representations")]
    assert debates[2].startswith("nothing of this kind is both useful and private here")
    assert "leace: not useful: accuracy 42.9% [33.8, 52.4] does not beat the majority class 42.9%" in debates[3]
    for kind in ("document-embeddings", "text"):
        assert rows[("drug-reviews", kind)][2].startswith("no verdict: even without a defense (none) accuracy 68.0%")
    encodings = rows[("rt-polarity", "training-encodings")]
    assert encodings[2].startswith("nothing of this kind is both useful and private here")
    assert "rss any-source re-identification 100.0%" in encodings[2]  # the least bad, k4-m0-intra, leaks
    assert rows[("rt-polarity", "model")][2].startswith("dpsgd ep200-eps8 (epsilon=8 epsilon-delta-dp)")


def test_the_page_states_the_rules_and_keeps_the_frontier_as_a_description(tmp_path):
    import shutil
    from pathlib import Path

    from veil.report.bench import render_bench
    from veil.report.bench_use import ALPHA

    committed = Path(__file__).resolve().parents[2] / "results" / "bench" / "cells"
    (tmp_path / "b" / "cells").mkdir(parents=True)
    for p in committed.glob("rt-polarity--*-ep200*.json"):  # the model kind: plain, DP-SGD, TextHide's model
        shutil.copy(p, tmp_path / "b" / "cells" / p.name)
    md, _ = render_bench(tmp_path / "b", tmp_path / "out", name="bench")
    text = md.read_text()
    use = text.index("## What to use")
    assert f"one-sided tests at alpha {ALPHA:g}" in text[use:]
    assert "exact one-sided binomial test of its test-split hits against the majority rate" in text
    front = text.index("## Privacy-utility frontier (a description, not advice)")
    assert use < text.index("### TextHide or DP-SGD?") < front
    (row,) = [line for line in text[use:front].splitlines() if line.startswith("| rt-polarity | model |")]
    assert "dpsgd ep200-eps8" in row and "texthide-model ep200-k4-m256: leaks: membership-" in row
    # DP-SGD's bound is read with the delta its record states (the registry's guarantee has none)
    assert "membership AUC its (8, 0.0001)-DP allows" in row


def test_a_setting_that_passes_the_attacks_that_ran_gets_no_verdict_while_a_planned_one_did_not_run():
    """Passing the attacks that ran says nothing of a stronger one that did not (``veil bench --demo``, a partial
    --attacks run): no recommendation; an attack that ran and beats its floor still fails the setting."""
    dp = _setting("dpsgd", "eps1", 0.72, {"membership-rmia": ("auc", 0.54, 0.52, 0.56, True)},
                  guarantee={"kind": "epsilon-delta-dp", "epsilon": 1.0, "delta": 1e-5})
    dp.missing = ["membership-lira"]
    row = _model_row(PLAIN, dp)
    assert row[2].startswith("nothing of this kind is both useful and private here. Least bad: dpsgd eps1")
    assert row[2].endswith("privacy untested: membership-rmia AUC 54.0% [52.0, 56.0], beating random guessing "
                           "(p<1e-4), within the 73.11% membership AUC its (1, 1e-05)-DP allows; not run on it: "
                           "membership-lira (no verdict until they are)")
    hide = _setting("texthide-model", "k4", 0.70, {"membership-loss": ("auc", 0.54, 0.52, 0.56, True)})
    hide.missing = ["membership-lira"]
    dp.missing = []
    row = _model_row(PLAIN, hide, dp)
    assert row[2].startswith("dpsgd eps1 ")
    assert row[3] == ("texthide-model k4: leaks: membership-loss AUC 54.0% [52.0, 56.0] beats random guessing "
                      "(p<1e-4)")


def test_bench_points_name_the_planned_attacks_a_setting_has_no_record_of(tmp_path):
    import shutil
    from pathlib import Path

    from veil.report.bench import bench_points, load_bench

    committed = Path(__file__).resolve().parents[2] / "results" / "bench" / "cells"
    (tmp_path / "cells").mkdir()
    for p in committed.glob("rt-polarity--dpsgd-*.json"):
        if "--membership-lira--" not in p.name:
            shutil.copy(p, tmp_path / "cells" / p.name)
    (dp,) = bench_points(load_bench(tmp_path)[0])["rt-polarity"]
    assert dp.missing == ["membership-lira"]
    whole = {p.name: p.missing for p in bench_points(load_bench(committed.parent)[0])["rt-polarity"]}
    assert whole and all(m == [] for m in whole.values())  # the committed quick run has every planned attack


def test_a_demo_report_names_what_it_left_out_and_the_command_that_adds_it(tmp_path):
    import shutil
    from pathlib import Path

    from veil._io import atomic_write_json
    from veil.report.bench import render_bench

    committed = Path(__file__).resolve().parents[2] / "results" / "bench" / "cells"
    (tmp_path / "b" / "cells").mkdir(parents=True)
    for p in committed.glob("rt-polarity--dpsgd-*.json"):
        if "--membership-lira--" not in p.name:
            shutil.copy(p, tmp_path / "b" / "cells" / p.name)
    left = {"trains a model for minutes": ["rt-polarity--dpsgd-ep200-eps8--membership-lira--quick-q500-e5-seed0"]}
    atomic_write_json(tmp_path / "b" / "run.json", {"cells": [], "left_out": left})
    text = render_bench(tmp_path / "b", tmp_path / "out", name="report")[0].read_text()
    section = text[text.index("## Left out of this run"):]
    assert f"`veil bench --quick --out {tmp_path / 'b'}` runs them" in section
    assert "| trains a model for minutes | 1: rt-polarity / dpsgd-ep200-eps8 / membership-lira |" in section
    assert "not run on it: membership-lira (no verdict until they are)" in text
