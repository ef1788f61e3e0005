"""Infilling: recover each redacted span of a released text from its context, with veil's masked LM.

Threat model: the attacker holds the released texts and knows the redactor and its operator (Kerckhoffs), so it
knows where the redacted spans are: ``<PERSON>`` placeholders (operator ``type``), runs of ``*`` as long as the
original value (``mask``: the length is released), 64-hex-digit tokens (``hash``: equal values give equal hashes, so
every mention of one value is linked). It never sees the owner's key, the spans' values or the detections. Its
public resources: veil's masked LM (trained on public text, ``veil models train mlm``) and a candidate set with
counts, e.g. every value its own run of the same redactor finds in public text.

Scoring: for each slot, the placeholder is replaced by k ``[MASK]`` tokens for k = 1..``max_pieces`` in a window of
the text around it, and a candidate of k subword pieces scores the sum of its pieces' log-probabilities at those
k positions (all masks predicted at once), plus the log of its public frequency (``prior``). Operator-specific
knowledge is used where the release gives it: under ``mask`` only candidates of the slot's length are ranked; under
``hash`` the masked-LM scores of every slot carrying the same hash are averaged (the attacker links the mentions).
The masked-LM term is weighted by ``weight`` against the prior (the experiments choose it on the attacker's own
public data, never on the targets).
Operators whose output hides where the spans are (``pseudonym``: surrogate names look like names) are out of this
attack's reach and refused: attack them with re-identification.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from veil.attacks.base import Attack, ThreatModel
from veil.attacks.text.observe import ReleasedText
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError

__all__ = ["Slot", "Infilling", "find_slots", "normalise", "SLOT_OPERATORS"]

#: the operators whose placeholders show where a span was, and how a placeholder looks
SLOT_OPERATORS = {"type": re.compile(r"<([A-Z][A-Z_]*)>"), "mask": re.compile(r"\*{2,}"),
                  "hash": re.compile(r"\b[0-9a-f]{64}\b")}
_MLM_NEED = "veil's masked LM (trained on public text by `veil models train mlm`)"


def normalise(value: str) -> str:
    """How values are compared: whitespace collapsed, case folded."""
    return " ".join(value.split()).casefold()


@dataclass(frozen=True)
class Slot:
    """One redacted span as the attacker sees it: the document, where the placeholder is, its text, and its entity
    when the placeholder says it (``type``) or None."""

    doc: int
    start: int
    end: int
    text: str
    entity: str | None


def _operator(observation: ReleasedText) -> str:
    op = observation.defense.get("operator")
    if op not in SLOT_OPERATORS:
        raise InvalidParameterError(
            f"infilling needs a release whose placeholders show where the redacted spans are (redaction with operator "
            f"{', '.join(SLOT_OPERATORS)}); this release's defense is {observation.defense.get('defense')!r} with "
            f"operator {op!r} (pseudonyms: use `veil redaction reidentify`)")
    return str(op)


def find_slots(observation: ReleasedText, entity: str | None = None) -> list[Slot]:
    """Every placeholder of the release (``entity``: under ``type``, only placeholders of that entity)."""
    if not isinstance(observation, ReleasedText):
        raise InvalidTypeError(f"observation must be a ReleasedText (observe_text(...)), not "
                               f"{type(observation).__name__}")
    op = _operator(observation)
    pattern = SLOT_OPERATORS[op]
    out = []
    for d, text in enumerate(observation.texts):
        for m in pattern.finditer(text):
            ent = m.group(1) if op == "type" else None
            if op == "type" and entity is not None and ent != entity:
                continue
            out.append(Slot(d, m.start(), m.end(), m.group(), ent))
    return out


class Infilling(Attack):
    """Rank public candidate values for each redacted span (see the module docstring).

    ``candidates``: the attacker's public values, repeated as often as seen (their counts are the prior);
    ``entity``: the entity type attacked (``type`` placeholders of other types are skipped); ``model``: veil's masked
    LM (a name, a folder or a loaded :class:`~veil.models.mlm.MaskedLM`); ``window``: characters of context on each
    side of a slot; ``prior``: add the log public frequency.
    """

    name = "infill"
    observes = "text"
    bench_cell = "veil.bench.cells.text:infill_cell"
    citation = ("infilling attacks on redacted text (masked-LM span recovery; e.g. Patsakis and Lykousas 2023, "
                "Staab et al. 2023): veil's masked LM with subword-level candidate scoring")
    threat = ThreatModel("the released (redacted) texts and where the redacted spans are (the operator's public "
                         "placeholders)", needs=("public candidate values with counts (what the attacker's own run of "
                                                 "the redactor finds in public text)", _MLM_NEED,
                                                 "the redaction mechanism and its operator (not its key)"),
                         trains=False)

    @classmethod
    def bench_applies(cls, defense: str, setting: Any) -> bool:
        """Redaction whose placeholders show where the spans are (not pseudonyms, not rewriting such as metric DP)."""
        return defense == "redaction" and setting.get("operator") in SLOT_OPERATORS

    def __init__(self, candidates: Iterable[str], *, entity: str = "PERSON", model: Any = "mlm",
                 max_pieces: int = 6, window: int = 300, prior: bool = True, use_model: bool = True,
                 weight: float = 1.0, batch_size: int = 32) -> None:
        if isinstance(candidates, str):
            raise InvalidTypeError("candidates must be a list of values (strings), not one string")
        counts: Counter[str] = Counter()
        shown: dict[str, str] = {}
        for v in candidates:
            if not isinstance(v, str):
                raise InvalidTypeError(f"candidates must be strings, got a {type(v).__name__}")
            key = normalise(v)
            if key:
                counts[key] += 1
                shown.setdefault(key, " ".join(v.split()))
        if len(counts) < 2:
            raise InvalidParameterError(f"infilling needs at least 2 distinct candidate values, got {len(counts)}")
        for name, value, low, high in (("max_pieces", max_pieces, 1, 12), ("window", window, 20, 5000),
                                       ("batch_size", batch_size, 1, 4096)):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise InvalidParameterError(f"{name} must be an int in {low}..{high}, got {value!r}")
        self.entity, self.max_pieces, self.window, self.batch_size = entity, max_pieces, window, batch_size
        self.use_prior, self.use_model = bool(prior), bool(use_model)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 < float(weight) <= 100.0:
            raise InvalidParameterError(f"weight must be a number in (0, 100], got {weight!r}")
        self.weight = float(weight)
        if not (self.use_prior or self.use_model):
            raise InvalidParameterError("prior=False with use_model=False leaves nothing to rank by")
        self.keys = sorted(counts, key=lambda k: (-counts[k], k))
        self.values = [shown[k] for k in self.keys]
        self.counts = np.asarray([counts[k] for k in self.keys], dtype=np.float64)
        self.prior = np.log(self.counts / self.counts.sum())
        self.lengths = np.asarray([len(v) for v in self.values])
        self._row = {k: i for i, k in enumerate(self.keys)}
        self.mlm = None
        if self.use_model:
            from veil.attacks.word_recovery.veil_mlm import _model

            self.mlm = _model(model)
            tok = self.mlm.tokenizer
            pieces = [tok(v, add_special_tokens=False)["input_ids"] for v in self.values]
            self.n_pieces = np.asarray([len(p) for p in pieces])
            self._by_k = {k: (np.flatnonzero(self.n_pieces == k),
                              np.asarray([pieces[i] for i in np.flatnonzero(self.n_pieces == k)],
                                         dtype=np.int64).reshape(-1, k)) for k in range(1, max_pieces + 1)}

    def config(self) -> dict[str, Any]:
        out = {**super().config(), "entity": self.entity, "candidates": len(self.keys),
               "candidate_mentions": int(self.counts.sum()), "prior": self.use_prior, "use_model": self.use_model,
               "weight": self.weight,
               "window_chars": self.window, "max_pieces": self.max_pieces}
        if self.mlm is not None:
            out["mlm"] = self.mlm.identity()
            out["unscorable_candidates"] = int((self.n_pieces > self.max_pieces).sum())
        return out

    def index(self, value: str) -> int | None:
        """The candidate row of ``value`` (None: not a candidate)."""
        return self._row.get(normalise(value))

    # ------------------------------------------------------------ scoring
    def _mlm_scores(self, observation: ReleasedText, slots: Sequence[Slot]) -> np.ndarray:
        import torch

        model, tok = self.mlm.model, self.mlm.tokenizer
        cls_id, sep_id, mask_id = tok.cls_token_id, tok.sep_token_id, self.mlm.mask_id
        side = (self.mlm.max_length - 2 - self.max_pieces) // 2
        contexts = []
        for s in slots:
            text = observation.texts[s.doc]
            left = tok(text[max(0, s.start - self.window):s.start], add_special_tokens=False)["input_ids"][-side:]
            right = tok(text[s.end:s.end + self.window], add_special_tokens=False)["input_ids"][:side]
            contexts.append((left, right))
        out = np.full((len(slots), len(self.keys)), -np.inf)
        model.eval()
        with torch.inference_mode():
            for k in range(1, self.max_pieces + 1):
                cols, pcs = self._by_k[k]
                if len(cols) == 0:
                    continue
                pk = torch.as_tensor(pcs)
                for b in range(0, len(slots), self.batch_size):
                    chunk = contexts[b:b + self.batch_size]
                    h = self.mlm.hidden([[cls_id] + left + [mask_id] * k + right + [sep_id] for left, right in chunk])
                    first = torch.as_tensor([1 + len(left) for left, _ in chunk])
                    rows = torch.arange(len(chunk))
                    sc = 0
                    for j in range(k):
                        lp = torch.log_softmax(model.cls(h[rows, first + j].float()), -1)
                        sc = sc + lp[:, pk[:, j]]
                    out[b:b + len(chunk), cols] = sc.numpy()
        return out

    def scores(self, observation: ReleasedText, slots: Sequence[Slot] | None = None) -> np.ndarray:
        """(slots, candidates) scores, higher = more likely; -inf: ruled out (wrong length under ``mask``)."""
        op = _operator(observation)
        slots = find_slots(observation, self.entity) if slots is None else list(slots)
        if not slots:
            return np.zeros((0, len(self.keys)))
        sc = self._mlm_scores(observation, slots) if self.use_model else np.zeros((len(slots), len(self.keys)))
        if op == "hash" and self.use_model:  # one value per hash: pool the evidence of every linked mention
            groups: dict[str, list[int]] = {}
            for i, s in enumerate(slots):
                groups.setdefault(s.text, []).append(i)
            for rows in groups.values():
                if len(rows) > 1:
                    sc[rows] = sc[rows].mean(axis=0)
        sc = self.weight * sc
        if self.use_prior:
            sc = sc + self.prior[None, :]
        if op == "mask":
            for i, s in enumerate(slots):
                sc[i, self.lengths != len(s.text)] = -np.inf
        return sc

    def rank(self, observation: ReleasedText, slots: Sequence[Slot], targets: Sequence[str]) -> np.ndarray:
        """The 1-based rank of each slot's true value among the candidates (pessimistic on ties; 0: the value is
        not a candidate or was ruled out)."""
        if len(slots) != len(targets):
            raise DataFormatError(f"{len(targets)} targets for {len(slots)} slots")
        sc = self.scores(observation, slots)
        ranks = np.zeros(len(slots), dtype=np.int64)
        for i, t in enumerate(targets):
            j = self.index(t)
            if j is None or not np.isfinite(sc[i, j]):
                continue
            ranks[i] = int((sc[i] >= sc[i, j]).sum())
        return ranks

    def run(self, observation: ReleasedText, top: int = 10) -> list[tuple[Slot, list[str]]]:
        """The attacker's output: each slot with its ``top`` guesses, best first (no truth involved)."""
        slots = find_slots(observation, self.entity)
        sc = self.scores(observation, slots)
        out = []
        for i, s in enumerate(slots):
            order = np.argsort(-sc[i], kind="stable")[:top]
            out.append((s, [self.values[j] for j in order if np.isfinite(sc[i, j])]))
        return out
