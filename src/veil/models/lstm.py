"""Encoders that yield the representation r(x) an eavesdropper sees (Coavoux et al. 2018, Sec. 2.1).

One interface: a :class:`RepresentationEncoder` is an ``nn.Module`` with an integer ``width`` whose ``forward(batch)``
returns r(x) of shape ``(B, width)``; ``batch`` is whatever its :class:`EncoderInputs` builds for a list of rows.
Defenses, the main-task head and the attackers only ever touch r(x), so they work for any encoder.

* :class:`LSTMEncoder`: the paper's encoder. Word embeddings (32), one unidirectional LSTM layer of width W,
  r(x) = the last hidden state. Sequences are batched with ``pack_padded_sequence`` (the authors' DyNet code
  runs one example at a time; ``benchmarks/attributes.py`` measures the difference). Dropout 0.2 is applied to
  the LSTM's inputs in training, and training-time word dropout replaces a token of training frequency f by UNK
  with probability 0.8375 / (0.8375 + f) (the authors' ``vocabulary.py``); both draw from the encoder's own
  generator.
* :class:`ProjectionEncoder`: a trainable projection ``tanh(A e + b)`` of frozen MiniLM sentence embeddings e,
  the representation a modern pipeline would send.

Texts are tokenised with a regular expression (words, numbers, punctuation; case kept) rather than NLTK's
``word_tokenize`` (not a veil dependency), and cut to ``max_tokens`` tokens.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from veil.errors import DataFormatError, InvalidParameterError
from veil.models.heads import GeneratorDropout, _as_torch_generator

__all__ = ["Vocabulary", "tokenize", "EncoderInputs", "TokenInputs", "VectorInputs", "LSTMEncoder",
           "ProjectionEncoder", "WORD_DROPOUT_ALPHA"]

_WORDS = re.compile(r"\w+(?:[-']\w+)*|[^\w\s]")
WORD_DROPOUT_ALPHA = 0.8375
PAD, UNK = 0, 1


def tokenize(text: str, max_tokens: int | None = None) -> list[str]:
    tokens = _WORDS.findall(text)
    return tokens[:max_tokens] if max_tokens else tokens


class Vocabulary:
    """Every token of the training texts (up to ``max_size``, most frequent first); id 0 = PAD, 1 = UNK."""

    def __init__(self, texts: Sequence[str], *, max_tokens: int | None = None, max_size: int = 50000) -> None:
        counts = Counter(t for text in texts for t in tokenize(text, max_tokens))
        if not counts:
            raise DataFormatError("the training texts have no tokens; give non-empty texts")
        words = [w for w, _ in counts.most_common(max_size)]
        self.index = {w: i + 2 for i, w in enumerate(words)}
        self.freq = np.array([0, 0] + [counts[w] for w in words], dtype=np.float64)
        self.max_tokens = max_tokens

    def __len__(self) -> int:
        return len(self.index) + 2

    def ids(self, text: str) -> list[int]:
        return [self.index.get(t, UNK) for t in tokenize(text, self.max_tokens)] or [UNK]


class EncoderInputs:
    """The model inputs of a list of examples; ``batch(rows)`` builds one batch for the encoder."""

    def __len__(self) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def batch(self, rows: np.ndarray) -> Any:  # pragma: no cover - interface
        raise NotImplementedError


class TokenInputs(EncoderInputs):
    """Token ids per text for :class:`LSTMEncoder`; a batch is ``(padded ids (B, T), lengths (B,))``."""

    def __init__(self, texts: Sequence[str], vocab: Vocabulary) -> None:
        self.ids = [torch.tensor(vocab.ids(t), dtype=torch.long) for t in texts]

    def __len__(self) -> int:
        return len(self.ids)

    def batch(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        return padded_batch(self.ids, rows)


def padded_batch(ids: Sequence[torch.Tensor], rows: np.ndarray, pad: int = PAD) -> tuple[torch.Tensor, torch.Tensor]:
    """The sequences ``ids[rows]`` padded with ``pad`` into (B, T), and their lengths (B,)."""
    seqs = [ids[int(i)] for i in rows]
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    return nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=pad), lengths


class VectorInputs(EncoderInputs):
    """Precomputed vectors (e.g. frozen MiniLM embeddings) for :class:`ProjectionEncoder`."""

    def __init__(self, X: np.ndarray) -> None:
        X = np.asarray(X, dtype=np.float32)
        if X.ndim != 2:
            raise DataFormatError(f"vectors must be (n, d), got shape {X.shape}")
        self.X = torch.from_numpy(X)

    def __len__(self) -> int:
        return int(self.X.shape[0])

    def batch(self, rows: np.ndarray) -> torch.Tensor:
        return self.X[torch.as_tensor(np.asarray(rows, dtype=np.int64))]


def _uniform_(t: torch.Tensor, bound: float, g: torch.Generator) -> None:
    with torch.no_grad():
        t.uniform_(-bound, bound, generator=g)


def empty_lstm(in_dim: int, hidden: int) -> nn.LSTM:
    """A one-layer batch-first LSTM allocated without drawing from torch's global generator (caller initialises)."""
    return nn.LSTM(in_dim, hidden, batch_first=True, device="meta").to_empty(device="cpu")


def _check_width(width: int) -> int:
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise InvalidParameterError(f"width must be an int >= 1 (the paper sweeps 8..128), got {width!r}")
    return width


class LSTMEncoder(nn.Module):
    """Word embeddings -> one-layer unidirectional LSTM -> r(x) = last hidden state (B, width)."""

    def __init__(self, vocab: Vocabulary, *, width: int = 64, emb_dim: int = 32, dropout: float = 0.2,
                 word_dropout: bool = True, rng: Any = None) -> None:
        super().__init__()
        self.width = _check_width(width)
        self.generator = _as_torch_generator(rng)
        self.embed = nn.utils.skip_init(nn.Embedding, len(vocab), emb_dim, padding_idx=PAD)
        self.lstm = empty_lstm(emb_dim, width)
        _uniform_(self.embed.weight, 1.0, self.generator)
        with torch.no_grad():
            self.embed.weight[PAD].zero_()
        for p in self.lstm.parameters():
            _uniform_(p, 1.0 / math.sqrt(width), self.generator)
        self.dropout = GeneratorDropout(dropout, self.generator)
        self.word_dropout = bool(word_dropout)
        freq = torch.as_tensor(vocab.freq, dtype=torch.float32)
        self.register_buffer("unk_prob", torch.where(freq > 0, WORD_DROPOUT_ALPHA / (WORD_DROPOUT_ALPHA + freq),
                                                     torch.zeros_like(freq)), persistent=False)

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        ids, lengths = batch
        if self.training and self.word_dropout:
            draw = torch.rand(ids.shape, generator=self.generator)
            ids = torch.where(draw < self.unk_prob[ids], torch.full_like(ids, UNK), ids)
        x = self.dropout(self.embed(ids))
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, (h, _) = self.lstm(packed)
        return h[-1]


class ProjectionEncoder(nn.Module):
    """r(x) = tanh(A e + b) over a frozen sentence embedding e (MiniLM: 384 dims)."""

    def __init__(self, in_dim: int = 384, *, width: int = 64, rng: Any = None) -> None:
        super().__init__()
        self.width = _check_width(width)
        g = _as_torch_generator(rng)
        self.proj = nn.utils.skip_init(nn.Linear, in_dim, width)
        nn.init.kaiming_uniform_(self.proj.weight, a=math.sqrt(5), generator=g)
        _uniform_(self.proj.bias, 1.0 / math.sqrt(in_dim), g)

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.proj(batch))
