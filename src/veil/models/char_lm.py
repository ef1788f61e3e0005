"""The character LSTM language model of the adversarial-generation defense (Coavoux et al. 2018, Sec. 3.1.2).

The generator reconstructs the text from r(x): a one-layer character LSTM (character embeddings 32, hidden size =
the encoder width W) whose initial CELL state is r(x) and initial hidden state is zero (the authors' DyNet code
passes ``[r(x), zeros]`` to ``initial_state``, which DyNet orders cells first). It reads ``[START] + chars`` and
predicts ``chars + [STOP]`` (teacher forcing), so

    L_g(x; theta_l, r) = -log P(x | r(x); theta_l) = - sum_{i=1}^{C} log P(x_i | x_{1..i-1}, r(x); theta_l)

summed over the C characters (plus STOP), as in the paper; ``reduction="mean"`` divides by the count instead.

Only the first ``max_chars`` characters of a text are read (default 300; the paper reads whole documents, which
costs too much on 2 CPU cores for emails and articles): :func:`CharVocabulary.encode` counts the texts it cut and
the caller says so (``truncated``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from veil.errors import DataFormatError, InvalidParameterError
from veil.models.heads import _as_torch_generator
from veil.models.lstm import empty_lstm, padded_batch

__all__ = ["CharVocabulary", "CharLM", "CharInputs", "MAX_CHARS"]

MAX_CHARS = 300
PAD, UNK, START, STOP = 0, 1, 2, 3


class CharVocabulary:
    """The ``max_size`` most frequent characters of the training texts; ids 0-3 = PAD, UNK, START, STOP."""

    def __init__(self, texts: Sequence[str], *, max_chars: int = MAX_CHARS, max_size: int = 200) -> None:
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
            raise InvalidParameterError(f"max_chars must be an int >= 1, got {max_chars!r}")
        counts = Counter(ch for t in texts for ch in t[:max_chars])
        if not counts:
            raise DataFormatError("the training texts have no characters")
        self.index = {ch: i + 4 for i, (ch, _) in enumerate(counts.most_common(max_size))}
        self.max_chars = max_chars

    def __len__(self) -> int:
        return len(self.index) + 4

    def encode(self, texts: Sequence[str]) -> tuple[list[torch.Tensor], int]:
        """Per text the ids ``[START] + chars[:max_chars] + [STOP]``, and how many texts were cut."""
        out, cut = [], 0
        for t in texts:
            cut += len(t) > self.max_chars
            ids = [START] + [self.index.get(ch, UNK) for ch in t[:self.max_chars]] + [STOP]
            out.append(torch.tensor(ids, dtype=torch.long))
        return out, cut


class CharInputs:
    """Character ids of a list of texts; ``batch(rows)`` -> (padded ids (B, T), lengths (B,))."""

    def __init__(self, texts: Sequence[str], vocab: CharVocabulary) -> None:
        self.ids, self.truncated = vocab.encode(texts)

    def __len__(self) -> int:
        return len(self.ids)

    def batch(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        return padded_batch(self.ids, rows, PAD)


class CharLM(nn.Module):
    """Character LSTM LM conditioned on r(x) through its initial cell state; returns per-example NLL."""

    def __init__(self, n_chars: int, *, width: int, emb_dim: int = 32, rng: Any = None) -> None:
        super().__init__()
        g = _as_torch_generator(rng)
        self.width = int(width)
        self.embed = nn.utils.skip_init(nn.Embedding, n_chars, emb_dim, padding_idx=PAD)
        self.lstm = empty_lstm(emb_dim, width)
        self.out = nn.utils.skip_init(nn.Linear, width, n_chars)
        with torch.no_grad():
            self.embed.weight.uniform_(-1.0, 1.0, generator=g)
            self.embed.weight[PAD].zero_()
            for p in [*self.lstm.parameters(), *self.out.parameters()]:
                p.uniform_(-1.0 / math.sqrt(width), 1.0 / math.sqrt(width), generator=g)

    def forward(self, r: torch.Tensor, batch: tuple[torch.Tensor, torch.Tensor], *,
                reduction: str = "sum") -> torch.Tensor:
        """-log P(x | r(x)) per example (B,): summed over predicted characters, or their mean."""
        if reduction not in ("sum", "mean"):
            raise InvalidParameterError(f"reduction must be 'sum' (the paper) or 'mean', got {reduction!r}")
        ids, lengths = batch
        inputs, targets = ids[:, :-1], ids[:, 1:]
        steps = (lengths - 1).clamp(min=1)
        c0 = r.unsqueeze(0)
        h0 = torch.zeros_like(c0)
        packed = nn.utils.rnn.pack_padded_sequence(self.embed(inputs), steps.cpu(), batch_first=True,
                                                   enforce_sorted=False)
        out, _ = self.lstm(packed, (h0, c0))
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=inputs.shape[1])
        logits = self.out(out)
        nll = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=PAD, reduction="none")
        total = nll.sum(dim=1)
        return total if reduction == "sum" else total / steps.to(total.dtype)
