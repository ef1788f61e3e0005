"""The empirical audit encodes only its subsample, says how many texts before encoding, and keeps the paper runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from veil.experiments.sentdp.empirical import FULL, QUICK, EmpiricalAuditConfig, empirical_config, empirical_file_name

RESULTS = Path(__file__).resolve().parents[3] / "results" / "sentdp"


@pytest.fixture(scope="module")
def encoder():
    from veil.encoders import TextEncoder

    return TextEncoder("minilm")


def test_subsample_encodes_exactly_what_the_plan_announced(builtin, encoder, tmp_path, monkeypatch, count_encodes):
    from veil.experiments.sentdp.empirical import run_empirical_audit

    corpus = builtin("news-articles")
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))  # a cold embedding cache
    cfg = EmpiricalAuditConfig(corpus="news-articles", mechanisms=("truncation",), epsilons=(3.0,), trials=100,
                               pairs=1, documents=2, neighbours_per_document=2, max_documents=6)
    # the subsample the runner draws: 6 documents with >= 2 sentences per split, seeded
    counts = np.asarray([len(d) for d in corpus.documents])
    rng = np.random.default_rng(cfg.seed)
    picks = np.concatenate([rng.permutation(idx[counts[idx] >= 2])[:6]
                            for idx in (corpus.indices(s) for s in ("train", "dev", "test"))])
    n_sentences = int(counts[picks].sum())
    assert n_sentences < int(counts.sum()) // 100  # far from the whole corpus

    calls, lines = count_encodes(encoder), []
    run_empirical_audit(cfg, results_dir=tmp_path / "res", corpus=corpus, encoder=encoder, progress=False,
                        log=lines.append)
    plan = [line for line in lines if line.startswith("veil: encoding")]
    assert len(plan) == 1 and plan[0].startswith(f"veil: encoding {n_sentences:,} sentences of news-articles "
                                                 f"(a seeded subsample of 6 documents per split, 18 in all")
    assert f"(0 of {n_sentences:,} cached): about " in plan[0]
    # the encoder got: the warm-up, the timed calibration batch, then exactly the announced sentences, once
    assert calls == [2, min(64, n_sentences), n_sentences]
    assert lines.index(plan[0]) < len(lines) - 1  # announced before the game's lines

    calls.clear()
    lines.clear()
    run_empirical_audit(cfg, results_dir=tmp_path / "res", corpus=corpus, encoder=encoder, progress=False,
                        log=lines.append, force=True)
    assert f"veil: encoding {n_sentences:,} sentences of news-articles (a seeded subsample of 6 documents per " \
           f"split, 18 in all; --full or --max-documents 0 audits the whole corpus): all cached, nothing to " \
           f"encode" in lines
    assert calls == []  # all cached: nothing encoded, nothing timed


def test_metric_dp_announces_its_vocabulary_and_its_bound(builtin, encoder, tmp_path, monkeypatch, count_encodes):
    from veil.experiments.sentdp.empirical import mdp_encodes_per_cell, run_empirical_audit

    corpus = builtin("news-articles")
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    cfg = EmpiricalAuditConfig(corpus="news-articles", mechanisms=("metric-dp",), epsilons=(3.0,), mdp_trials=40,
                               pairs=1, documents=2, neighbours_per_document=2, max_documents=6)
    calls, lines = count_encodes(encoder), []
    recs = run_empirical_audit(cfg, results_dir=tmp_path / "res", corpus=corpus, encoder=encoder, progress=False,
                               log=lines.append)
    vocab = [line for line in lines if "vocabulary words of news-articles" in line]
    assert len(vocab) == 1 and vocab[0].startswith("veil: encoding ")
    n_words = int(vocab[0].split()[2].replace(",", ""))
    assert n_words in calls  # the vocabulary was encoded in one call of the announced size
    bound = mdp_encodes_per_cell(cfg)
    assert any(f"at most {bound:,} per game (2 games" in line for line in lines)
    # the bound holds: the games encoded no more noisy sentences than announced
    assert all(rec.extra["embedding_cache"]["misses"] <= bound for rec in recs)


def test_quick_default_full_flag_and_explicit_settings():
    quick = empirical_config(corpus="spam-assassin")
    assert (quick.max_documents, quick.trials, quick.mdp_trials) == (QUICK["max_documents"], QUICK["trials"],
                                                                      QUICK["mdp_trials"])
    full = empirical_config(full=True, corpus="spam-assassin")
    assert (full.max_documents, full.trials, full.mdp_trials) == (None, 20000, 2000) == tuple(FULL.values())
    assert empirical_config(corpus="spam-assassin", max_documents=0).max_documents is None
    mixed = empirical_config(full=True, corpus="spam-assassin", trials=300, max_documents=7)
    assert (mixed.max_documents, mixed.trials, mixed.mdp_trials) == (7, 300, 2000)
    with pytest.raises(Exception, match="max_documents"):
        empirical_config(corpus="spam-assassin", max_documents=-1)
    with pytest.raises(TypeError):
        empirical_config(full="yes", corpus="spam-assassin")


@pytest.mark.parametrize("path", sorted(RESULTS.glob("empirical-*.json")), ids=lambda p: p.name)
def test_paper_records_keep_their_configs_and_names(path):
    """Each committed record's settings, given explicitly (max_documents None as 0), rebuild its config and name."""
    rec = json.loads(path.read_text())
    stored = rec["config"]["audit"]
    settings = {k: tuple(v) if isinstance(v, list) else v for k, v in stored.items()}
    settings["max_documents"] = settings["max_documents"] or 0
    cfg = empirical_config(**settings)
    assert cfg.to_dict() == stored
    c = rec["config"]
    assert empirical_file_name(cfg, c["mechanism"], c["neighbours"], c["epsilon"]) == path.name
    # the quick default is another run: it never passes for the paper's record
    assert empirical_config(corpus=stored["corpus"]).to_dict() != stored


@pytest.mark.parametrize("args, match", [
    (("--max-documents", "-1"), r"--max-documents"),
    (("--max-documents", "many"), r"--max-documents"),
    (("--trials", "10"), r"--trials"),
    (("--mdp-trials", "0"), r"--mdp-trials"),
    (("--full", "--max-documents", "-3"), r"--max-documents"),
])
def test_bad_subsample_options_are_refused_before_any_work(cli, args, match):
    cli("audit", "empirical", "--corpus", "spam-assassin", *args, match=match)


def test_records_are_kept_only_under_the_encoder_backend_they_were_made_with(builtin, encoder, tmp_path, monkeypatch):
    """A record made with torch (as every committed one: no backend key in config["audit"]) is kept under torch and
    refused under VEIL_ENCODER_BACKEND=onnx before any work; an encoder passed in decides by its own backend."""
    from veil.encoders.backends import ENV
    from veil.errors import StaleResultError
    from veil.experiments.sentdp.empirical import run_empirical_audit

    corpus = builtin("news-articles")
    cfg = EmpiricalAuditConfig(corpus="news-articles", mechanisms=("truncation",), epsilons=(3.0,), trials=100,
                               pairs=1, documents=2, neighbours_per_document=2, max_documents=6)
    monkeypatch.setenv(ENV, "torch")
    records = run_empirical_audit(cfg, results_dir=tmp_path, corpus=corpus, progress=False, log=lambda line: None)
    assert records and all(rec.config["audit"] == cfg.to_dict() for rec in records)  # one per neighbour kind
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.glob("*.json")}
    assert len(stamps) == len(records)
    monkeypatch.setenv(ENV, "onnx")
    with pytest.raises(StaleResultError, match=r'encoder_backend: stored \(absent\), requested "onnx"'):
        run_empirical_audit(cfg, results_dir=tmp_path, corpus=corpus, progress=False, log=lambda line: None)
    from veil.encoders import TextEncoder

    torch_encoder = TextEncoder("minilm", backend="torch")  # chosen explicitly: the environment says onnx
    lines: list[str] = []
    run_empirical_audit(cfg, results_dir=tmp_path, corpus=corpus, encoder=torch_encoder, progress=False,
                        log=lines.append)
    assert f"{len(records)} of {len(records)} empirical records exist and are kept" in lines[0]
    assert {p: p.stat().st_mtime_ns for p in tmp_path.glob("*.json")} == stamps
