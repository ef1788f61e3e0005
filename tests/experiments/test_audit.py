"""The SentDP audit runner on a small slice of a real document corpus, with the real encoder."""

from __future__ import annotations

import json

import numpy as np
import pytest

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.experiments.audit import run_sentdp_audit
from veil.results import ResultRecord


@pytest.fixture(scope="module")
def news_slice(builtin):
    """14 train documents with >= 8 sentences (the candidates) and 3 test documents of news-articles."""
    corpus = builtin("news-articles")
    counts = np.array([len(doc) for doc in corpus.documents])
    train = [i for i in corpus.indices("train") if 8 <= counts[i] <= 25][:14]
    test = [i for i in corpus.indices("test") if 2 <= counts[i] <= 25][:3]
    return corpus.select(np.array(train + test), name="news-slice")


@pytest.fixture(scope="module")
def encoder():
    from veil.encoders import TextEncoder

    return TextEncoder("minilm")


def test_audit_runner_writes_a_valid_record(news_slice, encoder, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))  # the slice's embeddings are cached here
    # the appendix depth separates the 14 candidates; tukey-min gives most of them depth 0 in 384 dimensions
    rec = run_sentdp_audit(news_slice, epsilons=(1, 10), neighbours_per_document=14, n_projections=20,
                           depth="appendix", seed=3, results_dir=tmp_path / "results", encoder=encoder,
                           progress=False)
    path = tmp_path / "results" / "audit-news-slice-appendix-docsall-nb14-p20-seed3.json"  # the size is in the name
    data = json.loads(path.read_text())
    back = ResultRecord.read(path)
    assert back.method == "sentdp" and back.experiment == "audit-news-slice-appendix" == rec.experiment
    m = back.metrics
    assert m["pairs"].mean == 3 * 14 and m["passed"].mean == 1.0
    for e in ("1", "10"):
        assert 0 < m[f"max_abs_log_ratio_eps{e}"].mean <= float(e) + 1e-9
        assert m[f"slack_eps{e}"].mean == pytest.approx(float(e) - m[f"max_abs_log_ratio_eps{e}"].mean)
    assert m["max_abs_log_ratio"].mean == m["max_abs_log_ratio_eps10"].mean
    cfg = data["config"]
    assert cfg["m"] == 14 and cfg["dim"] == 384 and cfg["n_documents"] == 3 and cfg["seed"] == 3
    assert cfg["depth"] == "appendix" and "seeded" in cfg["projections"] and "minilm" in cfg["encoder"]
    assert set(data["extra"]["max_by_kind"]["10"]) == {"random", "reflect", "tie", "deepest", "extreme",
                                                       "duplicate", "mean"}
    assert data["extra"]["worst"]["10"]["description"].startswith("document ")
    assert "PASSED" in capsys.readouterr().out
    # the same seed reproduces every number (the embeddings now come from the cache)
    again = run_sentdp_audit(news_slice, epsilons=(1, 10), neighbours_per_document=14, n_projections=20,
                             depth="appendix", seed=3, results_dir=None, encoder=encoder, progress=False)
    assert again.metrics["max_abs_log_ratio_eps1"] == rec.metrics["max_abs_log_ratio_eps1"]


def test_audit_runner_rejects_bad_arguments(news_slice, encoder):
    with pytest.raises(InvalidTypeError):
        run_sentdp_audit(42, results_dir=None)
    with pytest.raises(InvalidTypeError):
        run_sentdp_audit(news_slice, epsilons=(), results_dir=None)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        run_sentdp_audit(news_slice, epsilons=(1, -1), results_dir=None)
    with pytest.raises(InvalidParameterError, match="n_documents"):
        run_sentdp_audit(news_slice, n_documents=0, results_dir=None)
    no_train = news_slice.select(np.flatnonzero(news_slice.splits == "test"), name="only-test")
    with pytest.raises(DataFormatError, match="train document"):
        run_sentdp_audit(no_train, results_dir=None, encoder=encoder, progress=False)
