"""The bench report's "What to use" table: the privacy-utility frontier per release kind, and the settings a
stronger attack broke."""

from __future__ import annotations

from veil.report.bench import BenchPoint, broken, frontier


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

    from veil.report.bench import _completeness, load_bench

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
    from veil.report.bench import _by_kind, _rows, _what_to_use

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
    (row,) = [r for r in _what_to_use(points) if r[1] == "model"]
    # TextHide is beaten on both axes, and plain is no defense: neither is on the frontier
    assert row[2].startswith("dpsgd ep200-eps1") and "texthide" not in row[2]
    assert row[4] == "plain ep200: utility 74.0% [72.0, 76.0], membership-lira 88.0% [87.0, 89.0]"
    rows = {r[0]: r for r in _rows([plain, dp])}
    assert rows["plain ep200"][1] == "none" and rows["plain ep200"][3] == "membership-lira"
    assert rows["dpsgd ep200-eps1"][3] == "membership-rmia"


def test_texthide_or_dpsgd_joins_the_model_and_the_encodings_of_one_texthide_setting():
    from veil.report.bench import _texthide_or_dpsgd

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
    assert row == ["rt-polarity", "(256, 4): 70.0% [68.0, 72.0]", "unmix 100.0% [99.6, 100.0]",
                   "membership-rmia 57.0% [56.0, 58.0]", "epsilon 3: 72.0% [70.0, 74.0], membership-rmia 55.0% "
                   "[54.0, 56.0]"]
    (row,) = _texthide_or_dpsgd({"rt-polarity": [hide, dps[0]]})
    assert row[2] == "not run" and row[4] == "none of the DP-SGD settings run reaches it"
