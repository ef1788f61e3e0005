"""What the bench checks on data given to it (``veil bench --data``) before any cell: enough rows, the inputs' content
hashes, texts the encoder will truncate.

* :func:`check_bench_corpus`: a labelled file the bench cannot measure (one class, a split without rows, too few
  training rows per class; the loader has already removed duplicate texts, so a file of one repeated text is one row)
  is refused with a :class:`~veil.errors.DataFormatError` saying what is missing, instead of failing a cell after
  minutes of encoding and training.
* :func:`content_sha256`: the sha256 of what the cells of a given corpus read (texts, labels, splits, documents,
  private attributes, trees), which a record keeps beside its file's sha256 (:func:`veil.bench.data.corpus_inputs`):
  the same file read with other columns is other data.
* :func:`warn_truncated`: one :class:`~veil.errors.DataWarning`, before any cell, naming how many texts are longer
  than the encoder's token limit (the encoder cuts them).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from typing import Any

import numpy as np

from veil.errors import DataFormatError, DataWarning

__all__ = ["MIN_ROWS", "MIN_TRAIN_PER_CLASS", "check_bench_corpus", "content_sha256", "warn_truncated"]

#: the fewest rows (documents, for a document corpus) per split a corpus given to the bench must have: the heads
#: train on train (a membership game splits it in three), stop early on dev and are scored on test, where the
#: attackers' queries come from
MIN_ROWS = {"train": 10, "dev": 2, "test": 2}
#: the fewest training rows of every class: a head cannot learn a class it sees once
MIN_TRAIN_PER_CLASS = 2
#: rows that, split 80/10/10, leave every split above :data:`MIN_ROWS` but rarely (what the message advises)
ENOUGH = 50
_SPLITS = ("train", "dev", "test")


def check_bench_corpus(corpus: Any) -> None:
    """Raise :class:`~veil.errors.DataFormatError` unless the bench can measure ``corpus`` (a labelled
    :class:`~veil.corpora.base.Corpus` read from a file): at least two classes, :data:`MIN_ROWS` rows in each split
    and :data:`MIN_TRAIN_PER_CLASS` training rows of every class. For a document corpus the rows are its documents
    of at least two sentences (the only ones the document defenses release). Checked before any encoding."""
    documents = getattr(corpus, "documents", None)
    rows = np.arange(len(corpus.texts))
    what = "rows"
    if documents is not None:
        rows = np.asarray([i for i, d in enumerate(documents) if len(d) >= 2], dtype=np.int64)
        what = "documents of two or more sentences"
    labels = np.asarray(corpus.labels)[rows] if len(rows) else np.asarray([], dtype=np.int64)
    splits = np.asarray(corpus.splits, dtype=object)[rows] if len(rows) else np.asarray([], dtype=object)
    names = list(corpus.label_names or [])
    counts = {s: int((splits == s).sum()) for s in _SPLITS}
    shown = ", ".join(f"{counts[s]} {s}" for s in _SPLITS)
    dropped = int((getattr(corpus, "stats", None) or {}).get("duplicates_removed", 0) or 0)
    dup = f" left once {dropped} rows that repeated a text were removed" if dropped else ""
    how = "document id" if documents is not None else "text"
    where = (f"{corpus.name}: {len(rows)} {what}{dup}: {shown} (a file without a split column is split 80/10/10 by "
             f"a hash of each {how})")
    need = dict(MIN_ROWS, dev=0) if documents is not None else MIN_ROWS  # document cells use train and test only
    if dropped and len(rows) < sum(need.values()):
        raise DataFormatError(f"{where}; the bench needs distinct texts, at least {sum(need.values())} (heads train, "
                              f"stop early and are scored on different texts): give rows with other texts "
                              f"({ENOUGH} or more usually fill every split)")
    present = sorted({int(v) for v in labels})
    if len(present) < 2:
        only = repr(names[present[0]]) if present and present[0] < len(names) else "none"
        raise DataFormatError(f"{where}; every row has the same label ({only}): the bench measures utility as "
                              "classification accuracy and needs at least two classes; give rows of another class, "
                              "or check that the label column (CLI: --label-column) holds the label")
    short = [s for s in _SPLITS if counts[s] < need[s]]
    if short:
        needed = ", ".join(f"{need[s]} {s}" for s in _SPLITS if need[s])
        raise DataFormatError(f"{where}; the bench needs at least {needed} {what} (heads train on train, stop on "
                              f"dev and are scored on test, where the attackers' queries come from): add rows with "
                              f"distinct texts ({ENOUGH} or more usually fill every split)")
    train = labels[splits == "train"]
    few = {names[c] if c < len(names) else str(c): int((train == c).sum()) for c in present
           if (train == c).sum() < MIN_TRAIN_PER_CLASS}
    if few:
        listed = ", ".join(f"{k!r} ({v})" for k, v in few.items())
        raise DataFormatError(f"{where}; class(es) {listed} have fewer than {MIN_TRAIN_PER_CLASS} train {what}, so a "
                              "head cannot learn them: add rows of those classes, or drop their rows")


def _digest(parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8")
                          ).hexdigest()


def content_sha256(data: Any) -> str:
    """sha256 of what the bench reads of ``data``: a :class:`~veil.corpora.base.Corpus` (texts, labels by name,
    splits, documents, attributes), an :class:`~veil.corpora.attributes.AttributeCorpus` (texts, labels, splits,
    private variables) or treebank splits (``{split: trees}``, as CoNLL-U)."""
    from veil.corpora.attributes import AttributeCorpus
    from veil.corpora.base import Corpus

    if isinstance(data, Corpus):
        names = list(data.label_names or [])
        labels = None if data.labels is None else [names[int(v)] if names else float(v) for v in data.labels]
        return _digest({"texts": list(data.texts), "labels": labels, "splits": data.splits.tolist(),
                        "documents": data.documents, "attributes": {k: list(v) for k, v in data.attributes.items()}})
    if isinstance(data, AttributeCorpus):
        z = data.private
        return _digest({"texts": list(data.texts), "labels": [data.label_names[int(v)] for v in data.labels],
                        "splits": data.splits.tolist(), "private": {"names": list(z.names), "kind": z.kind,
                                                                    "Z": hashlib.sha256(np.ascontiguousarray(
                                                                        z.Z, dtype=np.float32).data).hexdigest()}})
    if isinstance(data, dict):
        from veil.parsing.trees import conllu_text

        return _digest({s: conllu_text(list(trees)) for s, trees in sorted(data.items())})
    raise TypeError(f"no content hash for {type(data).__name__}")


def warn_truncated(name: str, texts: list[str], encoder: Any) -> int:
    """Warn (:class:`~veil.errors.DataWarning`) when some of ``texts`` are longer than ``encoder.max_length``
    tokens: the encoder keeps their first tokens only. Returns how many are; checked before any cell, so the
    warning is on the console and not only in the first cell's record."""
    if not texts:
        return 0
    ids = encoder.tokenizer(list(texts), add_special_tokens=True, return_attention_mask=False,
                            return_token_type_ids=False, verbose=False)["input_ids"]
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(texts))
    limit = int(encoder.max_length)
    over = int((lengths > limit).sum())
    if over:
        warnings.warn(f"{over} of {len(texts)} texts of {name} are longer than {limit} tokens (the longest has "
                      f"{int(lengths.max())}); the encoder reads only their first {limit} tokens: split long texts "
                      "into shorter rows (or documents of sentences; CLI: --documents-column) to measure all of them",
                      DataWarning, stacklevel=2)
    return over
