"""veil.bench.cells.generative_model: a fine-tuned language model's bench cells (utility, membership, canary exposure,
PII inference, extraction) on a small real slice of the planted rt-polarity corpus, and the rules the report holds
them to."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from veil.bench.plan import UTILITY, BenchConfig, plan_cells

TASKS = {"rt-polarity-planted": "language-modeling"}
LIMIT = 12


@pytest.mark.parametrize(("quick", "settings"), [(True, {"lm-plain": [{}], "lm-dpsgd": [{"epsilon": 8.0}]}),
                                                 (False, {"lm-plain": [{}], "lm-scrub": [{}], "lm-dedup": [{}],
                                                          "lm-dpsgd": [{"epsilon": e} for e in (1.0, 3.0, 8.0)]})])
def test_the_plan_pairs_each_generative_setting_with_every_attack_on_a_language_model(quick, settings):
    cells = plan_cells(list(TASKS), config=BenchConfig(quick=quick), corpus_tasks=TASKS)
    found: dict[str, list[dict]] = {}
    for c in cells:
        if c.setting not in found.setdefault(c.defense, []):
            found[c.defense].append(c.setting)
    assert found == settings
    assert {c.attack for c in cells} == {"canary-exposure", "extraction", "pii-inference", "pii-reconstruction",
                                         "lm-membership-loss", "lm-membership-zlib", "lm-membership-reference",
                                         UTILITY}


def test_exposure_is_tested_against_a_never_planted_value_by_fisher_s_method():
    from scipy.stats import chi2

    from veil.bench.cells.generative_model import fisher_exposure_test

    # u = 2^-e: exposures 1 and 3 bits are rank p-values 1/2 and 1/8; -2 (ln 1/2 + ln 1/8) = 8 ln 2
    t = fisher_exposure_test([1.0, 3.0])
    assert t["statistic"] == pytest.approx(8 * math.log(2))
    assert t["p_value"] == pytest.approx(chi2.sf(8 * math.log(2), 4))
    assert not t["reject"]
    assert fisher_exposure_test([10.0, 10.0, 10.0, 10.0])["reject"]  # 40 bits over four canaries


def test_the_group_bound_on_pii_inference_by_hand():
    from veil.bench.cells.generative_model import group_top1_bound

    assert group_top1_bound(0.1, 0.0, 1, 100) == pytest.approx(math.exp(0.1) / 100)
    assert group_top1_bound(0.1, 1e-5, 2, 100) == pytest.approx(math.exp(0.2) / 100 + 2 * math.exp(0.1) * 1e-5)
    assert group_top1_bound(8.0, 1e-4, 16, 100) == 1.0  # vacuous: a value in 16 texts at epsilon 8
    assert group_top1_bound(1e3, 0.0, 16, 100) == 1.0  # no overflow


def test_a_bound_in_bits_rules_a_dp_setting_and_a_plain_one_is_held_to_its_floor():
    from veil.report.bench import BenchPoint
    from veil.report.bench_use import private

    block = {"success": "exposure", "success_metric": {"mean": 3.0, "ci_low": 2.0, "ci_high": 4.0, "unit": "bits"},
             "comparable": False, "test": {"p_value": 0.001, "reject": True}, "dp_bound": 12.9,
             "dp_bound_what": "bound", "guarantee": {"kind": "epsilon-delta-dp", "epsilon": 8.0, "delta": 1e-4}}
    dp = BenchPoint("c", "lm-dpsgd", {"epsilon": 8.0}, "eps8", {"kind": "epsilon-delta-dp", "epsilon": 8.0},
                    attacks={"canary-exposure": block})
    check = private(dp)
    assert check.passed is True and "within the 12.9 bits" in check.text
    over = dict(block, dp_bound=3.5)  # the interval's upper end, 4.0 bits, reaches above it
    assert private(BenchPoint("c", "lm-dpsgd", {"epsilon": 8.0}, "eps8", dp.guarantee,
                              attacks={"canary-exposure": over})).passed is False
    plain = {k: v for k, v in block.items() if k not in ("dp_bound", "dp_bound_what", "guarantee")}
    check = private(BenchPoint("c", "lm-plain", {}, "default", {"kind": "none"}, attacks={"canary-exposure": plain}))
    assert check.passed is False and "3.0 bits [2.0, 4.0]" in check.text


@pytest.fixture(scope="module")
def bench(tmp_path_factory, own_home, builtin):
    """The quick bench's lm-plain setting on a small slice (every attack but reconstruction), in a VEIL_HOME of its
    own, and its report."""
    from veil.bench.data import bench_data
    from veil.bench.runner import run_bench
    from veil.report.bench import render_bench

    builtin("rt-polarity")
    with own_home(tmp_path_factory.mktemp("home")) as root:
        out = tmp_path_factory.mktemp("bench")
        config = BenchConfig(quick=True, limit=LIMIT)
        attacks = ["canary-exposure", "extraction", "pii-inference", "lm-membership-loss", "lm-membership-zlib",
                   "lm-membership-reference"]
        cells = plan_cells(list(TASKS), defenses=["lm-plain"], attacks=attacks, config=config, corpus_tasks=TASKS)
        lines: list[str] = []
        run = run_bench(cells, out, progress=False, log=lines.append)
        md, _ = render_bench(out, out / "report")
        data = bench_data("rt-polarity-planted", True, LIMIT)
        yield out, run, lines, md.read_text(), data, root


def _blocks(out) -> dict[str, dict]:
    found = {}
    for path in sorted((out / "cells").glob("*.json")):
        rec = json.loads(path.read_text())
        found[rec["config"]["cell"]["attack"]] = rec["extra"]["bench"]
    return found


def test_every_cell_runs_on_one_model_trained_before_the_cells(bench):
    out, run, lines, _, data, root = bench
    assert not run.failed and len(list((out / "cells").glob("*.json"))) == 7
    assert sum("bench: model lm:" in line for line in lines) == 1  # the model and its reference, once, first
    assert len(list((root / "lm").glob("reference-*/model.safetensors"))) == 1
    assert len([p for p in (root / "lm").iterdir() if not p.name.startswith("reference-")]) == 1


def test_the_blocks_say_what_each_cell_measured_and_against_what(bench):
    b = _blocks(bench[0])
    u = b[UTILITY]
    assert u["utility"] == "next-token accuracy" and 0 < u["majority_rate"] < 1
    m = u["utility_metric"]
    assert m["ci_low"] <= m["mean"] <= m["ci_high"] and u["perplexity"]["mean"] < u["base_perplexity"]["mean"]
    for name in ("lm-membership-loss", "lm-membership-zlib", "lm-membership-reference"):
        assert b[name]["success"] == "auc" and b[name]["comparable"] is True and b[name]["random_rate"] == 0.5
        assert 0 < b[name]["test"]["p_value"] <= 1
    e = b["canary-exposure"]
    assert e["success_metric"]["unit"] == "bits" and e["comparable"] is False and "dp_bound" not in e
    assert e["test"]["test"].startswith("Fisher") and e["versus_success"]["mean"] == pytest.approx(1 / math.log(2))
    p = b["pii-inference"]
    assert p["random_rate"] == pytest.approx(1 / (4 * LIMIT))  # the candidates a limit leaves (100 without one)
    assert p["comparable"] is False and "p_value" in p["test"]
    x = b["extraction"]
    assert x["success"] == "extraction_precision" and "reference model" in x["versus"] and "p_value" in x["test"]


def test_no_planted_secret_reaches_a_cell_record(bench):
    from veil.bench.data_generation import bench_lm_run
    from veil.experiments.generation.run import _load_canaries, run_folder

    out, _, _, _, data, _ = bench
    canaries = _load_canaries(run_folder(bench_lm_run(data, "lm-plain", {})))
    text = "\n".join(p.read_text() for p in (out / "cells").glob("*.json")).lower()
    assert canaries and all(c.text().lower() not in text for c in canaries)


def test_the_report_has_a_generative_model_section_and_advice_for_it(bench):
    md = bench[3]
    assert "## generative-model: a language model fine-tuned on the private text" in md
    row = next(line for line in md.splitlines() if line.startswith("| lm-plain | none |"))
    assert "held-out perplexity" in row and "bits" in row and "lm-membership-" in row
    advice = next(line for line in md.splitlines() if line.startswith("| rt-polarity-planted | generative-model |"))
    assert "n/a" in advice  # only the undefended reference ran: nothing defended to recommend


def test_a_setting_the_plan_does_not_know_is_refused(bench):
    from veil.bench.data_generation import bench_lm_run
    from veil.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="only epsilon"):
        bench_lm_run(bench[4], "lm-dpsgd", {"clip": 2.0})
    assert np.isfinite(bench_lm_run(bench[4], "lm-dpsgd", {"epsilon": 3.0}).settings["epsilon"])
