"""The neural obfuscator of Hu et al. 2020 (Sec. 3-4): a BiLSTM that samples each hidden word's substitute from a
learned distribution over its tag's public words, trained through the frozen target parser.

Model (Sec. 3.1-3.2): a BiLSTM reads the client's sentence (the frozen parser's word, POS-tag, prefix, suffix and
shape embeddings, copied); each position whose Penn tag ``t`` is hidden at the level (:mod:`.spectrum`) gets
``p_y = softmax(w_{t,y} . h_i)`` over ``V_t`` (words seen with ``t`` in the training text) with the original's
logit masked (compared case-insensitively): the original is never chosen (Eq. 2). Other words are kept.

Training (Sec. 4): the parser's parameters never change and get no gradient (``requires_grad`` off, eval mode,
both restored afterwards). Each hidden word is drawn by straight-through Gumbel-softmax: the parser reads the hard
sample; gradients flow through the relaxed mixture of the candidates' parser inputs
(:meth:`~veil.models.biaffine.BiaffineParser.mix_inputs`); the temperature falls geometrically from 1 to 0.5
over the budget. Loss: the parser's arc plus label cross-entropy against its own parse of the ORIGINAL sentence
(the paper's footnote 3; veil has no gold trees) minus ``privacy_weight * H(p)`` (mean over hidden positions).
Kept: the network with the best parser UAS on obfuscated dev sentences (fixed draws; against the dev trees).

Release (:class:`NeuralObfuscator`): substitutes are SAMPLED from ``p`` (inverse CDF) with the secret randomness:
``rng=None`` (default) reads the OS CSPRNG (:func:`veil.random.secure_uniform`); an int seed is for experiments
and warns (:class:`~veil.errors.PrivacyLeakWarning`). Same interface and key as ``RandomSubstitution``.

Departures from the paper and the authors' code (recorded with the results):

* ``V_t`` is capped at the ``max_candidates`` (K, default 2,000) most frequent words of the tag in the training
  text (the paper: every type of the tag, ~28k for NNP here);
* a 1 x 128 BiLSTM (not 3 x 512) over the parser's own input embeddings (copied and frozen unless
  ``tune_embeddings``; subword features instead of a character CNN); heads start at zero, so training starts
  from the uniform (random-substitution) distribution over the capped ``V_t``;
* the parser's subword embeddings of the candidates are mixed with the same probabilities as its word
  embeddings (the authors feed the hard sample's characters, with no gradient);
* targets are the parser's greedy (argmax) heads and labels of the original (its decoded tree whenever the
  argmax is a tree); the parser runs in eval mode (no dropout);
* minutes on a subsample of the training split, not days of epochs; the temperature follows the budget (the
  code's ``max(0.5, exp(-1e-5 step))`` would not move in ~1,000 steps);
* ``privacy_weight`` (lambda >= 0, an entropy bonus; default 0 = the paper's final model).

Guarantee: none (heuristic), as for random substitution.
"""

from __future__ import annotations

import io
import json
import math
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from veil.defenses.base import Guarantee, ObfuscatedTextDefense
from veil.validation import check_choice, seeded_rng
from veil.defenses.obfuscation.random_substitution import ObfuscationKey, Obfuscated, check_tagged_sentence
from veil.defenses.obfuscation.spectrum import DEFAULT_SPECTRUM
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError

__all__ = ["ObfuscatorConfig", "NeuralTraining", "ObfuscatorNet", "NeuralObfuscator", "frequent_candidates",
           "train_obfuscator"]


def _check(name: str, value: Any, kind: type | tuple[type, ...], ok: bool, rule: str) -> None:
    if isinstance(value, bool) or not isinstance(value, kind):
        raise InvalidTypeError(f"{name} must be {rule}, got {type(value).__name__}")
    if not ok:
        raise InvalidParameterError(f"{name} must be {rule}, got {value!r}")


class _Config:
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]


@dataclass(frozen=True)
class ObfuscatorConfig(_Config):
    """The network: the level it obfuscates, the cap K on each ``V_t``, the BiLSTM's sizes."""

    level: str = "P3"
    max_candidates: int = 2000
    hidden: int = 128
    layers: int = 1
    dropout: float = 0.2
    tune_embeddings: bool = False

    def __post_init__(self) -> None:
        check_choice("level", self.level, DEFAULT_SPECTRUM.levels)
        _check("max_candidates", self.max_candidates, int, self.max_candidates >= 2, "an int >= 2")
        for name in ("hidden", "layers"):
            _check(name, getattr(self, name), int, getattr(self, name) >= 1, "an int >= 1")
        _check("dropout", self.dropout, (int, float), 0 <= self.dropout < 1, "a number in [0, 1)")
        if not isinstance(self.tune_embeddings, bool):
            raise InvalidTypeError("tune_embeddings must be a bool")


@dataclass(frozen=True)
class NeuralTraining(_Config):
    """How the network is trained: budget, subsample, temperature schedule, the privacy knob, the (public) seed
    of initialisation, batch order and Gumbel noise."""

    max_train: int | None = 20000
    dev_sentences: int = 400
    batch_size: int = 64
    lr: float = 2e-3
    max_minutes: float = 4.0
    max_epochs: int = 5
    eval_every: int = 50
    patience: int = 6
    tau_start: float = 1.0
    tau_end: float = 0.5
    privacy_weight: float = 0.0
    seed: int = 0
    threads: int = 1
    #: a cap on the optimiser steps: the budget, the same on a busy or an idle machine (the temperature anneals over
    #: it, and ``max_minutes`` is only a safety cap that marks a run cut short). None: the minute budget of earlier
    #: obfuscators (anneal over minutes or epochs), and left out of to_dict (their cache keys stay)
    max_steps: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.max_steps is None:
            del out["max_steps"]
        return out

    def __post_init__(self) -> None:
        if self.max_steps is not None:
            _check("max_steps", self.max_steps, int, self.max_steps >= 1, "None or an int >= 1")
        if self.max_train is not None:
            _check("max_train", self.max_train, int, self.max_train >= 1, "None or an int >= 1")
        for name in ("dev_sentences", "batch_size", "max_epochs", "eval_every", "patience", "threads"):
            _check(name, getattr(self, name), int, getattr(self, name) >= 1, "an int >= 1")
        _check("seed", self.seed, int, self.seed >= 0, "an int >= 0")
        finite = (lambda v: isinstance(v, (int, float)) and math.isfinite(v))
        for name in ("lr", "max_minutes", "tau_start", "tau_end"):
            v = getattr(self, name)
            _check(name, v, (int, float), finite(v) and v > 0, "a finite number > 0")
        _check("privacy_weight", self.privacy_weight, (int, float),
               finite(self.privacy_weight) and self.privacy_weight >= 0, "a finite number >= 0")


def frequent_candidates(sentences: Iterable[tuple[Sequence[str], Sequence[str]]], tags: Iterable[str],
                        k: int) -> dict[str, tuple[str, ...]]:
    """Tag -> its ``k`` most frequent word types (lower-cased types, first spelling seen; ties by the word)."""
    want = set(tags)
    counts: dict[str, Counter[str]] = {t: Counter() for t in want}
    spelling: dict[tuple[str, str], str] = {}
    for words, ts in sentences:
        for w, t in zip(words, ts):
            if t in want:
                counts[t][w.lower()] += 1
                spelling.setdefault((t, w.lower()), w)
    return {t: tuple(spelling[(t, w)] for w, _ in sorted(c.items(), key=lambda x: (-x[1], x[0]))[:k])
            for t, c in sorted(counts.items()) if c}


class ObfuscatorNet(nn.Module):
    """The network: a BiLSTM over the parser's input features (``vocab``: a ParserVocab; ``sizes``: the parser's
    embedding sizes) and one head ``(K_t, 2H)`` per hidden tag over its ``candidates``."""

    def __init__(self, vocab: Any, sizes: Mapping[str, int], candidates: Mapping[str, Sequence[str]],
                 config: ObfuscatorConfig) -> None:
        from veil.models.biaffine import PAD

        super().__init__()
        self.vocab, self.sizes, self.config = vocab, dict(sizes), config
        self.candidates = {t: tuple(c) for t, c in sorted(candidates.items())}
        self.index = {t: {w.lower(): i for i, w in enumerate(c)} for t, c in self.candidates.items()}
        s = self.sizes
        self.word = nn.Embedding(len(vocab.words), s["word_dim"], padding_idx=PAD)
        self.tag = nn.Embedding(len(vocab.tags), s["tag_dim"], padding_idx=PAD)
        self.prefix = nn.Embedding(s["sub_buckets"], s["sub_dim"], padding_idx=PAD)
        self.suffix = nn.Embedding(s["sub_buckets"], s["sub_dim"], padding_idx=PAD)
        self.shape = nn.Embedding(6, 8, padding_idx=PAD)
        self.drop = nn.Dropout(config.dropout)
        self.lstm = nn.LSTM(s["word_dim"] + s["tag_dim"] + 2 * s["sub_dim"] + 8, config.hidden,
                            num_layers=config.layers, batch_first=True, bidirectional=True,
                            dropout=config.dropout if config.layers > 1 else 0.0)
        # zero heads: training starts from the uniform distribution over V_t minus the original
        self.heads = nn.ParameterDict({t: nn.Parameter(torch.zeros(len(c), 2 * config.hidden))
                                       for t, c in self.candidates.items()})
        for emb in (self.word, self.tag, self.prefix, self.suffix, self.shape):
            emb.weight.requires_grad_(config.tune_embeddings)

    def encode(self, batch: Any) -> torch.Tensor:
        """``(B, T, 2H)`` states of a :class:`~veil.models.biaffine.Batch` (row 0 = ROOT)."""
        x = torch.cat([self.word(batch.words), self.tag(batch.tags), self.prefix(batch.prefix),
                       self.suffix(batch.suffix), self.shape(batch.shape)], dim=-1)
        packed = nn.utils.rnn.pack_padded_sequence(self.drop(x), (batch.mask.sum(1) + 1).cpu(), batch_first=True,
                                                   enforce_sorted=False)
        h, _ = nn.utils.rnn.pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=x.shape[1])
        return self.drop(h)

    def logits(self, h: torch.Tensor, tag: str, original: torch.Tensor) -> torch.Tensor:
        """``(n, K_t)`` logits of the rows ``h`` ``(n, 2H)``; ``original`` ``(n,)`` (-1: not a candidate) masked."""
        out = h @ self.heads[tag].T
        rows = (original >= 0).nonzero().squeeze(1)
        return out.index_put((rows, original[rows]), torch.tensor(float("-inf")))


def _plan(net: Any, sentences: Sequence[tuple[Sequence[str], Sequence[str]]]) -> dict[str, tuple[Any, Any, Any]]:
    """Per hidden tag: batch rows, padded positions (ROOT is 0) and the original's candidate index (-1: none)."""
    found: dict[str, tuple[list[int], list[int], list[int]]] = {}
    for i, (words, tags) in enumerate(sentences):
        for j, (w, t) in enumerate(zip(words, tags)):
            if t in net.index:
                rows, cols, orig = found.setdefault(t, ([], [], []))
                rows.append(i)
                cols.append(j + 1)
                orig.append(net.index[t].get(w.lower(), -1))
    return {t: tuple(torch.tensor(v, dtype=torch.long) for v in x) for t, x in found.items()}


def _batch(net: Any, sentences: Sequence[tuple[Sequence[str], Sequence[str]]]) -> Any:
    from veil.models.biaffine import Batch

    return Batch.make(net.vocab, [s[0] for s in sentences], [s[1] for s in sentences], buckets=net.sizes["sub_buckets"])


def _draw(net: Any, sentences: Sequence[tuple[Sequence[str], Sequence[str]]], uniform: Callable[[int], np.ndarray],
          batch_size: int = 128) -> list[Obfuscated]:
    """Sample every sentence's substitutes (inverse CDF of ``p`` with ``uniform``'s draws, taken in sentence and
    position order, so the draws do not depend on batching)."""
    plans = [[j for j, t in enumerate(tags) if t in net.index] for _, tags in sentences]
    u = uniform(sum(map(len, plans)))
    where = {(i, j): k for k, (i, j) in enumerate((i, j) for i, p in enumerate(plans) for j in p)}
    out: list[Any] = [None] * len(sentences)
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i][0]))
    was = net.training
    net.eval()
    with torch.inference_mode():
        for s in range(0, len(order), batch_size):
            chunk = order[s:s + batch_size]
            part = [sentences[i] for i in chunk]
            h = net.encode(_batch(net, part))
            picks: dict[tuple[int, int], str] = {}
            for tag, (rows, cols, orig) in _plan(net, part).items():
                p = net.logits(h[rows, cols], tag, orig).softmax(-1).double().numpy()
                cdf = np.cumsum(p, axis=1)
                r = rows.numpy()
                v = u[[where[(chunk[b], c - 1)] for b, c in zip(r, cols.numpy())]]
                # the first index whose cdf exceeds the draw: never a zero-probability word (the original), as
                # equal cdf values cannot straddle it; past the end (rounding) -> the last word of positive p
                j = (cdf <= (v * cdf[:, -1])[:, None]).sum(1)
                j = np.minimum(j, p.shape[1] - 1 - np.argmax(p[:, ::-1] > 0, axis=1))
                for b, c, k in zip(r, cols.numpy(), j):
                    picks[(chunk[b], c - 1)] = net.candidates[tag][k]
            for i in chunk:
                words, tags = sentences[i]
                new = [picks.get((i, j), w) for j, w in enumerate(words)]
                key = ObfuscationKey(tuple(plans[i]), tuple(words[j] for j in plans[i]))
                out[i] = Obfuscated(tuple(new), tuple(tags), key)
    net.train(was)
    return out


def _serialise(net: Any) -> tuple[bytes, dict[str, Any]]:
    buf = io.BytesIO()
    torch.save({"state": net.state_dict()}, buf)
    meta = {"format": "veil-neural-obfuscator/1", "config": net.config.to_dict(), "sizes": net.sizes,
            "candidates": {t: list(c) for t, c in net.candidates.items()}, "vocab": net.vocab.to_dict()}
    return buf.getvalue(), meta


def _fingerprint(weights: bytes, meta: Mapping[str, Any]) -> str:
    import hashlib

    from veil._io import sha256_text

    return sha256_text(hashlib.sha256(weights).hexdigest() + json.dumps(meta, sort_keys=True))


class NeuralObfuscator(ObfuscatedTextDefense):
    """Sample each hidden word's substitute from a trained network (see the module docstring).

    ``network``: from :func:`train_obfuscator` or :meth:`load`; ``rng``: None (OS CSPRNG, the default) or an int
    seed (experiments only; warns); ``summary``: the training summary, recorded in :meth:`config`.
    """

    name = "obfuscation-neural"
    guarantee: Guarantee = Guarantee("none", "heuristic (no formal guarantee): replaced words are sampled from a "
                                             "learned distribution over public same-tag words that keeps the parse; "
                                             "the context still leaks")
    citation = "Hu et al. 2020, privacy-preserving parsing: the neural obfuscator"
    tasks = ("dependency-parsing",)
    paper_attack = "word-recovery-trained"  # Hu et al. 2020, Sec. 5.2: an attacker trained on its own obfuscations

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        """Two levels of the POS spectrum (Hu et al. 2020, Table 1): P3 and P5, in the full bench only: each
        obfuscator trains through the biaffine parser (``veil parse train``, about 45 minutes once) for about 4
        minutes, more than the whole quick bench."""
        return [] if quick else [{"level": "P3"}, {"level": "P5"}]

    @classmethod
    def bench_make(cls, setting: dict[str, Any], data: Any, rng: Any = None, **options: Any) -> "NeuralObfuscator":
        """The obfuscator of ``setting["level"]`` from its trained ``network`` (an option: the bench trains it,
        or loads it from its cache, through the target parser) drawing with ``rng``."""
        network = options.get("network")
        if network is None:
            raise InvalidParameterError("the neural obfuscator's bench_make needs network= (a trained ObfuscatorNet)")
        return cls(network=network, rng=rng)

    def __init__(self, *, network: ObfuscatorNet, rng: Any = None, summary: Mapping[str, Any] | None = None) -> None:
        if not isinstance(network, ObfuscatorNet):
            raise InvalidTypeError("network must be an obfuscator network (train_obfuscator or NeuralObfuscator.load)")
        self.network, self.level = network, network.config.level
        self.hidden = DEFAULT_SPECTRUM.hidden_tags(self.level)
        self.summary = dict(summary or {})
        self._rng = seeded_rng(rng, "NeuralObfuscator", "substitutions")
        self._fp: str | None = None

    @property
    def fingerprint(self) -> str:
        """sha256 of the weights, sizes, candidates and vocabulary: which network made a result."""
        if self._fp is None:
            self._fp = _fingerprint(*_serialise(self.network))
        return self._fp

    def config(self) -> dict[str, Any]:
        net = self.network
        return {**super().config(), "level": self.level, "hidden_tags": sorted(self.hidden),
                "network": net.config.to_dict(), "max_candidates": net.config.max_candidates,
                "privacy_weight": self.summary.get("training", {}).get("privacy_weight"),
                "vocabulary_sizes": {t: len(c) for t, c in net.candidates.items()}, "fingerprint": self.fingerprint,
                "training": {k: v for k, v in self.summary.items() if k != "history"}}

    def _uniform(self, n: int) -> np.ndarray:
        from veil.random import secure_uniform

        return secure_uniform(n) if self._rng is None else self._rng.random(n)

    def obfuscate(self, words: Sequence[str], tags: Sequence[str]) -> Obfuscated:
        """The obfuscated sentence: same length, same tags; hidden-tag words replaced (never by themselves)."""
        return self.transform([(words, tags)])[0]

    def transform(self, sentences: Iterable[tuple[Sequence[str], Sequence[str]]]) -> list[Obfuscated]:
        """:meth:`obfuscate` for each ``(words, tags)`` pair (batched; the same draws as one by one)."""
        return _draw(self.network, [check_tagged_sentence(w, t) for w, t in sentences], self._uniform)

    def save(self, path: str | os.PathLike) -> Path:
        """``path`` (.pt: the state dict) and ``path.json`` (config, sizes, candidates, vocabulary, summary,
        fingerprint), each written atomically; the JSON last, so it never names weights that are not there."""
        from veil._io import atomic_write, atomic_write_json

        path = Path(path)
        weights, meta = _serialise(self.network)
        with atomic_write(path, "wb") as fh:
            fh.write(weights)
        atomic_write_json(path.with_suffix(".json"), {**meta, "fingerprint": _fingerprint(weights, meta),
                                                      "summary": self.summary})
        return path

    @classmethod
    def load(cls, path: str | os.PathLike, *, rng: Any = None) -> "NeuralObfuscator":
        """The obfuscator :meth:`save` wrote (its fingerprint checked); a missing, empty, damaged or foreign file
        (or .json) is a typed error naming it."""
        from veil._io import read_json
        from veil.errors import CacheCorruptError, DataFormatError, ResourceMissingError
        from veil.models.biaffine import ParserVocab
        from veil.models.files import load_tensors

        path = Path(path)
        what = "the neural obfuscator"
        fix = "train one with `veil parse obfuscator train` (it writes the .pt and its .json) and pass that file"
        if not path.is_file() or not path.with_suffix(".json").is_file():
            raise ResourceMissingError(f"{what} {path} (and its .json)", "veil parse obfuscator train",
                                       message=f"{what} {path} or its {path.with_suffix('.json').name} does not "
                                               f"exist; {fix}")
        meta = read_json(path.with_suffix(".json"), what=f"{what}'s description", fix=fix)
        weights = path.read_bytes()
        if not isinstance(meta, dict) or meta.get("format") != "veil-neural-obfuscator/1":
            raise DataFormatError(f"{path.with_suffix('.json')} is not the description of a neural obfuscator veil "
                                  f"wrote; {fix}")
        if _fingerprint(weights, {k: meta.get(k) for k in ("format", "config", "sizes", "candidates", "vocab")}) \
                != meta.get("fingerprint"):
            raise CacheCorruptError(f"neural obfuscator {path}", "its weights do not match its .json",
                                    "veil parse obfuscator train --force")
        blob = load_tensors(weights, what=what, fix=fix, keys=("state",), name=path)
        try:
            net = ObfuscatorNet(ParserVocab(**meta["vocab"]), meta["sizes"], meta["candidates"],
                                ObfuscatorConfig(**meta["config"]))
            net.load_state_dict(blob["state"])
        except (TypeError, ValueError, KeyError, RuntimeError) as exc:
            raise DataFormatError(f"{what} {path} does not hold an obfuscator veil can rebuild "
                                  f"({type(exc).__name__}); {fix}") from None
        net.eval()
        return cls(network=net, rng=rng, summary=meta.get("summary", {}))


def _dev_uas(net: Any, parser: Any, dev: Sequence[Any], seed: int) -> float:
    """UAS (%, every word) of ``parser`` on ``dev`` obfuscated by ``net`` (fixed draws), against dev's trees."""
    from veil.models.biaffine import Batch

    rng = np.random.default_rng(seed)
    obf = _draw(net, [(t.words, t.tags) for t in dev], rng.random)
    right = total = 0
    for s in range(0, len(dev), 64):
        part = list(range(s, min(s + 64, len(dev))))
        batch = Batch.make(parser.vocab, [obf[i].words for i in part], [dev[i].tags for i in part],
                           buckets=parser.config.sub_buckets)
        for i, (heads, _) in zip(part, parser.predict(batch)):
            right += int(np.sum(np.asarray(heads) == np.asarray(dev[i].heads)))
            total += len(heads)
    return 100.0 * right / max(total, 1)


def train_obfuscator(parser: Any, train: Sequence[Any], dev: Sequence[Any], *, config: ObfuscatorConfig =
                     ObfuscatorConfig(), training: NeuralTraining = NeuralTraining(),
                     log: Callable[[str], None] = print) -> NeuralObfuscator:
    """Train a network through the frozen ``parser`` (a BiaffineParser) on ``train`` trees (``words``, ``tags``;
    every one counts for ``V_t``, a subsample of ``max_train`` is trained on), select it on ``dev`` trees
    (``heads`` too); returns it as a :class:`NeuralObfuscator` drawing from the OS CSPRNG, with the summary.

    torch's global generator is forked (seeded with ``training.seed``) and restored; the parser's parameters and
    mode are restored afterwards and never updated."""
    from veil._threads import torch_threads

    if not isinstance(config, ObfuscatorConfig) or not isinstance(training, NeuralTraining):
        raise InvalidTypeError("config must be an ObfuscatorConfig and training a NeuralTraining")
    if not train or not dev:
        raise DataFormatError("train and dev must hold trees (the obfuscator learns and is selected on them)")
    flags, was = [p.requires_grad for p in parser.parameters()], parser.training
    parser.requires_grad_(False)
    parser.eval()
    try:
        with torch_threads(training.threads), torch.random.fork_rng(devices=[]):
            torch.manual_seed(training.seed)
            return _train(parser, train, dev, config, training, log)
    finally:
        for p, f in zip(parser.parameters(), flags):
            p.requires_grad_(f)
        parser.train(was)


def _train(parser: Any, train: Sequence[Any], dev: Sequence[Any], config: ObfuscatorConfig, tr: NeuralTraining,
           log: Callable[[str], None]) -> NeuralObfuscator:
    hidden = DEFAULT_SPECTRUM.hidden_tags(config.level)
    cands = frequent_candidates(((t.words, t.tags) for t in train), hidden, config.max_candidates)
    few = sorted(t for t, c in cands.items() if len({w.lower() for w in c}) < 2)
    if few:
        raise InvalidParameterError(f"the training text has only one word for tags {few}, so a substitute that "
                                    "differs from it cannot be drawn; train on more text")
    pc = parser.config
    sizes = {"word_dim": pc.word_dim, "tag_dim": pc.tag_dim, "sub_dim": pc.sub_dim, "sub_buckets": pc.sub_buckets}
    net = ObfuscatorNet(parser.vocab, sizes, cands, config)
    with torch.no_grad():
        for part in ("word", "tag", "prefix", "suffix", "shape"):  # the parser's input embeddings, copied
            getattr(net, part).weight.copy_(getattr(parser, part).weight)
    ids = {t: parser.word_ids(c) for t, c in cands.items()}
    tag_id = {t: parser.vocab.tag_id(t) for t in cands}
    rng = np.random.default_rng(tr.seed)
    if tr.max_train is not None and tr.max_train > len(train):
        log(f"veil: warning: max_train {tr.max_train} is more than the {len(train)} training sentences; using all "
            f"{len(train)}")
    pool = list(train) if tr.max_train is None else [train[i] for i in rng.permutation(len(train))[:tr.max_train]]
    dev = list(dev)[:tr.dev_sentences]
    gen = torch.Generator().manual_seed(tr.seed)
    params = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=tr.lr, betas=(0.9, 0.9))
    first = _dev_uas(net, parser, dev, tr.seed + 1)
    best = {"uas": first, "state": {k: v.clone() for k, v in net.state_dict().items()}}
    history: list[dict[str, Any]] = [{"step": 0, "minutes": 0.0, "dev_uas": round(first, 2)}]

    def evaluate(step: int, epoch: int, minutes: float, tau: float, loss: float) -> bool:
        uas = _dev_uas(net, parser, dev, tr.seed + 1)
        improved = uas > best["uas"]
        if improved:
            best.update(uas=uas, state={k: v.clone() for k, v in net.state_dict().items()})
        history.append({"step": step, "epoch": epoch, "minutes": round(minutes, 2), "tau": round(tau, 3),
                        "loss": round(loss, 4), "dev_uas": round(uas, 2)})
        log(f"step {step} epoch {epoch} {minutes:.1f} min tau {tau:.2f} loss {loss:.3f} dev UAS {uas:.2f}"
            f"{' (best)' if improved else ''}")
        return improved

    log(f"training a {config.level} obfuscator on {len(pool)} sentences (dev {len(dev)}); V_t capped at "
        f"{config.max_candidates}: {sum(map(len, cands.values()))} candidates over {len(cands)} tags; dev UAS at "
        f"the start (uniform over V_t) {first:.2f}")
    bad, step, epoch, stopped = 0, 0, 0, "epochs"
    start, done, tau, loss = time.monotonic(), False, tr.tau_start, torch.tensor(0.0)
    while epoch < tr.max_epochs and not done:
        order = sorted(rng.permutation(len(pool)), key=lambda i: len(pool[i]) // 5)  # similar lengths per batch
        chunks = [order[s:s + tr.batch_size] for s in range(0, len(order), tr.batch_size)]
        net.train()
        for n_chunk, chunk in enumerate(rng.permutation(len(chunks))):
            part = [(pool[i].words, pool[i].tags) for i in chunks[chunk]]
            batch = _batch(net, part)
            with torch.no_grad():
                arc, ld, lh = parser(batch)
                heads = arc.argmax(-1)
                labels = parser.label_scores(ld, lh, heads).argmax(-1)
                x = parser.embed(batch)
            if tr.max_steps is not None:  # anneal over the step budget: the same schedule on any machine
                progress = step / tr.max_steps
            else:
                progress = max((time.monotonic() - start) / 60 / tr.max_minutes, (epoch + n_chunk / len(chunks)) /
                               tr.max_epochs)
            tau = tr.tau_start * (tr.tau_end / tr.tau_start) ** min(1.0, progress)
            h, ent, n_ent = net.encode(batch), torch.tensor(0.0), 0
            for tag, (rows, cols, orig) in _plan(net, part).items():
                logp = net.logits(h[rows, cols], tag, orig).log_softmax(-1)
                g = -torch.log(-torch.log(torch.rand(logp.shape, generator=gen).clamp(1e-10, 1 - 1e-7)))
                soft = ((logp + g) / tau).softmax(-1)
                hard = nn.functional.one_hot(soft.argmax(-1), soft.shape[-1]).to(soft.dtype)
                y = hard - soft.detach() + soft  # straight-through: the parser reads the hard sample
                x = x.index_put((rows, cols), parser.mix_inputs(y, ids[tag], torch.full_like(rows, tag_id[tag])))
                ent = ent - (logp.exp() * logp.masked_fill(torch.isinf(logp), 0.0)).sum()
                n_ent += len(rows)
            arc, ld, lh = parser(batch, inputs=x)
            m = batch.mask
            loss = nn.functional.cross_entropy(arc[m], heads[m]) + nn.functional.cross_entropy(
                parser.label_scores(ld, lh, heads)[m], labels[m])
            if tr.privacy_weight > 0 and n_ent:
                loss = loss - tr.privacy_weight * ent / n_ent
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(params, 5.0)
            opt.step()
            step += 1
            minutes = (time.monotonic() - start) / 60
            capped = tr.max_steps is not None and step >= tr.max_steps
            if step % tr.eval_every == 0 or minutes > tr.max_minutes or capped:
                bad = 0 if evaluate(step, epoch, minutes, tau, loss.item()) else bad + 1
                net.train()
                if bad >= tr.patience or minutes > tr.max_minutes or capped:
                    stopped = ("flattened" if bad >= tr.patience else "steps" if capped else
                               "budget (cut short)" if tr.max_steps is not None else "budget")
                    done = True
                    break
        else:
            epoch += 1
    if history[-1]["step"] != step:  # the epochs ran out between evaluations
        evaluate(step, epoch, (time.monotonic() - start) / 60, tau, loss.item())
    net.load_state_dict(best["state"])
    net.eval()
    summary = {"best_dev_uas": round(best["uas"], 2), "start_dev_uas": round(first, 2), "steps": step,
               "stopped": stopped, "epochs": epoch, "minutes": round((time.monotonic() - start) / 60, 2),
               "train_sentences": len(pool),
               "dev_sentences": len(dev), "final_tau": round(tau, 3), "config": config.to_dict(),
               "training": tr.to_dict(), "history": history}
    return NeuralObfuscator(network=net, summary=summary)

