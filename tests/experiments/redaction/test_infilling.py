"""The infilling experiment: one record per operator, the masked-LM weight chosen on the attacker's calibration
texts (never the targets), every redacted PERSON span scored against the floor and against the attack without the
masked LM; a record is reused, a stale one refused, bad arguments refused before any work."""

from __future__ import annotations

import json

import pytest

from veil.errors import InvalidParameterError, StaleResultError
from veil.experiments.redaction.infilling import WEIGHTS, run_infilling


@pytest.fixture(scope="module")
def small(tmp_path_factory, quick_mlm, builtin):
    builtin("news-articles")
    root = tmp_path_factory.mktemp("infill")
    lines: list[str] = []
    paths = run_infilling(root, corpus="news-articles", operators=("type", "mask"), mlm="mlm-quick",
                          max_documents=12, max_public=300, max_calibration=12, log=lines.append)
    return root, paths, lines


def test_each_operator_writes_a_record_with_its_tests(small):
    root, paths, lines = small
    assert [p.name for p in paths] == ["infill-news-articles-type-person-msm-n12-s0.json",
                                       "infill-news-articles-mask-person-msm-n12-s0.json"]
    for path in paths:
        rec = json.loads(path.read_text())
        m, c = rec["metrics"], rec["config"]
        n = m["top1"]["n"]
        assert n == m["top10"]["n"] == m["floor_top1"]["n"] == m["top1_prior"]["n"] > 0
        assert m["top1"]["mean"] <= m["top10"]["mean"] and m["coverage"]["mean"] <= 1.0
        assert c["weight"] in WEIGHTS and len(c["calibration"]) == len(WEIGHTS)
        assert "McNemar" in c["tests"]["p_floor"]["test"]
        assert c["owner_randomness"].startswith("os-entropy")
    assert any(line.startswith("infill news-articles type: weight") for line in lines)
    mask = json.loads(paths[1].read_text())["metrics"]
    typ = json.loads(paths[0].read_text())["metrics"]
    # the mask releases each value's length: without the masked LM it ranks at least as well as under type
    assert mask["top1_prior"]["mean"] >= typ["top1_prior"]["mean"]


def test_a_record_is_reused_and_a_stale_one_refused(small):
    root, paths, _ = small
    before = paths[0].read_text()
    lines: list[str] = []
    again = run_infilling(root, corpus="news-articles", operators=("type",), mlm="mlm-quick", max_documents=12,
                          max_public=300, max_calibration=12, log=lines.append)
    assert again == [paths[0]] and paths[0].read_text() == before and "kept" in lines[0]
    with pytest.raises(StaleResultError, match="max_public"):
        run_infilling(root, corpus="news-articles", operators=("type",), mlm="mlm-quick", max_documents=12,
                      max_public=301, max_calibration=12, log=lines.append)


def test_bad_arguments_fail_before_work(tmp_path):
    with pytest.raises(InvalidParameterError, match="pseudonym"):
        run_infilling(tmp_path, operators=("pseudonym",))
    with pytest.raises(InvalidParameterError, match="brown"):
        run_infilling(tmp_path, corpus="brown")
    with pytest.raises(InvalidParameterError):
        run_infilling(tmp_path, operators=())
    assert not any(tmp_path.iterdir())
