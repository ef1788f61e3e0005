"""Correction by re-embedding: the inverter's guesses re-embedded with the public encoder and moved toward the
target vector (Vec2Text, Morris et al., EMNLP 2023, Sec. 3-4), on CPU and without a trained corrector.

Threat model (:data:`THREAT_MODEL`): the attacker observes released sentence vectors only. It needs the public
encoder (to re-embed its own guesses), the inverter trained on public text (:mod:`veil.models.inverter`) and, for
word edits, veil's masked LM trained on public text (:mod:`veil.models.mlm`). It has no index of private text,
and :func:`correct` takes no text at all: its inputs are the target vectors and these public models.

The search, for each target ``v`` (cosines against ``v / |v|``; the encoder's vectors are unit length):

* step 0: the greedy decode and the ``n_best`` best hypotheses of a beam search of width ``beam``
  (:meth:`~veil.models.inverter.Inverter.hypotheses`), all re-embedded; the one closest to ``v`` is kept;
* each step ``t = 1..steps`` proposes new texts for the current hypothesis ``h`` and keeps the closest to ``v``
  if it is closer than ``h`` (so the cosine of every text is non-decreasing over the steps):

  - *feedback* (one decode per ``alpha`` in ``alphas``): the ``n_best`` beam hypotheses decoded from
    ``u = v + alpha (v - e(h))``, normalised, ``e(h)`` the embedding of ``h``: the inverter is asked for the text
    whose embedding lies past its current miss. Vec2Text feeds ``v``, ``e(h)`` and ``v - e(h)`` to a trained
    corrector; here the residual moves the query of the base inverter itself;
  - *substitutions*: each WordPiece position of ``h`` (at most ``edit_positions``, spread evenly over longer
    texts) masked in turn, the masked LM's ``fillers`` most likely tokens put there (special and unused tokens
    and the token already there excluded), one batch of masked texts per chunk;
  - *deletions* (``deletions=True``): ``h`` without one of its words (a word: a token and its ``##`` pieces).

  Every new candidate of a chunk is re-embedded in one batch; a candidate already scored for that target (at any
  step) is not scored again, and a target whose hypothesis did not change in the previous step is not searched
  again (its proposals are those already scored). An empty text cannot be encoded: it is no candidate, and a
  target whose hypotheses are all empty keeps ``""`` with cosine -1 (the floor) until a non-empty text replaces it.

What each proposal kind buys, measured (see ``DEFAULTS`` below) on rt-polarity test sentences (a corpus the quick
inverter never trained on) with ``inverter-quick`` and ``mlm-quick``, one CPU thread (dev run):
MEASURED

Departures from Vec2Text: no trained corrector (the base inverter is re-queried with the extrapolated vector, and
the masked LM proposes word edits); a greedy hill climb on the re-embedded cosine with one kept hypothesis per
target (Vec2Text's sequence-level beam keeps several); a handful of steps (Vec2Text: up to 50).

The result (:class:`Correction`) holds every step's texts, their cosines, which proposal kind produced each kept
text, how many candidates were re-embedded and the seconds spent up to that step (loading models excluded), so one
run gives the whole correction curve (quality and cost against the number of steps).
"""

from __future__ import annotations

import math
import numbers
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from veil.attacks.base import ThreatModel
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError

__all__ = ["THREAT_MODEL", "Correction", "correct", "SOURCES"]

THREAT_MODEL = ThreatModel(
    observes="released sentence vectors (no text)",
    needs=("the public encoder, queried to re-embed guesses", "the inverter trained on public text",
           "veil's masked LM trained on public text (word edits)"))

#: the proposal kinds a kept text can come from: step 0 (``greedy``, ``beam``), then ``kept`` (nothing closer),
#: ``feedback``, ``substitution``, ``deletion``
SOURCES = ("greedy", "beam", "kept", "feedback", "substitution", "insertion", "deletion")
_UNUSED = re.compile(r"^\[unused\d+\]$")


@dataclass(frozen=True)
class Correction:
    """The correction curve of ``n`` targets over ``steps`` steps (index 0: the step-0 pick).

    ``texts[t][i]``: the hypothesis for target ``i`` after step ``t``; ``cosines`` (steps + 1, n): the cosine of
    its embedding to the target; ``sources[t][i]``: the proposal kind it came from (:data:`SOURCES`);
    ``candidates`` (steps + 1,): the texts re-embedded in each step; ``seconds`` (steps + 1,): wall seconds spent
    from the start up to the end of each step (models loaded before); ``config``: the settings and the
    identities of the inverter, the encoder and the masked LM."""

    texts: tuple[tuple[str, ...], ...]
    cosines: np.ndarray
    sources: tuple[tuple[str, ...], ...]
    candidates: np.ndarray
    seconds: np.ndarray
    config: dict[str, Any]

    def __post_init__(self) -> None:
        for name in ("cosines", "candidates", "seconds"):
            a = np.array(getattr(self, name), copy=True)
            a.flags.writeable = False
            object.__setattr__(self, name, a)

    @property
    def steps(self) -> int:
        return len(self.texts) - 1

    @property
    def final(self) -> list[str]:
        """The texts after the last step."""
        return list(self.texts[-1])

    def mean_cosine(self) -> np.ndarray:
        """(steps + 1,) the mean cosine over the targets after each step."""
        return self.cosines.mean(axis=1)

    def seconds_per_text(self) -> np.ndarray:
        """(steps + 1,) the seconds per target spent up to each step."""
        return self.seconds / max(1, self.cosines.shape[1])

    def to_dict(self) -> dict[str, Any]:
        return {"texts": [list(t) for t in self.texts], "cosines": self.cosines.tolist(),
                "sources": [list(s) for s in self.sources], "candidates": self.candidates.tolist(),
                "seconds": self.seconds.tolist(), "config": self.config}


# --------------------------------------------------------------------------- proposals
class _Edits:
    """Substitutions from the masked LM's fillers and single-word deletions of token sequences."""

    def __init__(self, mlm: Any, *, positions: int, fillers: int, deletions: bool, insertions: bool,
                 batch_size: int) -> None:
        import torch

        tok = mlm.tokenizer
        vocab = tok.get_vocab()
        banned = torch.zeros(len(mlm.model.cls.predictions.decoder.weight), dtype=torch.bool)
        banned[[i for t, i in vocab.items() if _UNUSED.match(t) or i in set(tok.all_special_ids)]] = True
        self.mlm, self.tok, self.banned = mlm, tok, banned
        self.positions, self.fillers, self.batch_size = positions, fillers, batch_size
        self.deletions, self.insertions = deletions, insertions

    def propose(self, texts: Sequence[str], guide: Any = None) -> list[list[tuple[str, str]]]:
        """For each text: ``(candidate, kind)`` pairs, substitutions first. ``guide(seqs)``, when given, returns
        for each token sequence a (len + 1, vocab) tensor of log-probabilities added to the masked LM's at each
        position (the inverter's, from the target vector and the tokens to the left)."""
        import torch

        tok, mlm = self.tok, self.mlm
        seqs = [tok(t, add_special_tokens=False)["input_ids"][:mlm.max_length - 2] if t else [] for t in texts]
        prior = guide(seqs) if guide is not None else None
        masked: list[tuple[int, int, int]] = []  # (text, position, 0: substitute there, 1: insert before it)
        for r, ids in enumerate(seqs):
            if len(ids) <= self.positions:
                at = list(range(len(ids)))
            else:
                at = [int(j) for j in np.unique(np.linspace(0, len(ids) - 1, self.positions).round())]
            masked += [(r, j, 0) for j in at]
            if self.insertions and ids:
                masked += [(r, j, 1) for j in at + [len(ids)]]
        out: list[list[tuple[str, str]]] = [[] for _ in texts]
        cls_id, sep_id, mask_id = int(tok.cls_token_id), int(tok.sep_token_id), mlm.mask_id
        with torch.inference_mode():
            for s in range(0, len(masked), self.batch_size):
                part = masked[s:s + self.batch_size]
                h = mlm.hidden([[cls_id] + seqs[r][:j] + [mask_id] + seqs[r][j + 1 - ins:] + [sep_id]
                                for r, j, ins in part])
                at = h[torch.arange(len(part)), torch.as_tensor([j + 1 for _, j, _ in part])]
                logits = torch.log_softmax(mlm.model.cls(at.float()), -1).masked_fill(self.banned, -math.inf)
                if prior is not None:
                    logits += torch.stack([prior[r][j] for r, j, _ in part])
                for k, (r, j, ins) in enumerate(part):
                    if not ins:
                        logits[k, seqs[r][j]] = -math.inf
                for (r, j, ins), fill in zip(part, logits.topk(self.fillers, dim=-1).indices.tolist()):
                    kind = "insertion" if ins else "substitution"
                    out[r] += [(self._text(seqs[r][:j] + [f] + seqs[r][j + 1 - ins:]), kind) for f in fill]
        if self.deletions:
            for r, ids in enumerate(seqs):
                starts = [j for j, t in enumerate(tok.convert_ids_to_tokens(ids)) if not t.startswith("##")]
                if len(starts) > 1:
                    for a, b in zip(starts, starts[1:] + [len(ids)]):
                        out[r].append((self._text(ids[:a] + ids[b:]), "deletion"))
        return out

    def _text(self, ids: Sequence[int]) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=True).strip()


def _inverter_guide(inverter: Any, vectors: np.ndarray) -> Any:
    """``guide(seqs)`` for :meth:`_Edits.propose`: the inverter's next-token log-probabilities at every position
    of each sequence, teacher-forced, conditioned on the matching row of ``vectors``."""
    import torch

    def guide(seqs: Sequence[Sequence[int]]) -> list[Any]:
        net, tok = inverter.net, inverter.tokenizer
        width = max(map(len, seqs)) + 1
        ids = torch.full((len(seqs), width), int(tok.pad_token_id), dtype=torch.long)
        att = torch.zeros((len(seqs), width), dtype=torch.long)
        for r, q in enumerate(seqs):
            ids[r, :len(q) + 1] = torch.as_tensor([int(tok.cls_token_id), *q])
            att[r, :len(q) + 1] = 1
        v = torch.as_tensor(vectors, dtype=torch.float32)
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
            hidden = net.start(v, ids, att).last_hidden_state[:, net.prefix_tokens:]
            logp = torch.log_softmax(net.logits(hidden, net.output_shift(v)[:, None].expand(-1, width, -1)), -1)
        return [logp[r, :len(q) + 1] for r, q in enumerate(seqs)]

    return guide


# --------------------------------------------------------------------------- the search
def _best(encoder: Any, targets: np.ndarray, pools: Sequence[Sequence[tuple[str, str]]], batch_size: int
          ) -> tuple[list[int], np.ndarray, np.ndarray]:
    """For each pool of ``(text, kind)`` (non-empty, distinct texts): the index of the text closest to its target
    (-1 for an empty pool), that cosine (-1 for an empty pool) and its unit embedding (zeros for an empty pool)."""
    flat = [t for pool in pools for t, _ in pool]
    emb = encoder.encode(flat, batch_size=batch_size, progress=False) if flat else np.zeros((0, targets.shape[1]))
    emb = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
    index, cos, vec = [], np.full(len(pools), -1.0), np.zeros_like(targets)
    start = 0
    for i, pool in enumerate(pools):
        if not pool:
            index.append(-1)
            continue
        c = emb[start:start + len(pool)] @ targets[i]
        k = int(np.argmax(c))
        index.append(k)
        cos[i], vec[i] = float(c[k]), emb[start + k]
        start += len(pool)
    return index, cos, vec


def _fresh(proposals: Sequence[tuple[str, str]], seen: set[str]) -> list[tuple[str, str]]:
    """The proposals whose text is non-empty and not yet in ``seen`` (added to it), first occurrence kept."""
    out = []
    for text, kind in proposals:
        if text and text not in seen:
            seen.add(text)
            out.append((text, kind))
    return out


def correct(inverter: Any, encoder: Any, vectors: Any, *, steps: int = 3, beam: int = 4, n_best: int = 4,
            alphas: Sequence[float] = (1.0,), mlm: Any = None, edit_positions: int = 32, fillers: int = 8,
            deletions: bool = True, insertions: bool = False, guided: bool = False, batch_size: int = 16, encode_batch_size: int = 128,
            progress: bool = False) -> Correction:
    """Invert ``vectors`` with ``inverter`` and correct the texts by re-embedding them with ``encoder`` for
    ``steps`` steps (the module docstring has the search and the threat model).

    ``inverter``: a loaded :class:`~veil.models.inverter.Inverter`; ``encoder``: the
    :class:`~veil.encoders.TextEncoder` it was trained for (another one is an
    :class:`~veil.errors.InvalidParameterError`); ``vectors``: (n, dim) finite, non-zero target vectors;
    ``alphas``: the feedback extrapolations (``()``: no feedback); ``mlm``: ``None`` (no word edits), ``"mlm"``,
    ``"mlm-quick"`` or a loaded :class:`~veil.models.mlm.MaskedLM`; ``batch_size``: targets searched together
    (bounds memory: about ``batch_size * (edit_positions * fillers + 32)`` candidate texts per batch);
    ``encode_batch_size``: the encoder's batch. Runs the inverter and the masked LM under bf16 autocast."""
    from veil.models.inverter import Inverter
    from veil.models.mlm import MaskedLM, load_mlm
    from veil.progress import progress_bar
    from veil.validation import check_int

    if not isinstance(inverter, Inverter):
        raise InvalidTypeError(f"inverter must be a veil.models.inverter.Inverter (load_inverter), not "
                               f"{type(inverter).__name__}")
    if not callable(getattr(encoder, "encode", None)):
        raise InvalidTypeError(f"encoder must be the TextEncoder the inverter was trained for (it re-embeds the "
                               f"guesses), not {type(encoder).__name__}")
    inverter.check_encoder(encoder)
    x = inverter.check_vectors(vectors).astype(np.float64)
    norms = np.linalg.norm(x, axis=1)
    if (norms == 0).any():
        raise DataFormatError(f"vectors has {int((norms == 0).sum())} zero row(s), which point nowhere; drop them")
    targets = x / norms[:, None]
    steps = check_int("steps", steps, minimum=0)
    beam = check_int("beam", beam, minimum=1)
    n_best = check_int("n_best", n_best, minimum=1, maximum=beam)
    edit_positions = check_int("edit_positions", edit_positions, minimum=1)
    fillers = check_int("fillers", fillers, minimum=1)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    encode_batch_size = check_int("encode_batch_size", encode_batch_size, minimum=1)
    if isinstance(alphas, (str, bytes)) or not isinstance(alphas, Sequence):
        raise InvalidTypeError(f"alphas must be a sequence of numbers (e.g. (1.0,); () for no feedback), not "
                               f"{type(alphas).__name__}")
    if not all(isinstance(a, numbers.Real) and not isinstance(a, bool) and math.isfinite(a) and a > 0
               for a in alphas):
        raise InvalidParameterError(f"alphas must be finite numbers > 0, got {list(alphas)!r}")
    if not all(isinstance(b, bool) for b in (deletions, insertions, guided, progress)):
        raise InvalidTypeError("deletions, insertions, guided and progress must be bools")
    if isinstance(mlm, str):
        mlm = load_mlm(mlm)
    elif mlm is not None and not isinstance(mlm, MaskedLM):
        raise InvalidTypeError(f"mlm must be None, 'mlm', 'mlm-quick' or a veil.models.mlm.MaskedLM, not "
                               f"{type(mlm).__name__}")
    edits = None if mlm is None else _Edits(mlm, positions=edit_positions, fillers=fillers, deletions=deletions,
                                            insertions=insertions, batch_size=256)
    config = {"steps": steps, "beam": beam, "n_best": n_best, "alphas": [float(a) for a in alphas],
              "edit_positions": edit_positions, "fillers": fillers, "deletions": deletions, "insertions": insertions, "guided": guided,
              "batch_size": batch_size, "inverter": inverter.identity(),
              "encoder": dict(inverter.encoder), "mlm": None if mlm is None else mlm.identity()}

    n = len(targets)
    seen: list[set[str]] = [set() for _ in range(n)]
    cur, src = [""] * n, ["beam"] * n
    cos, emb = np.full(n, -1.0), np.zeros_like(targets)
    changed = np.ones(n, dtype=bool)
    texts, cosines, sources, counts, seconds = [], [], [], [], []
    clock = time.perf_counter()

    def decode(u: np.ndarray) -> list[list[str]]:
        return inverter.hypotheses(u.astype(np.float32), beam=beam, n_best=n_best, batch_size=len(u))

    with progress_bar((steps + 1) * n, "correcting inversions", progress) as advance:
        for t in range(steps + 1):
            active = np.flatnonzero(changed).tolist()  # a hypothesis that did not move would propose the same texts
            advance(n - len(active))
            moved = np.zeros(n, dtype=bool)
            count = 0
            for s in range(0, len(active), batch_size):
                rows = active[s:s + batch_size]
                v = targets[rows]
                pools: list[list[tuple[str, str]]] = [[] for _ in rows]
                if t == 0:
                    for pool, hyps, g in zip(pools, decode(v), inverter.generate(v.astype(np.float32),
                                                                                 batch_size=len(rows))):
                        pool += [(h, "beam") for h in hyps] + [(g, "greedy")]
                else:
                    for a in alphas:
                        u = v + a * (v - emb[rows])
                        for pool, hyps in zip(pools, decode(u / np.linalg.norm(u, axis=1, keepdims=True))):
                            pool += [(h, "feedback") for h in hyps]
                    if edits is not None:
                        guide = _inverter_guide(inverter, v.astype(np.float32)) if guided else None
                        for pool, proposed in zip(pools, edits.propose([cur[i] for i in rows], guide)):
                            pool += proposed
                pools = [_fresh(pool, seen[i]) for pool, i in zip(pools, rows)]
                count += sum(map(len, pools))
                index, c, e = _best(encoder, v, pools, encode_batch_size)
                for r, i in enumerate(rows):
                    if index[r] >= 0 and (t == 0 or c[r] > cos[i]):
                        (cur[i], src[i]), cos[i], emb[i] = pools[r][index[r]], c[r], e[r]
                        moved[i] = True
                advance(len(rows))
            if t > 0:
                src = [k if moved[i] else "kept" for i, k in enumerate(src)]
            changed = moved
            texts.append(tuple(cur))
            cosines.append(cos.copy())
            sources.append(tuple(src))
            counts.append(count)
            seconds.append(time.perf_counter() - clock)
    return Correction(tuple(texts), np.array(cosines), tuple(sources), np.array(counts), np.array(seconds), config)
