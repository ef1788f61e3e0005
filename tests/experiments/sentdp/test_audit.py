"""The SentDP audit runner on a small slice of a real document corpus, with the real encoder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.experiments.sentdp.audit import FULL, QUICK, audit_file_name, audit_scale, run_sentdp_audit
from veil.results import ResultRecord

RESULTS = Path(__file__).resolve().parents[3] / "results" / "sentdp"


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
    lines: list[str] = []
    rec = run_sentdp_audit(news_slice, epsilons=(1, 10), neighbours_per_document=14, n_projections=20,
                           depth="appendix", seed=3, results_dir=tmp_path / "results", encoder=encoder,
                           progress=False, recoder=False, log=lines.append)
    # fit_documents None (the library's default, --full): every sentence of every split is announced and encoded
    n_all = sum(len(doc) for doc in news_slice.documents)
    assert lines == [lines[0]] and lines[0].startswith(f"veil: encoding {n_all:,} sentences of news-slice (every "
                                                       f"split: ") and f"(0 of {n_all:,} cached): about " in lines[0]
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
    with pytest.raises(InvalidParameterError, match="fit_documents"):
        run_sentdp_audit(news_slice, fit_documents=1, results_dir=None)
    with pytest.raises(InvalidTypeError, match="fit_documents"):
        run_sentdp_audit(news_slice, fit_documents=2.5, results_dir=None)
    with pytest.raises(InvalidParameterError, match="fitted pipeline was given"):
        run_sentdp_audit(news_slice, fit_documents=10, pipeline=object(), results_dir=None)
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


def test_a_fit_subsample_encodes_only_its_documents_and_the_audited_ones(builtin, encoder, tmp_path, monkeypatch,
                                                                      count_encodes):
    """fit_documents=8: 8 train and 2 dev documents fit the pipeline (recoder included); 2 test documents audited."""
    corpus = builtin("news-articles")
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))  # a cold embedding cache
    counts = np.asarray([len(d) for d in corpus.documents])
    # the documents the runner draws: the audited ones with default_rng(seed) (as the full run), the fitting sample
    # with default_rng([seed, 1]), among the documents with >= 2 (test) and >= 1 (train, dev) sentences
    test = corpus.indices("test")[counts[corpus.indices("test")] >= 2]
    audited = np.random.default_rng(0).choice(test, size=2, replace=False)
    rng = np.random.default_rng([0, 1])
    train, dev = (rng.permutation(idx[counts[idx] >= 1])[:k]
                  for idx, k in ((corpus.indices("train"), 8), (corpus.indices("dev"), 2)))
    n_sentences = int(counts[np.concatenate([train, dev, audited])].sum())
    assert n_sentences < int(counts.sum()) // 100  # far from the whole corpus

    calls, lines = count_encodes(encoder), []
    rec = run_sentdp_audit(corpus, epsilons=(3,), n_documents=2, fit_documents=8, neighbours_per_document=7,
                           n_projections=10, results_dir=tmp_path / "res", encoder=encoder, progress=False,
                           log=lines.append)
    assert len(lines) == 1 and lines[0].startswith(
        f"veil: encoding {n_sentences:,} sentences of news-articles (a seeded subsample: the 2 audited test "
        "documents and the 8 train and 2 dev documents the pipeline is fitted on; --full audits every test document "
        f"with the pipeline fitted on the whole corpus) (0 of {n_sentences:,} cached): about ")
    # the encoder got: the warm-up, the timed calibration batch, then exactly the announced sentences, once (the
    # pipeline's fit finds them in the cache)
    assert calls == [2, min(64, n_sentences), n_sentences]
    c = rec.config
    assert c["corpus"] == "news-articles" and c["n_documents"] == 2 and c["fit_documents"] == 8
    assert c["pipeline"]["recoder"]["n_clusters"] == 4  # fitted here on the 8 train documents
    assert c["m"] == int((counts[train] >= 8).sum())  # the candidates: the sample's train documents with >= 8
    assert c["pool"].endswith(f"({int(counts[train].sum())})")  # random neighbours: the sample's train sentences
    assert rec.metrics["pairs"].mean == 2 * 7 and rec.metrics["passed"].mean == 1.0
    assert {int(rec.extra["worst"]["3"]["description"].split()[1].rstrip(","))} <= set(audited.tolist())
    assert [p.name for p in (tmp_path / "res").iterdir()] == ["audit-news-articles-docs2-fit8-nb7-p10-seed0.json"]


def test_quick_default_full_flag_and_explicit_settings():
    assert audit_scale() == QUICK == {"n_documents": 20, "fit_documents": 200}
    assert audit_scale(full=True) == FULL == {"n_documents": None, "fit_documents": None}
    assert audit_scale(n_documents=0, fit_documents=0) == FULL  # 0: all of them
    assert audit_scale(full=True, n_documents=5) == {"n_documents": 5, "fit_documents": None}  # explicit wins
    assert audit_scale(fit_documents=30) == {"n_documents": 20, "fit_documents": 30}
    for bad in ({"n_documents": -1}, {"fit_documents": -1}, {"fit_documents": 1}):
        with pytest.raises(InvalidParameterError):
            audit_scale(**bad)
    with pytest.raises(InvalidTypeError):
        audit_scale(full="yes")
    with pytest.raises(InvalidTypeError):
        audit_scale(n_documents=2.0)


@pytest.mark.parametrize("path", sorted(RESULTS.glob("audit-*.json")), ids=lambda p: p.name)
def test_paper_records_are_the_full_configuration(path):
    """--full names each committed record's file and compares equal to its config; the quick default never does."""
    c = json.loads(path.read_text())["config"]
    settings = dict(depth=c["depth"], neighbours=c["neighbours_per_document"], n_projections=c["n_projections"],
                    seed=c["seed"], recoder=c["recoder"], control=c["control"])
    full = audit_scale(full=True)
    assert audit_file_name(c["corpus"], **settings, **full) == path.name
    quick = audit_scale()
    assert audit_file_name(c["corpus"], **settings, **quick) != path.name
    # the runner reads the committed record as this very configuration (not stale), before any work
    with pytest.raises(InvalidParameterError, match="this same configuration"):
        run_sentdp_audit(c["corpus"], epsilons=tuple(c["epsilons"]),
                         neighbours_per_document=c["neighbours_per_document"], n_projections=c["n_projections"],
                         depth=c["depth"], seed=c["seed"], recoder=c["recoder"], control=c["control"],
                         results_dir=RESULTS, **full)


@pytest.mark.parametrize("args, match", [
    (("--fit-documents", "1"), r"--fit-documents\) must be 0 \(the whole train/dev split\) or at least 2"),
    (("--fit-documents", "-1"), r"--fit-documents"),
    (("--fit-documents", "many"), r"--fit-documents"),
    (("--documents", "-1"), r"--documents"),
    (("--full", "--fit-documents", "1"), r"--fit-documents"),
])
def test_bad_subsample_options_are_refused_before_any_work(cli, args, match):
    cli("audit", "sentdp", "spam-assassin", *args, match=match)


@pytest.mark.parametrize("args, name", [
    ((), "audit-spam-assassin-docs20-fit200-nb35-p50-seed0.json"),
    (("--full",), "audit-spam-assassin-docsall-nb35-p50-seed0.json"),
    (("--full", "--documents", "7"), "audit-spam-assassin-docs7-nb35-p50-seed0.json"),
    (("--documents", "0", "--fit-documents", "40"), "audit-spam-assassin-docsall-fit40-nb35-p50-seed0.json"),
])
def test_the_command_defaults_to_the_quick_run_and_full_to_the_paper_run(cli, args, name):
    """Which run the options select, read from the record each would write (it exists: refused before any work)."""
    target = cli.work / "veil-results" / "sentdp" / name
    target.parent.mkdir(parents=True)
    target.write_text("{}")
    cli("audit", "sentdp", "spam-assassin", *args, match=rf"{name} exists; pass --force")
