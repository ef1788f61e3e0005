"""Text encoders (registry name or local model folder) and the embedding cache.

>>> from veil.encoders import TextEncoder, encoder_names
>>> encoder_names()
['minilm']
>>> enc = TextEncoder("minilm")                       # mean pooling, L2-normalised, 256 tokens
>>> X = enc.encode(["A gripping, funny film."])        # float32 (1, 384)
>>> X = enc.encode_corpus(corpus, "train")             # cached under veil_home()/embeddings/
>>> TextEncoder("minilm", backend="torch")             # the float32 reference (default: bf16 or onnx, by CPU)

Importing this package does not import torch or transformers; building a
:class:`TextEncoder` does.
"""

from __future__ import annotations

from veil.encoders.cache import (CacheKey, CacheWarning, EmbeddingCache, encode_cached, encode_corpus,
                                 encode_sentences, texts_sha256)
from veil.encoders.backends import backend_identity, backend_names
from veil.encoders.registry import encoder_names, resolve_model
from veil.encoders.text import POOLINGS, TextEncoder

__all__ = ["TextEncoder", "backend_identity", "backend_names", "EmbeddingCache", "CacheKey", "CacheWarning",
           "encoder_names", "encode_cached", "encode_corpus", "encode_sentences", "resolve_model", "texts_sha256",
           "POOLINGS"]
