"""The retrieval experiment runner and its result page, on a real corpus with few queries."""

from __future__ import annotations

import pytest

from veil.errors import InvalidParameterError
from veil.experiments.texthide.retrieval import planned_paths, run_retrieval, write_records
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
    n = records[0].config["n_queries"]
    assert sorted(p.name for p in paths) == sorted(
        p.name for p in planned_paths("trec-questions", "rss", defense="all", m=256, k=4, queries=n, seed=1,
                                      root=tmp_path))  # the CLI checks these names before any work
    assert any(p.name == f"trec-questions-rss-texthide-m256-k4-q{n}-seed1.json" for p in paths)
    render_all(tmp_path / "results", tmp_path / "docs")
    page = (tmp_path / "docs" / "retrieval.md").read_text()
    assert "### trec-questions (60 queries" in page and "paper, CoLA" in page and "exact one-sided binomial test" in page


def test_bad_runner_arguments():
    with pytest.raises(InvalidParameterError, match="unknown attack"):
        run_retrieval("trec-questions", "gradient")
    with pytest.raises(InvalidParameterError, match="unknown defense"):
        run_retrieval("trec-questions", "rss", defense="sentdp")
