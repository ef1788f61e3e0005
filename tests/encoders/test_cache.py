"""EmbeddingCache on its own, and TextEncoder.encode_corpus through it (real MiniLM)."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from veil.corpora.base import Corpus
from veil.encoders import CacheKey, CacheWarning, EmbeddingCache, TextEncoder, texts_sha256
from veil.errors import InvalidParameterError, InvalidTypeError

TEXTS = [
    "The service was quick and the staff were friendly.",
    "I would not recommend this hotel to anyone.",
    "The new bridge will open to traffic next spring.",
    "A warm, funny and beautifully acted film.",
    "The battery lasts barely half a day.",
    "Parliament voted to extend the deadline by six months.",
    "Add the onions and cook until soft.",
    "The match was postponed because of heavy snow.",
    "Her second novel is even better than her first.",
    "The museum's new wing houses modern sculpture.",
]
SPLITS = ["train", "train", "dev", "train", "test", "train", "dev", "train", "test", "train"]


@pytest.fixture(autouse=True)
def tmp_home(tmp_path, monkeypatch):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path))
    return tmp_path


@pytest.fixture
def key() -> CacheKey:
    return CacheKey(model_id="minilm-0123456789ab", pooling="mean", max_length=256, normalize=True,
                    corpus="tiny", split="train", texts_sha256=texts_sha256(TEXTS), n=len(TEXTS), dim=8)


def _vectors(key: CacheKey) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((key.n, key.dim)).astype(np.float32)


def _checksum(path):
    return path.with_name(path.name + ".sha256")


# ------------------------------------------------------------- EmbeddingCache
def test_put_get_roundtrip_under_veil_home(key, tmp_home):
    cache = EmbeddingCache()
    assert cache.get(key) is None
    path = cache.put(key, _vectors(key))
    assert path == cache.path(key) and path.is_relative_to(tmp_home / "embeddings")
    np.testing.assert_array_equal(cache.get(key), _vectors(key))
    # the array and its checksum, no temporary file left behind
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name, path.name + ".sha256"]
    assert _checksum(path).read_text().strip() == hashlib.sha256(_vectors(key).tobytes()).hexdigest()


def test_every_key_field_changes_the_path(key):
    cache = EmbeddingCache()
    changes = {"model_id": "other-model", "pooling": "cls", "max_length": 128, "normalize": False,
               "corpus": "other", "split": "dev", "texts_sha256": texts_sha256(TEXTS[::-1]), "n": 9, "dim": 4}
    paths = {cache.path(dataclasses.replace(key, **{field: value})) for field, value in changes.items()}
    assert len(paths | {cache.path(key)}) == len(changes) + 1


def test_texts_hash_depends_on_order_and_boundaries():
    assert texts_sha256(["ab", "c"]) != texts_sha256(["a", "bc"])
    assert texts_sha256(["a", "b"]) != texts_sha256(["b", "a"])
    assert texts_sha256([]) != texts_sha256([""])


@given(st.lists(st.text(max_size=5), max_size=4), st.lists(st.text(max_size=5), max_size=4))
def test_texts_hash_separates_different_lists(a, b):
    assert (texts_sha256(a) == texts_sha256(b)) == (a == b)


def test_put_rejects_wrong_arrays(key):
    cache = EmbeddingCache()
    with pytest.raises(InvalidParameterError, match=r"expects float32 \(10, 8\)"):
        cache.put(key, _vectors(key).astype(np.float64))
    with pytest.raises(InvalidParameterError, match=r"expects float32"):
        cache.put(key, _vectors(key)[:5])
    with pytest.raises(InvalidTypeError, match=r"numpy array"):
        cache.put(key, _vectors(key).tolist())
    assert not cache.path(key).exists()


@pytest.mark.parametrize("damage", ["truncate", "garbage", "wrong_shape", "wrong_dtype", "nan"])
def test_damaged_file_warns_and_counts_as_a_miss(key, damage):
    cache = EmbeddingCache()
    path = cache.put(key, _vectors(key))
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:200])
    elif damage == "garbage":
        path.write_bytes(b"not a numpy file at all")
    elif damage == "wrong_shape":
        np.save(path, _vectors(key)[:3])
    elif damage == "wrong_dtype":
        np.save(path, _vectors(key).astype(np.float16))
    else:
        bad = _vectors(key)
        bad[2, 3] = np.nan
        np.save(path, bad)
    with pytest.warns(CacheWarning, match=r"deleting the file and recomputing"):
        assert cache.get(key) is None
    assert not path.exists() and not _checksum(path).exists()


def test_tampered_values_fail_the_checksum(key):
    """A valid .npy of the right shape, dtype and finite values, but not the bytes that were stored."""
    cache = EmbeddingCache()
    path = cache.put(key, _vectors(key))
    tampered = _vectors(key)
    tampered[4, 5] += 0.25
    with open(path, "wb") as fh:
        np.save(fh, tampered)
    with pytest.warns(CacheWarning, match=r"are damaged \(the array's sha256 is [0-9a-f]{12}\.\.\., .*\.npy\.sha256 "
                                          r"records [0-9a-f]{12}\.\.\.\); deleting the file and recomputing"):
        assert cache.get(key) is None
    assert not path.exists() and not _checksum(path).exists()
    cache.put(key, _vectors(key))  # the caller's recompute-and-rewrite
    np.testing.assert_array_equal(cache.get(key), _vectors(key))


@pytest.mark.parametrize("damage", ["edited", "binary"])
def test_damaged_checksum_file_counts_as_a_miss(key, damage):
    cache = EmbeddingCache()
    path = cache.put(key, _vectors(key))
    _checksum(path).write_bytes(b"0" * 64 if damage == "edited" else b"\xff\xfe")
    with pytest.warns(CacheWarning, match=r"deleting the file and recomputing"):
        assert cache.get(key) is None
    assert not path.exists() and not _checksum(path).exists()


def test_entry_without_checksum_is_read_and_gets_one(key):
    """Entries written before the checksum existed keep working (shape checks), and are then checksummed."""
    cache = EmbeddingCache()
    path = cache.put(key, _vectors(key))
    _checksum(path).unlink()
    np.testing.assert_array_equal(cache.get(key), _vectors(key))
    assert _checksum(path).read_text().strip() == hashlib.sha256(_vectors(key).tobytes()).hexdigest()


def test_clear(key):
    cache = EmbeddingCache()
    other = dataclasses.replace(key, model_id="other-model")
    cache.put(key, _vectors(key))
    cache.put(dataclasses.replace(key, split="dev"), _vectors(key))
    cache.put(other, _vectors(other))
    assert cache.clear("other-model") == 1
    assert cache.get(other) is None and cache.get(key) is not None
    assert cache.clear() == 2
    assert cache.get(key) is None and cache.clear() == 0
    assert not cache.root.exists() or not any(cache.root.rglob("*"))  # checksum files go too


def test_explicit_root(tmp_path, key):
    cache = EmbeddingCache(tmp_path / "elsewhere")
    assert cache.put(key, _vectors(key)).is_relative_to(tmp_path / "elsewhere")
    with pytest.raises(InvalidTypeError):
        EmbeddingCache(3)


# ------------------------------------------------------ encode_corpus (model)
@pytest.fixture(scope="module")
def encoder() -> TextEncoder:
    return TextEncoder("minilm", backend="torch")  # ForwardCounter counts the torch module's calls


@pytest.fixture
def corpus() -> Corpus:
    return Corpus(name="tiny", texts=list(TEXTS), splits=SPLITS)


class ForwardCounter:
    """Counts forward passes of a module (a real hook, the model still runs)."""

    def __init__(self, module):
        self.calls = 0
        self._handle = module.register_forward_hook(self._hook)

    def _hook(self, module, inputs, output):
        self.calls += 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.remove()


@pytest.mark.slow
def test_miss_then_hit_does_not_run_the_model(encoder, corpus, tmp_home):
    with ForwardCounter(encoder.module) as counter:
        first = encoder.encode_corpus(corpus, "train", progress=False)
        assert counter.calls > 0
        counter.calls = 0
        second = encoder.encode_corpus(corpus, "train", progress=False)
        assert counter.calls == 0
    np.testing.assert_array_equal(first, second)
    train = [TEXTS[i] for i in corpus.indices("train")]
    np.testing.assert_allclose(first, encoder.encode(train, progress=False), atol=1e-6, rtol=0)
    assert len(list((tmp_home / "embeddings").rglob("*.npy"))) == 1


@pytest.mark.slow
def test_split_normalize_and_cache_flag_make_separate_entries(encoder, corpus, tmp_home):
    whole = encoder.encode_corpus(corpus, progress=False)
    assert whole.shape == (len(TEXTS), 384)
    raw = encoder.encode_corpus(corpus, normalize=False, progress=False)
    assert not np.allclose(raw, whole)
    assert len(list((tmp_home / "embeddings").rglob("*.npy"))) == 2
    with ForwardCounter(encoder.module) as counter:
        encoder.encode_corpus(corpus, cache=False, progress=False)
        assert counter.calls > 0
    assert len(list((tmp_home / "embeddings").rglob("*.npy"))) == 2


@pytest.mark.slow
def test_corrupt_entry_is_recomputed(encoder, corpus):
    cache = EmbeddingCache()
    expected = encoder.encode_corpus(corpus, "train", cache=cache, progress=False)
    (path,) = cache.root.rglob("*.npy")
    path.write_bytes(path.read_bytes()[:-100])
    with ForwardCounter(encoder.module) as counter, pytest.warns(CacheWarning, match=r"unreadable"):
        again = encoder.encode_corpus(corpus, "train", cache=cache, progress=False)
    assert counter.calls > 0
    np.testing.assert_array_equal(again, expected)
    np.testing.assert_array_equal(np.load(path), expected)  # rewritten intact
    assert _checksum(path).read_text().strip() == hashlib.sha256(expected.tobytes()).hexdigest()


@pytest.mark.slow
def test_tampered_entry_is_recomputed_and_rewritten(encoder, corpus):
    cache = EmbeddingCache()
    expected = encoder.encode_corpus(corpus, "train", cache=cache, progress=False)
    (path,) = cache.root.rglob("*.npy")
    tampered = expected.copy()
    tampered[0, :10] = 0.0  # still float32, right shape, finite: only the checksum tells
    with open(path, "wb") as fh:
        np.save(fh, tampered)
    with ForwardCounter(encoder.module) as counter, pytest.warns(CacheWarning, match=r"damaged \(the array's sha256"):
        again = encoder.encode_corpus(corpus, "train", cache=cache, progress=False)
    assert counter.calls > 0
    np.testing.assert_array_equal(again, expected)
    np.testing.assert_array_equal(np.load(path), expected)
    assert _checksum(path).read_text().strip() == hashlib.sha256(expected.tobytes()).hexdigest()



@pytest.mark.slow
def test_changed_weights_change_the_model_id_and_miss_the_cache(encoder, corpus):
    import torch

    tuned = TextEncoder("minilm", backend="torch")
    assert tuned.model_id == encoder.model_id  # same files -> same id -> shared entries
    before = tuned.encode_corpus(corpus, "dev", progress=False)
    with torch.no_grad():
        tuned.module.encoder.layer[0].output.dense.weight.mul_(1.5)
    assert tuned.model_id != encoder.model_id and "-tuned-" in tuned.model_id
    assert tuned.model_id == tuned.model_id  # stable while the weights stay put
    with ForwardCounter(tuned.module) as counter:
        after = tuned.encode_corpus(corpus, "dev", progress=False)
        assert counter.calls > 0
    assert not np.allclose(after, before)


@pytest.mark.slow
def test_encode_corpus_rejects_bad_arguments(encoder, corpus):
    with pytest.raises(InvalidTypeError, match=r"veil Corpus"):
        encoder.encode_corpus(TEXTS)
    with pytest.raises(InvalidTypeError, match=r"cache must be"):
        encoder.encode_corpus(corpus, cache="yes")
    with pytest.raises(InvalidParameterError, match=r"unknown split"):
        encoder.encode_corpus(corpus, "validation")


def test_model_fingerprint_follows_content_not_modification_times(tmp_path):
    """A reinstalled model (same bytes, new mtimes) keeps its caches; one changed byte does not."""
    import os
    import shutil

    from veil.encoders.registry import folder_fingerprint

    a = tmp_path / "a"
    (a / "1_Pooling").mkdir(parents=True)
    (a / "config.json").write_text('{"hidden_size": 4}')
    (a / "model.safetensors").write_bytes(bytes(range(256)) * 64)
    (a / "1_Pooling" / "config.json").write_text("{}")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    os.utime(b / "model.safetensors", ns=(1, 1))  # a reinstall: same content, another time
    assert folder_fingerprint(a) == folder_fingerprint(b)
    data = bytearray((b / "model.safetensors").read_bytes())
    data[100] ^= 1
    (b / "model.safetensors").write_bytes(bytes(data))
    assert folder_fingerprint(a) != folder_fingerprint(b)
    (b / "model.safetensors").write_bytes(bytes(range(256)) * 64)
    (b / "extra.txt").write_text("x")
    assert folder_fingerprint(a) != folder_fingerprint(b)


def test_clear_removes_only_entry_files(tmp_path, key):
    """A folder given as root that also holds the user's own .npy files: clear() removes veil's entries only."""
    root = tmp_path / "mine"
    cache = EmbeddingCache(root)
    entry = cache.put(key, _vectors(key))
    (root / "data.npy").parent.mkdir(exist_ok=True)
    np.save(root / "data.npy", np.zeros(3))
    own = entry.parent / "my-vectors.npy"  # the user's file beside an entry
    np.save(own, np.zeros(3))
    (root / "empty-folder").mkdir()
    assert cache.clear() == 1
    assert not entry.exists() and not _checksum(entry).exists()
    assert (root / "data.npy").is_file() and own.is_file() and (root / "empty-folder").is_dir()


@pytest.mark.slow
def test_a_cache_hit_warns_about_truncated_texts_as_the_encoding_did(corpus, tmp_home):
    """benchmarks/records_under_load.py found a record whose warnings depended on whether the embeddings were
    cached: the hit now warns as the encoding did (without running the model)."""
    import warnings

    from veil.encoders.cache import encode_cached
    from veil.errors import DataWarning

    short = TextEncoder("minilm", backend="torch", max_length=8)
    texts = ["one two three four five six seven eight nine ten eleven twelve", "short"]
    for _ in range(2):  # the miss, then the hit
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            encode_cached(short, texts, "tiny-long", "train", progress=False)
        said = [str(w.message) for w in caught if issubclass(w.category, DataWarning)]
        assert said == ["1 of 2 texts are longer than max_length=8 tokens and were truncated; split long texts "
                        "into sentences or raise max_length (this model allows up to 512)"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        encode_cached(short, ["short"], "tiny-long", "train", progress=False)
    assert not [w for w in caught if issubclass(w.category, DataWarning)]
