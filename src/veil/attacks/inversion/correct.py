"""Correction by re-embedding: the inverter's guesses re-embedded with the public encoder and moved toward the
target vector (Vec2Text, Morris et al., EMNLP 2023, Sec. 3-4), on CPU and without a trained corrector.

Threat model (:data:`THREAT_MODEL`): the attacker observes released sentence vectors only. It needs the public
encoder (to re-embed its own guesses), the inverter trained on public text (:mod:`veil.models.inverter`) and,
only for ``edits="mlm"``, veil's masked LM trained on public text (:mod:`veil.models.mlm`). It has no index of
private text, and :func:`correct` takes no text at all: its inputs are the target vectors and these public models.

The search, for each target ``v`` (cosines against ``v / |v|``; the encoder's vectors are unit length):

* step 0: the greedy decode and the ``n_best`` best hypotheses of a beam search of width ``beam``
  (:meth:`~veil.models.inverter.Inverter.hypotheses`), all re-embedded; the one closest to ``v`` is kept;
* each step ``t = 1..steps`` proposes new texts for the current hypothesis ``h`` and keeps the closest to ``v``
  if it is closer than ``h`` (so the cosine of every text is non-decreasing over the steps):

  - *word edits* (``edits``): each WordPiece position of ``h`` (at most ``edit_positions``, spread evenly over
    longer texts) gets the ``fillers`` best tokens other than its own (special and unused tokens excluded), as
    substitutions (and, with ``insertions=True``, insertions before each position and at the end), plus ``h``
    without one of its words (``deletions``; a word is a token and its ``##`` pieces). The fillers are ranked by
    the inverter (``"inverter"``, the default: its next-token log-probabilities given ``v`` and the tokens to the
    left, one teacher-forced pass per batch), by the masked LM (``"mlm"``: each position masked in turn, given
    both sides, batched) or by the sum of both log-probabilities (``"mlm+inverter"``);
  - *feedback* (one decode per ``alpha`` in ``alphas``; off by default): the ``n_best`` beam hypotheses decoded
    from ``u = v + alpha (v - e(h))``, normalised, ``e(h)`` the embedding of ``h``: the inverter is asked for
    the text whose embedding lies past its current miss. Vec2Text feeds ``v``, ``e(h)`` and ``v - e(h)`` to a
    trained corrector; here the residual moves the query of the base inverter itself.

  Every new candidate of a batch of targets is re-embedded in one pass of the encoder; a candidate already scored
  for that target (at any step) is not scored again, and a target whose hypothesis did not change in the previous
  step is not searched again (it would propose the texts already scored). An empty text cannot be encoded: it is no
  candidate, and a target whose hypotheses are all empty keeps ``""`` with cosine -1 (the floor).

Measured on 100 rt-polarity test sentences (a corpus the quick inverter never trained on) with ``inverter-quick``
and MiniLM (onnx), one CPU thread on a shared 2-core machine (dev run). Token F1 in percent
(:func:`~veil.models.inverter.token_f1` against the originals, which only the measurement saw), in brackets the
change against step 0 with a paired bootstrap 95% interval; cosine to the target; seconds per text, cumulative:

* greedy decode alone: F1 19.0 (0.01 s); beam 4 alone: F1 19.0 (0.05 s);
* step 0 (greedy and beam 4 x 4 hypotheses, reranked): F1 20.9, cosine 0.527, 0.11 s;
* defaults (``edits="inverter"``, fillers 8), steps 1, 2, 3: F1 24.6, 26.1, 27.5 (step 3: +6.6 [+4.9, +8.5]),
  cosine 0.622, 0.668, 0.696, after 0.56, 0.98, 1.43 s; steps 4-6: F1 28.0, 28.6, 28.8, cosine 0.744 at 2.75 s;
* ``edits="mlm"`` (mlm-quick), step 3: F1 21.6 (+0.7 [-0.4, +1.9]), cosine 0.615, 1.52 s; with the full
  ``mlm``: F1 21.9, cosine 0.624; ``edits="mlm+inverter"``: F1 24.8 (-2.7 [-4.0, -1.4] against the
  defaults), cosine 0.651;
* feedback alone, step 3: ``alphas=(1.0,)`` F1 21.7 (+0.8 [-0.3, +2.3]), cosine 0.554, 0.21 s;
  ``alphas=(1.0, 2.0)`` F1 21.0 (+0.1 [-1.2, +1.4]), cosine 0.557, 0.32 s; with the default edits,
  ``alphas=(1.0,)``: F1 27.4 (-0.1 [-0.7, +0.4] against the defaults), cosine 0.703, 1.68 s;
* default edits with ``insertions=True``, step 3: F1 28.0 (+0.5 [-0.4, +1.5] against the defaults), cosine 0.710,
  2.74 s; ``fillers=4``: F1 25.4, 0.82 s; ``fillers=16``: F1 27.9, 2.57 s; ``beam=8, n_best=8``: step 0 F1 22.4
  (+1.5 [-0.1, +3.5] against beam 4), step 3 F1 28.2 (+0.7 [-0.6, +1.9] against beam 4), 1.28 s.

So reranking the beam's hypotheses helps (+1.9 [+0.7, +3.1] F1 over beam 4 alone), and the inverter-ranked word
edits are what correction buys (+6.6 F1 in 3 steps). The masked LM's fillers raise the cosine (+0.09) but not the
token F1, and added to the inverter's they lower it; so masked-LM edits are an option (``edits="mlm"``), not the
default. Feedback moves the cosine a little and the F1 by no more than noise,
alone or with the edits: off by default (``alphas=()``). Insertions double the cost of a step for less than the
extra steps that time buys (28.0 at 2.7 s against 28.8): off by default. No text is recovered exactly at this
inverter's quality (0 of 100 in every setting).

Departures from Vec2Text: no trained corrector (the base inverter is re-queried with the extrapolated vector, and
ranks word edits); a greedy hill climb on the re-embedded cosine with one kept hypothesis per target (Vec2Text's
sequence-level beam keeps several); a handful of steps (Vec2Text: up to 50).

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

__all__ = ["THREAT_MODEL", "EDITS", "SOURCES", "Correction", "correct"]

THREAT_MODEL = ThreatModel(
    observes="released sentence vectors (no text)",
    needs=("the public encoder, queried to re-embed guesses", "the inverter trained on public text",
           "veil's masked LM trained on public text (only for edits='mlm' or 'mlm+inverter')"))

#: the proposal kinds a kept text can come from: step 0 (``greedy``, ``beam``), then ``kept`` (nothing closer),
#: ``feedback``, ``substitution``, ``insertion``, ``deletion``
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
#: which model ranks the fillers of the word edits: the inverter (its next-token log-probabilities given the target
#: vector and the tokens to the left), the masked LM (given both sides), their sum, or no word edits
EDITS = ("inverter", "mlm", "mlm+inverter", "none")


class _Edits:
    """Substitutions and insertions of the ``fillers`` best-ranked WordPiece tokens at each position (ranked by
    the masked LM ``mlm``, the ``inverter`` conditioned on the target vector, or the sum of their
    log-probabilities), and single-word deletions."""

    def __init__(self, tokenizer: Any, *, mlm: Any, inverter: Any, positions: int, fillers: int, deletions: bool,
                 insertions: bool, batch_size: int = 256) -> None:
        import torch

        vocab = tokenizer.get_vocab()
        special = set(tokenizer.all_special_ids)
        self.banned = torch.zeros(len(tokenizer), dtype=torch.bool)
        self.banned[[i for t, i in vocab.items() if _UNUSED.match(t) or i in special]] = True
        self.tok, self.mlm, self.inverter = tokenizer, mlm, inverter
        self.positions, self.fillers, self.batch_size = positions, fillers, batch_size
        self.deletions, self.insertions = deletions, insertions

    def propose(self, texts: Sequence[str], vectors: np.ndarray, shortlist: Any = None
                ) -> list[list[tuple[str, str]]]:
        """For each text (``vectors``: its target, unit length): ``(candidate, kind)`` pairs; with ``shortlist``
        (a :class:`_Shortlist`), only the candidates it ranks highest per text."""
        import torch

        tok = self.tok
        seqs = [tok(t, add_special_tokens=False)["input_ids"][:self._limit()] if t else [] for t in texts]
        slots: list[tuple[int, int, int]] = []  # (text, position, 0: substitute there, 1: insert before it)
        for r, ids in enumerate(seqs):
            if len(ids) <= self.positions:
                at = list(range(len(ids)))
            else:
                at = [int(j) for j in np.unique(np.linspace(0, len(ids) - 1, self.positions).round())]
            slots += [(r, j, 0) for j in at]
            if self.insertions and ids:
                slots += [(r, j, 1) for j in at + [len(ids)]]
        out: list[list[tuple[str, str]]] = [[] for _ in texts]
        edits: list[list[tuple[int, int, int]]] = [[] for _ in texts]  # per candidate: (position, token, kind)
        prior = self._inverter_logprobs(seqs, vectors) if self.inverter is not None and slots else None
        with torch.inference_mode():
            for s in range(0, len(slots), self.batch_size):
                part = slots[s:s + self.batch_size]
                score = torch.zeros((len(part), len(self.banned)))
                if self.mlm is not None:
                    score += self._mlm_logprobs(seqs, part)
                if prior is not None:
                    score += torch.stack([prior[r][j] for r, j, _ in part])
                score.masked_fill_(self.banned, -math.inf)
                for k, (r, j, ins) in enumerate(part):
                    if not ins:
                        score[k, seqs[r][j]] = -math.inf  # a substitution changes the token
                for (r, j, ins), fill in zip(part, score.topk(self.fillers, dim=-1).indices.tolist()):
                    kind = "insertion" if ins else "substitution"
                    out[r] += [(self._text(seqs[r][:j] + [f] + seqs[r][j + 1 - ins:]), kind) for f in fill]
                    edits[r] += [(j, f, ins) for f in fill]
        if self.deletions:
            for r, ids in enumerate(seqs):
                starts = [j for j, t in enumerate(tok.convert_ids_to_tokens(ids)) if not t.startswith("##")]
                if len(starts) > 1:
                    for a, b in zip(starts, starts[1:] + [len(ids)]):
                        out[r].append((self._text(ids[:a] + ids[b:]), "deletion"))
                        edits[r].append((a, b, 2))
        if shortlist is not None:
            out = shortlist.keep(seqs, vectors, out, edits)
        return out

    def _limit(self) -> int:
        if self.mlm is not None:
            return self.mlm.max_length - 2
        return int(self.inverter.net.decoder.config.max_position_embeddings) - self.inverter.net.prefix_tokens - 1

    def _mlm_logprobs(self, seqs: Sequence[list[int]], part: Sequence[tuple[int, int, int]]) -> Any:
        """(len(part), vocab) the masked LM's log-probabilities of the token at each slot, the slot masked."""
        import torch

        tok, mlm = self.tok, self.mlm
        cls_id, sep_id, mask_id = int(tok.cls_token_id), int(tok.sep_token_id), mlm.mask_id
        h = mlm.hidden([[cls_id] + seqs[r][:j] + [mask_id] + seqs[r][j + 1 - ins:] + [sep_id] for r, j, ins in part])
        at = h[torch.arange(len(part)), torch.as_tensor([j + 1 for _, j, _ in part])]
        return torch.log_softmax(mlm.model.cls(at.float()), -1)

    def _inverter_logprobs(self, seqs: Sequence[list[int]], vectors: np.ndarray) -> Any:
        """(texts, longest + 1, vocab) the inverter's log-probabilities of the token at each position given the
        target vector and the tokens to its left (teacher-forced, one batch, bf16 autocast where native)."""
        import torch

        net, tok = self.inverter.net, self.tok
        width = max(map(len, seqs)) + 1
        ids = torch.full((len(seqs), width), int(tok.pad_token_id), dtype=torch.long)
        att = torch.zeros((len(seqs), width), dtype=torch.long)
        for r, q in enumerate(seqs):
            ids[r, :len(q) + 1] = torch.as_tensor([int(tok.cls_token_id), *q])
            att[r, :len(q) + 1] = 1
        v = torch.as_tensor(vectors, dtype=torch.float32)
        from veil._bf16 import autocast

        with torch.inference_mode(), autocast("cpu"):
            hidden = net.start(v, ids, att).last_hidden_state[:, net.prefix_tokens:]
            shift = net.output_shift(v)[:, None].expand(-1, width, -1)
            return torch.log_softmax(net.logits(hidden, shift), -1)

    def _text(self, ids: Sequence[int]) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=True).strip()


class _Shortlist:
    """Re-embed only the ``size`` word edits per text that a first-order estimate ranks highest (HotFlip, Ebrahimi
    et al. 2018, applied to the encoder): with ``g_j`` the gradient of the cosine between the encoder's vector of the
    current text and the target with respect to the input word embedding at position ``j``, and ``E`` the encoder's
    word-embedding table, substituting token ``w`` at ``j`` scores ``(E[w] - E[h_j]) . g_j``, inserting ``w``
    before ``j`` scores ``E[w] . g_j`` and deleting the word at ``j..k`` scores ``-sum E[h_i] . g_i`` over its
    pieces. One forward and backward pass of the encoder per text and step (its torch module, whatever backend
    encodes), against the re-embedding of every candidate (about ``edit_positions * fillers`` texts)."""

    def __init__(self, encoder: Any, tokenizer: Any, size: int) -> None:
        if encoder.tokenizer.get_vocab() != tokenizer.get_vocab():
            raise InvalidParameterError("shortlist ranks edits with the encoder's word embeddings, and the encoder's "
                                        "vocabulary differs from the edits' tokenizer; leave shortlist=None")
        self.encoder, self.size = encoder, size
        self.cls_id, self.sep_id = int(encoder.tokenizer.cls_token_id), int(encoder.tokenizer.sep_token_id)
        self.pad_id = int(encoder.tokenizer.pad_token_id)

    def _gradients(self, seqs: Sequence[list[int]], vectors: np.ndarray) -> tuple[Any, Any]:
        """(texts, longest + 2, dim) gradients of each text's cosine to its target w.r.t. its input word embeddings
        ([CLS] at 0), and the word-embedding table."""
        import torch

        from veil.encoders.pooling import pool

        module = self.encoder.module
        table = module.get_input_embeddings()
        width = max(map(len, seqs)) + 2
        ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
        att = torch.zeros((len(seqs), width), dtype=torch.long)
        for r, q in enumerate(seqs):
            ids[r, :len(q) + 2] = torch.as_tensor([self.cls_id, *q, self.sep_id])
            att[r, :len(q) + 2] = 1
        was_training = module.training
        module.eval()
        try:
            with torch.enable_grad():
                x = table(ids).detach().requires_grad_(True)
                hidden = module(inputs_embeds=x, attention_mask=att).last_hidden_state
                v = pool(self.encoder.pooling, hidden, att, normalize=True)
                (v * torch.as_tensor(vectors, dtype=v.dtype)).sum().backward()
        finally:
            module.train(was_training)
        return x.grad.detach(), table.weight.detach()

    def keep(self, seqs: Sequence[list[int]], vectors: np.ndarray, out: list[list[tuple[str, str]]],
             edits: list[list[tuple[int, int, int]]]) -> list[list[tuple[str, str]]]:
        import torch

        rows = [r for r, q in enumerate(seqs) if q and len(out[r]) > self.size]
        if not rows:
            return out
        grad, table = self._gradients([seqs[r] for r in rows], vectors[rows])
        kept = list(out)
        for b, r in enumerate(rows):
            g, q = grad[b], seqs[r]
            cur = table[torch.as_tensor(q)]  # (len, dim) the current tokens' embeddings
            gain_cur = (cur * g[1:len(q) + 1]).sum(-1)  # E[h_j] . g_j
            score = []
            for j, w, kind in edits[r]:
                if kind == 2:  # deletion of the word at positions j..w-1
                    score.append(-float(gain_cur[j:w].sum()))
                else:
                    lift = float(table[w] @ g[j + 1])
                    score.append(lift - float(gain_cur[j]) if kind == 0 else lift)
            top = np.argsort(-np.asarray(score), kind="stable")[:self.size]
            kept[r] = [out[r][k] for k in sorted(top.tolist())]
        return kept


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
            alphas: Sequence[float] = (), edits: str = "inverter", mlm: Any = None, edit_positions: int = 32,
            fillers: int = 8, deletions: bool = True, insertions: bool = False, shortlist: int | None = None,
            batch_size: int = 16, encode_batch_size: int = 128, progress: bool = False) -> Correction:
    """Invert ``vectors`` with ``inverter`` and correct the texts by re-embedding them with ``encoder`` for
    ``steps`` steps (the module docstring has the search, the threat model and what each option buys).

    ``inverter``: a loaded :class:`~veil.models.inverter.Inverter`; ``encoder``: the
    :class:`~veil.encoders.TextEncoder` it was trained for (another one is an
    :class:`~veil.errors.InvalidParameterError`); ``vectors``: (n, dim) finite, non-zero target vectors;
    ``beam``, ``n_best``: the beam search's width and the hypotheses kept from it (step 0 and feedback);
    ``alphas``: the feedback extrapolations (``()``: no feedback); ``edits``: which model ranks the fillers of
    the word edits (:data:`EDITS`); ``shortlist``: re-embed only this many word edits per text and step, those
    a first-order estimate of their cosine gain ranks highest (:class:`_Shortlist`; None: every edit, the
    default until its cost in token F1 is measured); ``mlm``: the masked LM for ``edits="mlm"`` or
    ``"mlm+inverter"`` (``"mlm"``, ``"mlm-quick"`` or a loaded :class:`~veil.models.mlm.MaskedLM`);
    ``edit_positions``: the most positions edited per text and step; ``fillers``: tokens tried per position;
    ``batch_size``: targets searched together (bounds memory: about ``batch_size * edit_positions * fillers``
    candidate texts at once); ``encode_batch_size``: the encoder's batch. The inverter and the masked LM run
    under bf16 autocast where it is native (:mod:`veil._bf16`)."""
    from veil.models.inverter import Inverter
    from veil.models.mlm import MaskedLM, load_mlm
    from veil.progress import progress_bar
    from veil.validation import check_choice, check_int

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
    if shortlist is not None:
        shortlist = check_int("shortlist", shortlist, minimum=1)
    encode_batch_size = check_int("encode_batch_size", encode_batch_size, minimum=1)
    if isinstance(alphas, (str, bytes)) or not isinstance(alphas, Sequence):
        raise InvalidTypeError(f"alphas must be a sequence of numbers (e.g. (1.0,); () for no feedback), not "
                               f"{type(alphas).__name__}")
    if not all(isinstance(a, numbers.Real) and not isinstance(a, bool) and math.isfinite(a) and a > 0
               for a in alphas):
        raise InvalidParameterError(f"alphas must be finite numbers > 0, got {list(alphas)!r}")
    if not all(isinstance(b, bool) for b in (deletions, insertions, progress)):
        raise InvalidTypeError("deletions, insertions and progress must be bools")
    edits = check_choice("edits", edits, EDITS)
    if isinstance(mlm, str):
        mlm = load_mlm(mlm)
    elif mlm is not None and not isinstance(mlm, MaskedLM):
        raise InvalidTypeError(f"mlm must be None, 'mlm', 'mlm-quick' or a veil.models.mlm.MaskedLM, not "
                               f"{type(mlm).__name__}")
    if (mlm is not None) != edits.startswith("mlm"):
        raise InvalidParameterError(f"edits={edits!r} " + ("needs mlm= (veil's masked LM: 'mlm' or 'mlm-quick')"
                                    if mlm is None else "uses no masked LM; pass edits='mlm' or 'mlm+inverter' to "
                                                        "use it, or leave mlm=None"))
    if mlm is not None and edits == "mlm+inverter" and mlm.tokenizer.get_vocab() != inverter.tokenizer.get_vocab():
        raise InvalidParameterError("the masked LM and the inverter have different vocabularies, so their "
                                    "log-probabilities cannot be added; use edits='mlm' or edits='inverter'")
    editor = None if edits == "none" else _Edits(
        inverter.tokenizer if mlm is None else mlm.tokenizer, mlm=mlm,
        inverter=inverter if "inverter" in edits else None, positions=edit_positions, fillers=fillers,
        deletions=deletions, insertions=insertions)
    ranker = None if shortlist is None or editor is None else _Shortlist(encoder, editor.tok, shortlist)
    config = {"steps": steps, "beam": beam, "n_best": n_best, "alphas": [float(a) for a in alphas], "edits": edits,
              "edit_positions": edit_positions, "fillers": fillers, "deletions": deletions, "insertions": insertions,
              "batch_size": batch_size, **({} if shortlist is None else {"shortlist": shortlist}),
              "inverter": inverter.identity(), "encoder": dict(inverter.encoder),
              "mlm": None if mlm is None else mlm.identity()}

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
                    if editor is not None:
                        for pool, proposed in zip(pools, editor.propose([cur[i] for i in rows], v, ranker)):
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
