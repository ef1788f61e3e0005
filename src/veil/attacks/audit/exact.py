"""Exact privacy audit of DeepCandidate (epsilon-SentDP, Meehan et al. 2022, Sec. 3.1, 4.2 and App. A.2).

SentDP promises that for neighbouring documents S, S' (same number of
sentences k, one sentence replaced by ANY other) and every output f,
``|log P(f | S) - log P(f | S')| <= epsilon``. For a fixed, data-independent
projection set DeepCandidate's output distribution is known exactly
(:meth:`~veil.defenses.sentdp.DeepCandidate.log_probabilities`), so the audit
needs no sampling and no statistics: it evaluates the bound itself on many
neighbour pairs and reports the largest observed log ratio. Passing is
evidence, not proof (only the pairs tried are checked); one failing pair is
proof that the implementation breaks its guarantee.

Parts (STYLE.md, practice 4):

* threat model: the strongest one. The auditor knows the document, the
  public candidates and the projections, and chooses the replacement
  sentence freely (it need not be a real sentence);
* search (:func:`make_neighbours`), neighbour kinds in :data:`NEIGHBOUR_KINDS`:
  ``random`` (a real sentence from a pool of other documents), ``reflect``
  (the replaced sentence reflected through a candidate's value on the
  projection where that candidate's depth is smallest, i.e. moved across to
  the other side), ``tie`` (a copy of a random candidate), ``deepest`` (a copy
  of the currently deepest candidate), ``extreme`` (``±big * v_j`` along a
  projection vector), ``duplicate`` (a copy of another sentence of the same
  document) and ``mean`` (the document's mean sentence embedding);
* scoring: the exact log ratio over all m candidates; typed, frozen results
  (:class:`SentDPAudit` per epsilon, :class:`SentDPAuditSweep` for many
  documents).

Negative controls (:data:`veil.defenses.sentdp.controls.NEGATIVE_CONTROLS`):
:class:`~veil.defenses.sentdp.controls.DoubledSensitivity` (utilities doubled) and
:class:`~veil.defenses.sentdp.controls.DoubledEpsilon` (releases at twice the stated epsilon) must
fail the audit; the tests check that they do on synthetic and on real documents
(``veil.experiments.sentdp.audit.run_sentdp_audit(..., control=...)``). The empirical counterpart, which
runs the mechanism instead of reading its distribution, is :mod:`veil.attacks.audit.empirical`.

Two entry points:

* :func:`audit_document` compares ``mechanism.log_probabilities`` of S and
  of each S' directly (the whole code path, one epsilon);
* :func:`audit_sentdp` audits many documents at several epsilons: per
  document one projection set, one call of ``mechanism.utilities`` per
  neighbour, and the log-probabilities for every epsilon read from that one
  utility vector through the mechanism's own
  :meth:`~veil.defenses.sentdp.DeepCandidate.log_probabilities_of` (so a
  mechanism that maps utilities to probabilities wrongly shows it in the
  ratios). Separately, once per document, the mechanism's
  ``log_probabilities`` at its own epsilon is checked against the exponential
  mechanism ``epsilon * u / 2 - logsumexp(epsilon * u / 2)``
  (``derivation_error``); a mismatch fails the audit too.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from veil.attacks.base import Attack, ThreatModel, _jsonable
from veil.validation import as_vectors
from veil.validation import check_int, check_real
from veil.defenses.sentdp import DeepCandidate, check_document
from veil.defenses.sentdp.depth import ProjectionSet, draw_projections, project_sentences
from veil.errors import InvalidParameterError, InvalidTypeError
from veil.random import RngLike, as_generator

__all__ = ["ExactAudit", "WhiteBox", "NEIGHBOUR_KINDS", "TOLERANCE", "Neighbour", "WorstPair", "SentDPAudit", "SentDPAuditSweep",
           "make_neighbours", "audit_document", "audit_sentdp"]

NEIGHBOUR_KINDS = ("random", "reflect", "tie", "deepest", "extreme", "duplicate", "mean")
TOLERANCE = 1e-9  # float slack on the bound


@dataclass(frozen=True)
class Neighbour:
    """S' = S with sentence ``position`` replaced by ``vector`` (float64, (d,)); ``note`` says how it was made."""

    kind: str
    position: int
    vector: np.ndarray
    note: str

    def apply(self, S: np.ndarray) -> np.ndarray:
        out = np.array(S, dtype=np.float64, copy=True)
        out[self.position] = self.vector
        return out


@dataclass(frozen=True)
class WorstPair:
    """The pair (document, neighbour, candidate) with the largest |log ratio| at one epsilon."""

    log_ratio: float
    document: int
    kind: str
    position: int
    candidate: int
    note: str

    def describe(self) -> str:
        return (f"document {self.document}, sentence {self.position} replaced ({self.kind}: {self.note}), "
                f"candidate {self.candidate}: |log P(f|S) - log P(f|S')| = {self.log_ratio:.6g}")

    def to_dict(self) -> dict[str, Any]:
        return {"log_ratio": self.log_ratio, "document": self.document, "kind": self.kind,
                "position": self.position, "candidate": self.candidate, "note": self.note,
                "description": self.describe()}


@dataclass(frozen=True)
class SentDPAudit:
    """The audit at one epsilon: the largest |log P(f|S) - log P(f|S')| over every pair and candidate tried.

    ``passed`` holds when it is at most ``epsilon + tolerance`` and the
    derived log-probabilities matched the mechanism's own (``derivation_error``).
    ``max_utility_change`` is the largest |u_f(S) - u_f(S')| seen (the
    sensitivity, 1 for DeepCandidate).
    """

    epsilon: float
    n_pairs: int
    n_documents: int
    max_abs_log_ratio: float
    max_by_kind: Mapping[str, float]
    pairs_by_kind: Mapping[str, int]
    max_utility_change: float
    worst: WorstPair | None
    tolerance: float = TOLERANCE
    derivation_error: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "max_by_kind", MappingProxyType(dict(self.max_by_kind)))
        object.__setattr__(self, "pairs_by_kind", MappingProxyType(dict(self.pairs_by_kind)))

    @property
    def passed(self) -> bool:
        return (self.max_abs_log_ratio <= self.epsilon + self.tolerance
                and self.derivation_error <= self.tolerance)

    @property
    def slack(self) -> float:
        """epsilon minus the largest observed log ratio (negative: the guarantee is broken)."""
        return self.epsilon - self.max_abs_log_ratio

    def to_dict(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "n_pairs": self.n_pairs, "n_documents": self.n_documents,
                "max_abs_log_ratio": self.max_abs_log_ratio, "slack": self.slack, "passed": self.passed,
                "max_by_kind": dict(self.max_by_kind), "pairs_by_kind": dict(self.pairs_by_kind),
                "max_utility_change": self.max_utility_change, "tolerance": self.tolerance,
                "derivation_error": self.derivation_error,
                "worst": None if self.worst is None else self.worst.to_dict()}


@dataclass(frozen=True)
class SentDPAuditSweep:
    """Audits of many documents at several epsilons (one :class:`SentDPAudit` per epsilon).

    ``utility_stats`` describes the audited documents' utilities: the mean
    over documents of the largest utility, of the number of candidates that
    attain it, and of the fraction of candidates with utility 0.
    """

    audits: tuple[SentDPAudit, ...]
    n_documents: int
    n_pairs: int
    wall_time_s: float
    config: Mapping[str, Any] = field(default_factory=dict)
    utility_stats: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "audits", tuple(self.audits))
        object.__setattr__(self, "config", MappingProxyType(dict(self.config)))
        object.__setattr__(self, "utility_stats", MappingProxyType(dict(self.utility_stats)))

    @property
    def passed(self) -> bool:
        return all(a.passed for a in self.audits)

    @property
    def pairs_per_second(self) -> float:
        return self.n_pairs / self.wall_time_s if self.wall_time_s > 0 else float("inf")

    def audit(self, epsilon: float) -> SentDPAudit:
        """The audit at ``epsilon``."""
        for a in self.audits:
            if a.epsilon == float(epsilon):
                return a
        raise InvalidParameterError(f"epsilon {epsilon!r} was not audited; audited: "
                                    f"{', '.join(f'{a.epsilon:g}' for a in self.audits)}")

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "n_documents": self.n_documents, "n_pairs": self.n_pairs,
                "wall_time_s": self.wall_time_s, "pairs_per_second": self.pairs_per_second,
                "config": _jsonable(self.config), "utility_stats": dict(self.utility_stats),
                "audits": [a.to_dict() for a in self.audits]}


# ---------------------------------------------------------------- validation
def _check_mechanism(mechanism: Any) -> DeepCandidate:
    if not isinstance(mechanism, DeepCandidate):
        raise InvalidTypeError(f"mechanism must be a DeepCandidate (or a subclass), not {type(mechanism).__name__}")
    return mechanism


def _check_kinds(kinds: Sequence[str] | None, pool: np.ndarray | None) -> tuple[str, ...]:
    if kinds is None:
        return NEIGHBOUR_KINDS if pool is not None else tuple(k for k in NEIGHBOUR_KINDS if k != "random")
    if isinstance(kinds, str) or not isinstance(kinds, Sequence):
        raise InvalidTypeError(f"kinds must be a sequence of names from {', '.join(NEIGHBOUR_KINDS)}")
    kinds = tuple(kinds)
    bad = [k for k in kinds if k not in NEIGHBOUR_KINDS]
    if bad or not kinds:
        raise InvalidParameterError(f"unknown neighbour kinds {bad or '(none given)'}; valid: "
                                    f"{', '.join(NEIGHBOUR_KINDS)}")
    if "random" in kinds and pool is None:
        raise InvalidParameterError("neighbour kind 'random' needs a pool of other documents' sentence "
                                    "embeddings (pool=...); or leave 'random' out of kinds")
    return kinds


def _check_pool(pool: Any, d: int) -> np.ndarray | None:
    return None if pool is None else as_vectors("pool", pool, dim=d).astype(np.float64, copy=False)


def _fixed_projections(mechanism: DeepCandidate, projections: ProjectionSet | np.ndarray | None,
                       gen: np.random.Generator) -> ProjectionSet:
    """A projection set chosen independently of the document (drawn from the audit's own generator)."""
    if isinstance(projections, ProjectionSet):
        return projections  # validated against the mechanism by its own utilities()
    if projections is None:
        projections = draw_projections(mechanism.n_projections, mechanism.dim, gen)
    return mechanism.projections(projections)


# ---------------------------------------------------------------- neighbours
def make_neighbours(S: np.ndarray, projections: ProjectionSet, candidates: np.ndarray, utilities: np.ndarray, *,
                    n: int, kinds: Sequence[str] | None = None, pool: np.ndarray | None = None,
                    rng: RngLike = None) -> list[Neighbour]:
    """``n`` neighbours of S (k, d), the kinds taken in turn (``duplicate`` is skipped when k == 1).

    ``utilities`` are the candidates' depths for S on ``projections`` (used
    to find the deepest candidate); ``pool`` holds other documents' sentence
    embeddings for the ``random`` kind.
    """
    gen = as_generator(rng)
    S = np.asarray(S, dtype=np.float64)
    F = np.asarray(candidates, dtype=np.float64)
    k, m = S.shape[0], F.shape[0]
    kinds = tuple(x for x in _check_kinds(kinds, pool) if not (x == "duplicate" and k < 2))
    if not kinds:
        return []
    V = projections.vectors
    s_proj = project_sentences(S, V)                                               # (k, p)
    f_proj = np.take_along_axis(projections.sorted_values, projections.rank, axis=1)  # (p, m) candidate order
    deepest = np.flatnonzero(utilities == utilities.max())
    big = 1e3 * (1.0 + float(np.linalg.norm(S, axis=1).max()) + float(np.linalg.norm(F, axis=1).max()))
    out: list[Neighbour] = []
    for t in range(n):
        kind = kinds[t % len(kinds)]
        pos = int(gen.integers(k))
        if kind == "random":
            idx = int(gen.integers(len(pool)))
            vec, note = pool[idx], f"pool sentence {idx}"
        elif kind == "reflect":
            i = int(gen.choice(deepest)) if gen.random() < 0.5 else int(gen.integers(m))
            per_proj = np.minimum((s_proj >= f_proj[:, i]).sum(axis=0), (s_proj <= f_proj[:, i]).sum(axis=0))
            j = int(gen.choice(np.flatnonzero(per_proj == per_proj.min())))
            v = V[j]
            vec = S[pos] - 2.0 * (s_proj[pos, j] - f_proj[j, i]) / float(v @ v) * v
            note = f"reflected through candidate {i} on projection {j}"
        elif kind == "tie":
            i = int(gen.integers(m))
            vec, note = F[i], f"copy of candidate {i}"
        elif kind == "deepest":
            i = int(gen.choice(deepest))
            vec, note = F[i], f"copy of the deepest candidate {i}"
        elif kind == "extreme":
            j, sign = int(gen.integers(V.shape[0])), float(gen.choice([-1.0, 1.0]))
            vec, note = sign * big * V[j], f"{'+' if sign > 0 else '-'}{big:.3g} * projection {j}"
        elif kind == "duplicate":
            other = int(gen.integers(k - 1))
            other += other >= pos
            vec, note = S[other], f"copy of sentence {other}"
        else:  # mean
            vec, note = S.mean(axis=0), "the document's mean sentence embedding"
        out.append(Neighbour(kind=kind, position=pos, vector=np.array(vec, dtype=np.float64), note=note))
    return out


# ---------------------------------------------------------------- scoring
def _log_softmax(scores: np.ndarray) -> np.ndarray:
    shifted = scores - scores.max(axis=-1, keepdims=True)  # exact for the top score; rounding stays near 0
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _mechanism_log_probs(mechanism: DeepCandidate, utilities: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """The mechanism's own log-probabilities for these utilities at every epsilon, (E, m)."""
    return np.stack([mechanism.log_probabilities_of(utilities, float(e)) for e in eps])


class _Tally:
    """Running maxima for one epsilon."""

    def __init__(self, epsilon: float) -> None:
        self.epsilon = epsilon
        self.best = -np.inf
        self.worst: WorstPair | None = None
        self.by_kind: dict[str, float] = {}
        self.pairs_by_kind: dict[str, int] = {}

    def add(self, ratio: np.ndarray, doc: int, nb: Neighbour) -> None:
        c = int(np.argmax(ratio))
        r = float(ratio[c])
        self.by_kind[nb.kind] = max(self.by_kind.get(nb.kind, -np.inf), r)
        self.pairs_by_kind[nb.kind] = self.pairs_by_kind.get(nb.kind, 0) + 1
        if r > self.best:
            self.best = r
            self.worst = WorstPair(log_ratio=r, document=doc, kind=nb.kind, position=nb.position, candidate=c,
                                   note=nb.note)

    def result(self, n_documents: int, max_du: float, tolerance: float, derivation_error: float) -> SentDPAudit:
        n = sum(self.pairs_by_kind.values())
        return SentDPAudit(epsilon=self.epsilon, n_pairs=n, n_documents=n_documents,
                           max_abs_log_ratio=float(self.best) if n else 0.0, max_by_kind=self.by_kind,
                           pairs_by_kind=self.pairs_by_kind, max_utility_change=max_du, worst=self.worst,
                           tolerance=tolerance, derivation_error=derivation_error)


def audit_document(mechanism: DeepCandidate, S: np.ndarray, projections: ProjectionSet | np.ndarray | None = None,
                   *, neighbours: int | Sequence[Neighbour] = 50, kinds: Sequence[str] | None = None,
                   pool: np.ndarray | None = None, rng: RngLike = None,
                   tolerance: float = TOLERANCE) -> SentDPAudit:
    """Audit one document through ``mechanism.log_probabilities`` (the whole code path, ``mechanism.epsilon``).

    ``projections``: a fixed set (or (p, d) vectors); None draws one from
    ``rng``, independently of S. ``neighbours``: a count (made by
    :func:`make_neighbours`) or the neighbours themselves.
    """
    mechanism = _check_mechanism(mechanism)
    S = check_document(S, mechanism.dim).astype(np.float64, copy=False)
    pool = _check_pool(pool, mechanism.dim)
    tolerance = check_real("tolerance", tolerance, low=0.0, high=1.0)
    gen = as_generator(rng)
    proj = _fixed_projections(mechanism, projections, gen)
    u = mechanism.utilities(S, proj)
    if isinstance(neighbours, (int, np.integer)) and not isinstance(neighbours, bool):
        nbs = make_neighbours(S, proj, mechanism.candidates, u, n=check_int("neighbours", neighbours, minimum=1),
                              kinds=kinds, pool=pool, rng=gen)
    elif isinstance(neighbours, Sequence) and all(isinstance(x, Neighbour) for x in neighbours):
        nbs = list(neighbours)
    else:
        raise InvalidTypeError("neighbours must be a count or a sequence of Neighbour")
    base = mechanism.log_probabilities(S, proj)
    tally, max_du = _Tally(mechanism.epsilon), 0.0
    for nb in nbs:
        S2 = nb.apply(S)
        max_du = max(max_du, float(np.abs(u - mechanism.utilities(S2, proj)).max()))
        tally.add(np.abs(base - mechanism.log_probabilities(S2, proj)), 0, nb)
    return tally.result(1, max_du, tolerance, 0.0)


@dataclass(frozen=True)
class WhiteBox:
    """What a white-box auditor observes: the mechanism itself (its exact output probabilities) and the documents
    (their sentence embeddings) around which it builds one-sentence neighbours."""

    mechanism: DeepCandidate
    documents: Sequence[np.ndarray]


class ExactAudit(Attack):
    """The exact audit as an attack for the bench: white-box, it checks the SentDP bound on every candidate for a
    document and its one-sentence neighbours (:func:`audit_sentdp`). Its success is a violated bound.

    ``ExactAudit(neighbours_per_document=35, pool=public_sentences, rng=None).run(WhiteBox(mechanism, documents))``
    returns the :class:`SentDPAuditSweep` at the mechanism's own epsilon."""

    name = "exact-audit"
    citation = "Meehan et al. 2022, Def. 1 (epsilon-SentDP), checked exactly over every output (veil)"
    threat = ThreatModel(observes="the mechanism itself (white-box): every output's probability on a document "
                                  "and on its one-sentence neighbours",
                         needs=("public sentences to build neighbours from",))
    observes = "document-embeddings"
    bench_cell = "veil.bench.cells.document_embeddings:audit_cell"

    def __init__(self, *, neighbours_per_document: int = 35, pool: np.ndarray | None = None,
                 rng: RngLike = None) -> None:
        self.neighbours_per_document, self.pool, self.rng = neighbours_per_document, pool, rng

    def run(self, observation: WhiteBox) -> SentDPAuditSweep:
        """The attack's one verb: audit the mechanism exactly on the documents and their neighbours."""
        if not isinstance(observation, WhiteBox):
            raise InvalidTypeError(f"the exact audit observes WhiteBox(mechanism, documents), not "
                                   f"{type(observation).__name__}")
        return audit_sentdp(observation.mechanism, observation.documents,
                            neighbours_per_document=self.neighbours_per_document, pool=self.pool, rng=self.rng)

    @classmethod
    def bench_applies(cls, defense: str, setting: Any) -> bool:
        """A mechanism whose output probabilities it can compute exactly: DeepCandidate (and its variants)."""
        from veil.defenses.base import get_defense

        return issubclass(get_defense(defense), DeepCandidate)


def audit_sentdp(mechanism: DeepCandidate, documents: Sequence[np.ndarray], *,
                 epsilons: Sequence[float] | None = None, neighbours_per_document: int = 35,
                 kinds: Sequence[str] | None = None, pool: np.ndarray | None = None,
                 document_ids: Sequence[int] | None = None, rng: RngLike = None, tolerance: float = TOLERANCE,
                 progress: bool = False) -> SentDPAuditSweep:
    """Audit many documents at several epsilons (default: the mechanism's own).

    Per document: one projection set drawn from ``rng`` (independent of the
    document), ``mechanism.utilities`` once for S and once per neighbour, and
    the exact log ratio over all candidates for every epsilon derived from
    those utility vectors (see the module docstring). ``document_ids`` label
    the documents in the worst-pair descriptions (default 0..n-1).
    """
    start = time.perf_counter()
    mechanism = _check_mechanism(mechanism)
    if isinstance(documents, np.ndarray) or not isinstance(documents, Sequence):
        raise InvalidTypeError("documents must be a sequence (list) of (k, d) arrays, one per document")
    docs = [check_document(S, mechanism.dim) for S in documents]
    if not docs:
        raise InvalidParameterError("documents is empty; an audit needs at least one document")
    if epsilons is None:
        epsilons = (mechanism.epsilon,)
    if isinstance(epsilons, (str, bytes)) or not isinstance(epsilons, Sequence) or not epsilons:
        raise InvalidTypeError("epsilons must be a non-empty sequence of numbers")
    eps = np.asarray([check_real("epsilon", e, low=0.0, high=np.inf, low_open=True, high_open=True)
                      for e in epsilons], dtype=np.float64)
    n_nb = check_int("neighbours_per_document", neighbours_per_document, minimum=1)
    pool = _check_pool(pool, mechanism.dim)
    kinds = _check_kinds(kinds, pool)
    tolerance = check_real("tolerance", tolerance, low=0.0, high=1.0)
    ids = list(range(len(docs))) if document_ids is None else [int(i) for i in document_ids]
    if len(ids) != len(docs):
        raise InvalidParameterError(f"{len(ids)} document_ids for {len(docs)} documents")
    gen = as_generator(rng)
    tallies = [_Tally(float(e)) for e in eps]
    max_du = derivation_error = 0.0
    n_pairs = 0
    top, n_top, zero = [], [], []
    from veil.encoders._inputs import progress_bar

    with progress_bar(len(docs), "SentDP audit", progress and len(docs) > 1) as advance:
        for doc_id, S in zip(ids, docs):
            S = S.astype(np.float64, copy=False)
            proj = _fixed_projections(mechanism, None, gen)
            u = mechanism.utilities(S, proj)
            top.append(float(u.max()))
            n_top.append(int((u == u.max()).sum()))
            zero.append(float((u == 0).mean()))
            own = _log_softmax(mechanism.epsilon * u / 2.0)  # the exponential mechanism at the stated epsilon
            derivation_error = max(derivation_error,
                                   float(np.abs(mechanism.log_probabilities(S, proj) - own).max()))
            base = _mechanism_log_probs(mechanism, u, eps)  # (E, m)
            for nb in make_neighbours(S, proj, mechanism.candidates, u, n=n_nb, kinds=kinds, pool=pool, rng=gen):
                u2 = mechanism.utilities(nb.apply(S), proj)
                max_du = max(max_du, float(np.abs(u - u2).max()))
                ratio = np.abs(base - _mechanism_log_probs(mechanism, u2, eps))
                for t, row in zip(tallies, ratio):
                    t.add(row, doc_id, nb)
                n_pairs += 1
            advance(1)
    config = {"mechanism": mechanism.config(), "epsilons": eps.tolist(), "neighbours_per_document": n_nb,
              "kinds": list(kinds), "pool_size": 0 if pool is None else int(len(pool)),
              "projections": "one fixed set per document, drawn from the audit rng independently of the document",
              "tolerance": tolerance}
    return SentDPAuditSweep(audits=tuple(t.result(len(docs), max_du, tolerance, derivation_error) for t in tallies),
                            n_documents=len(docs), n_pairs=n_pairs, wall_time_s=time.perf_counter() - start,
                            config=config, utility_stats={
                                "mean_top_utility": float(np.mean(top)),
                                "mean_candidates_at_top": float(np.mean(n_top)),
                                "mean_fraction_zero_utility": float(np.mean(zero))})
