"""The bench's infilling cell: planned only for redaction operators whose placeholders show the spans; it scores
every redacted PERSON span of the private documents against the most-frequent-value floor on the same targets."""

from __future__ import annotations

import warnings

import numpy as np

from veil.bench.plan import BenchConfig, plan_cells


def test_infilling_is_planned_for_placeholders_only():
    cells = plan_cells(["drug-reviews"], defenses=["redaction", "metric-dp"], attacks=["infill", "reidentify", "rss"],
                       config=BenchConfig(quick=False), corpus_tasks={"drug-reviews": "document-classification"})
    infill = {c.setting.get("operator") for c in cells if c.attack == "infill"}
    assert infill == {"type", "mask", "hash"}
    assert not any(c.attack == "reidentify" for c in cells)  # needs authors: `veil redaction reidentify`
    assert {c.defense for c in cells if c.attack == "rss"} == {"redaction", "metric-dp"}


def test_the_infilling_cell_scores_every_redacted_person_span(builtin, quick_mlm):
    from veil.bench.cells.text import infill_cell
    from veil.bench.data import bench_data
    from veil.defenses.redaction import PresidioRedaction
    from veil.errors import PrivacyLeakWarning

    builtin("drug-reviews")
    config = BenchConfig(quick=True, limit=120, queries=40, key_seed=1)
    cell = next(c for c in plan_cells(["drug-reviews"], defenses=["redaction"], attacks=["infill"], config=config,
                                      corpus_tasks={"drug-reviews": "document-classification"}) if c.attack == "infill")
    data = bench_data("drug-reviews", True, 120)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        rec = infill_cell(cell, data)
    rows = np.sort(np.random.default_rng(config.seed).choice(data.splits["test"], size=40, replace=False))
    red = PresidioRedaction(operator="type").redact([s for i in rows for s in data.sentences[i]])
    spans = sum(s.entity == "PERSON" for r in red for s in r.spans)
    bench = rec.extra["bench"]
    assert rec.metrics["top1"].n == spans > 0
    assert bench["success"] == "top1" and "McNemar" in bench["test"]["test"]
    assert 0.0 <= rec.metrics["floor_top1"].mean <= 1.0 and rec.config["mlm"] == "mlm-quick"
