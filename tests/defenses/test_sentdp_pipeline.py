"""The DeepCandidate pipeline (recoder H, candidates F) on a real slice of news-articles."""

from __future__ import annotations

import numpy as np
import pytest

from veil.defenses.sentdp.pipeline import SentDPPipeline, split_documents, state_sha256
from veil.defenses.sentdp.recoder import RecoderConfig, document_means, train_recoder
from veil.errors import CacheCorruptError, DataFormatError, InvalidTypeError


@pytest.fixture(scope="module")
def news_slice(builtin):
    """Sentence embeddings of 90 train, 30 dev and 20 test news articles (first 12 sentences each)."""
    from veil.encoders import TextEncoder

    corpus = builtin("news-articles")
    picks = {s: [i for i in corpus.indices(s) if len(corpus.documents[i]) >= 2] for s in ("train", "dev", "test")}
    idx = picks["train"][:90] + picks["dev"][:30] + picks["test"][:20]
    docs = [corpus.documents[i][:12] for i in idx]
    enc = TextEncoder("minilm")
    S = enc.encode([s for d in docs for s in d], progress=False)
    offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])])
    split = {"train": np.arange(90), "dev": np.arange(90, 120), "test": np.arange(120, 140)}
    return enc, docs, S, offsets, split


def test_document_means_match_a_loop():
    rng = np.random.default_rng(0)
    S = rng.standard_normal((17, 5)).astype(np.float32)
    offsets = np.array([0, 3, 4, 10, 17])
    expected = np.stack([S[a:b].mean(axis=0) for a, b in zip(offsets[:-1], offsets[1:])])
    np.testing.assert_allclose(document_means(S, offsets), expected, rtol=1e-6)
    with pytest.raises(DataFormatError):
        document_means(S, np.array([0, 3, 3, 17]))


def test_recoder_learns_the_cluster_objective(news_slice):
    import torch

    _, _, S, offsets, split = news_slice
    rec = train_recoder(S, offsets, split["train"], split["dev"], config=RecoderConfig(n_clusters=6, epochs=8,
                                                                                     patience=8))
    assert rec.recode(S[:4]).shape == (4, S.shape[1])
    first, best = rec.history[0]["train_loss"], min(h["train_loss"] for h in rec.history)
    # chance level of a 6-way cross-entropy is log 6 = 1.79; training must get well below where it started
    assert best < first and best < np.log(6)
    assert 1 <= rec.best_epoch <= len(rec.history)
    state = rec.state()
    clone = type(rec).from_state(state)
    with torch.no_grad():
        np.testing.assert_array_equal(clone.recode(S[:7]), rec.recode(S[:7]))


def test_pipeline_candidates_are_public_long_training_documents(news_slice, tmp_path):
    enc, docs, S, offsets, split = news_slice
    pipe = SentDPPipeline.fit_vectors(S, offsets, split["train"], split["dev"], n_candidates=40, min_sentences=8,
                                      recoder=RecoderConfig(n_clusters=5, epochs=2))
    counts = np.diff(offsets)
    assert len(pipe.candidates) == 40 and set(pipe.candidate_docs) <= set(split["train"])
    assert (counts[pipe.candidate_docs] >= 8).all()
    expected = document_means(pipe.recode(S), offsets)[pipe.candidate_docs]
    np.testing.assert_allclose(pipe.candidates, expected, rtol=1e-5, atol=1e-6)
    assert pipe.config()["m"] == 40 and pipe.config()["eligible_documents"] >= 40

    path = pipe.save(tmp_path / "pipe.pt")
    again = SentDPPipeline.load(path, encoder=enc)
    np.testing.assert_array_equal(again.candidates, pipe.candidates)
    test_docs = [docs[i] for i in split["test"][:5]]
    rel = again.embed(test_docs, epsilon=5.0, n_projections=10, progress=False)
    assert len(rel) == 5 and rel.epsilon == 5.0
    np.testing.assert_array_equal(rel.embeddings, again.candidates[rel.indices])
    assert list(rel.n_sentences) == [len(d) for d in test_docs]
    blocks = split_documents(S, offsets, split["test"][:2])
    assert [len(b) for b in blocks] == [len(docs[i]) for i in split["test"][:2]]


def test_pipeline_bad_input(news_slice, tmp_path):
    enc, docs, S, offsets, split = news_slice
    pipe = SentDPPipeline.fit_vectors(S, offsets, split["train"], split["dev"], n_candidates=10, recoder=None)
    pipe.encoder = enc
    with pytest.raises(DataFormatError, match="no sentences"):
        pipe.embed([["One sentence."], []], epsilon=1.0)
    with pytest.raises(InvalidTypeError):
        pipe.embed("not a list of documents", epsilon=1.0)
    with pytest.raises(DataFormatError, match=">= 99 sentences"):
        SentDPPipeline.fit_vectors(S, offsets, split["train"], split["dev"], min_sentences=99, recoder=None)
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a pipeline")
    with pytest.raises(DataFormatError):
        SentDPPipeline.load(bad)


# ------------------------------------------------------------ saved-file integrity
def _fitted(news_slice, recoder=RecoderConfig(n_clusters=5, epochs=2)):
    _, _, S, offsets, split = news_slice
    return SentDPPipeline.fit_vectors(S, offsets, split["train"], split["dev"], n_candidates=20, recoder=recoder)


def _resave(path, edit):
    """Load a saved pipeline's raw state, change it, and write it back with its old checksum."""
    import torch

    state = torch.load(path, weights_only=True)
    edit(state)
    torch.save(state, path)


@pytest.mark.parametrize("part", ["candidates", "recoder_weight", "info", "flipped_byte"])
def test_tampered_saved_pipeline_is_refused(news_slice, tmp_path, part):
    import torch

    pipe = _fitted(news_slice)
    path = pipe.save(tmp_path / "pipe.pt")
    state = torch.load(path, weights_only=True)
    assert state["format"] == 2 and state["sha256"] == state_sha256({k: v for k, v in state.items() if k != "sha256"})
    np.testing.assert_array_equal(SentDPPipeline.load(path).candidates, pipe.candidates)
    if part == "candidates":
        _resave(path, lambda s: s["candidates"][3].add_(1e-3))
    elif part == "recoder_weight":
        _resave(path, lambda s: next(iter(s["recoder"]["state_dict"].values())).mul_(1.01))
    elif part == "info":
        _resave(path, lambda s: s["info"].update(seed=7))
    else:  # one bit of a candidate's float64 bytes: torch.load itself reads it without complaint
        data = bytearray(path.read_bytes())
        at = bytes(data).index(torch.as_tensor(pipe.candidates).numpy().tobytes())
        data[at + 11] ^= 0x01
        path.write_bytes(bytes(data))
    damaged = path.read_bytes()
    fix = f"SentDPPipeline.fit(corpus).save({str(path)!r})"
    with pytest.raises(CacheCorruptError, match=r"its contents hash to [0-9a-f]{12}\.\.\., the file records") as info:
        SentDPPipeline.load(path)
    assert f"Run `{fix}` to rebuild it" in str(info.value)
    assert path.read_bytes() == damaged and [p.name for p in tmp_path.iterdir()] == ["pipe.pt"]  # nothing written


def test_pipeline_saved_before_checksums_still_loads(news_slice, tmp_path):
    import torch

    pipe = _fitted(news_slice, recoder=None)
    legacy = {"format": 1, "candidates": torch.as_tensor(pipe.candidates), "candidate_docs":
              torch.as_tensor(pipe.candidate_docs), "info": pipe.info, "recoder": None}
    torch.save(legacy, tmp_path / "old.pt")
    np.testing.assert_array_equal(SentDPPipeline.load(tmp_path / "old.pt").candidates, pipe.candidates)


def test_unreadable_or_missing_pipeline_names_the_fix(tmp_path):
    from veil.errors import ResourceMissingError

    with pytest.raises(ResourceMissingError, match=r"does not exist; fit and save one: SentDPPipeline\.fit"):
        SentDPPipeline.load(tmp_path / "nope.pt")
    (tmp_path / "bad.pt").write_bytes(b"\x80\x02garbage")
    with pytest.raises(DataFormatError, match=r"fit and save it again: SentDPPipeline\.fit") as info:
        SentDPPipeline.load(tmp_path / "bad.pt")
    assert "weights_only" not in str(info.value)  # torch's advice to unpickle arbitrary code is not passed on


@pytest.mark.slow
def test_fitted_pipeline_cache_refits_a_damaged_file(builtin, tmp_path, monkeypatch):
    """The cache behind `veil sentdp embed`: a damaged file warns, is refitted and rewritten.

    The cached corpus is a real 80-document slice of news-articles installed
    under its registry name in a temporary VEIL_HOME, so the fit takes seconds.
    """
    import dataclasses

    from veil.corpora.registry import get_spec
    from veil.encoders import CacheWarning
    from veil.experiments.sentdp.embed import fitted_pipeline

    full = builtin("news-articles")
    long = {s: [i for i in full.indices(s) if len(full.documents[i]) >= 8] for s in ("train", "dev")}
    part = full.select(long["train"][:60] + long["dev"][:20])
    part = dataclasses.replace(part, documents=[d[:8] for d in part.documents])
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "vh"))
    part.save(tmp_path / "vh" / "corpora" / "news-articles", extra_meta={"build": get_spec("news-articles").build_id})

    first = fitted_pipeline("news-articles", n_candidates=10, progress=False)
    (path,) = (tmp_path / "vh" / "sentdp").iterdir()
    intact = path.read_bytes()
    again = fitted_pipeline("news-articles", n_candidates=10, progress=False)  # a hit: the file is not rewritten
    np.testing.assert_array_equal(again.candidates, first.candidates)
    assert path.read_bytes() == intact

    _resave(path, lambda s: s["candidates"].mul_(-1.0))
    with pytest.warns(CacheWarning, match=r"cached SentDP pipeline .* is damaged \(its contents hash to .*\); "
                                          r"refitting it on 'news-articles' and rewriting the file"):
        refit = fitted_pipeline("news-articles", n_candidates=10, progress=False)
    np.testing.assert_array_equal(refit.candidate_docs, first.candidate_docs)
    np.testing.assert_array_equal(SentDPPipeline.load(path).candidates, refit.candidates)  # rewritten, checksum valid
