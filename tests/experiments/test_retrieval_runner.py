"""The retrieval experiment runner and its result page, on a real corpus with few queries."""

from __future__ import annotations

import pytest

from veil.errors import InvalidParameterError
from veil.experiments.retrieval import run_retrieval, write_records
from veil.report import render_all


def test_rss_runner_writes_records_and_page(builtin, tmp_path):
    builtin("trec-questions")
    records = run_retrieval("trec-questions", "rss", queries=60, seed=1, progress=False)
    assert [r.config["setting"] for r in records] == ["baseline", "mix-only", "texthide", "random"]
    base, rnd = records[0], records[-1]
    assert base.metrics["identity"].mean >= 0.95  # undefended representations give the text away
    assert rnd.metrics["identity"].mean <= 0.1
    assert set(base.metrics) == {"identity", "jaccard", "tfidf_cosine", "label", "sbert_cosine"}
    paths = write_records(records, tmp_path / "results" / "retrieval")
    assert len(paths) == 4
    render_all(tmp_path / "results", tmp_path / "docs")
    page = (tmp_path / "docs" / "retrieval.md").read_text()
    assert "### trec-questions (60 queries" in page and "paper, CoLA" in page and "Rand's" in page


def test_bad_runner_arguments():
    with pytest.raises(InvalidParameterError, match="unknown attack"):
        run_retrieval("trec-questions", "gradient")
    with pytest.raises(InvalidParameterError, match="unknown defense"):
        run_retrieval("trec-questions", "rss", defense="sentdp")
