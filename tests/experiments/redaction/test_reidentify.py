"""The re-identification experiment on redacted text: the closed-world split, one record per operator, reuse of a
record of the same configuration, refusal of one made under another."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from veil.errors import DataFormatError, InvalidParameterError, StaleResultError
from veil.experiments.redaction.reidentify import candidate_split, run_reidentification
from veil.results import ResultRecord


def test_candidate_split_is_closed_world_disjoint_and_seeded():
    texts = [f"text {i}" for i in range(40)] + ["text 0", "   "]
    sources = [f"Name{i % 7} <n{i % 7}@example.org>" for i in range(40)] + ["Name0 <n0@example.org>", "X <x@y.org>"]
    sources[39] = "NA"
    split = candidate_split(texts, sources, key="address", min_texts=5, max_texts=4, seed=3)
    assert set(split.public_candidates) == set(split.private_candidates) == {f"n{i}@example.org" for i in range(7)}
    assert not set(split.public_texts) & set(split.private_texts)  # no text on both sides
    assert len(set(split.public_texts + split.private_texts)) == len(split.public_texts + split.private_texts)
    assert Counter(split.private_candidates) == {f"n{i}@example.org": 2 for i in range(7)}  # 4 texts: 2 + 2
    assert "   " not in split.private_texts + split.public_texts
    assert candidate_split(texts, sources, key="address", min_texts=5, max_texts=4, seed=3) == split
    assert candidate_split(texts, sources, key="address", min_texts=5, max_texts=4, seed=4) != split
    few = candidate_split(texts, sources, key="address", min_texts=2, max_candidates=3, seed=0)
    assert few.candidates == 3
    with pytest.raises(DataFormatError, match="lower min_texts"):
        candidate_split(texts, sources, key="address", min_texts=30)
    with pytest.raises(InvalidParameterError):
        candidate_split(texts, sources, min_texts=1)


def _run(root, log=None, **kw):
    return run_reidentification(root, corpus="hoc-speeches", operators=("none", "type"), max_candidates=12, seed=0,
                                log=log or (lambda line: None), **kw)


def test_writes_reuses_and_refuses_stale_records(builtin, tmp_path):
    builtin("hoc-speeches")  # pulled into the real cache if missing
    paths = _run(tmp_path)
    assert [p.name for p in paths] == ["reidentify-hoc-speeches-none-msm-min2-max10-n12-s0.json",
                                       "reidentify-hoc-speeches-type-msm-min2-max10-n12-s0.json"]
    none, typed = (ResultRecord.read(p) for p in paths)
    for rec, op in ((none, "none"), (typed, "type")):
        assert rec.method == "redaction" and rec.config["operator"] == op and rec.config["candidates"] == 12
        for name in ("top1", "top5", "mrr", "floor", "floor_chance", "floor_majority", "p_top1", "beats_floor",
                     "top1[plain]", "spans_per_document", "redacted_char_share"):
            assert name in rec.metrics, name
        assert rec.metrics["top1"].ci_low <= rec.metrics["top1"].mean <= rec.metrics["top1"].ci_high
        assert rec.metrics["floor_chance"].mean == pytest.approx(1 / 12)
    assert none.config["variants"] == ["plain"] and none.metrics["redacted_char_share"].mean == 0.0
    assert typed.config["variants"] == ["plain", "kerckhoffs"] and "top1[kerckhoffs]" in typed.metrics
    assert 0 < typed.metrics["redacted_char_share"].mean < 1 and typed.extra["entities"]
    assert typed.config["defense"]["operator"] == "type" and typed.config["chosen"] in ("plain", "kerckhoffs")
    assert "value" not in json.dumps(typed.to_dict()["extra"])  # no redacted value is written

    before = {p: p.read_bytes() for p in paths}
    lines: list[str] = []
    assert _run(tmp_path, log=lines.append) == paths
    assert all("kept" in line for line in lines) and len(lines) == 2
    assert {p: p.read_bytes() for p in paths} == before

    with pytest.raises(StaleResultError, match="max_chars"):
        _run(tmp_path, max_chars=300)
    assert {p: p.read_bytes() for p in paths} == before
    _run(tmp_path, max_chars=300, force=True)
    assert ResultRecord.read(paths[1]).config["max_chars"] == 300


def test_damaged_record_and_bad_arguments_fail_before_work(tmp_path):
    path = tmp_path / "reidentify-hoc-speeches-none-msm-min2-max10-n12-s0.json"
    path.write_text("{")
    with pytest.raises(DataFormatError):
        run_reidentification(tmp_path, corpus="hoc-speeches", operators=("none",), max_candidates=12)
    with pytest.raises(InvalidParameterError):
        run_reidentification(tmp_path, corpus="rt-polarity")
    with pytest.raises(InvalidParameterError):
        run_reidentification(tmp_path, corpus="hoc-speeches", operators=("redact",))
    with pytest.raises(InvalidParameterError):
        run_reidentification(tmp_path, corpus="hoc-speeches", operators=())


def test_metric_dp_records_are_reused_only_under_the_encoder_backend_they_were_made_with(builtin, tmp_path,
                                                                                        monkeypatch):
    """Metric DP's word vectors are frozen MiniLM encodings: its torch record (as every committed one: no backend
    key) is refused under VEIL_ENCODER_BACKEND=onnx before any work; a TF-IDF-only release is kept either way."""
    import veil.experiments.redaction.releases as releases
    from veil.encoders.backends import ENV

    builtin("hoc-speeches")
    # metric DP's public vocabulary from the quick silver treebank (a real one, as in test_releases): a fresh
    # machine has not built the full one (minutes), and what is tested here is the backend comparison
    monkeypatch.setattr(releases, "TREEBANK", "silver-sm-quick")
    monkeypatch.setattr(releases, "VOCABULARY_SIZE", 2000)
    monkeypatch.setenv(ENV, "torch")
    ops = ("none", "metric-dp-eps10")

    def run(operators, log=None):
        return run_reidentification(tmp_path, corpus="hoc-speeches", operators=operators, max_candidates=12,
                                    max_chars=300, seed=0, log=log or (lambda line: None))

    paths = run(ops)
    assert [ResultRecord.read(p).config.get("encoder_backend") for p in paths] == [None, None]
    before = {p: p.read_bytes() for p in paths}
    monkeypatch.setenv(ENV, "onnx")
    with pytest.raises(StaleResultError, match=r'metric-dp-eps10.*encoder_backend: stored \(absent\), requested '
                                               r'"onnx"'):
        run(ops)
    lines: list[str] = []
    assert run(("none",), lines.append) == paths[:1]
    assert "kept" in lines[0]
    monkeypatch.setenv(ENV, "torch")
    lines.clear()
    assert run(ops, lines.append) == paths
    assert all("kept" in line for line in lines) and {p: p.read_bytes() for p in paths} == before
