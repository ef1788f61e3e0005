"""veil.api.kinds: what protect encodes, and what it keeps on disk."""

from __future__ import annotations

import numpy as np
import pytest

DOCS = [["The council met on Tuesday.", "It approved the budget."], ["Rain fell over the harbour."]]


def _files(root):
    return sorted(p for p in root.rglob("*") if p.is_file())


@pytest.fixture
def empty_home(tmp_path, monkeypatch, real_home):
    for sub in ("corpora", "encoders"):
        if (real_home / sub).exists():
            (tmp_path / sub).symlink_to(real_home / sub)
    monkeypatch.setenv("VEIL_HOME", str(tmp_path))
    return tmp_path


def test_a_public_corpus_is_encoded_once_and_the_callers_documents_are_never_stored(empty_home, monkeypatch):
    from veil.api.kinds import _embed_documents
    from veil.encoders import TextEncoder

    before = _files(empty_home)
    mine = _embed_documents(DOCS)  # the caller's documents: memory only
    assert _files(empty_home) == before
    public = _embed_documents(DOCS, "news-articles")  # a built-in corpus' train split: cached on disk
    stored = _files(empty_home)
    assert len(stored) > len(before)

    def no_encoding(*args, **kwargs):
        raise AssertionError("encoded again instead of reading the cache")

    monkeypatch.setattr(TextEncoder, "encode", no_encoding)
    again = _embed_documents(DOCS, "news-articles")
    for a, b, c in zip(public, again, mine):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, c, atol=1e-6)
    assert [len(d) for d in again] == [2, 1]


def test_only_a_registry_corpus_counts_as_public(builtin, tmp_path):
    import veil.corpora as vc
    from veil.api.kinds import _builtin_name

    assert _builtin_name(builtin("news-articles")) == "news-articles"
    mine = tmp_path / "news-articles.csv"  # a user's file with a built-in corpus' name is still the user's
    mine.write_text("text,label\n" + "".join(f"private note {i},{i % 2}\n" for i in range(40)))
    assert _builtin_name(vc.load(mine)) is None
