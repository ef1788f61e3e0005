"""Attachment scores and the parsers that produce trees for them.

UAS/LAS compare a predicted tree with a reference tree position by position (an obfuscated sentence keeps its
original's positions, so its parse is scored against the silver tree of the ORIGINAL sentence, Hu et al.
Sec. 5). Scores are given with punctuation (as Hu et al.'s code counts them: every word) and without
(CoNLL-style, punctuation by the reference tag). Bootstrap intervals resample sentences.

:func:`parse_with` runs one of the three parsers on pre-tokenised, tagged sentences: ``biaffine`` (veil's,
which takes the tags as input), ``spacy-sm`` and ``spacy-md`` (which tag for themselves and see ``spaces``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from veil.errors import DataFormatError, UnknownNameError
from veil.parsing.trees import Tree, is_punct

__all__ = ["PARSER_NAMES", "attachment_scores", "parse_with", "sentence_counts"]

PARSER_NAMES = ("biaffine", "spacy-sm", "spacy-md")


def sentence_counts(gold: Sequence[Tree], pred: Sequence[tuple[Sequence[int], Sequence[str]]]) -> np.ndarray:
    """Per sentence: [words, heads right, heads+labels right, non-punct words, their heads right, both right]."""
    if len(gold) != len(pred):
        raise DataFormatError(f"{len(pred)} predicted trees for {len(gold)} reference trees")
    out = np.zeros((len(gold), 6), dtype=np.int64)
    for i, (tree, (heads, labels)) in enumerate(zip(gold, pred)):
        if len(heads) != len(tree):
            raise DataFormatError(f"tree {i}: {len(heads)} predicted heads for {len(tree)} words; parsers must keep "
                                  "the tokenisation")
        h = np.asarray(heads) == np.asarray(tree.heads)
        hl = h & (np.asarray(labels, dtype=object) == np.asarray(tree.deprels, dtype=object))
        keep = ~np.array([is_punct(t, u) for t, u in zip(tree.tags, tree.upos)], dtype=bool)
        out[i] = [len(tree), h.sum(), hl.sum(), keep.sum(), (h & keep).sum(), (hl & keep).sum()]
    return out


def attachment_scores(gold: Sequence[Tree], pred: Sequence[tuple[Sequence[int], Sequence[str]]], *,
                      n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> dict[str, Any]:
    """UAS, LAS, UAS/LAS without punctuation (percent) with sentence-bootstrap CIs: name -> veil Metric."""
    from veil.results import Metric

    c = sentence_counts(gold, pred)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(c), size=(n_boot, len(c)))
    boot = c[idx].sum(axis=1)  # (n_boot, 6)
    tot = c.sum(axis=0)
    out = {}
    for name, num, den in (("uas", 1, 0), ("las", 2, 0), ("uas_nopunct", 4, 3), ("las_nopunct", 5, 3)):
        vals = 100.0 * boot[:, num] / np.maximum(boot[:, den], 1)
        lo, hi = np.quantile(vals, [(1 - level) / 2, (1 + level) / 2])
        out[name] = Metric(mean=float(100.0 * tot[num] / max(tot[den], 1)), n=int(tot[den]), ci_low=float(lo),
                           ci_high=float(hi), ci_level=level)
    return out


def parse_with(parser: str, sentences: Sequence[Tree], *, model: str | os.PathLike | None = None,
               batch_size: int = 64) -> list[tuple[list[int], list[str]]]:
    """Heads and labels of each sentence (its words, tags and spaces) by ``parser`` (see :data:`PARSER_NAMES`)."""
    if parser not in PARSER_NAMES:
        raise UnknownNameError("parser", parser, PARSER_NAMES)
    if parser == "biaffine":
        from veil.parsing.train import load_parser

        net = load_parser(model)
        return predict_biaffine(net, sentences, batch_size=batch_size)
    from veil.models.spacy_pipelines import load_spacy, parse_words, parsed_trees

    nlp = load_spacy(parser)
    return [parsed_trees(doc) for doc in parse_words(nlp, [(t.words, t.spaces) for t in sentences])]


def predict_biaffine(net: Any, sentences: Sequence[Tree], *, batch_size: int = 64) -> list[tuple[list[int],
                                                                                                list[str]]]:
    """Batched prediction in length order (less padding), returned in input order."""
    import torch

    from veil.models.biaffine import Batch

    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    out: list[Any] = [None] * len(sentences)
    with torch.inference_mode():
        for s in range(0, len(order), batch_size):
            chunk = order[s:s + batch_size]
            batch = Batch.make(net.vocab, [sentences[i].words for i in chunk], [sentences[i].tags for i in chunk],
                               buckets=net.config.sub_buckets)
            for i, res in zip(chunk, net.predict(batch)):
                out[i] = res
    return out
