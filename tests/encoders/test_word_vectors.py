"""veil.encoders.word_vectors: vocabulary, MiniLM-derived static word vectors, exact nearest-word search."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veil.encoders import EmbeddingCache, TextEncoder
from veil.encoders import word_vectors as wv_module
from veil.encoders.word_vectors import WORD_PATTERN, UnknownWordError, WordVectors, build_vocabulary, split_words
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError, VeilError

WORDS = ["cat", "dog", "house", "river", "happy", "sad", "xylophone"]


def _oracle(Q: np.ndarray, M: np.ndarray) -> np.ndarray:
    """Slow reference: argmin of the float64 squared distance to every word (first index on ties)."""
    M64 = M.astype(np.float64)
    out = []
    for q in Q.astype(np.float64):
        diff = M64 - q
        out.append(int(np.argmin(np.einsum("vd,vd->v", diff, diff))))
    return np.asarray(out)


def _random_vectors(V=300, d=16, seed=0) -> WordVectors:
    M = np.random.default_rng(seed).standard_normal((V, d)).astype(np.float32)
    return WordVectors(words=[f"w{chr(97 + i % 26)}{i}" for i in range(V)], matrix=M)


# ------------------------------------------------------------ tokenising and the vocabulary
@settings(max_examples=200, deadline=None)
@given(st.text())
def test_split_words_round_trips_and_puts_letter_runs_at_odd_positions(text):
    parts = split_words(text)
    assert "".join(parts) == text and len(parts) % 2 == 1
    assert all(WORD_PATTERN.fullmatch(p) for p in parts[1::2])
    assert all(WORD_PATTERN.search(p) is None for p in parts[0::2])


def test_split_words_keeps_digits_and_punctuation_out_of_words():
    parts = split_words("Don't pay 42 dollars_now!")
    assert parts[1::2] == ["Don", "t", "pay", "dollars", "now"]
    assert parts[0::2] == ["", "'", " ", " 42 ", "_", "!"]
    with pytest.raises(InvalidTypeError):
        split_words(None)


def test_build_vocabulary_orders_by_count_then_alphabet():
    texts = ["The cat and THE dog.", "the Cat sat; 3 dogs!", "Zebra zebra and the"]
    assert build_vocabulary(texts) == ["the", "and", "cat", "zebra", "dog", "dogs", "sat"]
    assert build_vocabulary(texts, max_size=3) == ["the", "and", "cat"]
    assert build_vocabulary(texts, min_count=2) == ["the", "and", "cat", "zebra"]
    assert build_vocabulary(iter(texts)) == build_vocabulary(texts)


def test_build_vocabulary_refuses_bad_input():
    with pytest.raises(DataFormatError, match="no alphabetic word"):
        build_vocabulary(["123 !!", "4.5"])
    with pytest.raises(DataFormatError, match="min_count"):
        build_vocabulary(["a b c"], min_count=2)
    with pytest.raises(InvalidTypeError):
        build_vocabulary("just one string")
    with pytest.raises(DataFormatError, match=r"texts\[1\]"):
        build_vocabulary(["ok", 3])
    with pytest.raises(InvalidParameterError):
        build_vocabulary(["a"], max_size=0)
    with pytest.raises(InvalidTypeError):
        build_vocabulary(["a"], min_count=1.0)


# ------------------------------------------------------------ WordVectors without an encoder
def test_constructor_validates():
    M = np.zeros((2, 3), dtype=np.float32)
    with pytest.raises(InvalidParameterError, match="empty"):
        WordVectors(words=[], matrix=np.zeros((0, 3)))
    with pytest.raises(DataFormatError, match="more than once"):
        WordVectors(words=["a", "a"], matrix=M)
    with pytest.raises(DataFormatError, match=r"shape \(2, d\)"):
        WordVectors(words=["a", "b"], matrix=np.zeros((3, 3)))
    with pytest.raises(DataFormatError, match="NaN"):
        WordVectors(words=["a", "b"], matrix=np.array([[0.0, np.nan, 0], [0, 0, 0]]))
    with pytest.raises(DataFormatError, match="non-empty str"):
        WordVectors(words=["a", ""], matrix=M)
    with pytest.raises(InvalidTypeError):
        WordVectors(words="ab", matrix=M)
    with pytest.raises(InvalidTypeError):
        WordVectors(words=["a", "b"], matrix=M.tolist())
    with pytest.raises(InvalidTypeError):
        WordVectors(words=["a", "b"], matrix=M, encoder="minilm")
    with pytest.raises(TypeError):
        WordVectors(["a", "b"], M)  # keyword-only


def test_lookup_and_unknown_words():
    wv = _random_vectors()
    assert len(wv) == 300 and wv.dim == 16 and "wa0" in wv and "nope" not in wv and wv.index("wb1") == 1
    np.testing.assert_array_equal(wv.vectors(["wb1", "wa0", "wb1"]), wv.matrix[[1, 0, 1]])
    np.testing.assert_array_equal(wv.vector("wc2"), wv.matrix[2])
    assert wv.vectors([]).shape == (0, 16) and wv.matrix.dtype == np.float32 and not wv.matrix.flags.writeable
    with pytest.raises(UnknownWordError, match="no encoder") as info:
        wv.vectors(["wa0", "nope"])
    assert isinstance(info.value, KeyError) and isinstance(info.value, VeilError)
    with pytest.raises(UnknownWordError):
        wv.index("nope")
    with pytest.raises(DataFormatError):
        wv.vectors(["wa0", " "])
    with pytest.raises(InvalidTypeError):
        wv.vectors("wa0")


# ------------------------------------------------------------ exact nearest neighbour
@settings(max_examples=40, deadline=None)
@given(st.integers(1, 60), st.integers(1, 12), st.integers(1, 40), st.floats(0.0, 100.0), st.integers(0, 2**32 - 1),
       st.integers(1, 17))
def test_nearest_matches_the_float64_oracle(V, d, n, spread, seed, batch_size):
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((V, d)).astype(np.float32)
    wv = WordVectors(words=[f"w{chr(97 + i % 26)}{i}" for i in range(V)], matrix=M)
    Q = M[rng.integers(0, V, n)] + spread * rng.standard_normal((n, d))
    np.testing.assert_array_equal(wv.nearest(Q, batch_size=batch_size), _oracle(Q, M))


def test_nearest_returns_the_word_itself_and_breaks_ties_by_index():
    wv = _random_vectors()
    np.testing.assert_array_equal(wv.nearest(wv.matrix.astype(np.float64)), np.arange(300))
    # 20 identical vectors: more candidates than re-ranked per query -> the full float64 scan; smallest index wins
    M = np.random.default_rng(1).standard_normal((50, 4)).astype(np.float32)
    M[10:30] = M[10]
    dup = WordVectors(words=[f"w{chr(97 + i % 26)}{i}" for i in range(50)], matrix=M)
    q = M[10:11].astype(np.float64) + 1e-3
    assert dup.nearest(q)[0] == _oracle(q, M)[0] == 10


def test_nearest_resolves_differences_float32_scores_cannot():
    """Pairs of words one float32 ulp apart under scores ~1e7: float32 misorders some, the float64 re-rank never."""
    import torch

    rng = np.random.default_rng(8)
    base = np.full(8, 1000.0, dtype=np.float32)
    M = np.repeat(base[None], 40, axis=0)
    M[:, 1] += 50.0 * (np.arange(40) // 2).astype(np.float32)  # 20 pairs, far apart from each other
    M[1::2, 0] = np.nextafter(M[0::2, 0], np.float32(np.inf))  # the odd word is one ulp further on axis 0
    wv = WordVectors(words=[f"w{chr(97 + i % 26)}{i}" for i in range(40)], matrix=M)
    Q = M[rng.integers(0, 40, 400)].astype(np.float64)
    Q[:, 0] += rng.choice([-1.0, 1.0], 400) * rng.uniform(1.0, 20.0, 400)  # squared distances differ by ~1e-5
    Q[:, 2:] += rng.uniform(-1.0, 1.0, (400, 6))
    truth = _oracle(Q, M)
    np.testing.assert_array_equal(wv.nearest(Q), truth)
    # the case is hard: plain float32 scores pick the wrong word of the pair for some queries
    V = torch.from_numpy(M.copy())
    scores = (V * V).sum(1)[None, :] - 2.0 * (torch.from_numpy(Q.astype(np.float32)) @ V.T)
    assert (scores.argmin(1).numpy() != truth).any()


def test_nearest_bound_follows_torch_matmul_precision(monkeypatch):
    """With TF32-sized input rounding the candidate sets grow, the answers stay exact."""
    monkeypatch.setattr(wv_module, "_dot_unit_roundoff", lambda: 2.0**-8)
    rng = np.random.default_rng(4)
    M = rng.standard_normal((500, 24)).astype(np.float32)
    wv = WordVectors(words=[f"w{chr(97 + i % 26)}{i}" for i in range(500)], matrix=M)
    Q = rng.standard_normal((200, 24)) * 5
    np.testing.assert_array_equal(wv.nearest(Q), _oracle(Q, M))


def test_nearest_of_queries_beyond_float32_range():
    wv = _random_vectors()
    Q = np.random.default_rng(6).standard_normal((20, 16)) * 1e39  # float32 scores overflow: float64 scan
    np.testing.assert_array_equal(wv.nearest(Q), _oracle(Q, wv.matrix))


def test_nearest_validates_queries():
    wv = _random_vectors()
    with pytest.raises(DataFormatError, match=r"\(n, 16\)"):
        wv.nearest(np.zeros((2, 3)))
    with pytest.raises(DataFormatError, match="NaN"):
        wv.nearest(np.full((1, 16), np.nan))
    with pytest.raises(InvalidTypeError):
        wv.nearest([[0.0] * 16])
    with pytest.raises(InvalidParameterError):
        wv.nearest(np.zeros((1, 16)), batch_size=0)
    assert wv.nearest(np.zeros((0, 16))).shape == (0,)


# ------------------------------------------------------------ with the real encoder
@pytest.fixture(scope="module")
def encoder():
    return TextEncoder("minilm")


@pytest.mark.slow
def test_from_encoder_embeds_words_alone_unnormalised_through_the_cache(encoder, tmp_path, monkeypatch):
    cache = EmbeddingCache(tmp_path)
    wv = WordVectors.from_encoder(encoder, WORDS, cache=cache)
    expected = encoder.encode(WORDS, normalize=False, progress=False)
    np.testing.assert_array_equal(wv.matrix, expected)
    assert wv.words == tuple(WORDS) and wv.dim == 384 and np.all(np.linalg.norm(wv.matrix, axis=1) > 1.5)
    assert len(list(tmp_path.rglob("*.npy"))) == 1
    calls = []
    monkeypatch.setattr(encoder, "encode", lambda texts, **kw: calls.append(texts) or expected[: len(texts)])
    again = WordVectors.from_encoder(encoder, WORDS, cache=cache)  # a cache hit does not run the model
    np.testing.assert_array_equal(again.matrix, wv.matrix)
    assert calls == []
    with pytest.raises(InvalidParameterError, match="empty"):
        WordVectors.from_encoder(encoder, [], cache=cache)


@pytest.mark.slow
def test_unseen_words_are_embedded_on_demand_and_memoised(encoder, tmp_path, monkeypatch):
    wv = WordVectors.from_encoder(encoder, WORDS, cache=EmbeddingCache(tmp_path))
    got = wv.vectors(["kitten", "cat", "kitten", "puppy"])
    ref = encoder.encode(["kitten", "puppy"], normalize=False, progress=False)
    np.testing.assert_allclose(got[[0, 2, 3]], ref[[0, 0, 1]], atol=1e-5)  # other batch: float32 order only
    np.testing.assert_array_equal(got[1], wv.matrix[0])
    assert "kitten" not in wv and len(wv) == len(WORDS)  # the vocabulary (the output set) does not grow
    monkeypatch.setattr(encoder, "encode", lambda *a, **kw: pytest.fail("memoised words must not be re-encoded"))
    np.testing.assert_array_equal(wv.vector("puppy"), got[3])
    assert len(list(tmp_path.rglob("*.npy"))) == 1  # words of private texts never reach the disk cache
    # nearest word of a word's own vector is itself; of an unseen word, some vocabulary word
    np.testing.assert_array_equal(wv.nearest(wv.matrix.astype(np.float64)), np.arange(len(WORDS)))
    assert wv.words[wv.nearest(got[:1].astype(np.float64))[0]] in WORDS


@pytest.mark.slow
def test_encoder_dimension_must_match(encoder):
    with pytest.raises(DataFormatError, match="384"):
        WordVectors(words=["a"], matrix=np.zeros((1, 5)), encoder=encoder)
