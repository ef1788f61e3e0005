"""A biaffine dependency parser (Dozat & Manning 2017), the target parser of Hu et al. 2020 (Sec. 3, 5.1).

Input per word: a word embedding (lower-cased form; optionally initialised from en_core_web_md's 300-d static
vectors), a POS-tag embedding (Penn tags; the paper's parser uses POS input), and subword features (embeddings
of the hashed 3-letter prefix and suffix and of the word's shape). A BiLSTM reads the sentence with an
artificial ROOT word in front; two MLPs give dependent and head views for arcs and two smaller ones for labels;
a biaffine scorer gives ``s[b, d, h]`` (word ``d``'s head is ``h``) and a bilinear scorer per label gives the
label of each arc. Trees are decoded as maximum spanning arborescences with one root
(:func:`veil.models.arborescence.decode_tree`).

Soft inputs (for part 2's obfuscator, Hu et al. Sec. 3.2): :meth:`BiaffineParser.forward` takes
``word_vectors`` ``(B, T, D)`` in place of the lookup, and :meth:`WordEmbedding.mix` turns a distribution over
candidate words into such a vector (``probs @ E[candidates]``), so gradients reach the distribution through the
frozen parser. The subword features depend on the word's string too, so a distribution over words also gives
mixtures of them: :meth:`BiaffineParser.mix_inputs` mixes every per-word input embedding (word, prefix, suffix,
shape) with the same probabilities, and ``forward(batch, inputs=...)`` takes the whole input row (a one-hot
distribution gives exactly the row of that word, :meth:`BiaffineParser.embed`).

Departures from the authors' NeuroNLP2 parser: subword hash features instead of a character CNN (cheaper on
CPU), smaller sizes (see :class:`ParserConfig`), no variational (shared) dropout masks.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from veil.errors import DataFormatError, InvalidParameterError

__all__ = ["ParserConfig", "ParserVocab", "WordEmbedding", "BiaffineParser", "Batch", "PAD", "UNK", "ROOT"]

PAD, UNK, ROOT = 0, 1, 2
_SPECIAL = ("<pad>", "<unk>", "<root>")


@dataclass(frozen=True)
class ParserConfig:
    """Sizes of the parser. Measured: with md-initialised words, 45 min on 1 thread of a loaded 2-core machine
    (3,072 steps, 1.7 epochs of the silver train split) reach 91.9 UAS / 90.6 LAS on 2,000 silver test sentences
    (dev UAS passed 88 after ~23 min)."""

    word_dim: int = 100
    tag_dim: int = 32
    sub_dim: int = 32
    sub_buckets: int = 20000
    hidden: int = 128
    layers: int = 2
    arc_dim: int = 192
    label_dim: int = 64
    dropout: float = 0.33

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _shape(word: str) -> int:
    if word.isupper():
        return 1
    if word[:1].isupper():
        return 2
    if any(c.isdigit() for c in word):
        return 3
    if not any(c.isalnum() for c in word):
        return 4
    return 5


def _bucket(text: str, buckets: int) -> int:
    return 3 + zlib.crc32(text.encode("utf-8")) % (buckets - 3)


@dataclass
class ParserVocab:
    """Word, tag and label alphabets (index 0 pad, 1 unknown, 2 root) built from training trees."""

    words: list[str]
    tags: list[str]
    labels: list[str]
    _w: dict[str, int] = field(default_factory=dict, repr=False)
    _t: dict[str, int] = field(default_factory=dict, repr=False)
    _l: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._w = {w: i for i, w in enumerate(self.words)}
        self._t = {t: i for i, t in enumerate(self.tags)}
        self._l = {lab: i for i, lab in enumerate(self.labels)}

    @classmethod
    def build(cls, sentences: Sequence[tuple[Sequence[str], Sequence[str], Sequence[str]]], *,
              min_count: int = 2) -> "ParserVocab":
        """From ``(words, tags, labels)`` triples; words seen fewer than ``min_count`` times map to unknown."""
        wc: Counter[str] = Counter()
        tags, labels = set(), set()
        for words, ts, ls in sentences:
            wc.update(w.lower() for w in words)
            tags.update(ts)
            labels.update(ls)
        if not wc:
            raise DataFormatError("no training sentences: the parser's vocabulary would be empty")
        words = sorted((w for w, c in wc.items() if c >= min_count), key=lambda w: (-wc[w], w))
        return cls([*_SPECIAL, *words], [*_SPECIAL, *sorted(tags)], sorted(labels))

    def to_dict(self) -> dict[str, list[str]]:
        return {"words": self.words, "tags": self.tags, "labels": self.labels}

    def word_id(self, word: str) -> int:
        return self._w.get(word.lower(), UNK)

    def tag_id(self, tag: str) -> int:
        return self._t.get(tag, UNK)

    def label_id(self, label: str) -> int:
        return self._l.get(label, 0)


@dataclass
class Batch:
    """Padded tensors of a batch; position 0 of every row is ROOT. ``mask`` marks real words (not ROOT, not pad)."""

    words: torch.Tensor
    tags: torch.Tensor
    prefix: torch.Tensor
    suffix: torch.Tensor
    shape: torch.Tensor
    mask: torch.Tensor
    heads: torch.Tensor | None = None
    labels: torch.Tensor | None = None

    @classmethod
    def make(cls, vocab: ParserVocab, sentences: Sequence[Sequence[str]], tags: Sequence[Sequence[str]],
             heads: Sequence[Sequence[int]] | None = None, labels: Sequence[Sequence[str]] | None = None, *,
             buckets: int = 20000, word_dropout: float = 0.0, rng: np.random.Generator | None = None) -> "Batch":
        b, t = len(sentences), 1 + max(len(s) for s in sentences)
        arr = {k: np.zeros((b, t), dtype=np.int64) for k in ("words", "tags", "prefix", "suffix", "shape", "heads",
                                                                 "labels")}
        mask = np.zeros((b, t), dtype=bool)
        for i, words in enumerate(sentences):
            n = len(words)
            if n == 0:
                raise DataFormatError(f"sentence {i} of the batch is empty; drop empty sentences before parsing")
            if len(tags[i]) != n:
                raise DataFormatError(f"sentence {i}: {len(tags[i])} tags for {n} words; give one tag per word")
            arr["words"][i, 0] = arr["tags"][i, 0] = ROOT
            arr["words"][i, 1:n + 1] = [vocab.word_id(w) for w in words]
            arr["tags"][i, 1:n + 1] = [vocab.tag_id(x) for x in tags[i]]
            arr["prefix"][i, 1:n + 1] = [_bucket("<" + w.lower()[:3], buckets) for w in words]
            arr["suffix"][i, 1:n + 1] = [_bucket(w.lower()[-3:] + ">", buckets) for w in words]
            arr["shape"][i, 1:n + 1] = [_shape(w) for w in words]
            mask[i, 1:n + 1] = True
            if heads is not None:
                arr["heads"][i, 1:n + 1] = heads[i]
            if labels is not None:
                arr["labels"][i, 1:n + 1] = [vocab.label_id(x) for x in labels[i]]
        if word_dropout > 0 and rng is not None:  # unknown-word replacement while training
            drop = (rng.random(arr["words"].shape) < word_dropout) & mask
            arr["words"][drop] = UNK
        to = {k: torch.from_numpy(v) for k, v in arr.items()}
        return cls(to["words"], to["tags"], to["prefix"], to["suffix"], to["shape"], torch.from_numpy(mask),
                   to["heads"] if heads is not None else None, to["labels"] if labels is not None else None)


class WordEmbedding(nn.Embedding):
    """A word embedding whose lookup also takes mixtures: ``mix(probs, ids) = probs @ weight[ids]``."""

    def mix(self, probs: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """``probs`` ``(..., K)`` over the words ``ids`` ``(K,)`` -> ``(..., D)`` (differentiable in ``probs``)."""
        return probs @ self.weight[ids]


class _MLP(nn.Sequential):
    def __init__(self, d_in: int, d_out: int, dropout: float) -> None:
        super().__init__(nn.Linear(d_in, d_out), nn.LeakyReLU(0.1), nn.Dropout(dropout))


class BiaffineParser(nn.Module):
    """The parser (see the module docstring). ``vectors`` ``(V, D)`` initialises the word embedding (D must match)."""

    def __init__(self, vocab: ParserVocab, config: ParserConfig = ParserConfig(),
                 vectors: np.ndarray | None = None) -> None:
        super().__init__()
        self.vocab, self.config = vocab, config
        c = config
        if vectors is not None:
            if vectors.shape != (len(vocab.words), c.word_dim):
                raise InvalidParameterError(f"vectors have shape {vectors.shape}, the parser needs "
                                            f"({len(vocab.words)}, {c.word_dim}); set word_dim to match")
        self.word = WordEmbedding(len(vocab.words), c.word_dim, padding_idx=PAD)
        if vectors is not None:
            with torch.no_grad():
                self.word.weight.copy_(torch.as_tensor(vectors, dtype=torch.float32))
        self.tag = nn.Embedding(len(vocab.tags), c.tag_dim, padding_idx=PAD)
        self.prefix = nn.Embedding(c.sub_buckets, c.sub_dim, padding_idx=PAD)
        self.suffix = nn.Embedding(c.sub_buckets, c.sub_dim, padding_idx=PAD)
        self.shape = nn.Embedding(6, 8, padding_idx=PAD)
        d_in = c.word_dim + c.tag_dim + 2 * c.sub_dim + 8
        self.drop = nn.Dropout(c.dropout)
        self.lstm = nn.LSTM(d_in, c.hidden, num_layers=c.layers, batch_first=True, bidirectional=True,
                            dropout=c.dropout if c.layers > 1 else 0.0)
        h2 = 2 * c.hidden
        self.arc_dep, self.arc_head = _MLP(h2, c.arc_dim, c.dropout), _MLP(h2, c.arc_dim, c.dropout)
        self.lab_dep, self.lab_head = _MLP(h2, c.label_dim, c.dropout), _MLP(h2, c.label_dim, c.dropout)
        self.arc_w = nn.Parameter(torch.zeros(c.arc_dim, c.arc_dim))
        self.arc_b = nn.Parameter(torch.zeros(c.arc_dim))
        n_lab = max(1, len(vocab.labels))
        self.lab_w = nn.Parameter(torch.zeros(n_lab, c.label_dim + 1, c.label_dim + 1))

    def embed(self, batch: Batch, word_vectors: torch.Tensor | None = None) -> torch.Tensor:
        """The BiLSTM's input ``(B, T, d_in)``: word, tag, prefix, suffix and shape embeddings of each position."""
        w = self.word(batch.words) if word_vectors is None else word_vectors
        return torch.cat([w, self.tag(batch.tags), self.prefix(batch.prefix), self.suffix(batch.suffix),
                          self.shape(batch.shape)], dim=-1)

    def word_ids(self, words: Sequence[str]) -> dict[str, torch.Tensor]:
        """The ids ``(K,)`` of the per-word inputs (``words``, ``prefix``, ``suffix``, ``shape``) of ``words``."""
        b = self.config.sub_buckets
        return {"words": torch.tensor([self.vocab.word_id(w) for w in words], dtype=torch.long),
                "prefix": torch.tensor([_bucket("<" + w.lower()[:3], b) for w in words], dtype=torch.long),
                "suffix": torch.tensor([_bucket(w.lower()[-3:] + ">", b) for w in words], dtype=torch.long),
                "shape": torch.tensor([_shape(w) for w in words], dtype=torch.long)}

    def mix_inputs(self, probs: torch.Tensor, ids: dict[str, torch.Tensor], tags: torch.Tensor) -> torch.Tensor:
        """Input rows ``(n, d_in)`` of words drawn from ``probs`` ``(n, K)`` over the words ``ids``
        (:meth:`word_ids`) at positions tagged ``tags`` ``(n,)``: each per-word embedding is mixed with the same
        probabilities (differentiable in ``probs``); a one-hot row gives that word's :meth:`embed` row."""
        return torch.cat([self.word.mix(probs, ids["words"]), self.tag(tags),
                          probs @ self.prefix.weight[ids["prefix"]], probs @ self.suffix.weight[ids["suffix"]],
                          probs @ self.shape.weight[ids["shape"]]], dim=-1)

    def forward(self, batch: Batch, word_vectors: torch.Tensor | None = None,
                inputs: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Arc scores ``(B, T, T)`` (row = dependent, column = head; padded heads at -inf) and the label views.

        ``word_vectors`` ``(B, T, word_dim)`` replaces the word lookup (soft inputs; row 0 = ROOT); ``inputs``
        ``(B, T, d_in)`` replaces the whole input (:meth:`embed`, :meth:`mix_inputs`).
        """
        x = self.embed(batch, word_vectors) if inputs is None else inputs
        lengths = batch.mask.sum(1) + 1
        packed = nn.utils.rnn.pack_padded_sequence(self.drop(x), lengths.cpu(), batch_first=True,
                                                   enforce_sorted=False)
        h, _ = self.lstm(packed)
        h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=x.shape[1])
        h = self.drop(h)
        dep, head = self.arc_dep(h), self.arc_head(h)
        arc = torch.einsum("bid,de,bje->bij", dep, self.arc_w, head) + (head @ self.arc_b).unsqueeze(1)
        valid = batch.mask.clone()
        valid[:, 0] = True
        arc = arc.masked_fill(~valid.unsqueeze(1), float("-inf"))
        return arc, self.lab_dep(h), self.lab_head(h)

    def label_scores(self, lab_dep: torch.Tensor, lab_head: torch.Tensor, heads: torch.Tensor) -> torch.Tensor:
        """Label scores ``(B, T, L)`` of each word's arc to ``heads`` ``(B, T)``."""
        hh = lab_head.gather(1, heads.clamp(min=0).unsqueeze(-1).expand(-1, -1, lab_head.shape[-1]))
        one = torch.ones_like(lab_dep[..., :1])
        d, g = torch.cat([lab_dep, one], -1), torch.cat([hh, one], -1)
        return torch.einsum("btd,lde,bte->btl", d, self.lab_w, g)

    def loss(self, batch: Batch) -> torch.Tensor:
        """Cross-entropy of the gold heads plus that of the gold labels (on gold arcs), over real words."""
        if batch.heads is None or batch.labels is None:
            raise InvalidParameterError("the batch has no gold trees; build it with heads= and labels=")
        arc, ld, lh = self(batch)
        m = batch.mask
        arc_loss = nn.functional.cross_entropy(arc[m], batch.heads[m])
        lab = self.label_scores(ld, lh, batch.heads)
        return arc_loss + nn.functional.cross_entropy(lab[m], batch.labels[m])

    @torch.no_grad()
    def predict(self, batch: Batch) -> list[tuple[list[int], list[str]]]:
        """Decoded heads (1-based, 0 = root; always a tree) and labels of each sentence."""
        from veil.models.arborescence import decode_tree

        was = self.training
        self.eval()
        arc, ld, lh = self(batch)
        logp = arc.log_softmax(-1).numpy()
        lengths = batch.mask.sum(1).tolist()
        heads = torch.zeros_like(batch.words)
        for i, n in enumerate(lengths):
            heads[i, 1:n + 1] = torch.from_numpy(decode_tree(logp[i, :n + 1, :n + 1][:, :n + 1]))
        labs = self.label_scores(ld, lh, heads).argmax(-1)
        self.train(was)
        names = self.vocab.labels
        return [(heads[i, 1:n + 1].tolist(), [names[k] for k in labs[i, 1:n + 1].tolist()])
                for i, n in enumerate(lengths)]

    def save(self, path: Any) -> None:
        """Weights, vocabulary and config in one file (written atomically)."""
        from veil._io import atomic_write

        with atomic_write(path, "wb") as fh:
            torch.save({"state": self.state_dict(), "vocab": self.vocab.to_dict(), "config": self.config.to_dict()},
                       fh)

    @classmethod
    def load(cls, path: Any, *, fix: str = "train one with `veil parse train` or pass another --model") \
            -> "BiaffineParser":
        """The parser :meth:`save` wrote; a missing, empty, damaged or foreign file is a typed error naming it."""
        from veil.models.files import load_tensors

        what = "the biaffine parser"
        blob = load_tensors(path, what=what, fix=fix, keys=("state", "vocab", "config"))
        try:
            model = cls(ParserVocab(**blob["vocab"]), ParserConfig(**blob["config"]))
            model.load_state_dict(blob["state"])
        except (TypeError, ValueError, KeyError, RuntimeError) as exc:
            raise DataFormatError(f"{what} {path} does not hold a parser veil can rebuild ({type(exc).__name__}); "
                                  f"it was not used. {fix}") from None
        model.eval()
        return model
