"""The SentDP evaluation runner on a small real slice (DeepCandidate and truncation)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from veil.errors import InvalidParameterError, StaleResultError
from veil.experiments.sentdp.eval import SentDPEval, planned_paths, run_sentdp_eval


def test_config_validation():
    with pytest.raises(InvalidParameterError):
        SentDPEval(methods=("laplace",))
    with pytest.raises(InvalidParameterError):
        SentDPEval(epsilons=(0.0,))


# 40 documents, 9 publishers, 4 classifier epochs: the tiny classifiers may collapse (tests/training checks that warning)
@pytest.mark.filterwarnings("ignore::veil.errors.CollapsedModelWarning")
def test_runner_writes_one_record_per_method_and_epsilon(builtin, tmp_path):
    builtin("news-articles")
    cfg = SentDPEval(corpus="news-articles", epsilons=(2.0, 40.0), methods=("deepcandidate", "truncation"),
                     trials=2, p_grid=(10, 20), p_trials=1, classifier_seeds=(0,), classifier_epochs=4,
                     n_clusters=5, recoder_epochs=2, max_documents=40, n_candidates=30)
    records = run_sentdp_eval(cfg, results_dir=tmp_path, progress=False, log=lambda line: None)
    names = sorted(p.stem for p in tmp_path.glob("*.json"))
    assert names == sorted(["news-articles-reference-n40-seed0", "news-articles-deepcandidate-eps2-t2-n40-seed0",
                            "news-articles-deepcandidate-eps40-t2-n40-seed0", "news-articles-truncation-eps2-t2-n40-seed0",
                            "news-articles-truncation-eps40-t2-n40-seed0"])
    assert sorted(p.stem for p in planned_paths(cfg, tmp_path)) == names  # known before the run
    # resumable: a finished run is kept as is (no work, no rewrite); a lost cell is redone alone
    stamps = {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("*.json")}
    lines: list[str] = []
    again = run_sentdp_eval(cfg, results_dir=tmp_path, progress=False, log=lines.append)
    assert len(again) == 5 and lines == ["news-articles: 5 of 5 records exist and are kept (--force recomputes)"]
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("*.json")} == stamps
    lost = "news-articles-truncation-eps40-t2-n40-seed0.json"
    (tmp_path / lost).unlink()
    redone = run_sentdp_eval(cfg, results_dir=tmp_path, progress=False, log=lambda line: None)
    assert len(redone) == 5 and (tmp_path / lost).exists()
    assert {n: t for n, t in stamps.items() if n != lost} == {p.name: p.stat().st_mtime_ns
                                                              for p in tmp_path.glob("*.json") if p.name != lost}
    with pytest.raises(StaleResultError, match=r"another configuration \(classifier_epochs: stored 4, requested 5\)"):
        run_sentdp_eval(replace(cfg, classifier_epochs=5), results_dir=tmp_path, progress=False, log=lambda line: None)
    ref = json.loads((tmp_path / "news-articles-reference-n40-seed0.json").read_text())
    assert 0 < ref["metrics"]["random_guess"]["mean"] <= 1
    assert ref["config"]["pipeline"]["m"] == 30
    dc = next(r for r in records if r.experiment.endswith("deepcandidate-eps40"))
    assert dc.metrics["test_macro_f1"].n == 2 and dc.config["n_projections"] in (10, 20)
    assert set(dc.extra["p_selection"]) == {"10", "20"}
    assert 0 <= dc.extra["collapsed_trials"] <= 2  # flagged per record
    assert sum(b["n_docs"] for b in dc.extra["k_bins"]) == ref["config"]["n_test"]
    # per-document predictions for the page's bootstrap over test documents: every method on the same documents
    from veil.metrics.utility import macro_f1

    tr = next(r for r in records if r.experiment.endswith("truncation-eps40"))
    labels = dc.extra["test_labels"]
    assert len(labels) == ref["config"]["n_test"] and tr.extra["test_labels"] == labels
    assert ref["extra"]["non_private"]["test_labels"] == labels
    assert tuple(macro_f1(labels, p) for p in dc.extra["test_predictions"]) == dc.metrics["test_macro_f1"].values


def test_rewrite_encoder_encodes_each_distinct_text_once():
    from veil.encoders import TextEncoder
    from veil.experiments.sentdp.eval import _RewriteEncoder

    encoder = TextEncoder("minilm")
    encode = _RewriteEncoder(encoder)
    texts = ["the cat sat", "a dog ran", "the cat sat"]
    X = encode(texts)
    assert (encode.requested, encode.encoded) == (3, 2)
    np.testing.assert_allclose(X, encoder.encode(texts, progress=False), atol=1e-5)  # same rows, same order
    encode(["a dog ran", "birds sing"])
    assert (encode.requested, encode.encoded) == (5, 3)


@pytest.mark.filterwarnings("ignore::veil.errors.CollapsedModelWarning")
def test_records_are_kept_only_under_the_encoder_backend_they_were_made_with(builtin, tmp_path, monkeypatch):
    """The sentence vectors are frozen MiniLM encodings: records made with torch (as every committed one: no backend
    key in config["eval"]) are kept under torch and refused under VEIL_ENCODER_BACKEND=onnx before any work."""
    from veil.encoders.backends import ENV

    builtin("news-articles")
    cfg = SentDPEval(corpus="news-articles", epsilons=(2.0,), methods=("truncation",), trials=1, classifier_seeds=(0,),
                     classifier_epochs=2, n_clusters=3, recoder_epochs=1, max_documents=20, n_candidates=10)
    monkeypatch.setenv(ENV, "torch")
    run_sentdp_eval(cfg, results_dir=tmp_path, progress=False, log=lambda line: None)
    stamps = {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("*.json")}
    assert len(stamps) == 2 and all("encoder_backend" not in json.loads(p.read_text())["config"]["eval"]
                                    for p in tmp_path.glob("*.json"))
    monkeypatch.setenv(ENV, "onnx")
    with pytest.raises(StaleResultError, match=r'encoder_backend: stored \(absent\), requested "onnx"'):
        run_sentdp_eval(cfg, results_dir=tmp_path, progress=False, log=lambda line: None)
    monkeypatch.setenv(ENV, "torch")
    lines: list[str] = []
    run_sentdp_eval(cfg, results_dir=tmp_path, progress=False, log=lines.append)
    assert lines == ["news-articles: 2 of 2 records exist and are kept (--force recomputes)"]
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("*.json")} == stamps
