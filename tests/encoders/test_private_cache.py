"""A user's private texts are not cached on disk unless asked (veil.encoders.cache.private_texts): inside the block
their encodings are reused from memory, and nothing of them is left in VEIL_HOME when it ends, on an error or on
Ctrl-C too; keep=True caches them as any corpus; texts that are not private are cached as before."""

from __future__ import annotations

import numpy as np
import pytest

from veil.corpora.base import Corpus
from veil.encoders import TextEncoder
from veil.encoders.cache import MemoryCache, encode_cached, private_texts, resolve_store
from veil.encoders.plan import is_cached

PRIVATE = ["my diagnosis came back on Tuesday", "the landlord raised my rent again", "I told no one about the loan"]
PUBLIC = ["The museum's new wing houses modern sculpture.", "The match was postponed because of heavy snow."]


@pytest.fixture(autouse=True)
def tmp_home(tmp_path, monkeypatch):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path))
    return tmp_path


@pytest.fixture(scope="module")
def encoder() -> TextEncoder:
    return TextEncoder("minilm", backend="torch")


def _entries(home) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in (home / "embeddings").rglob("*.npy")) \
        if (home / "embeddings").exists() else []


class Forwards:
    """Counts forward passes of the encoder's module (a real hook; the model still runs)."""

    def __init__(self, module):
        self.calls = 0
        self._handle = module.register_forward_hook(lambda *_: setattr(self, "calls", self.calls + 1))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.remove()


@pytest.mark.slow
def test_private_texts_are_reused_in_memory_and_never_written(encoder, tmp_home):
    corpus = Corpus(name="file-mine", texts=list(PRIVATE), splits=["train", "dev", "test"])
    with private_texts(PRIVATE):
        assert isinstance(resolve_store(True, PRIVATE), MemoryCache)
        with Forwards(encoder.module) as forwards:
            first = encoder.encode_corpus(corpus, progress=False)
            assert forwards.calls > 0
            forwards.calls = 0
            assert is_cached(encoder, PRIVATE, "file-mine", "all")  # the run's announcement sees the memory entry
            second = encoder.encode_corpus(corpus, progress=False)
            assert forwards.calls == 0  # reused within the run
        np.testing.assert_array_equal(first, second)
        public = encode_cached(encoder, PUBLIC, "public", "train", progress=False)  # not private: on disk
        assert public.shape == (2, 384)
    assert _entries(tmp_home) == [e for e in _entries(tmp_home) if "/public/" in e] and len(_entries(tmp_home)) == 1
    assert not is_cached(encoder, PRIVATE, "file-mine", "all")  # gone with the block
    assert not list(tmp_home.rglob("*file-mine*"))


@pytest.mark.slow
@pytest.mark.parametrize("stop", [RuntimeError, KeyboardInterrupt])
def test_nothing_stays_after_an_error_or_ctrl_c(encoder, tmp_home, stop):
    with pytest.raises(stop):
        with private_texts(PRIVATE):
            encode_cached(encoder, PRIVATE, "file-mine", "all", progress=False)
            assert is_cached(encoder, PRIVATE, "file-mine", "all")
            raise stop()
    assert not is_cached(encoder, PRIVATE, "file-mine", "all") and _entries(tmp_home) == []


@pytest.mark.slow
def test_keep_caches_them_on_disk_as_any_corpus(encoder, tmp_home):
    with private_texts(PRIVATE, keep=True):
        encode_cached(encoder, PRIVATE, "file-mine", "all", progress=False)
    assert [e.split("/")[-2] for e in _entries(tmp_home)] == ["file-mine"]


def test_an_explicit_store_and_cache_false_are_the_callers_choice(tmp_path):
    from veil.encoders.cache import EmbeddingCache

    mine = EmbeddingCache(tmp_path / "mine")
    with private_texts(PRIVATE):
        assert resolve_store(mine, PRIVATE) is mine
        assert resolve_store(False, PRIVATE) is None
        assert type(resolve_store(True, PUBLIC)) is EmbeddingCache
        with private_texts(["another secret"]):  # blocks nest: both sets are private, one memory store
            assert resolve_store(True, PRIVATE) is resolve_store(True, ["another secret"])
        assert type(resolve_store(True, ["another secret"])) is EmbeddingCache
