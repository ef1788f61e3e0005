"""Word-recovery attackers on veil's own masked LM (:mod:`veil.models.mlm`): zero-shot and fine-tuned.

Both rank every CANDIDATE word at each obfuscated position. The candidates are every lower-cased word of the
attacker's public tagged text (:class:`CandidateWords`; no frequency cap): random substitution draws its
substitutes from the same public vocabulary, so the candidates cover whatever the obfuscator can emit, and a true
word outside them cannot be ranked at all (rank 0, a miss; ``coverage`` in the scores says how many can). The
released POS tag enters as ``log p(tag | word)`` counted on the public text (add-one smoothing towards the tag's
overall share): by Bayes, p(word | context, tag) is proportional to p(word | context) p(tag | word) when the
tag adds nothing about the word beyond the context.

* :class:`ZeroShotMLMAttacker` (``word-recovery-veil-mlm``) learns nothing from obfuscations: each obfuscated
  word is replaced by k ``[MASK]`` tokens, once for each k = 1..``max_pieces``, and a candidate of k subwords
  scores the sum of its subwords' log-probabilities at those k masks (whole-word masking, as the model was
  trained). A candidate longer than ``max_pieces`` subwords is not ranked.
* :class:`TunedMLMAttacker` (``word-recovery-veil-mlm-tuned``) fine-tunes the whole masked LM on (obfuscated,
  original) pairs that the attacker makes from its public sentences with the same obfuscator (its own draws:
  Kerckhoffs). Each obfuscated word is read as ``[MASK]`` followed by the substitute's subwords (``reads=
  "substitute"``; ``"mask"`` drops the substitute), all with token type 1; the hidden state at the ``[MASK]``
  goes through the masked LM's transform and is scored against every candidate's embedding (the mean of its
  subwords' input embeddings, which the decoder is tied to) plus a learned per-word bias and the tag term. It
  trains until the MRR on a held-out share of its OWN sentences stops rising (``patience`` evaluations without a
  new best), within ``max_minutes``; the best evaluation's weights are kept, and ``stopped`` says which limit
  ended it ("flattened", "budget" or "epochs").

Threat model (as :mod:`~veil.attacks.word_recovery.observe`): the released words, tags and obfuscated positions;
public tagged text; the mechanism (the tuned attacker); veil's masked LM, trained on public text only.
"""

from __future__ import annotations

import copy
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from veil.attacks.base import Attack, ThreatModel
from veil.attacks.word_recovery.floors import THREAT, AttackVocabulary
from veil.attacks.word_recovery.observe import ObfuscatedText
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError

__all__ = ["CandidateWords", "ZeroShotMLMAttacker", "TunedMLMAttacker", "READS"]

READS = ("substitute", "mask")
_MLM_NEED = "veil's masked LM (trained on public text by `veil models train mlm`)"


def _model(model: Any) -> Any:
    from veil.models.mlm import MaskedLM, load_mlm

    if isinstance(model, MaskedLM):
        return model
    if isinstance(model, str) or hasattr(model, "__fspath__"):
        return load_mlm(model)
    raise InvalidTypeError(f"model must be a masked LM name ('mlm', 'mlm-quick'), a folder or a MaskedLM, "
                           f"not {type(model).__name__}")


def _check_text(text: Any) -> None:
    if not isinstance(text, ObfuscatedText):
        raise InvalidTypeError(f"text must be an ObfuscatedText (see observe()), not {type(text).__name__}")


class CandidateWords:
    """The candidate words (every lower-cased word of public tagged text, most frequent first, after
    :attr:`AttackVocabulary.SPECIAL`), their subword pieces, and ``log p(tag | word)``."""

    def __init__(self, public: Iterable[tuple[Sequence[str], Sequence[str]]], tokenizer: Any,
                 smoothing: float = 1.0) -> None:
        pairs: Counter[tuple[str, str]] = Counter()
        for words, tags in public:
            pairs.update((w.lower(), t) for w, t in zip(words, tags))
        if not pairs:
            raise DataFormatError("the attacker's public text is empty; give it tagged sentences")
        totals: Counter[str] = Counter()
        for (w, _), c in pairs.items():
            totals[w] += c
        words = sorted(totals, key=lambda w: (-totals[w], w))
        self.vocabulary = AttackVocabulary((*AttackVocabulary.SPECIAL, *words))
        self.lookup = self.vocabulary.index()
        tag_counts: Counter[str] = Counter()
        for (_, t), c in pairs.items():
            tag_counts[t] += c
        self.tags = ("<unk>", *sorted(tag_counts))
        self.tag_index = {t: i for i, t in enumerate(self.tags)}
        n_special = len(AttackVocabulary.SPECIAL)
        counts = np.zeros((len(self.tags), len(self.vocabulary)), dtype=np.float64)
        for (w, t), c in pairs.items():
            counts[self.tag_index[t], self.lookup[w]] = c
        share = np.asarray([0.0] + [tag_counts[t] for t in self.tags[1:]]) / sum(tag_counts.values())
        word_total = counts.sum(0)
        prior = np.log((counts + smoothing * share[:, None]) / (word_total[None, :] + smoothing) + 1e-30)
        prior[0] = 0.0  # a tag the public text never shows: no information
        prior[:, :n_special] = -np.inf
        self.prior = prior.astype(np.float32)
        ids = tokenizer(list(words), add_special_tokens=False)["input_ids"]
        self.pieces: list[list[int]] = [[], [], [], *[list(p) for p in ids]]
        self.n_pieces = np.asarray([len(p) for p in self.pieces], dtype=np.int64)
        self.smoothing = smoothing

    def __len__(self) -> int:
        return len(self.vocabulary)

    def tag_ids(self, text: ObfuscatedText) -> np.ndarray:
        return np.asarray([self.tag_index.get(tags[p], 0) for tags, pos in zip(text.tags, text.positions)
                           for p in pos], dtype=np.int64)

    def targets(self, targets: Sequence[Sequence[str]]) -> np.ndarray:
        return np.asarray(self.vocabulary.targets([w.lower() for ws in targets for w in ws], self.lookup),
                          dtype=np.int64)

    def describe(self) -> dict[str, Any]:
        n = len(self) - len(AttackVocabulary.SPECIAL)
        return {"candidates": n, "tags": len(self.tags) - 1, "tag_smoothing": self.smoothing,
                "pieces": {str(k): int((self.n_pieces[3:] == k).sum()) for k in range(1, 5)},
                "longer_than_4_pieces": int((self.n_pieces[3:] > 4).sum())}


def _sentence_pieces(tokenizer: Any, words: Sequence[str]) -> list[list[int]]:
    return [list(p) for p in tokenizer(list(words), add_special_tokens=False)["input_ids"]]


def _sentence_key(words: Sequence[str], positions: Sequence[int], originals: Sequence[str]) -> str:
    """A digest of the ORIGINAL sentence behind an obfuscated one (what the attacker was trained on)."""
    import hashlib

    restored = list(words)
    for p, o in zip(positions, originals):
        restored[p] = o
    return hashlib.sha256("\x1f".join(w.lower() for w in restored).encode("utf-8")).hexdigest()


def _ranks_from_scores(scores: Any, targets: np.ndarray) -> np.ndarray:
    """Pessimistic ranks; a target scored -inf (not rankable) gets rank 0, as a word outside the candidates."""
    import torch

    from veil.metrics.ranking import pessimistic_ranks

    t = torch.as_tensor(targets)
    true = scores.gather(1, t.clamp(min=0).unsqueeze(1)).squeeze(1)
    t = torch.where(torch.isfinite(true), t, torch.full_like(t, -1))
    return pessimistic_ranks(scores, t.numpy())


class _MLMAttack(Attack):
    abstract = True
    observes = "obfuscated-text"
    bench_cell = "veil.bench.cells.obfuscated_text:word_recovery_cell"

    def _setup(self, public: Iterable[tuple[Sequence[str], Sequence[str]]], model: Any, batch_size: int) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidParameterError(f"batch_size must be an int >= 1, got {batch_size!r}")
        self.mlm = _model(model)
        self.tokenizer = self.mlm.tokenizer
        self.candidates = CandidateWords(public, self.tokenizer)
        self.vocabulary = self.candidates.vocabulary
        self.batch_size = batch_size
        self.unreached = 0
        self.stats: dict[str, Any] = {}

    def _score_batches(self, text: ObfuscatedText) -> Iterator[tuple[np.ndarray, Any]]:  # pragma: no cover
        raise NotImplementedError

    def scores(self, text: ObfuscatedText) -> Iterator[tuple[np.ndarray, Any]]:
        """``(global position indices, (P, V) float32 scores)`` batch by batch (-inf: not a candidate here)."""
        import torch

        _check_text(text)
        start = time.monotonic()
        self.mlm.model.eval()
        with torch.inference_mode():
            yield from self._score_batches(text)
        seconds = time.monotonic() - start
        self.stats = {"sentences": len(text), "seconds": round(seconds, 2),
                      "sentences_per_s": round(len(text) / seconds, 1) if seconds > 0 else 0.0}

    def rank(self, text: ObfuscatedText, targets: Sequence[Sequence[str]]) -> np.ndarray:
        """Pessimistic rank of each true word (lower-cased) at each obfuscated position (0: not rankable)."""
        _check_text(text)
        tgt = self.candidates.targets(targets)
        if len(tgt) != text.n_positions:
            raise DataFormatError(f"{len(tgt)} targets for {text.n_positions} obfuscated positions")
        out = np.zeros(len(tgt), dtype=np.int64)
        for idx, sc in self.scores(text):
            out[idx] = _ranks_from_scores(sc, tgt[idx])
        return out

    def run(self, observation: ObfuscatedText) -> list[list[str | None]]:
        """The attack's one verb: the top candidate at every obfuscated position (None where nothing is ranked)."""
        flat: list[str | None] = [None] * observation.n_positions if isinstance(observation, ObfuscatedText) else []
        for idx, sc in self.scores(observation):
            best = sc.argmax(1)
            ok = sc.gather(1, best.unsqueeze(1)).squeeze(1) > float("-inf")
            for i, b, good in zip(idx.tolist(), best.tolist(), ok.tolist()):
                flat[i] = self.vocabulary.words[b] if good else None
        it = iter(flat)
        return [[next(it) for _ in pos] for pos in observation.positions]

    def config(self) -> dict[str, Any]:
        return {**super().config(), "model": self.mlm.identity(), "candidates": self.candidates.describe(),
                "unreached_positions": self.unreached, "speed": dict(self.stats)}


class ZeroShotMLMAttacker(_MLMAttack):
    """Rank candidates by veil's masked LM at whole-word masks, with the tag term (see the module docstring)."""

    name = "word-recovery-veil-mlm"
    citation = ("Hu et al. 2020, Sec. 5.2 (their BERT attacker, zero-shot; veil's own masked LM, subword-level "
                "candidate scoring)")
    threat = ThreatModel(THREAT.observes, THREAT.needs + (_MLM_NEED,), trains=False)

    def __init__(self, public: Iterable[tuple[Sequence[str], Sequence[str]]], *, model: Any = "mlm",
                 max_pieces: int = 4, batch_size: int = 32) -> None:
        if isinstance(max_pieces, bool) or not isinstance(max_pieces, int) or not 1 <= max_pieces <= 8:
            raise InvalidParameterError(f"max_pieces must be an int in 1..8, got {max_pieces!r}")
        self._setup(public, model, batch_size)
        self.max_pieces = max_pieces
        n = self.candidates.n_pieces
        self._by_k = {k: (np.flatnonzero(n == k), np.asarray([self.candidates.pieces[i] for i in np.flatnonzero(n == k)],
                                                              dtype=np.int64).reshape(-1, k))
                      for k in range(1, max_pieces + 1)}

    def config(self) -> dict[str, Any]:
        return {**super().config(), "max_pieces": self.max_pieces}

    def _score_batches(self, text: ObfuscatedText) -> Iterator[tuple[np.ndarray, Any]]:
        import torch

        model, tok = self.mlm.model, self.tokenizer
        cls_id, sep_id, mask_id = tok.cls_token_id, tok.sep_token_id, self.mlm.mask_id
        limit = self.mlm.max_length
        offsets = np.concatenate([[0], np.cumsum([len(p) for p in text.positions])]).astype(np.int64)
        prior = torch.as_tensor(self.candidates.prior)
        tag_ids = self.candidates.tag_ids(text)
        order = sorted((i for i in range(len(text)) if text.positions[i]), key=lambda i: len(text.words[i]))
        self.unreached = 0
        for s in range(0, len(order), self.batch_size):
            rows = order[s:s + self.batch_size]
            pieces = [_sentence_pieces(tok, text.words[i]) for i in rows]
            index = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in rows])
            scores = torch.full((len(index), len(self.candidates)), float("-inf"))
            reached = np.ones(len(index), dtype=bool)
            for k in range(1, self.max_pieces + 1):
                seqs, where = [], []  # where: (batch row, first mask token) per obfuscated position, or None
                for b, (i, pcs) in enumerate(zip(rows, pieces)):
                    hidden = set(text.positions[i])
                    ids, first = [cls_id], {}
                    for j, p in enumerate(pcs):
                        if j in hidden:
                            first[j] = len(ids)
                            ids += [mask_id] * k
                        else:
                            ids += p
                    cut = ids[:limit - 1] + [sep_id]
                    seqs.append(cut)
                    for p in text.positions[i]:
                        where.append((b, first[p]) if first[p] + k <= limit - 1 else None)
                h = self.mlm.hidden(seqs)
                ok = np.asarray([w is not None for w in where])
                reached &= ok
                if not ok.any():
                    continue
                bs = torch.as_tensor([w[0] for w in where if w is not None])
                ts = torch.as_tensor([w[1] for w in where if w is not None])
                lp = torch.stack([torch.log_softmax(model.cls(h[bs, ts + j].float()), -1) for j in range(k)], 1)
                cols, pcs_k = self._by_k[k]
                if len(cols) == 0:
                    continue
                pk = torch.as_tensor(pcs_k)
                sc = sum(lp[:, j][:, pk[:, j]] for j in range(k))
                scores[torch.as_tensor(np.flatnonzero(ok))[:, None], torch.as_tensor(cols)[None, :]] = sc
            scores[~torch.as_tensor(reached)] = float("-inf")
            self.unreached += int((~reached).sum())
            yield index, scores + prior[torch.as_tensor(tag_ids[index])]


class TunedMLMAttacker(_MLMAttack):
    """veil's masked LM fine-tuned on the attacker's own (obfuscated, original) public pairs (module docstring)."""

    name = "word-recovery-veil-mlm-tuned"
    citation = ("Hu et al. 2020, Sec. 5.2 (their trained attacker over BERT; veil's own masked LM fine-tuned, "
                "reading the substitute)")
    threat = ThreatModel(THREAT.observes, THREAT.needs + ("the obfuscation mechanism (not its draws)", _MLM_NEED),
                         trains=True)

    def __init__(self, public: Iterable[tuple[Sequence[str], Sequence[str]]], *, model: Any = "mlm",
                 reads: str = "substitute", batch_tokens: int = 2048, seed: int = 0) -> None:
        import torch

        if reads not in READS:
            raise InvalidParameterError(f"reads must be one of {', '.join(READS)}, got {reads!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise InvalidParameterError(f"seed must be an int >= 0, got {seed!r}")
        if isinstance(batch_tokens, bool) or not isinstance(batch_tokens, int) or batch_tokens < 64:
            raise InvalidParameterError(f"batch_tokens must be an int >= 64, got {batch_tokens!r}")
        from veil.models.mlm import MaskedLM

        # fine-tuning changes the weights: a model object given by the caller is copied, never changed
        self._setup(public, copy.deepcopy(model) if isinstance(model, MaskedLM) else model, 32)
        self.reads, self.seed, self.batch_tokens = reads, seed, batch_tokens
        cand = self.candidates
        flat = [p for ps in cand.pieces for p in ps]
        self._flat = torch.as_tensor(flat or [0], dtype=torch.long)
        self._offsets = torch.as_tensor(np.concatenate([[0], np.cumsum(cand.n_pieces)[:-1]]), dtype=torch.long)
        self._empty = torch.as_tensor(cand.n_pieces == 0)
        dec_bias = self.mlm.model.cls.predictions.decoder.bias if getattr(
            self.mlm.model.cls.predictions.decoder, "bias", None) is not None else self.mlm.model.cls.predictions.bias
        init = torch.zeros(len(cand))
        with torch.no_grad():
            init += torch.nn.functional.embedding_bag(self._flat, dec_bias.detach().unsqueeze(1), self._offsets,
                                                      mode="mean").squeeze(1) * (~self._empty)
        self.word_bias = torch.nn.Parameter(init)
        self.history: list[dict[str, Any]] = []
        self.selected: dict[str, Any] | None = None
        self.stopped: str | None = None
        #: digests of the original sentences of the pairs it was fine-tuned on (:func:`_sentence_key`)
        self.trained_on: frozenset[str] = frozenset()

    def config(self) -> dict[str, Any]:
        return {**super().config(), "reads": self.reads, "seed": self.seed, "stopped": self.stopped,
                "trained_sentences": len(self.trained_on),
                "selected": self.selected, "history": self.history[-5:]}

    # -- inputs ---------------------------------------------------------------------------------------------
    def _inputs(self, text: ObfuscatedText, rows: Sequence[int]) -> tuple[Any, Any, Any, np.ndarray, np.ndarray]:
        """Padded ids, attention, token types, and per obfuscated position (in order) its (batch row, [MASK]
        token) or -1 where truncation cut it off."""
        import torch

        tok = self.tokenizer
        limit = self.mlm.max_length
        seqs, types, where_b, where_t = [], [], [], []
        for b, i in enumerate(rows):
            pcs = _sentence_pieces(tok, text.words[i])
            hidden = set(text.positions[i])
            ids, ty, first = [tok.cls_token_id], [0], {}
            for j, p in enumerate(pcs):
                if j in hidden:
                    first[j] = len(ids)
                    extra = p if self.reads == "substitute" else []
                    ids += [self.mlm.mask_id, *extra]
                    ty += [1] * (1 + len(extra))
                else:
                    ids += p
                    ty += [0] * len(p)
            ids, ty = ids[:limit - 1] + [tok.sep_token_id], ty[:limit - 1] + [0]
            seqs.append(ids)
            types.append(ty)
            for p in text.positions[i]:
                ok = first[p] < limit - 1
                where_b.append(b if ok else -1)
                where_t.append(first[p] if ok else -1)
        width = max(map(len, seqs))
        ids_t = torch.full((len(seqs), width), tok.pad_token_id, dtype=torch.long)
        att = torch.zeros((len(seqs), width), dtype=torch.long)
        ty_t = torch.zeros((len(seqs), width), dtype=torch.long)
        for b, (q, t) in enumerate(zip(seqs, types)):
            ids_t[b, :len(q)], att[b, :len(q)], ty_t[b, :len(q)] = torch.as_tensor(q), 1, torch.as_tensor(t)
        return ids_t, att, ty_t, np.asarray(where_b), np.asarray(where_t)

    def _word_table(self) -> Any:
        import torch

        emb = self.mlm.model.bert.embeddings.word_embeddings.weight
        table = torch.nn.functional.embedding_bag(self._flat, emb, self._offsets, mode="mean")
        return table * (~self._empty).unsqueeze(1)

    def _logits(self, ids: Any, att: Any, ty: Any, wb: np.ndarray, wt: np.ndarray, tag_ids: np.ndarray,
                table: Any, fp32: bool) -> Any:
        import torch

        model = self.mlm.model
        keep = wb >= 0
        from veil._bf16 import autocast

        with autocast("cpu"):
            h = model.bert(input_ids=ids, attention_mask=att, token_type_ids=ty).last_hidden_state
            z = model.cls.predictions.transform(h[torch.as_tensor(wb[keep]), torch.as_tensor(wt[keep])])
            if not fp32:
                out = z @ table.T
        if fp32:
            out = z.float() @ table.float().T
        out = out.float() + self.word_bias + torch.as_tensor(self.candidates.prior)[torch.as_tensor(tag_ids[keep])]
        return out

    def _batches(self, text: ObfuscatedText, rng: np.random.Generator | None) -> list[list[int]]:
        rows = [i for i in range(len(text)) if text.positions[i]]
        lengths = {i: sum(len(w) for w in text.words[i]) // 3 + 2 * len(text.positions[i]) + 2 for i in rows}
        key = (lambda i: (lengths[i], rng.random())) if rng is not None else (lambda i: (lengths[i], i))
        order = sorted(rows, key=key)
        out, cur, width = [], [], 0
        for i in order:
            if cur and max(width, lengths[i]) * (len(cur) + 1) > self.batch_tokens:
                out.append(cur)
                cur, width = [], 0
            cur.append(i)
            width = max(width, lengths[i])
        if cur:
            out.append(cur)
        if rng is not None:
            rng.shuffle(out)
        return out

    def _score_batches(self, text: ObfuscatedText) -> Iterator[tuple[np.ndarray, Any]]:
        import torch

        offsets = np.concatenate([[0], np.cumsum([len(p) for p in text.positions])]).astype(np.int64)
        tag_ids = self.candidates.tag_ids(text)
        table = self._word_table().float()
        self.unreached = 0
        for rows in self._batches(text, None):
            ids, att, ty, wb, wt = self._inputs(text, rows)
            index = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in rows])
            scores = torch.full((len(index), len(self.candidates)), float("-inf"))
            keep = wb >= 0
            if keep.any():
                scores[torch.as_tensor(keep)] = self._logits(ids, att, ty, wb, wt, tag_ids[index], table, True)
            scores[:, :len(AttackVocabulary.SPECIAL)] = float("-inf")
            scores[:, self._empty] = float("-inf")
            self.unreached += int((~keep).sum())
            yield index, scores

    # -- training -------------------------------------------------------------------------------------------
    def fit(self, text: ObfuscatedText, originals: Sequence[Sequence[str]], *, max_minutes: float = 30.0,
            epochs: int = 20, lr: float = 5e-5, head_lr: float = 1e-3, eval_every: int = 100, patience: int = 3,
            min_delta: float = 0.002, dev_share: float = 0.05, max_dev: int = 400,
            on_eval: Callable[["TunedMLMAttacker", dict[str, Any]], None] | None = None,
            log: Callable[[str], None] | None = None, max_steps: int | None = None) -> "TunedMLMAttacker":
        """Fine-tune on the attacker's own obfuscations ``text`` of public sentences and their ``originals``.

        Every ``eval_every`` steps the MRR on the held-out ``dev_share`` of the sentences (at most ``max_dev``) is
        measured (``on_eval(self, row)`` is called with the row, e.g. to draw a learning curve); training stops when
        ``patience`` evaluations in a row raise it by no more than ``min_delta`` over the last one that did (the
        curve has flattened), when ``max_minutes`` are spent, after ``max_steps`` optimiser steps (None: no cap; a
        step count, unlike minutes, is the same budget on a loaded machine) or after ``epochs``. The best
        evaluation's weights are kept (``selected``)."""
        import torch

        from veil.attacks.word_recovery.neural import _check_budget

        _check_text(text)
        _check_budget(max_minutes=max_minutes, epochs=epochs, lr=lr, head_lr=head_lr, eval_every=eval_every,
                      patience=patience, dev_share=dev_share, max_dev=max_dev,
                      **({} if max_steps is None else {"max_steps": max_steps}))
        if isinstance(min_delta, bool) or not isinstance(min_delta, (int, float)) or not 0 <= min_delta < 1:
            raise InvalidParameterError(f"min_delta must be a number in [0, 1), got {min_delta!r}")
        if len(originals) != len(text) or any(len(o) != len(p) for o, p in zip(originals, text.positions)):
            raise DataFormatError("originals must hold one word per obfuscated position of each sentence")
        rng = np.random.default_rng(self.seed)
        n_dev = min(max_dev, int(round(dev_share * len(text)))) if len(text) >= 20 else 0
        perm = rng.permutation(len(text))
        dev_rows, train_rows = np.sort(perm[:n_dev]), np.sort(perm[n_dev:])

        def subset(rows: np.ndarray) -> tuple[ObfuscatedText, list[Sequence[str]]]:
            return (ObfuscatedText(tuple(text.words[i] for i in rows), tuple(text.tags[i] for i in rows),
                                   tuple(text.positions[i] for i in rows)), [originals[i] for i in rows])

        train, train_y = subset(train_rows)
        dev, dev_y = subset(dev_rows)
        self.trained_on = frozenset(_sentence_key(text.words[i], text.positions[i], originals[i]) for i in range(len(text)))
        y_all = self.candidates.targets(train_y)
        offsets = np.concatenate([[0], np.cumsum([len(p) for p in train.positions])]).astype(np.int64)
        tag_all = self.candidates.tag_ids(train)
        model = self.mlm.model
        head = list(model.cls.predictions.transform.parameters()) + [self.word_bias]
        body = list(model.bert.parameters())
        opt = torch.optim.AdamW([{"params": body, "lr": lr}, {"params": head, "lr": head_lr}], weight_decay=0.01,
                                fused=True)
        start, step, best, bad, progress = time.monotonic(), 0, -1.0, 0, -1.0
        best_state: Any = None
        self.history, self.stopped = [], "epochs"

        def evaluate(epoch: int, loss: float | None) -> bool:
            nonlocal best, bad, best_state, progress
            row: dict[str, Any] = {"step": step, "epoch": epoch, "minutes": round((time.monotonic() - start) / 60, 3),
                                   "loss": None if loss is None else round(loss, 4)}
            if len(dev):
                ranks = self.rank(dev, dev_y)
                row["dev_mrr"] = round(float(np.where(ranks > 0, 1.0 / np.maximum(ranks, 1), 0.0).mean()), 5)
                if row["dev_mrr"] > best:
                    best = row["dev_mrr"]
                    best_state = (copy.deepcopy(model.state_dict()), self.word_bias.detach().clone())
                    self.selected = {"step": step, "minutes": row["minutes"], "dev_mrr": row["dev_mrr"]}
                if row["dev_mrr"] > progress + min_delta:
                    progress, bad = row["dev_mrr"], 0
                else:
                    bad += 1
            self.history.append(row)
            if on_eval is not None:
                on_eval(self, row)
            if log is not None:
                log(f"  {self.name}: step {step} {row['minutes']:.1f} min loss "
                    f"{'-' if loss is None else f'{loss:.3f}'} dev MRR {row.get('dev_mrr', float('nan')):.4f}")
            model.train()
            return bad >= patience

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed + 1)
            evaluate(0, None)  # the starting point: the masked LM before any fine-tuning
            done = False
            for epoch in range(epochs):
                losses: list[float] = []
                for rows in self._batches(train, rng):
                    ids, att, ty, wb, wt = self._inputs(train, rows)
                    index = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in rows])
                    keep = wb >= 0
                    y = torch.as_tensor(y_all[index][keep])
                    if not (y >= 0).any():
                        continue
                    logits = self._logits(ids, att, ty, wb, wt, tag_all[index], self._word_table(), False)
                    logits[:, :len(AttackVocabulary.SPECIAL)] = float("-inf")
                    loss = torch.nn.functional.cross_entropy(logits, torch.where(y >= 0, y, -100), ignore_index=-100)
                    opt.zero_grad()
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(body + head, 1.0)
                    opt.step()
                    losses.append(loss.item())
                    step += 1
                    if step % eval_every == 0:
                        done = evaluate(epoch, float(np.mean(losses[-eval_every:])))
                        if done:
                            self.stopped = "flattened"
                    if not done and ((time.monotonic() - start) / 60 > max_minutes
                                     or (max_steps is not None and step >= max_steps)):
                        self.stopped = "steps" if max_steps is not None and step >= max_steps else "budget"
                        done = True
                        if self.history[-1]["step"] != step:
                            evaluate(epoch, float(np.mean(losses[-eval_every:])))
                    if done:
                        break
                if done:
                    break
        if best_state is not None:
            model.load_state_dict(best_state[0])
            with torch.no_grad():
                self.word_bias.copy_(best_state[1])
        model.eval()
        return self
