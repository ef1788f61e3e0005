"""A trained word-recovery attacker over a frozen pretrained encoder (Hu et al. 2020, Sec. 5.2).

The paper's strongest attackers read the obfuscated sentence with BERT. :class:`ContextualAttacker` reads it
with the frozen all-MiniLM-L6-v2 (the registry's ``minilm``, loaded offline) and learns, like the paper's
trained attacker, from obfuscations of public text that it makes itself with the public mechanism (it knows
the defense, not the client's draws):

1. features (computed once, cached in memory): the released words go to the tokenizer as pre-split words
   (``is_split_into_words``); with ``reads="mask"`` (default) every obfuscated word is replaced by ``[MASK]``
   (under random substitution the substitute carries nothing but its tag, which is released anyway), with
   ``reads="substitute"`` the obfuscated words are read as released (for obfuscators whose substitutes may
   leak). The feature of a position is the hidden state of its word's FIRST subword, the last ``layers``
   layers concatenated (default 2: 768 dimensions);
2. a head: layer-normalised feature + a learned embedding of the position's POS tag -> one hidden layer
   (512, GELU, dropout) -> a vector of the encoder's width, scored (dot product) against the frozen MiniLM
   input embedding of every :class:`AttackVocabulary` word (the mean of its subwords' embeddings, as BERT ties
   its output layer to its input embeddings), plus a learned per-word bias and a fixed log p(word | tag)
   counted on the training positions (the tag-frequency floor as a starting point). Trained with Adam
   (cross-entropy) for up to ``epochs`` epochs within ``max_minutes``; the epoch is chosen by MRR on a
   held-out 5% of the attacker's own training sentences (never the test data).

Choices, measured on a dev slice (silver-sm, P3, the attacker's own obfuscations of 2,500 public sentences,
400 other sentences to score, 1 minute of head training, 1 torch thread; prv, lower = stronger attacker):
masked reads with the last two layers 94.92, the last layer only 94.97 (no real difference; two kept),
substitute reads 95.41 (the head overfits the random substitutes), tag-frequency floor 95.06. A first head
with a freely learned 512 x V output layer did no better than the floor (95.18): too few examples per word.
Speed of the feature pass (batches of 64 length-sorted sentences, 1 torch thread, on a shared 2-core machine
with other jobs running): 70-105 sentences/s with masked reads on silver-sm sentences (P3: ~8 obfuscated
words per sentence), e.g. 4,879 training sentences in 60 s. In ``run_parsing`` at P3 (5,000 public sentences,
3 minutes of head training, 500 test sentences): prv 93.85 against the tag-frequency floor's 95.34, the
held-out MRR still rising when the budget ran out.

Sentences longer than the model's 512 subwords are truncated; an obfuscated position whose first subword is
cut off (or a word that tokenizes to nothing) is never scored: rank 0 (a miss), counted in
``config()["unreached_positions"]`` with a :class:`~veil.errors.DataWarning` at attack time.

Departures from the paper: MiniLM (6 layers, 384 wide, sentence-embedding fine-tuned) instead of BERT-base,
frozen rather than fine-tuned; the attacker sees the POS tags (the service receives them); a capped vocabulary.
"""

from __future__ import annotations

import copy
import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from veil.attacks.base import Attack, ThreatModel
from veil.attacks.word_recovery.floors import THREAT, AttackVocabulary
from veil.attacks.word_recovery.observe import ObfuscatedText
from veil.errors import DataFormatError, DataWarning, InvalidParameterError, InvalidTypeError

__all__ = ["ContextualAttacker", "READS"]

READS = ("mask", "substitute")


def _head(d_in: int, n_tags: int, words: Any, hidden: int, dropout: float) -> Any:
    """Feature + tag -> hidden -> encoder width, scored against the frozen encoder embedding of every word."""
    import torch
    from torch import nn

    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(d_in)
            self.tag = nn.Embedding(n_tags, 32, padding_idx=0)
            self.mlp = nn.Sequential(nn.Dropout(dropout / 2), nn.Linear(d_in + 32, hidden), nn.GELU(),
                                     nn.Dropout(dropout), nn.Linear(hidden, words.shape[1]),
                                     nn.LayerNorm(words.shape[1]))
            self.register_buffer("words", words)  # (V, width): frozen, like BERT's tied output embedding
            self.bias = nn.Parameter(torch.zeros(words.shape[0]))
            self.register_buffer("prior", torch.zeros(n_tags, words.shape[0]))  # log p(word | tag), set by fit

        def forward(self, x: Any, tags: Any) -> Any:
            h = self.mlp(torch.cat([self.norm(x), self.tag(tags)], -1))
            return h @ self.words.T + self.bias + self.prior[tags]

    return Head()


class ContextualAttacker(Attack):
    """Recover obfuscated words from a frozen MiniLM's view of the sentence (see the module docstring)."""

    name = "word-recovery-minilm"
    citation = ("Hu et al. 2020, Sec. 5.2 (trained attacker over a frozen pretrained encoder; MiniLM in place "
                "of BERT, see the module docstring)")
    threat = ThreatModel(THREAT.observes, THREAT.needs + ("the obfuscation mechanism (not its draws)",
                                                          "a public pretrained encoder (all-MiniLM-L6-v2)"),
                         trains=True)
    observes = "obfuscated-text"
    bench_cell = "veil.bench.cells.obfuscated_text:word_recovery_cell"

    def __init__(self, vocabulary: AttackVocabulary, tags: Sequence[str], *, encoder: str = "minilm",
                 reads: str = "mask", layers: int = 2, hidden: int = 512, dropout: float = 0.3,
                 batch_size: int = 64, seed: int = 0) -> None:
        """``seed`` (an int, for experiments) seeds the head's initialisation, dropout, shuffling and held-out split."""
        if not isinstance(vocabulary, AttackVocabulary):
            raise InvalidTypeError(f"vocabulary must be an AttackVocabulary, not {type(vocabulary).__name__}")
        if reads not in READS:
            raise InvalidParameterError(f"reads must be one of {', '.join(READS)}, got {reads!r}")
        for key, value, low in (("layers", layers, 1), ("hidden", hidden, 1), ("batch_size", batch_size, 1),
                                ("seed", seed, 0)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidTypeError(f"{key} must be an int, not {type(value).__name__}")
            if value < low:
                raise InvalidParameterError(f"{key} must be >= {low}, got {value}")
        if not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
            raise InvalidParameterError(f"dropout must be a number in [0, 1), got {dropout!r}")
        import torch

        from veil.encoders.registry import resolve_model
        from veil.encoders.text import _load

        resolved = resolve_model(encoder)
        self.model, self.tokenizer = _load(resolved.folder, "cpu")
        self.model.requires_grad_(False)
        n_layers = int(self.model.config.num_hidden_layers)
        if layers > n_layers:
            raise InvalidParameterError(f"layers must be <= {n_layers} (the encoder's depth), got {layers}")
        self.max_length = int(min(self.tokenizer.model_max_length, self.model.config.max_position_embeddings))
        self.encoder_id, self.reads, self.layers = resolved.model_id, reads, layers
        self.hidden, self.dropout, self.batch_size, self.seed = hidden, float(dropout), batch_size, seed
        self.vocabulary, self.tags = vocabulary, ("<pad>", "<unk>", *sorted(set(tags)))
        self._lookup, self._tag = vocabulary.index(), {t: i for i, t in enumerate(self.tags)}
        self.feature_dim = layers * int(self.model.config.hidden_size)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.head = _head(self.feature_dim, len(self.tags), self._word_embeddings(), hidden, self.dropout)
        self.history: list[dict[str, float]] = []
        self.selected_epoch: int | None = None
        #: how training ended: "epochs", "flattened" (the dev MRR stopped rising) or "budget" (cut short by the
        #: minute cap: a busy machine; a record made with it is not the result its epochs ask for)
        self.stopped: str | None = None
        self.unreached = {"fit": 0, "rank": 0}
        self.feature_stats: dict[str, dict[str, float]] = {}

    def config(self) -> dict[str, Any]:
        return {**super().config(), "encoder": self.encoder_id, "reads": self.reads, "layers": self.layers,
                "hidden": self.hidden, "dropout": self.dropout, "vocabulary": len(self.vocabulary),
                "max_length": self.max_length, "seed": self.seed, "selected_epoch": self.selected_epoch,
                "stopped": self.stopped, "unreached_positions": dict(self.unreached),
                "features": copy.deepcopy(self.feature_stats), "history": self.history[-5:]}

    def _word_embeddings(self) -> Any:
        """(V, width): the mean input embedding of each vocabulary word's subwords (zero for special entries)."""
        import torch

        table = self.model.get_input_embeddings().weight.detach()
        out = torch.zeros(len(self.vocabulary), table.shape[1])
        n_special = len(AttackVocabulary.SPECIAL)
        ids = self.tokenizer(list(self.vocabulary.words[n_special:]), add_special_tokens=False)["input_ids"]
        for k, pieces in enumerate(ids):
            if pieces:
                out[n_special + k] = table[pieces].mean(0)
        return out

    def _set_prior(self, tags: np.ndarray, y: np.ndarray, smoothing: float = 0.1) -> None:
        """log p(word | tag) on the training positions, add-``smoothing``: the tag-frequency floor as a start."""
        import torch

        counts = np.full((len(self.tags), len(self.vocabulary)), smoothing)
        np.add.at(counts, (tags, y), 1.0)
        prior = np.log(counts / counts.sum(1, keepdims=True))
        prior[:, :len(AttackVocabulary.SPECIAL)] = 0.0
        self.head.prior.copy_(torch.as_tensor(prior, dtype=torch.float32))

    # -- features -------------------------------------------------------------------------------------------
    def _features(self, text: ObfuscatedText, progress: bool, stage: str) -> tuple[np.ndarray, np.ndarray]:
        """``(n_positions, d)`` float16 features in sentence/position order, and which positions were reached.

        Its speed is recorded in ``self.feature_stats[stage]``."""
        import torch

        from veil.progress import progress_bar

        offsets = np.concatenate([[0], np.cumsum([len(p) for p in text.positions])]).astype(np.int64)
        feats = np.zeros((int(offsets[-1]), self.feature_dim), dtype=np.float16)
        reached = np.zeros(int(offsets[-1]), dtype=bool)
        order = sorted((i for i in range(len(text)) if text.positions[i]), key=lambda i: len(text.words[i]))
        mask = self.tokenizer.mask_token
        start = time.monotonic()
        self.model.eval()
        with torch.inference_mode(), progress_bar(len(order), "MiniLM features", progress) as advance:
            for s in range(0, len(order), self.batch_size):
                idx = order[s:s + self.batch_size]
                seqs = []
                for i in idx:
                    words = list(text.words[i])
                    if self.reads == "mask":
                        for p in text.positions[i]:
                            words[p] = mask
                    seqs.append(words)
                enc = self.tokenizer(seqs, is_split_into_words=True, truncation=True, max_length=self.max_length,
                                     padding=True, return_tensors="pt")
                out = self.model(**enc, output_hidden_states=True)
                h = torch.cat([out.hidden_states[-k] for k in range(self.layers, 0, -1)], -1)
                rows, cols, dest = [], [], []
                for b, i in enumerate(idx):
                    first: dict[int, int] = {}
                    for t, w in enumerate(enc.word_ids(b)):
                        if w is not None and w not in first:
                            first[w] = t
                    for k, p in enumerate(text.positions[i]):
                        if p in first:
                            rows.append(b)
                            cols.append(first[p])
                            dest.append(int(offsets[i]) + k)
                if dest:
                    feats[dest] = h[rows, cols].float().numpy().astype(np.float16)
                    reached[dest] = True
                advance(len(idx))
        seconds = time.monotonic() - start
        self.feature_stats[stage] = {"sentences": len(order), "seconds": round(seconds, 2),
                                     "sentences_per_s": round(len(order) / seconds, 1) if seconds > 0 else 0.0}
        return feats, reached

    def _tag_ids(self, text: ObfuscatedText) -> np.ndarray:
        return np.asarray([self._tag.get(tags[p], 1) for tags, pos in zip(text.tags, text.positions) for p in pos],
                          dtype=np.int64)

    def _logits(self, feats: np.ndarray, tags: np.ndarray) -> Any:
        import torch

        logits = self.head(torch.as_tensor(feats, dtype=torch.float32), torch.as_tensor(tags))
        logits[:, :len(AttackVocabulary.SPECIAL)] = float("-inf")
        return logits

    def _ranks(self, feats: np.ndarray, tags: np.ndarray, targets: np.ndarray, chunk: int = 512) -> np.ndarray:
        import torch

        from veil.metrics.ranking import pessimistic_ranks

        self.head.eval()
        out = [np.zeros(0, dtype=np.int64)]
        with torch.inference_mode():
            for s in range(0, len(targets), chunk):
                out.append(pessimistic_ranks(self._logits(feats[s:s + chunk], tags[s:s + chunk]),
                                             targets[s:s + chunk]))
        return np.concatenate(out)

    # -- training and attack --------------------------------------------------------------------------------
    def fit(self, text: ObfuscatedText, originals: Sequence[Sequence[str]], *, epochs: int = 40,
            max_minutes: float = 10.0, batch_size: int = 256, lr: float = 1e-3, patience: int = 4,
            dev_share: float = 0.05, progress: bool = False) -> "ContextualAttacker":
        """Train the head on the attacker's own obfuscations ``text`` of public sentences and their ``originals``.

        The feature pass runs first (its time is not part of ``max_minutes``, which bounds the head's training);
        the kept head is the one of the epoch with the best MRR on the held-out ``dev_share`` of the sentences
        (with fewer than 20 sentences nothing is held out and the last epoch is kept).
        """
        from veil.attacks.word_recovery.neural import _check_budget

        _check_budget(epochs=epochs, max_minutes=max_minutes, batch_size=batch_size, lr=lr, patience=patience,
                      dev_share=dev_share)
        import torch

        if not isinstance(text, ObfuscatedText):
            raise InvalidTypeError(f"text must be an ObfuscatedText (see observe()), not {type(text).__name__}")
        if len(originals) != len(text) or any(len(o) != len(p) for o, p in zip(originals, text.positions)):
            raise DataFormatError("originals must hold one word per obfuscated position of each sentence")
        if not 0.0 <= dev_share < 1.0:
            raise InvalidParameterError(f"dev_share must be in [0, 1), got {dev_share!r}")
        rng = np.random.default_rng(self.seed)
        feats, reached = self._features(text, progress, "fit")
        tags = self._tag_ids(text)
        y = np.asarray(self.vocabulary.targets([w.lower() for o in originals for w in o], self._lookup),
                       dtype=np.int64)
        sentence = np.repeat(np.arange(len(text)), [len(p) for p in text.positions])
        n_dev = int(round(dev_share * len(text))) if len(text) >= 20 else 0
        held = np.zeros(len(text), dtype=bool)
        held[rng.permutation(len(text))[:n_dev]] = True
        self.unreached["fit"] = int((~reached).sum())
        train = np.flatnonzero(reached & (y >= 0) & ~held[sentence])
        dev = np.flatnonzero(reached & held[sentence])
        if len(train) == 0:
            raise DataFormatError("no obfuscated position of the training text has its original in the attacker's "
                                  "vocabulary; give the attacker more public text")
        self._set_prior(tags[train], y[train])
        opt = torch.optim.Adam(self.head.parameters(), lr=lr)
        start, best, best_state = time.monotonic(), -1.0, None
        self.history, self.stopped = [], "epochs"
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed + 1)
            for epoch in range(epochs):
                self.head.train()
                perm = train[rng.permutation(len(train))]
                total, count = 0.0, 0
                for s in range(0, len(perm), batch_size):
                    b = np.sort(perm[s:s + batch_size])
                    logits = self.head(torch.as_tensor(feats[b], dtype=torch.float32), torch.as_tensor(tags[b]))
                    loss = torch.nn.functional.cross_entropy(logits, torch.as_tensor(y[b]))
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    total, count = total + loss.item(), count + 1
                    if (time.monotonic() - start) / 60 > max_minutes:
                        self.stopped = "budget"
                        break
                row: dict[str, float] = {"epoch": epoch, "loss": total / max(count, 1),
                                         "minutes": round((time.monotonic() - start) / 60, 3)}
                if len(dev):
                    ranks = self._ranks(feats[dev], tags[dev], y[dev])
                    row["dev_mrr"] = float(np.where(ranks > 0, 1.0 / np.maximum(ranks, 1), 0.0).mean())
                    if row["dev_mrr"] > best:
                        best, best_state, self.selected_epoch = row["dev_mrr"], copy.deepcopy(
                            self.head.state_dict()), epoch
                else:
                    self.selected_epoch = epoch
                self.history.append(row)
                if epoch < epochs - 1 and (time.monotonic() - start) / 60 > max_minutes:
                    self.stopped = "budget"
                    break
                if len(dev) and self.selected_epoch is not None and epoch - self.selected_epoch >= patience:
                    self.stopped = "flattened"
                    break
        if best_state is not None:
            self.head.load_state_dict(best_state)
        self.head.eval()
        return self

    def run(self, observation: ObfuscatedText) -> list[list[str | None]]:
        """The attack's one verb: the top guess at every obfuscated position (None where the encoder did not reach
        the position)."""
        import torch

        if not isinstance(observation, ObfuscatedText):
            raise InvalidTypeError(f"observation must be an ObfuscatedText (see observe()), "
                                   f"not {type(observation).__name__}")
        feats, reached = self._features(observation, False, "run")
        tags = self._tag_ids(observation)
        guesses: list[str | None] = [None] * len(reached)
        keep = np.flatnonzero(reached)
        self.head.eval()
        with torch.inference_mode():
            for s in range(0, len(keep), 512):
                rows = keep[s:s + 512]
                logits = self._logits(feats[rows], tags[rows])
                logits[:, :len(AttackVocabulary.SPECIAL)] = float("-inf")
                for r, b in zip(rows, logits.argmax(dim=1).tolist()):
                    guesses[r] = self.vocabulary.words[b]
        it = iter(guesses)
        return [[next(it) for _ in pos] for pos in observation.positions]

    def rank(self, text: ObfuscatedText, targets: Sequence[Sequence[str]]) -> np.ndarray:
        """Pessimistic rank of each true word (lower-cased) at each obfuscated position (0: outside the vocabulary
        or not reached by the encoder)."""
        if not isinstance(text, ObfuscatedText):
            raise InvalidTypeError(f"text must be an ObfuscatedText (see observe()), not {type(text).__name__}")
        feats, reached = self._features(text, False, "rank")  # from the released text alone
        tgt = np.asarray(self.vocabulary.targets([w for ws in targets for w in ws], self._lookup), dtype=np.int64)
        if len(tgt) != len(reached):
            raise DataFormatError(f"{len(tgt)} targets for {len(reached)} obfuscated positions")
        out = np.zeros(len(tgt), dtype=np.int64)
        keep = np.flatnonzero(reached)
        out[keep] = self._ranks(feats[keep], self._tag_ids(text)[keep], tgt[keep])
        self.unreached["rank"] = int((~reached).sum())
        if self.unreached["rank"]:
            warnings.warn(f"{self.unreached['rank']} obfuscated position(s) lie past the encoder's "
                          f"{self.max_length} subwords (or tokenize to nothing) and count as misses (rank 0)",
                          DataWarning, stacklevel=2)
        return out
