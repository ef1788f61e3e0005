"""Neural word-recovery attackers (Hu et al. 2020, Sec. 5.2): a trained attacker and a masked-LM attacker.

Both read a sentence with a BiLSTM (word embedding, initialised from en_core_web_md's vectors as the paper
initialises from GloVe; tag embedding; an embedding of "this position was obfuscated") and score every word of
the attacker's vocabulary at each obfuscated position. They differ in what they learn from:

* :class:`TrainedAttacker` (the paper's "trained attacker") learns on obfuscations of the public training
  split, made by the attacker itself with the public mechanism (it knows the defense but not the client's
  draws): it reads the obfuscated words and predicts the originals.
* :class:`MaskedLMAttacker` (the paper's BERT attacker) is a masked language model trained on public ORIGINAL
  text only (open-class words masked at random); at attack time the obfuscated positions are masked, so it
  ranks candidates from context alone. Departure: no pretrained MLM ships offline (RESOURCES.md), so veil
  trains this smaller word-level model instead of BERT-base and caches it under ``VEIL_HOME``.

The trained attacker stops when the MRR on a held-out share of its own sentences stops rising (patience), within
a minute budget; the masked LM trains for its minute budget.

Departures from the authors' attacker: 1-layer BiLSTM (they: 3 x 512, highway), a capped vocabulary, early
stopping on a minute-capped budget instead of 40 epochs with patience; the paper's attacker sees no tags, veil's sees them (the
service receives them, since the parser takes POS input).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from veil.attacks.base import Attack, ThreatModel
from veil.attacks.word_recovery.floors import THREAT, AttackVocabulary
from veil.attacks.word_recovery.observe import ObfuscatedText
from veil.errors import InvalidParameterError

__all__ = ["TrainedAttacker", "MaskedLMAttacker", "OPEN_TAGS"]

#: tags whose words the masked LM learns to fill in (every tag of the paper's P5 level)
OPEN_TAGS = frozenset({"NNP", "NNPS", "NN", "NNS", "JJ", "JJR", "JJS", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ",
                       "RB", "RBR", "RBS"})
_MASK = 2


def _net(n_words: int, n_tags: int, dim: int, hidden: int, vectors: np.ndarray | None) -> Any:
    import torch
    from torch import nn

    class RecoveryNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.word = nn.Embedding(n_words, dim, padding_idx=0)
            if vectors is not None:
                with torch.no_grad():
                    self.word.weight.copy_(torch.as_tensor(vectors))
            self.tag = nn.Embedding(n_tags, 24, padding_idx=0)
            self.flag = nn.Embedding(2, 8)
            self.lstm = nn.LSTM(dim + 32, hidden, batch_first=True, bidirectional=True)
            self.proj = nn.Sequential(nn.Dropout(0.2), nn.Linear(2 * hidden, dim), nn.Tanh())
            self.out = nn.Linear(dim, n_words)

        def forward(self, words: Any, tags: Any, flags: Any, rows: Any, cols: Any) -> Any:
            x = torch.cat([self.word(words), self.tag(tags), self.flag(flags)], -1)
            h, _ = self.lstm(nn.functional.dropout(x, 0.2, self.training))
            return self.out(self.proj(h[rows, cols]))

    return RecoveryNet()


def _check_budget(**values: Any) -> None:
    """Training budgets: finite numbers > 0 (minutes, learning rates), ints >= 1 (epochs, batch sizes)."""
    import math

    for name, v in values.items():
        if name == "dev_share":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1:
                raise InvalidParameterError(f"dev_share must be a number in [0, 1), got {v!r}")
        elif name in ("max_minutes", "lr", "head_lr"):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise InvalidParameterError(f"{name} must be a finite number > 0, got {v!r}")
        elif isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InvalidParameterError(f"{name} must be an int >= 1, got {v!r}")


class _NeuralAttacker(Attack):
    abstract = True  # the trained and masked-LM attackers share it; each is registered
    observes = "obfuscated-text"
    bench_cell = "veil.bench.cells.obfuscated_text:word_recovery_cell"
    threat = THREAT
    masks_input = False

    def __init__(self, vocabulary: AttackVocabulary, tags: Sequence[str], *, dim: int = 100, hidden: int = 192,
                 vectors: str = "md", seed: int = 0) -> None:
        import torch

        if vectors not in ("md", "none"):
            raise InvalidParameterError(f"vectors must be 'md' or 'none', got {vectors!r}")
        self.vocabulary, self.tags = vocabulary, ("<pad>", "<unk>", *sorted(set(tags)))
        self._lookup, self._tag = vocabulary.index(), {t: i for i, t in enumerate(self.tags)}
        self.seed, self.vectors_source = seed, vectors
        init = None
        if vectors == "md":
            from veil.models.spacy_pipelines import md_vectors

            init = md_vectors(list(vocabulary.words), dim)[0]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.net = _net(len(vocabulary), len(self.tags), dim, hidden, init)
        self.history: list[dict[str, float]] = []

    def config(self) -> dict[str, Any]:
        return {**super().config(), "vocabulary": len(self.vocabulary), "vectors": self.vectors_source,
                "seed": self.seed, "history": self.history[-3:]}

    def _tensors(self, words: Sequence[Sequence[str]], tags: Sequence[Sequence[str]],
                 positions: Sequence[Sequence[int]]) -> tuple[Any, ...]:
        import torch

        b, t = len(words), max(len(w) for w in words)
        w_ids = np.zeros((b, t), dtype=np.int64)
        t_ids = np.zeros((b, t), dtype=np.int64)
        flags = np.zeros((b, t), dtype=np.int64)
        rows, cols = [], []
        for i, (ws, ts, ps) in enumerate(zip(words, tags, positions)):
            w_ids[i, :len(ws)] = self.vocabulary.ids(ws, self._lookup)
            t_ids[i, :len(ts)] = [self._tag.get(x, 1) for x in ts]
            flags[i, list(ps)] = 1
            if self.masks_input:
                w_ids[i, list(ps)] = _MASK
            rows += [i] * len(ps)
            cols += list(ps)
        return tuple(torch.as_tensor(a) for a in (w_ids, t_ids, flags, np.asarray(rows, dtype=np.int64),
                                                  np.asarray(cols, dtype=np.int64)))

    def _fit(self, words: list[tuple[str, ...]], tags: list[tuple[str, ...]], make_positions: Any,
             targets_of: Any, *, epochs: int, max_minutes: float, batch_size: int, rng: np.random.Generator,
             evaluate: Any = None, eval_every: int = 200, max_steps: int | None = None) -> str:
        """Train; ``evaluate(epoch, step, minutes, loss)`` (if given) runs every ``eval_every`` batches and returns
        True to stop. Returns what ended training: "flattened" (evaluate said stop), "budget" (``max_minutes``),
        "steps" (``max_steps`` optimiser steps, None: no cap) or "epochs"."""
        import torch

        _check_budget(epochs=epochs, max_minutes=max_minutes, batch_size=batch_size, eval_every=eval_every,
                      **({} if max_steps is None else {"max_steps": max_steps}))
        opt = torch.optim.Adam(self.net.parameters(), lr=2e-3, betas=(0.9, 0.9))
        start, step, stopped = time.monotonic(), 0, "epochs"
        order = sorted(range(len(words)), key=lambda i: len(words[i]))
        chunks = [order[s:s + batch_size] for s in range(0, len(order), batch_size)]
        eval_every = max(1, min(eval_every, len(chunks)))  # at least once an epoch
        self.net.train()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed + 1)
            for epoch in range(epochs):
                total, count = 0.0, 0
                for k in rng.permutation(len(chunks)):
                    chunk = chunks[k]
                    ws, ts = [words[i] for i in chunk], [tags[i] for i in chunk]
                    pos, seen = make_positions(chunk, ws, ts)
                    y = torch.as_tensor([self._lookup.get(w.lower(), -1) for i, ps in zip(chunk, pos)
                                         for w in targets_of(i, ps)], dtype=torch.long)
                    y = torch.where(y >= len(AttackVocabulary.SPECIAL), y, torch.full_like(y, -100))
                    if (y >= 0).sum() == 0:
                        continue
                    logits = self.net(*self._tensors(seen, ts, pos))
                    loss = torch.nn.functional.cross_entropy(logits, y, ignore_index=-100)
                    opt.zero_grad()
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(self.net.parameters(), 5.0)
                    opt.step()
                    total, count, step = total + loss.item(), count + 1, step + 1
                    minutes = (time.monotonic() - start) / 60
                    if evaluate is not None and step % eval_every == 0:
                        if evaluate(epoch, step, minutes, total / max(count, 1)):
                            stopped = "flattened"
                            break
                        self.net.train()
                    if minutes > max_minutes:
                        stopped = "budget"
                        break
                    if max_steps is not None and step >= max_steps:
                        stopped = "steps"
                        break
                if evaluate is None:
                    self.history.append({"epoch": epoch, "loss": total / max(count, 1),
                                         "minutes": (time.monotonic() - start) / 60})
                if stopped != "epochs":
                    break
        if evaluate is not None and stopped in ("budget", "steps") and step % eval_every:
            evaluate(epoch, step, (time.monotonic() - start) / 60, total / max(count, 1))
        self.net.eval()
        return stopped

    def _logits(self, text: ObfuscatedText, batch_size: int) -> Iterator[tuple[list[int], Any]]:
        """(sentence rows, logits over the vocabulary at their obfuscated positions), batch by batch, in order."""
        import torch

        self.net.eval()
        with torch.inference_mode():
            for s in range(0, len(text), batch_size):
                keep = [i for i in range(s, min(s + batch_size, len(text))) if text.positions[i]]
                if not keep:
                    continue
                logits = self.net(*self._tensors([text.words[i] for i in keep], [text.tags[i] for i in keep],
                                                 [text.positions[i] for i in keep]))
                logits[:, :len(AttackVocabulary.SPECIAL)] = float("-inf")
                yield keep, logits

    def run(self, observation: ObfuscatedText, *, batch_size: int = 64) -> list[list[str]]:
        """The attack's one verb: the top guess (a vocabulary word) at every obfuscated position."""
        words = self.vocabulary.words
        out: list[list[str]] = [[] for _ in range(len(observation))]
        for keep, logits in self._logits(observation, batch_size):
            best = iter(logits.argmax(dim=1).tolist())
            for i in keep:
                out[i] = [words[next(best)] for _ in observation.positions[i]]
        return out

    def rank(self, text: ObfuscatedText, targets: Sequence[Sequence[str]], *, batch_size: int = 64) -> np.ndarray:
        """Pessimistic rank of each true word (lower-cased) at each obfuscated position (0: outside the vocabulary)."""
        from veil.metrics.ranking import pessimistic_ranks

        out = [pessimistic_ranks(logits, self.vocabulary.targets([w for i in keep for w in targets[i]], self._lookup))
               for keep, logits in self._logits(text, batch_size)]
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


class TrainedAttacker(_NeuralAttacker):
    """Learns original words from (obfuscated sentence, originals) pairs it makes with the public mechanism."""

    name = "word-recovery-trained"
    citation = "Hu et al. 2020, Sec. 5.2 (trained attacker)"
    threat = ThreatModel(THREAT.observes, THREAT.needs + ("the obfuscation mechanism (not its draws)",),
                         trains=True)

    stopped: str | None = None
    selected: dict[str, Any] | None = None

    def fit(self, text: ObfuscatedText, originals: Sequence[Sequence[str]], *, epochs: int = 30,
            max_minutes: float = 10.0, batch_size: int = 32, eval_every: int = 200, patience: int = 4,
            dev_share: float = 0.05, max_dev: int = 500, min_delta: float = 0.002,
            on_eval: Any = None, max_steps: int | None = None) -> "TrainedAttacker":
        """Train on the attacker's own obfuscations ``text`` of public sentences and their ``originals``.

        Every ``eval_every`` batches the MRR on a held-out ``dev_share`` of those sentences (at most ``max_dev``)
        is measured (``on_eval(self, row)`` sees each row); training stops when ``patience`` evaluations raise it
        by no more than ``min_delta`` over the last one that did (``stopped = "flattened"``), when ``max_minutes``
        are spent ("budget"), after ``max_steps`` optimiser steps ("steps"; None: no cap) or after ``epochs``; the
        best evaluation's weights are kept (``selected``). With fewer
        than 20 sentences nothing is held out."""
        import copy

        _check_budget(patience=patience, dev_share=dev_share, max_dev=max_dev)
        if isinstance(min_delta, bool) or not isinstance(min_delta, (int, float)) or not 0 <= min_delta < 1:
            raise InvalidParameterError(f"min_delta must be a number in [0, 1), got {min_delta!r}")
        rng = np.random.default_rng(self.seed)
        n_dev = min(max_dev, int(round(dev_share * len(text)))) if len(text) >= 20 else 0
        perm = rng.permutation(len(text))
        dev_rows, rows = np.sort(perm[:n_dev]), np.sort(perm[n_dev:])
        dev = ObfuscatedText(tuple(text.words[i] for i in dev_rows), tuple(text.tags[i] for i in dev_rows),
                             tuple(text.positions[i] for i in dev_rows))
        dev_y = [[w.lower() for w in originals[i]] for i in dev_rows]
        best: list[Any] = [-1.0, None, 0, -1.0]  # best dev MRR, its weights, evaluations without progress, progress

        def evaluate(epoch: int, step: int, minutes: float, loss: float) -> bool:
            row: dict[str, Any] = {"epoch": epoch, "step": step, "minutes": round(minutes, 3), "loss": round(loss, 4)}
            if len(dev):
                ranks = self.rank(dev, dev_y)
                row["dev_mrr"] = round(float(np.where(ranks > 0, 1.0 / np.maximum(ranks, 1), 0.0).mean()), 5)
                if row["dev_mrr"] > best[0]:
                    best[0], best[1] = row["dev_mrr"], copy.deepcopy(self.net.state_dict())
                    self.selected = {"step": step, "minutes": row["minutes"], "dev_mrr": row["dev_mrr"]}
                if row["dev_mrr"] > best[3] + min_delta:
                    best[2], best[3] = 0, row["dev_mrr"]
                else:
                    best[2] += 1
            self.history.append(row)
            if on_eval is not None:
                on_eval(self, row)
            return bool(len(dev)) and best[2] >= patience

        words = [text.words[i] for i in rows]
        self.stopped = self._fit(words, [text.tags[i] for i in rows],
                                 lambda chunk, ws, ts: ([text.positions[rows[i]] for i in chunk], ws),
                                 lambda i, ps: originals[rows[i]], epochs=epochs, max_minutes=max_minutes,
                                 batch_size=batch_size, rng=rng, evaluate=evaluate, eval_every=eval_every,
                                 max_steps=max_steps)
        if best[1] is not None:
            self.net.load_state_dict(best[1])
        self.net.eval()
        return self

    def config(self) -> dict[str, Any]:
        return {**super().config(), "stopped": self.stopped, "selected": self.selected}


class MaskedLMAttacker(_NeuralAttacker):
    """A word-level masked LM trained on public original text; obfuscated positions are masked at attack time."""

    name = "word-recovery-mlm"
    citation = "Hu et al. 2020, Sec. 5.2 (BERT attacker; veil trains a smaller masked LM, see the module docstring)"
    threat = ThreatModel(THREAT.observes, THREAT.needs, trains=True)
    masks_input = True

    def fit(self, sentences: Sequence[tuple[Sequence[str], Sequence[str]]], *, mask_rate: float = 0.4,
            epochs: int = 2, max_minutes: float = 10.0, batch_size: int = 32) -> "MaskedLMAttacker":
        """Train on public ``(words, tags)``: each epoch masks a ``mask_rate`` share of open-class words anew."""
        rng = np.random.default_rng(self.seed)
        words = [tuple(w) for w, _ in sentences]
        tags = [tuple(t) for _, t in sentences]

        def positions(chunk: list[int], ws: list[tuple[str, ...]], ts: list[tuple[str, ...]]) -> tuple[Any, Any]:
            pos = []
            for t in ts:
                cand = [j for j, x in enumerate(t) if x in OPEN_TAGS]
                pos.append(tuple(j for j in cand if rng.random() < mask_rate))
            return pos, ws

        self._fit(words, tags, positions, lambda i, ps: [words[i][j] for j in ps], epochs=epochs,
                  max_minutes=max_minutes, batch_size=batch_size, rng=rng)
        return self

    def save(self, path: Any) -> None:
        import torch

        from veil._io import atomic_write

        with atomic_write(path, "wb") as fh:
            torch.save({"state": self.net.state_dict(), "words": list(self.vocabulary.words),
                        "tags": list(self.tags), "history": self.history, "seed": self.seed,
                        "vectors": self.vectors_source}, fh)

    @classmethod
    def load(cls, path: Any) -> "MaskedLMAttacker":
        from veil.errors import DataFormatError
        from veil.models.files import load_tensors

        what = "the masked-LM word-recovery attacker"
        fix = f"delete {path} so that it is trained again (`veil attack word-recovery --method mlm` does it)"
        blob = load_tensors(path, what=what, fix=fix, keys=("state", "words", "tags", "history", "seed"))
        try:
            obj = cls(AttackVocabulary(tuple(blob["words"])), blob["tags"][2:], vectors="none", seed=blob["seed"])
            obj.net.load_state_dict(blob["state"])
        except (TypeError, ValueError, KeyError, RuntimeError, IndexError) as exc:
            raise DataFormatError(f"{what} {path} does not hold an attacker veil can rebuild "
                                  f"({type(exc).__name__}); it was not used. {fix}") from None
        obj.history = blob["history"]
        # built without the md vectors (its weights replace them), it reports those it was trained from; one saved
        # before veil kept that was trained with md vectors (the only way veil trained one then)
        obj.vectors_source = str(blob.get("vectors", "md"))
        obj.net.eval()
        return obj
