"""veil.defenses.defaults: the builders the bench, the CLI and veil.protect share."""

from __future__ import annotations

import numpy as np
import pytest

from veil.defenses.defaults import document_candidates, key_seeds, mask_pool, mean_embeddings, tag_vocabulary
from veil.errors import InvalidParameterError, PrivacyLeakWarning


def test_key_seeds_split_one_seed_as_the_bench_always_has_and_none_stays_the_os_csprng():
    assert key_seeds(None) == [None, None]
    expected = [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(7).spawn(2)]
    assert key_seeds(7) == expected and len(set(expected)) == 2


def test_mask_pool_reads_the_cli_spelling_of_m():
    assert mask_pool("inf", 8).m is None and mask_pool("16", 8).m == 16 and mask_pool(0, 8).m == 0
    with pytest.raises(InvalidParameterError, match="'inf'"):
        mask_pool("many", 8)
    with pytest.warns(PrivacyLeakWarning):
        seeded = mask_pool(4, 8, rng=1)
    with pytest.warns(PrivacyLeakWarning):
        assert np.array_equal(seeded.masks.numpy(), mask_pool(4, 8, rng=1).masks.numpy())


def test_candidates_are_the_float64_means_of_each_documents_sentence_embeddings():
    docs = [np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32), np.array([[0.5, -1.0]], dtype=np.float32)]
    means = mean_embeddings(docs)
    assert means.dtype == np.float32 and np.array_equal(means, [[2.0, 3.0], [0.5, -1.0]])
    cand = document_candidates(means)
    assert cand.dtype == np.float64 and np.array_equal(cand, means.astype(np.float64))


def test_tag_vocabulary_takes_trees_or_pairs_alike():
    from types import SimpleNamespace

    pairs = [(["the", "dog", "runs"], ["DT", "NN", "VBZ"]), (["a", "cat", "sleeps"], ["DT", "NN", "VBZ"])]
    trees = [SimpleNamespace(words=w, tags=t) for w, t in pairs]
    a, b = tag_vocabulary(pairs), tag_vocabulary(trees)
    assert sorted(a.candidates("NN")) == sorted(b.candidates("NN")) == ["cat", "dog"]
