"""The SentDP audit runner on a small slice of a real document corpus, with the real encoder."""

from __future__ import annotations

import json

import numpy as np
import pytest

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.experiments.sentdp.audit import run_sentdp_audit
from veil.results import ResultRecord


@pytest.fixture(scope="module")
def news_slice(builtin):
    """14 train documents with >= 8 sentences (the candidates), 2 dev and 3 test documents of news-articles."""
    corpus = builtin("news-articles")
    counts = np.array([len(doc) for doc in corpus.documents])
    train = [i for i in corpus.indices("train") if 8 <= counts[i] <= 25][:14]
    dev = [i for i in corpus.indices("dev") if 2 <= counts[i] <= 25][:2]
    test = [i for i in corpus.indices("test") if 2 <= counts[i] <= 25][:3]
    return corpus.select(np.array(train + dev + test), name="news-slice")


@pytest.fixture(scope="module")
def encoder():
    from veil.encoders import TextEncoder

    return TextEncoder("minilm")


def test_audit_runner_writes_a_valid_record(news_slice, encoder, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))  # the slice's embeddings are cached here
    # the appendix depth separates the 14 candidates; tukey-min gives most of them depth 0 in 384 dimensions
    # the pipeline without the recoder (14 documents are too few for its clusters): candidates are raw means
    rec = run_sentdp_audit(news_slice, epsilons=(1, 10), neighbours_per_document=14, n_projections=20,
                           depth="appendix", seed=3, results_dir=tmp_path / "results", encoder=encoder,
                           progress=False, recoder=False)
    path = tmp_path / "results" / "audit-news-slice-appendix-docsall-nb14-p20-rec0-seed3.json"  # sizes in the name
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
                             depth="appendix", seed=3, results_dir=None, encoder=encoder, progress=False,
                             recoder=False)
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


def test_empirical_runner_writes_one_record_per_cell_and_resumes(builtin, encoder, tmp_path, monkeypatch):
    from veil.experiments.sentdp.empirical import EmpiricalAuditConfig, run_empirical_audit

    corpus = builtin("news-articles")
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))  # the subsample's embeddings are cached here
    cfg = EmpiricalAuditConfig(corpus="news-articles", epsilons=(3.0,), trials=200, mdp_trials=60, pairs=1,
                               documents=2, neighbours_per_document=2, max_documents=12)
    lines: list[str] = []
    recs = run_empirical_audit(cfg, results_dir=tmp_path / "res", corpus=corpus, encoder=encoder, progress=False,
                               log=lines.append)
    kinds = ["deepcandidate-reflect", "deepcandidate-extreme", "truncation-extreme", "truncation-corner",
             "metric-dp-one-word", "metric-dp-all-words"]
    assert [r.experiment for r in recs] == [f"empirical-news-articles-{k}-eps3" for k in kinds]
    for rec in recs:
        m, cfg_ = rec.metrics, rec.config
        assert 0.0 <= m["epsilon_lower_bound"].mean <= m["formal_epsilon"].mean and m["violation"].mean == 0.0
        assert m["epsilon_lower_bound"].ci_level == 0.95 and cfg_["confidence"] == 0.95
        assert cfg_["trials"] == (60 if cfg_["mechanism"] == "metric-dp" else 200)
        assert rec.extra["game"]["pair"] == rec.extra["candidate_pairs"][0]["name"]
    mdp = recs[4]
    info = mdp.extra["candidate_pairs"][0]
    assert mdp.metrics["formal_epsilon"].mean == pytest.approx(3.0 * info["distance_sum"])
    assert len(info["positions"]) == 1
    assert recs[0].config["m"] == recs[0].config["pipeline"]["m"] == recs[0].config["sampler"]["m"]
    files = sorted(p.name for p in (tmp_path / "res").iterdir())
    # settings away from the defaults are in the name (documents 2, neighbours 2), so other runs never collide
    assert len(files) == 6 and all(f.endswith("-pairs1-n12-docs2-nb2-seed0.json") for f in files)
    assert sum("-t200-sel200-" in f for f in files) == 4 and sum("-t60-sel60-" in f for f in files) == 2
    again = run_empirical_audit(cfg, results_dir=tmp_path / "res", corpus=corpus, encoder=encoder, progress=False,
                                log=lines.append)
    assert [r.created for r in again] == [r.created for r in recs] and lines[-1].startswith("news-articles: 6 of 6")
    # a record made under another configuration is refused naming the key, never kept (issue 26)
    from dataclasses import replace

    from veil.errors import StaleResultError
    from veil.experiments.sentdp.empirical import empirical_file_name

    first = tmp_path / "res" / empirical_file_name(cfg, "deepcandidate", "reflect", 3.0)
    data = json.loads(first.read_text())
    data["config"]["audit"]["confidence"] = 0.9  # as an older veil, which left confidence out of the name
    first.write_text(json.dumps(data))
    with pytest.raises(StaleResultError, match=r"\(confidence: stored 0\.9, requested 0\.95\).*--force"):
        run_empirical_audit(cfg, results_dir=tmp_path / "res", corpus=corpus, encoder=encoder, progress=False,
                            log=lines.append)
    assert empirical_file_name(replace(cfg, confidence=0.9), "deepcandidate", "reflect", 3.0) != first.name


def test_a_registered_corpus_is_audited_through_the_cached_release_pipeline(news_slice, monkeypatch):
    """By name (and with H), both audits use the pipeline `veil sentdp embed` releases with (its on-disk cache)."""
    import veil.experiments.sentdp.embed as embed
    from veil.experiments.sentdp.audit import _pipeline

    used = []
    monkeypatch.setattr(embed, "fitted_pipeline", lambda name, progress=True: used.append(name) or "cached")
    assert _pipeline("news-articles", news_slice, None, recoder=True, progress=False) == "cached"
    assert used == ["news-articles"]
