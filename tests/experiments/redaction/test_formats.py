"""The held-out format injection set and its record (veil.experiments.redaction.formats): reproducible from the
seed, spans that line up, seed 1's values apart from seed 0's, and a record scoring veil's recognizers against
Presidio's English defaults alone (what the additions find that Presidio's drop), kept on a second run."""

from __future__ import annotations

import json

import pytest

from veil.experiments.redaction.formats import FORMAT_CLASSES, build_formats, run_formats


def test_the_set_is_reproducible_lines_up_and_seed_one_is_apart_from_seed_zero():
    one, again, zero = build_formats(3, 1), build_formats(3, 1), build_formats(3, 0)
    assert one.texts == again.texts and len(one) == 3 * sum(len(v) for v in FORMAT_CLASSES.values())
    for text, s in zip(one.texts, one.spans):
        assert text[s.start:s.end] == s.value and s.variant in FORMAT_CLASSES[s.entity]
    assert not {s.value for s in one.spans} & {s.value for s in zero.spans}  # other values than the tuning draw


def test_the_record_scores_both_detectors_and_is_kept(tmp_path):
    path = run_formats(tmp_path, n_per_variant=3, seed=1)
    record = json.loads(path.read_text())
    m = record["metrics"]
    for cls in FORMAT_CLASSES:
        assert m[f"recall_{cls}"]["n"] == 3 * len(FORMAT_CLASSES[cls]) and f"presidio_recall_{cls}" in m
    # the numbers Presidio's own SSN recognizer throws away: veil's keeps every one of them
    assert m["recall_US_SSN_presidio_rejects"]["mean"] == 1.0
    assert m["presidio_recall_US_SSN_presidio_rejects"]["mean"] < 1.0
    assert m["recall_STREET_ADDRESS"]["mean"] > m["presidio_recall_STREET_ADDRESS"]["mean"]
    assert record["config"]["baseline"]["recognizers"] == "Presidio's English defaults alone"
    assert {"base_rate_STREET_ADDRESS", "base_rate_UK_POSTCODE", "base_rate_IT_FISCAL_CODE"} <= set(m)  # zeros too
    assert "seed 0" in record["config"]["held_out"] and "NOT" not in record["config"]["held_out"]
    before = path.read_text()
    assert run_formats(tmp_path, n_per_variant=3, seed=1) == path and path.read_text() == before


def test_bad_sizes_are_typed_errors(tmp_path):
    from veil.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError):
        run_formats(tmp_path, n_per_variant=0)
    with pytest.raises(InvalidParameterError, match="n_per_variant"):
        build_formats(10 ** 6)
