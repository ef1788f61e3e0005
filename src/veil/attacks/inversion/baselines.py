"""The two baselines every inversion number is set against (Morris et al. 2023, Vec2Text, Table 1, whose rows
include a bag-of-words predictor and GEIA's decoder; Li et al. 2023, GEIA, whose attack the inverter follows).

Both see only the released vectors and public data, never the private texts and never an index of them:

* :class:`NearestPublic`: answer each vector with the public sentence whose public-encoder vector has the highest
  cosine with it (exact search, :class:`veil.attacks.retrieval.SimilaritySearch`: chunked float32 candidates
  re-scored in float64, ties to the lowest index). What an attacker with the inverter's training corpus gets
  without training anything: it can only ever output a public sentence.
* :class:`BagOfWords`: a linear map from the vector to the presence of each of the ``vocab_size`` most frequent
  public words (one ``Linear(d, V)``, binary cross-entropy with logits, Adam), trained on public (vector, text)
  pairs; its output is a bag of words, not a sentence.

Departures from Vec2Text's bag-of-words row: it predicts over the ``vocab_size`` most frequent word tokens of the
public sentences (:func:`veil.models.inverter.word_tokens`), not the T5 tokenizer's vocabulary; its weights start
at zero and its biases at the logit of each word's share of public sentences (so step 0 is the "most frequent
words" guess and the learning curve starts from it; the loss is convex, so the start costs nothing); it outputs
``round(sum of its probabilities)`` words (the expected number of distinct vocabulary words) rather than a fixed
count; training stops early on its held-out token F1.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from veil.attacks.base import Attack, Observation, ThreatModel, rng_description
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.random import RngLike
from veil.validation import as_vectors, check_int, check_real, check_rng

__all__ = ["NearestPublic", "BagOfWords", "CITATION"]

CITATION = ("Morris et al. 2023, Text Embeddings Reveal (Almost) As Much As Text (Vec2Text), EMNLP, Table 1 "
            "baselines; Li et al. 2023, Sentence Embedding Leaks More Information than You Expect (GEIA), ACL "
            "Findings")
_OBSERVES = "released vectors only (one per private text; no index of the private texts)"
_PREDICT_ROWS = 1024  # vectors scored at a time by BagOfWords (bounds the (rows, V) probability block)


def _vectors_of(observation: Any) -> Any:
    """The vectors of an :class:`~veil.attacks.base.Observation`, or the array itself."""
    return observation.vectors if isinstance(observation, Observation) else observation


def _public(texts: Any, vectors: Any, encoder: Any, cache: bool, what: str) -> tuple[list[str], np.ndarray]:
    """Validated public texts and their (n, d) vectors (encoded by ``encoder`` when ``vectors`` is None)."""
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
        raise InvalidTypeError(f"texts must be a list of public sentences (str), not {type(texts).__name__}")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise InvalidTypeError(f"texts[{i}] is a {type(t).__name__}, not a str")
    if not texts:
        raise DataFormatError(f"{what} needs public sentences; the public set is empty")
    if (vectors is None) == (encoder is None):
        raise InvalidParameterError(f"{what} needs the public sentences' vectors or the public encoder that makes them "
                               "(exactly one of vectors=, encoder=)")
    if vectors is None:
        from veil.encoders.cache import encode_cached

        vectors = encode_cached(encoder, texts, "public-sentences", what.lower().replace(" ", "-"), cache=cache,
                                progress=False)
    x = as_vectors("vectors", vectors)
    if len(x) != len(texts):
        raise DataFormatError(f"{len(texts)} public sentences but {len(x)} vectors; pass one vector per sentence")
    return texts, np.ascontiguousarray(x, dtype=np.float32)


class NearestPublic(Attack):
    """The nearest public sentence: each released vector answered with the public sentence of highest cosine.

    ``texts``: public sentences (e.g. the inverter's training corpus); ``vectors``: their ``(n, d)`` vectors from
    the public encoder, or ``encoder`` (a :class:`~veil.encoders.TextEncoder`) to encode them (through the
    embedding cache unless ``cache=False``). ``backend``: the search backend (``"auto"``, ``"torch"``,
    ``"faiss"``; the answers are the same). Memory: the public vectors once (200k x 384 float32 is 300 MB) plus
    one bounded block of scores per query chunk. Deterministic (ties go to the earliest public sentence).

    >>> NearestPublic(public_texts, public_vectors).run(released)   # one public sentence per vector
    """

    name: ClassVar[str] = "invert-nearest-public"
    citation: ClassVar[str] = CITATION
    threat: ClassVar[ThreatModel] = ThreatModel(
        observes=_OBSERVES,
        needs=("the public encoder that made the vectors", "public sentences and their public-encoder vectors"))
    observes: ClassVar[str] = "vectors"

    @classmethod
    def bench_applies(cls, defense: str, setting: Any) -> bool:
        return False  # no bench cell yet: `veil attack invert` runs it beside the inverter

    def __init__(self, texts: Sequence[str], vectors: Any = None, *, encoder: Any = None, backend: str = "auto",
                 cache: bool = True) -> None:
        from veil.attacks.retrieval.index import SimilaritySearch

        texts, x = _public(texts, vectors, encoder, cache, "NearestPublic")
        self.index = SimilaritySearch(texts, x, backend=backend, normalize=True)

    @property
    def dim(self) -> int:
        return self.index.dim

    def __len__(self) -> int:
        return len(self.index)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "public_sentences": len(self.index), "index": self.index.config()}

    def run(self, observation: Any) -> list[str]:
        """The public sentence nearest (cosine) to each released vector (an Observation or an ``(n, d)`` array)."""
        x = as_vectors("vectors", _vectors_of(observation), dim=self.dim)
        idx, _ = self.index.query(x, top_k=1)
        return self.index.texts_at(idx[:, 0])


class BagOfWords(Attack):
    """A bag-of-words predictor from the vector: ``Linear(d, V)`` trained with binary cross-entropy to say which
    of the ``vocab_size`` most frequent public words a sentence contains.

    Training (in the constructor): the public pairs are split by ``rng`` into a training part and a held-out dev
    part (``dev_share`` of them, at most ``max_dev``); the vocabulary is the ``vocab_size`` most frequent word
    tokens of the training part (by the number of sentences holding them; ties by the word). Adam at ``lr`` on
    shuffled minibatches of ``batch_size``; every ``eval_every`` steps, at step 0 and at the last step the dev loss
    (binary cross-entropy averaged over sentences and vocabulary words) and the dev token F1 of :meth:`run`'s
    outputs are recorded (:attr:`curve`: step, minutes, dev_loss, dev_token_f1); training stops after ``patience``
    evaluations without a better dev token F1, at ``max_steps``, or after ``max_minutes`` (checked between
    steps), and keeps the weights of the best dev token F1. ``rng`` (int seed, numpy Generator, or None for OS
    entropy) draws the split and the batch order: the attacker's own randomness, not a secret. ``log`` (e.g.
    ``print``), when given, gets one line per evaluation: the step, the dev token F1, the best so far and the
    minutes spent (a fit on the full inverter's public sentences takes many minutes).

    :meth:`run` outputs, per vector, the ``max(1, round(sum of the V probabilities))`` most probable words
    (round half up), joined by spaces in descending probability. It is a BAG, not a sentence: token F1 and
    exact match compare bags, while BLEU and ROUGE-L measure word order and are low by construction.

    >>> BagOfWords(public_texts, public_vectors, rng=0).run(released)
    """

    name: ClassVar[str] = "invert-bag-of-words"
    citation: ClassVar[str] = CITATION
    threat: ClassVar[ThreatModel] = ThreatModel(
        observes=_OBSERVES,
        needs=("the public encoder that made the vectors", "public sentences and their public-encoder vectors "
               "(to train on)"),
        trains=True)
    observes: ClassVar[str] = "vectors"

    @classmethod
    def bench_applies(cls, defense: str, setting: Any) -> bool:
        return False  # no bench cell yet: `veil attack invert` runs it beside the inverter

    def __init__(self, texts: Sequence[str], vectors: Any = None, *, encoder: Any = None, vocab_size: int = 10000,
                 dev_share: float = 0.1, max_dev: int = 2000, batch_size: int = 128, lr: float = 1e-2,
                 max_steps: int = 5000, max_minutes: float = 30.0, eval_every: int = 100, patience: int = 5,
                 rng: RngLike = 0, cache: bool = True, log: Callable[[str], None] | None = None) -> None:
        self.vocab_size = check_int("vocab_size", vocab_size, minimum=1)
        self.dev_share = check_real("dev_share", dev_share, low=0.0, high=1.0, low_open=True, high_open=True)
        self.max_dev = check_int("max_dev", max_dev, minimum=1)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.lr = check_real("lr", lr, low=0.0, high=math.inf, low_open=True, high_open=True)
        self.max_steps = check_int("max_steps", max_steps, minimum=1)
        self.max_minutes = check_real("max_minutes", max_minutes, low=0.0, high=math.inf, low_open=True)
        self.eval_every = check_int("eval_every", eval_every, minimum=1)
        self.patience = check_int("patience", patience, minimum=1)
        check_rng(rng)
        self._rng_desc = rng_description(rng)
        texts, x = _public(texts, vectors, encoder, cache, "BagOfWords")
        if len(texts) < 2:
            raise DataFormatError("BagOfWords needs at least 2 public sentences (a training part and a dev part)")
        self._fit(texts, x, rng, log)

    # ------------------------------------------------------------------ training
    def _fit(self, texts: list[str], x: np.ndarray, rng: RngLike, log: Callable[[str], None] | None = None) -> None:
        import torch

        from veil.models.inverter import word_tokens
        from veil.random import as_generator, torch_generator

        gen = as_generator(rng)
        n = len(texts)
        n_dev = min(self.max_dev, max(1, int(round(self.dev_share * n))), n - 1)
        order = gen.permutation(n)
        dev, train = np.sort(order[:n_dev]), np.sort(order[n_dev:])
        words = [set(word_tokens(texts[i])) for i in range(n)]
        df = Counter(w for i in train for w in words[i])
        vocab = sorted(df, key=lambda w: (-df[w], w))[:self.vocab_size]
        if not vocab:
            raise DataFormatError("the public training sentences hold no word tokens; pass sentences with words")
        self.vocab = tuple(vocab)
        col = {w: j for j, w in enumerate(self.vocab)}
        targets = [np.array(sorted(col[w] for w in words[i] if w in col), dtype=np.int64) for i in range(n)]
        d, V = x.shape[1], len(self.vocab)
        self._dim = d
        share = np.array([df[w] for w in self.vocab], dtype=np.float64)
        prior = (share + 0.5) / (len(train) + 1.0)
        self.linear = torch.nn.Linear(d, V)
        with torch.no_grad():
            self.linear.weight.zero_()
            self.linear.bias.copy_(torch.from_numpy(np.log(prior / (1.0 - prior))).float())
        tgen = torch_generator(gen)
        opt = torch.optim.Adam(self.linear.parameters(), lr=self.lr)
        X = torch.from_numpy(x)

        def batch_targets(rows: np.ndarray) -> torch.Tensor:
            y = torch.zeros(len(rows), V)
            for r, i in enumerate(rows):
                y[r, torch.from_numpy(targets[i])] = 1.0
            return y

        dev_texts = [texts[i] for i in dev]
        self.curve: list[dict[str, float]] = []
        best = (-math.inf, 0, {k: v.clone() for k, v in self.linear.state_dict().items()})
        since, step, stop = 0, 0, ""
        start = time.perf_counter()
        perm = torch.randperm(len(train), generator=tgen).numpy()
        pos = 0

        def evaluate() -> float:
            from veil.models.inverter import mean_token_f1

            with torch.no_grad():
                loss = sum(float(torch.nn.functional.binary_cross_entropy_with_logits(
                    self.linear(X[dev[s:s + _PREDICT_ROWS]]), batch_targets(dev[s:s + _PREDICT_ROWS]),
                    reduction="sum")) for s in range(0, len(dev), _PREDICT_ROWS)) / (len(dev) * V)
            f1 = mean_token_f1(dev_texts, self._bags(x[dev]))
            self.curve.append({"step": step, "minutes": round((time.perf_counter() - start) / 60.0, 4),
                               "dev_loss": loss, "dev_token_f1": f1})
            return f1

        while True:
            out_of_steps = step >= self.max_steps
            last = out_of_steps or (time.perf_counter() - start) / 60.0 >= self.max_minutes
            if step % self.eval_every == 0 or last:  # the last weights are always evaluated
                f1 = evaluate()
                if f1 > best[0]:
                    best, since = (f1, step, {k: v.clone() for k, v in self.linear.state_dict().items()}), 0
                else:
                    since += 1
                if log is not None:
                    log(f"bag of words: step {step:,}/{self.max_steps:,}, dev token F1 {f1:.2f} (best {best[0]:.2f} "
                        f"at step {best[1]:,}; {since}/{self.patience} evaluations without a gain), "
                        f"{(time.perf_counter() - start) / 60.0:.1f} min" + _left(start, step, self.max_steps))
                if since >= self.patience:
                    stop = "patience"
                    break
            if last:
                stop = "max_steps" if out_of_steps else "max_minutes"
                break
            if pos + self.batch_size > len(perm):
                perm, pos = torch.randperm(len(train), generator=tgen).numpy(), 0
            rows = train[perm[pos:pos + self.batch_size]]
            pos += self.batch_size
            loss = torch.nn.functional.binary_cross_entropy_with_logits(self.linear(X[rows]), batch_targets(rows))
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
        self.linear.load_state_dict(best[2])
        self.linear.eval()
        self.selected_step, self.steps, self.stopped = int(best[1]), step, stop
        self.train_sentences, self.dev_sentences = len(train), len(dev)
        self.minutes = (time.perf_counter() - start) / 60.0

    # ------------------------------------------------------------------ saving
    #: bumped whenever the fit changes, so a file fitted by other code is not read as this one
    FORMAT: ClassVar[int] = 1
    _SETTINGS: ClassVar[tuple[str, ...]] = ("vocab_size", "dev_share", "max_dev", "batch_size", "lr", "max_steps",
                                            "max_minutes", "eval_every", "patience", "_rng_desc", "_dim",
                                            "selected_step", "steps", "stopped", "train_sentences", "dev_sentences",
                                            "minutes")

    def save(self, path: str | os.PathLike) -> Path:
        """Write the fitted predictor (weights, vocabulary, settings, learning curve: public material only)
        atomically to one file that records the sha256 of its contents, which :meth:`load` checks."""
        import torch

        from veil._io import atomic_write
        from veil.defenses.sentdp.pipeline import state_sha256

        state: dict[str, Any] = {"format": self.FORMAT, "weight": self.linear.weight.detach().clone(),
                                 "bias": self.linear.bias.detach().clone(), "vocab": list(self.vocab),
                                 "settings": {k: getattr(self, k) for k in self._SETTINGS},
                                 "curve": [dict(r) for r in self.curve]}
        state["sha256"] = state_sha256(state)
        path = Path(path)
        with atomic_write(path, "wb") as fh:
            torch.save(state, fh)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> "BagOfWords":
        """Read a file written by :meth:`save`. A file that is not one, was written by another format, or whose
        contents do not match its recorded sha256 raises :class:`~veil.errors.CacheCorruptError` (nothing of it
        is used)."""
        import torch

        from veil.defenses.sentdp.pipeline import state_sha256
        from veil.errors import CacheCorruptError

        path = Path(path)
        fix = f"rm {path}, then run again (it is refitted from public data)"
        try:
            state = torch.load(path, weights_only=True)
        except Exception as exc:  # noqa: BLE001 - any unpickling failure is a bad file
            raise CacheCorruptError(f"saved bag-of-words predictor {path}",
                                    f"it cannot be read ({type(exc).__name__})", fix) from None
        if not isinstance(state, dict) or state.get("format") != cls.FORMAT:
            raise CacheCorruptError(f"saved bag-of-words predictor {path}",
                                    f"it is not format {cls.FORMAT} of a saved BagOfWords", fix)
        recorded = state.pop("sha256", None)
        if recorded != state_sha256(state):
            raise CacheCorruptError(f"saved bag-of-words predictor {path}",
                                    "its contents do not match the sha256 it records", fix)
        import torch.nn

        self = cls.__new__(cls)
        for k, v in state["settings"].items():
            setattr(self, k, v)
        self.vocab = tuple(state["vocab"])
        self.curve = [dict(r) for r in state["curve"]]
        self.linear = torch.nn.Linear(state["weight"].shape[1], state["weight"].shape[0])
        with torch.no_grad():
            self.linear.weight.copy_(state["weight"])
            self.linear.bias.copy_(state["bias"])
        self.linear.eval()
        return self

    # ------------------------------------------------------------------ inference
    @property
    def dim(self) -> int:
        return self._dim

    def probabilities(self, observation: Any) -> np.ndarray:
        """The predicted probability of each vocabulary word per vector, float32 ``(n, V)``."""
        x = as_vectors("vectors", _vectors_of(observation), dim=self.dim)
        return np.concatenate([self._probs(x[s:s + _PREDICT_ROWS]) for s in range(0, len(x), _PREDICT_ROWS)])

    def _probs(self, x: np.ndarray) -> np.ndarray:
        import torch

        with torch.no_grad():
            return torch.sigmoid(self.linear(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)))).numpy()

    def _bags(self, x: np.ndarray) -> list[str]:
        out: list[str] = []
        for s in range(0, len(x), _PREDICT_ROWS):
            p = self._probs(x[s:s + _PREDICT_ROWS])
            ks = np.maximum(1, np.floor(p.astype(np.float64).sum(axis=1) + 0.5).astype(np.int64))
            ks = np.minimum(ks, p.shape[1])
            for row, k in zip(p, ks):
                top = np.argpartition(-row, k - 1)[:k] if k < len(row) else np.arange(len(row))
                top = top[np.lexsort((top, -row[top]))]  # descending probability, ties by vocabulary rank
                out.append(" ".join(self.vocab[j] for j in top))
        return out

    def run(self, observation: Any) -> list[str]:
        """Per released vector (an Observation or an ``(n, d)`` array) the bag of its most probable words."""
        x = as_vectors("vectors", _vectors_of(observation), dim=self.dim)
        return self._bags(np.ascontiguousarray(x, dtype=np.float32))

    def config(self) -> dict[str, Any]:
        """Settings, data sizes, where training stopped and the learning curve (JSON-ready)."""
        return {**super().config(), "vocab_size": self.vocab_size, "vocabulary": len(self.vocab),
                "dev_share": self.dev_share, "max_dev": self.max_dev, "batch_size": self.batch_size, "lr": self.lr,
                "max_steps": self.max_steps, "max_minutes": self.max_minutes, "eval_every": self.eval_every,
                "patience": self.patience, "rng": self._rng_desc, "train_sentences": self.train_sentences,
                "dev_sentences": self.dev_sentences, "dim": self.dim, "steps": self.steps,
                "selected_step": self.selected_step, "stopped": self.stopped, "minutes": round(self.minutes, 4),
                "curve": [dict(r) for r in self.curve]}


def _left(start: float, step: int, max_steps: int) -> str:
    """``; at most about N min more at this rate`` from the steps done since ``start`` (blank before the first
    step and at the cap)."""
    if step <= 0 or step >= max_steps:
        return ""
    rate = step / max(time.perf_counter() - start, 1e-9)
    return f"; at most about {(max_steps - step) / rate / 60.0:.0f} min more at this rate (less if it stops early)"
