"""The empirical epsilon audit of DP-MLM (issue 53), in its own unit: one output word piece.

DP-MLM (:class:`veil.defenses.rewriting.dp_mlm.DPMLM`) claims that each output word piece is epsilon-DP against any
change of the input text. The audit plays the distinguishing game of :mod:`veil.attacks.audit.empirical` on pairs of
texts x, x' of the same length in word pieces, at one position: many independent runs of the mechanism on each, the
output word piece at that position kept (:meth:`~veil.defenses.rewriting.dp_mlm.DPMLM.position_sampler`).

Pairs (:func:`dp_mlm_pairs`), from the given public sentences, of two kinds (:data:`PAIR_KINDS`):

* ``one-piece``: a sentence and the same sentence with the word piece at one position replaced by another drawn
  from the output vocabulary by the auditor's rng (``replacements`` per position), at that position;
* ``same-length``: two of the sentences with the same number of word pieces, at each position (the guarantee holds
  against any change of the text, so a wholly different text is a neighbour too, and it moves the logits more).

Each is screened by the bound that the two exact output distributions predict (white-box: the mechanism's own
distributions, the ones it samples), and the ``keep`` best go to the game. The statistic is their log-likelihood
ratio (``likelihood-ratio``: the most powerful test between two known distributions). Only the fresh scoring runs
enter the bound, so its Clopper-Pearson confidence holds whatever the screening chose.

A bound above the claimed epsilon is a violation shown at confidence ``1 - alpha``; a bound below it says only that
this game found no more. :class:`veil.defenses.rewriting.controls.Greedy` (greedy: no sampling)
must be caught. :func:`realized_epsilon` gives, for the screened pairs, the largest log ratio of the exact output
probabilities: what the pairs could show at best, the ceiling of the game's bound.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from veil.attacks.audit.empirical import DistinguishingGame, GamePair, lookup_statistic, predicted_bounds
from veil.errors import DataFormatError, InvalidTypeError
from veil.random import RngLike, as_generator
from veil.validation import check_int, check_real

__all__ = ["PAIR_KINDS", "dp_mlm_pairs", "realized_epsilon", "audit_dp_mlm"]


def _pair(mechanism: Any, x: str, x2: str, position: int, p: np.ndarray, q: np.ndarray, name: str,
          info: dict[str, Any]) -> GamePair:
    size = int(max(mechanism.mlm.tokenizer.vocab_size, int(mechanism.vocab.max()) + 1))
    tiny = np.finfo(np.float64).tiny
    table = np.zeros(size, dtype=np.float64)
    table[mechanism.vocab] = np.log(np.maximum(q, tiny)) - np.log(np.maximum(p, tiny))
    stat = lookup_statistic("likelihood-ratio", table, description="log P[y | x'] - log P[y | x] of the output word "
                                                                   "piece at the changed position (white-box)")
    return GamePair(name, mechanism.position_sampler(x, position), mechanism.position_sampler(x2, position), (stat,),
                    info)


PAIR_KINDS = ("one-piece", "same-length")


def _screen(p: np.ndarray, q: np.ndarray, trials: int, alpha: float) -> tuple[float, float]:
    """(predicted bound, realized log ratio) of one position's two output distributions (a probability of 0, as a
    broken mechanism gives, floored at the smallest positive double: the ratio is then as large as a double holds)."""
    tiny = np.finfo(np.float64).tiny
    lp, lq = np.log(np.maximum(p, tiny)), np.log(np.maximum(q, tiny))
    order = np.argsort(lp - lq, kind="stable")  # most x'-like outputs first: the likelihood-ratio tests' regions
    fpr, tpr = np.cumsum(p[order]), np.cumsum(q[order])
    # screening only: the tests whose regions are the first k outputs, k on a geometric grid (the exact sweep over
    # every k costs a Clopper-Pearson limit per vocabulary entry)
    cut = np.unique(np.geomspace(1, len(order), 256).astype(np.int64)) - 1
    bound = float(predicted_bounds(np.clip(fpr[cut], 0, 1), np.clip(tpr[cut], 0, 1), trials, alpha).max())
    return bound, float(np.abs(lp - lq).max())


def dp_mlm_pairs(mechanism: Any, sentences: Sequence[str], *, kinds: Sequence[str] = PAIR_KINDS,
                 replacements: int = 4, keep: int = 3, trials: int = 1_000_000, alpha: float = 0.05,
                 rng: RngLike = 0) -> list[GamePair]:
    """The ``keep`` pairs (of ``kinds``) with the largest bound predicted for ``trials`` scoring runs per input
    (module docstring); ``rng``: the auditor's choice of replacements. Each pair's ``info`` holds its kind, texts,
    position, screening score and realized log ratio."""
    from veil.defenses.rewriting.dp_mlm import DPMLM
    from veil.errors import InvalidParameterError

    if not isinstance(mechanism, DPMLM):
        raise InvalidTypeError(f"the DP-MLM audit runs a veil DPMLM (or its control), not {type(mechanism).__name__}")
    if isinstance(sentences, str) or not isinstance(sentences, Sequence) or not sentences \
            or not all(isinstance(s, str) for s in sentences):
        raise DataFormatError("give the audit a non-empty list of public sentences (str)")
    kinds = tuple(kinds)
    if not kinds or any(k not in PAIR_KINDS for k in kinds):
        raise InvalidParameterError(f"pair kinds must be among {', '.join(PAIR_KINDS)}, got {kinds!r}")
    replacements = check_int("replacements", replacements, minimum=1)
    keep = check_int("keep", keep, minimum=1)
    gen = as_generator(rng)
    tok = mechanism.mlm.tokenizer
    base = mechanism.distributions(list(sentences))
    if not any(ids for ids, _ in base):
        raise DataFormatError("the audit's sentences hold no word piece to change")
    texts = list(sentences)  # the samplers tokenise these very strings, so positions agree
    scored: list[tuple[float, float, str, str, str, int, np.ndarray, np.ndarray]] = []
    if "one-piece" in kinds:
        neighbours: list[tuple[int, int, list[int]]] = []
        for s, (ids, _) in enumerate(base):
            for i in range(len(ids)):
                for r in gen.choice(mechanism.vocab, size=replacements, replace=False):
                    if int(r) != ids[i]:
                        neighbours.append((s, i, ids[:i] + [int(r)] + ids[i + 1:]))
        # a decoded neighbour that does not re-tokenise to the same pieces is not a one-piece change: left out
        neighbours = [(s, i, new) for s, i, new in neighbours
                      if tok(tok.decode(new), add_special_tokens=False)["input_ids"] == new]
        changed = mechanism.position_distributions([(tok.decode(new), i) for _, i, new in neighbours]) \
            if neighbours else []
        for (s, i, new), q in zip(neighbours, changed):
            bound, real = _screen(base[s][1][i], q, trials, alpha)
            scored.append((bound, real, "one-piece", texts[s], tok.decode(new), i, base[s][1][i], q))
    if "same-length" in kinds:
        for a in range(len(base)):
            for b in range(a + 1, len(base)):
                (ia, pa), (ib, pb) = base[a], base[b]
                if not ia or len(ia) != len(ib):
                    continue
                for i in range(len(ia)):
                    bound, real = _screen(pa[i], pb[i], trials, alpha)
                    scored.append((bound, real, "same-length", texts[a], texts[b], i, pa[i], pb[i]))
    if not scored:
        raise DataFormatError("no pair to audit: no neighbour re-tokenises to a one-word-piece change and no two "
                              "sentences have the same length; give more sentences")
    scored.sort(key=lambda t: -t[0])
    pairs = []
    for n, (bound, real, kind, x, x2, i, p, q) in enumerate(scored[:keep]):
        info = {"kind": kind, "x": x, "x2": x2, "position": i,
                "from": tok.convert_ids_to_tokens(tok(x, add_special_tokens=False)["input_ids"][i]),
                "to": tok.convert_ids_to_tokens(tok(x2, add_special_tokens=False)["input_ids"][i]),
                "screening": "bound predicted by the exact output distributions", "screening_score": bound,
                "realized_log_ratio": real}
        pairs.append(_pair(mechanism, x, x2, i, p, q, f"pair {n} ({kind}, word piece {i})", info))
    return pairs


def realized_epsilon(pairs: Sequence[GamePair]) -> float:
    """The largest log ratio of exact output probabilities over ``pairs`` (white-box): the most any game on them can
    show."""
    return max(float(p.info["realized_log_ratio"]) for p in pairs)


def audit_dp_mlm(mechanism: Any, sentences: Sequence[str], *, kinds: Sequence[str] = PAIR_KINDS,
                 trials: int = 1_000_000, selection_trials: int = 200_000, replacements: int = 4, keep: int = 3,
                 alpha: float = 0.05, rng: RngLike = 0) -> dict[str, Any]:
    """Play the game (module docstring) and return the claimed epsilon, the lower bound, the chosen pair and the
    counts behind the bound. Each input's runs are ``trials`` (scoring) and ``selection_trials`` (choice)."""
    alpha = check_real("alpha", alpha, low=0.0, high=1.0, low_open=True, high_open=True)
    start = time.perf_counter()
    pairs = dp_mlm_pairs(mechanism, sentences, kinds=kinds, replacements=replacements, keep=keep, trials=trials,
                         alpha=alpha, rng=rng)
    game = DistinguishingGame(pairs, trials=trials, selection_trials=selection_trials, alpha=alpha,
                              chunk=min(trials, 1_000_000))
    result = game.run()
    chosen = next(p for p in pairs if p.name == result.pair)
    b = result.bound
    return {"mechanism": getattr(mechanism, "name", type(mechanism).__name__), "claimed_epsilon": mechanism.epsilon,
            "unit": "word piece", "epsilon_lower_bound": b.epsilon, "point_estimate": b.point_estimate,
            "violation": b.epsilon > mechanism.epsilon, "confidence": 1 - alpha, "pair": dict(chosen.info),
            "false_positives": b.false_positives, "false_negatives": b.false_negatives, "n_x": b.n_x,
            "n_x2": b.n_x2, "direction": b.direction, "trials": trials, "selection_trials": selection_trials,
            "pairs": len(pairs), "kinds": list(kinds), "realized_epsilon": realized_epsilon(pairs),
            "seconds": time.perf_counter() - start}
