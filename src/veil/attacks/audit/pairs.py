"""Neighbouring inputs and test statistics for the empirical epsilon audit of veil's SentDP mechanisms.

Each builder returns candidate :class:`~veil.attacks.audit.empirical.GamePair` s for one neighbour
kind (:data:`NEIGHBOUR_KINDS`), ranked by a screening score computed WITHOUT running the
mechanism, so that only the few most promising pairs spend selection runs. The mechanism object
given is the one that runs (its own sampling code and randomness: the OS CSPRNG unless seeded).

* DeepCandidate (sentence level, epsilon-SentDP): the replacement sentences of the exact audit
  (:func:`veil.attacks.audit.exact.make_neighbours`): ``reflect`` (the sentence moved across a
  candidate on the projection where that candidate is shallowest) and ``extreme`` (a huge vector
  along one projection). Projections are drawn from the audit's rng, independently of the
  document, and fixed for the pair (the guarantee holds for any such set). Screening: the bound
  the exact output distributions predict (white-box). Statistics: ``utility-gap`` (u_f(x') -
  u_f(x) of the released candidate f: the likelihood-ratio order, white-box), ``projection`` (the
  released embedding on mean(x') - mean(x), black-box) and ``histogram`` (learned).
* Truncation (epsilon-SentDP): ``extreme`` (as above, along a random unit vector; clipping sends
  it to a random corner of the box) and ``corner`` (the sentence nearest a corner replaced by the
  opposite corner: every coordinate of the truncated mean moves by the most one sentence can move
  it, the worst case of the Laplace bound). Screening: sqrt(sum_j (delta_j / b_j)^2), which sets
  the power of a test when d is large. Statistics: ``log-likelihood-ratio`` (the exact Laplace
  log density ratio, white-box) and ``projection`` on mean(x') - mean(x).
* Word-level metric DP (guarantee per WORD): ``one-word`` (the word with the farthest vocabulary
  word replaced by it) and ``all-words`` (every word replaced by its farthest vocabulary word).
  The sentence-level epsilon of the change is ``epsilon * sum_i ||phi(w_i) - phi(w'_i)||`` over
  the changed words (:func:`metric_dp_neighbour`). Only the changed sentence is run: the other
  sentences' rewrites are independent of it and identically distributed under x and x', so the
  best test ignores them. Statistics: ``words`` (learned naive Bayes over the output words at the
  changed positions: exact in form, as words are perturbed independently) and ``embedding`` (the
  rewrite's MiniLM embedding on e(s') - e(s), through :class:`CachedEmbedder`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from veil.attacks.audit.empirical import (GamePair, Statistic, histogram_statistic, lookup_statistic,
                                         predicted_bounds, projection_statistic)
from veil.attacks.audit.exact import Neighbour, make_neighbours
from veil.validation import check_int
from veil.errors import InvalidParameterError
from veil.random import RngLike, as_generator

__all__ = ["NEIGHBOUR_KINDS", "CachedEmbedder", "exact_predicted_bound", "deepcandidate_pairs", "truncation_pairs",
           "truncation_neighbours", "metric_dp_neighbour", "metric_dp_pairs"]

NEIGHBOUR_KINDS = {"deepcandidate": ("reflect", "extreme"), "truncation": ("extreme", "corner"),
                   "metric-dp": ("one-word", "all-words")}


def _check_kind(mechanism: str, kind: str) -> str:
    if kind not in NEIGHBOUR_KINDS[mechanism]:
        raise InvalidParameterError(f"neighbour kind {kind!r} is not one of {mechanism}'s: "
                                    f"{', '.join(NEIGHBOUR_KINDS[mechanism])}")
    return kind


def _top(scored: list[tuple[float, Callable[[], GamePair]]], keep: int) -> list[GamePair]:
    order = sorted(range(len(scored)), key=lambda i: -scored[i][0])  # stable: ties keep their drawing order
    return [scored[i][1]() for i in order[:keep]]


# ---------------------------------------------------------------- DeepCandidate
def exact_predicted_bound(log_p: np.ndarray, log_q: np.ndarray, n: int, alpha: float) -> float:
    """The best predicted bound of a likelihood-ratio test between two known discrete distributions."""
    order = np.argsort(log_p - log_q, kind="stable")  # most x'-like outputs first
    fpr = np.concatenate([[0.0], np.cumsum(np.exp(log_p[order]))])
    tpr = np.concatenate([[0.0], np.cumsum(np.exp(log_q[order]))])
    return float(predicted_bounds(np.clip(fpr, 0, 1), np.clip(tpr, 0, 1), n, alpha).max())


def _dc_pair(mechanism: Any, S: np.ndarray, S2: np.ndarray, projections: Any, name: str,
             info: dict[str, Any]) -> GamePair:
    u, u2 = mechanism.utilities(S, projections), mechanism.utilities(S2, projections)
    direction = S2.mean(axis=0) - S.mean(axis=0)

    def sampler(doc: np.ndarray) -> Callable[[int], np.ndarray]:
        return lambda n: mechanism.release([doc] * n, projections).indices

    stats = (lookup_statistic("utility-gap", u2 - u, "u_f(x') - u_f(x) of the released candidate f (the "
                                                    "likelihood-ratio order for these projections; white-box)"),
             lookup_statistic("projection", mechanism.candidates @ direction,
                              "the released embedding projected on mean(x') - mean(x) (black-box)"),
             histogram_statistic("histogram", description="empirical log-likelihood ratio of the released "
                                                          "candidate index, fitted on the fit runs"))
    return GamePair(name, sampler(S), sampler(S2), stats, info)


def deepcandidate_pairs(mechanism: Any, documents: Sequence[np.ndarray], *, kind: str, neighbours_per_document: int,
                        keep: int, trials: int, alpha: float, document_ids: Sequence[int], rng: RngLike = None
                        ) -> list[GamePair]:
    """The ``keep`` pairs (of ``neighbours_per_document`` per document) with the best exact predicted bound."""
    from veil.defenses.sentdp.depth import draw_projections

    kind = _check_kind("deepcandidate", kind)
    gen = as_generator(rng)
    scored = []
    for doc_id, S in zip(document_ids, documents):
        S = np.asarray(S, dtype=np.float64)
        P = mechanism.projections(draw_projections(mechanism.n_projections, mechanism.dim, gen))
        u = mechanism.utilities(S, P)
        log_p = mechanism.log_probabilities(S, P)
        for nb in make_neighbours(S, P, mechanism.candidates, u, n=neighbours_per_document, kinds=(kind,), rng=gen):
            S2 = nb.apply(S)
            log_q = mechanism.log_probabilities(S2, P)
            pred = exact_predicted_bound(log_p, log_q, trials, alpha)
            info = {"document": int(doc_id), "position": nb.position, "k": int(len(S)), "note": nb.note,
                    "screening": "exact predicted bound", "screening_score": pred,
                    "exact_max_abs_log_ratio": float(np.abs(log_p - log_q).max())}
            name = f"document {doc_id}, sentence {nb.position} ({kind}: {nb.note})"
            scored.append((pred, lambda S=S, S2=S2, P=P, name=name, info=info: _dc_pair(mechanism, S, S2, P, name,
                                                                                           info)))
    return _top(scored, check_int("keep", keep, minimum=1))


# ---------------------------------------------------------------- truncation
def truncation_neighbours(mechanism: Any, S: np.ndarray, *, kind: str, n: int, rng: RngLike = None
                          ) -> list[Neighbour]:
    """``corner``: one neighbour (see the module docstring); ``extreme``: ``n`` of them."""
    kind = _check_kind("truncation", kind)
    S = np.asarray(S, dtype=np.float64)
    lo, hi, w = mechanism.lower, mechanism.upper, mechanism.width
    if kind == "corner":
        clipped = mechanism.clip(S)
        free = w > 0
        reach = (np.maximum(clipped - lo, hi - clipped)[:, free] / w[free]).sum(axis=1)
        pos = int(np.argmax(reach))
        vec = np.where(clipped[pos] - lo >= hi - clipped[pos], lo, hi)
        return [Neighbour(kind, pos, vec, f"sentence {pos} replaced by the opposite corner of the box")]
    from veil.defenses.sentdp.depth import draw_projections

    gen = as_generator(rng)
    big = 1e3 * (1.0 + float(np.linalg.norm(S, axis=1).max()) + float(np.abs(np.stack([lo, hi])).max()) * len(lo))
    out = []
    for v in draw_projections(check_int("n", n, minimum=1), S.shape[1], gen):
        pos, sign = int(gen.integers(len(S))), float(gen.choice([-1.0, 1.0]))
        out.append(Neighbour(kind, pos, sign * big * v, f"{'+' if sign > 0 else '-'}{big:.3g} * a random unit vector"))
    return out


def _trunc_pair(mechanism: Any, S: np.ndarray, S2: np.ndarray, name: str, info: dict[str, Any]) -> GamePair:
    mu, mu2 = mechanism.truncated_mean(S), mechanism.truncated_mean(S2)
    b = mechanism.noise_scale(len(S))
    free = b > 0

    def llr(Z: np.ndarray) -> np.ndarray:
        Z = np.asarray(Z, dtype=np.float64)[:, free]
        return ((np.abs(Z - mu[free]) - np.abs(Z - mu2[free])) / b[free]).sum(axis=1)

    def sampler(doc: np.ndarray) -> Callable[[int], np.ndarray]:
        return lambda n: mechanism.privatize_many([doc] * n)

    stats = (Statistic("log-likelihood-ratio", score=llr, description="log p(z | x') - log p(z | x) of the "
                                                                        "Laplace release (white-box)"),
             projection_statistic("projection", mu2 - mu, "the release projected on mean(x') - mean(x)"))
    return GamePair(name, sampler(S), sampler(S2), stats, info)


def truncation_pairs(mechanism: Any, documents: Sequence[np.ndarray], *, kind: str, neighbours_per_document: int,
                     keep: int, document_ids: Sequence[int], rng: RngLike = None) -> list[GamePair]:
    """The ``keep`` pairs with the largest sqrt(sum_j (delta_j / b_j)^2)."""
    gen = as_generator(rng)
    scored = []
    for doc_id, S in zip(document_ids, documents):
        S = np.asarray(S, dtype=np.float64)
        b = mechanism.noise_scale(len(S))
        free = b > 0
        mu = mechanism.truncated_mean(S)
        for nb in truncation_neighbours(mechanism, S, kind=kind, n=neighbours_per_document, rng=gen):
            S2 = nb.apply(S)
            ratio = (mechanism.truncated_mean(S2) - mu)[free] / b[free]
            power = float(np.sqrt((ratio ** 2).sum()))
            info = {"document": int(doc_id), "position": nb.position, "k": int(len(S)), "note": nb.note,
                    "screening": "sqrt(sum_j (delta_j / b_j)^2)", "screening_score": power,
                    "privacy_loss_bound": float(np.abs(ratio).sum())}
            name = f"document {doc_id}, sentence {nb.position} ({kind}: {nb.note})"
            scored.append((power, lambda S=S, S2=S2, name=name, info=info: _trunc_pair(mechanism, S, S2, name, info)))
    return _top(scored, check_int("keep", keep, minimum=1))


# ---------------------------------------------------------------- word-level metric DP
class CachedEmbedder:
    """Sentence embeddings through ``encoder.encode`` with an in-memory memo: the same rewrite is encoded once.

    The memo holds at most ``max_entries`` texts (emptied when full); it lives as long as this
    object (no module-level cache). ``hits`` and ``misses`` count texts.
    """

    def __init__(self, encoder: Any, *, max_entries: int = 200_000) -> None:
        self.encoder = encoder
        self.max_entries = check_int("max_entries", max_entries, minimum=1)
        self._memo: dict[str, np.ndarray] = {}
        self.hits = self.misses = 0

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in self._memo]
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        if missing:
            if len(self._memo) + len(missing) > self.max_entries:
                self._memo.clear()
            self._memo.update(zip(missing, self.encoder.encode(missing, progress=False)))
        return np.stack([self._memo[t] for t in texts]).astype(np.float64)


def metric_dp_neighbour(mechanism: Any, sentence: str, *, kind: str) -> dict[str, Any] | None:
    """The changed sentence for ``one-word`` or ``all-words`` (None when the sentence has no word).

    Returns ``text`` (x'), ``positions`` (word indices changed), ``replacements``,
    ``distance_sum`` (sum of ||phi(w) - phi(w')|| over them) and ``formal_epsilon``
    (``mechanism.epsilon * distance_sum``, the sentence-level bound of the change).
    """
    from veil.encoders.word_vectors import split_words

    kind = _check_kind("metric-dp", kind)
    parts = split_words(sentence)
    words = [w.lower() for w in parts[1::2]]
    if not words:
        return None
    vec = mechanism.vectors
    phi = vec.vectors(words).astype(np.float64)
    V = vec.matrix.astype(np.float64)
    d2 = (V ** 2).sum(axis=1)[None, :] - 2.0 * phi @ V.T + (phi ** 2).sum(axis=1)[:, None]
    far = np.argmax(d2, axis=1)
    reach = np.sqrt(np.maximum(d2[np.arange(len(words)), far], 0.0))
    positions = [int(np.argmax(reach))] if kind == "one-word" else list(range(len(words)))
    new = list(parts)
    replacements = {}
    for i in positions:
        new[2 * i + 1] = replacements[i] = vec.words[int(far[i])]
    dist = float(sum(np.linalg.norm(phi[i] - vec.vectors([replacements[i]])[0].astype(np.float64))
                     for i in positions))
    return {"text": "".join(new), "positions": positions, "replacements": {str(i): w for i, w in replacements.items()},
            "words": len(words), "distance_sum": dist, "formal_epsilon": mechanism.epsilon * dist}


def _mdp_pair(mechanism: Any, sentence: str, change: dict[str, Any], embed: CachedEmbedder | None, name: str,
              info: dict[str, Any]) -> GamePair:
    from veil.encoders.word_vectors import split_words

    positions = tuple(change["positions"])

    def key(text: str) -> tuple[str, ...]:
        out = split_words(text)[1::2]
        return tuple(out[i] for i in positions)

    stats: list[Statistic] = [histogram_statistic("words", key=key, description="naive Bayes over the output words at "
                                                                               "the changed positions (learned)")]
    if embed is not None:
        e = embed([sentence, change["text"]])
        direction = e[1] - e[0]
        stats.append(Statistic("embedding", score=lambda texts: embed(texts) @ direction,
                               description="the rewrite's sentence embedding projected on e(x') - e(x)"))

    def sampler(text: str) -> Callable[[int], list[str]]:
        return lambda n: mechanism.rewrite_many([text] * n)

    return GamePair(name, sampler(sentence), sampler(change["text"]), tuple(stats), info)


def metric_dp_pairs(mechanism: Any, sentences: Sequence[tuple[int, int, str]], *, kind: str, keep: int,
                    embed: CachedEmbedder | None) -> list[GamePair]:
    """The ``keep`` changed sentences (of ``(document, index, text)``) with the largest sentence-level bound."""
    scored = []
    for doc_id, idx, text in sentences:
        change = metric_dp_neighbour(mechanism, text, kind=kind)
        if change is None:
            continue
        info = {"document": int(doc_id), "sentence": int(idx), "x": text, "x2": change["text"],
                "positions": change["positions"], "replacements": change["replacements"], "words": change["words"],
                "distance_sum": change["distance_sum"], "formal_epsilon": change["formal_epsilon"],
                "screening": "formal sentence-level epsilon", "screening_score": change["formal_epsilon"]}
        name = f"document {doc_id}, sentence {idx} ({kind}: {len(change['positions'])} of {change['words']} words)"
        scored.append((change["formal_epsilon"], lambda text=text, change=change, name=name, info=info:
                       _mdp_pair(mechanism, text, change, embed, name, info)))
    if not scored:
        raise InvalidParameterError("no sentence with a word to change; give sentences with letters")
    return _top(scored, check_int("keep", keep, minimum=1))
