"""The DeepCandidate pipeline (recoder H, candidates F) on a real slice of news-articles."""

from __future__ import annotations

import numpy as np
import pytest

from veil.defenses.sentdp_pipeline import SentDPPipeline, split_documents
from veil.defenses.sentdp_recoder import RecoderConfig, document_means, train_recoder
from veil.errors import DataFormatError, InvalidTypeError


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
