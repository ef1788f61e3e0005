"""DeepCandidate: epsilon-SentDP document embeddings (Meehan, Mrini and Chaudhuri, ACL 2022).

Sentence-level privacy (SentDP, Sec. 3.1): two documents are neighbours when
they have the same number of sentences and differ in ONE sentence, replaced
by any other sentence. A mechanism M is epsilon-SentDP when for all
neighbours x, x' and every output z, ``P[M(x) = z] <= e^epsilon P[M(x') = z]``.

:class:`DeepCandidate` is the mechanism M_TD of Sec. 4.2 / App. A.1: the
exponential mechanism over m public candidate embeddings ``F`` (embeddings of
public documents, never the private ones), with utility the approximate
Tukey depth of each candidate among the document's sentence embeddings
(:mod:`veil.defenses.sentdp.depth`), ``P(f_i) ∝ exp(epsilon * u_i / 2)``.

What is guaranteed (and tested exactly, by :mod:`veil.attacks.audit`):

* for ANY fixed projection set chosen independently of the private document,
  and for every candidate, ``|log P(f_i | x) - log P(f_i | x')| <= epsilon``
  for neighbours x, x' (sensitivity of the depth is 1, App. A.2);
* the candidate set and the projections are public; only the choice is random.

What is NOT protected:

* the number of sentences k is public (neighbours have the same k);
* documents differing in a sentences are only ``a * epsilon``-indistinguishable;
* every release spends its epsilon: a document embedded twice has spent
  ``2 * epsilon`` (sequential composition); veil does not track budgets
  across calls for you, every :class:`Release` carries the epsilon it used;
* whatever the sentence encoder (and recoder) were trained on: they must be
  trained on public data (here: the public training split).

Departures from the paper: the default depth is Tukey's minimum (see
../shared/papers/README.md), the appendix variant is ``depth="appendix"``;
one projection set is drawn per :meth:`DeepCandidate.release` call and shared
by the documents of that call (the guarantee holds for any data-independent
projection set). Sampling is exact
(:class:`~veil.defenses.sentdp.sampling.ExactSampler`): the released
distribution is the exponential mechanism itself, no probability rounded,
given uniform random bits (``secrets`` when ``rng=None``), so the epsilon
above holds for the implementation. The float64 inverse CDF veil used before
was only (epsilon, delta)-SentDP with a delta it never bounded, and was no
faster; :mod:`veil.defenses.sentdp.sampling` gives the argument and the
measured speeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from veil.defenses.base import DocumentEmbeddingsDefense, Guarantee
from veil.validation import check_choice, check_epsilon, check_documents, check_int, check_real, seeded_rng, check_sentence_embeddings
from veil.defenses.sentdp.depth import DEPTHS, ProjectionSet, candidates_digest, depth_fast, draw_projections
from veil.defenses.sentdp.levels import default_workers, iter_depths
from veil.defenses.sentdp.sampling import ExactSampler, GeneratorBits, OSBits
from veil.errors import InvalidParameterError, InvalidTypeError
from veil.random import RngLike, as_generator

__all__ = ["DeepCandidate", "Release", "Releases", "check_document", "check_candidates"]


@dataclass(frozen=True)
class Release:
    """One private embedding: the chosen candidate, its vector and the epsilon spent."""

    index: int
    embedding: np.ndarray
    epsilon: float
    n_sentences: int


@dataclass(frozen=True)
class Releases:
    """Private embeddings of many documents: ``indices`` (n,), ``embeddings`` (n, d), each at ``epsilon``."""

    indices: np.ndarray
    embeddings: np.ndarray
    epsilon: float
    n_sentences: np.ndarray

    def __len__(self) -> int:
        return int(len(self.indices))


def _real(a: np.ndarray) -> bool:
    return (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)) and a.dtype != np.bool_


def check_candidates(candidates: Any) -> np.ndarray:
    """Candidates as float64 (m >= 1, d), finite."""
    if not isinstance(candidates, np.ndarray):
        raise InvalidTypeError(f"candidates must be a numpy array (m, d) of public document embeddings, "
                               f"not {type(candidates).__name__}")
    if candidates.ndim != 2 or candidates.shape[0] < 1 or candidates.shape[1] < 1:
        raise InvalidParameterError(f"candidates must be a non-empty (m, d) array, got shape {candidates.shape}; "
                                    f"build them from public documents (at least one)")
    if not _real(candidates) or not np.isfinite(candidates).all():
        raise InvalidParameterError("candidates contain NaN, infinite or non-numeric values; drop those rows")
    return candidates.astype(np.float64, copy=False)


def check_document(S: Any, d: int) -> np.ndarray:
    """One document's sentence embeddings as an array (k >= 1, d), finite and real."""
    return check_sentence_embeddings(S, d, against="the candidates have")


class DeepCandidate(DocumentEmbeddingsDefense):
    """The exponential mechanism over public candidates scored by approximate Tukey depth.

    Parameters (keyword-only)
    -------------------------
    candidates: (m, d) public document embeddings F.
    epsilon: the SentDP parameter, finite and > 0.
    n_projections: p, the number of random unit projections (paper: chosen on dev from 10..100).
    depth: ``"tukey-min"`` (default) or ``"appendix"``.
    rng: None (OS CSPRNG, the default: use it for anything you release), or an
        int seed / numpy Generator for reproducible experiments only (warns).

    Sampling is exact (:class:`~veil.defenses.sentdp.sampling.ExactSampler`,
    ``"sampler": "exact"`` in :meth:`config`): releases follow
    :meth:`probabilities` with no rounding, so epsilon-SentDP holds for this
    implementation given uniform random bits.
    """

    name = "deepcandidate"
    citation = "Meehan, Mrini & Chaudhuri 2022, Sentence-level Privacy for Document Embeddings (ACL)"
    # paper_attack: none; the paper's privacy is its formal bound (the bench runs every attack on it anyway)
    guarantee = Guarantee("sentdp", "epsilon-SentDP for the epsilon it is built with: replacing any one sentence "
                          "changes every output's probability by at most e^epsilon (exact sampling)")
    tasks = ("document-classification",)

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        return [{"epsilon": e} for e in ((3.0, 30.0) if quick else (1.0, 3.0, 10.0, 30.0))]

    @classmethod
    def bench_make(cls, setting: dict[str, Any], data: Any, rng: Any = None, **options: Any) -> "DeepCandidate":
        """Candidates: the public (train) documents' mean sentence embeddings, ``data.candidates``."""
        return cls(candidates=data.candidates, epsilon=float(setting["epsilon"]), n_projections=50, rng=rng)

    @classmethod
    def bench_guarantee(cls, setting: dict[str, Any]) -> Guarantee:
        eps = float(setting["epsilon"])
        return Guarantee("sentdp", f"epsilon-SentDP, epsilon={eps:g} per released document", epsilon=eps)

    def __init__(self, *, candidates: np.ndarray, epsilon: float, n_projections: int = 50,
                 depth: str = "tukey-min", rng: RngLike = None) -> None:
        self.candidates = check_candidates(candidates)
        self._digest = candidates_digest(self.candidates)
        self.epsilon = check_epsilon(epsilon, what="SentDP")
        self.n_projections = check_int("n_projections", n_projections, minimum=1)
        self.depth = check_choice("depth", depth, DEPTHS)
        seeded = seeded_rng(rng, "DeepCandidate", "sampling")
        self._seeded = seeded is not None
        self._rng = seeded if seeded is not None else as_generator(None)  # projections (public) when unseeded
        self._sampler = ExactSampler(self.epsilon)
        self._bits = GeneratorBits(self._rng) if self._seeded else OSBits()
        self.guarantee = Guarantee(
            "sentdp", f"epsilon-SentDP: replacing any one sentence changes the probability of every output by at "
                      f"most a factor e^{self.epsilon:g} (exact sampling: this holds for the implementation, given "
                      f"uniform random bits); the number of sentences is public; each release spends epsilon",
            epsilon=self.epsilon)

    def __repr__(self) -> str:
        return (f"DeepCandidate(m={self.m}, d={self.dim}, epsilon={self.epsilon:g}, "
                f"n_projections={self.n_projections}, depth={self.depth!r})")

    @property
    def m(self) -> int:
        return int(self.candidates.shape[0])

    @property
    def dim(self) -> int:
        return int(self.candidates.shape[1])

    def config(self) -> dict[str, Any]:
        return {**super().config(), "m": self.m, "dim": self.dim, "epsilon": self.epsilon,
                "n_projections": self.n_projections, "depth": self.depth, "sampler": "exact",
                "seeded": self._seeded}

    # ------------------------------------------------------------ projections
    def projections(self, vectors: np.ndarray | None = None) -> ProjectionSet:
        """A projection set: fresh unit vectors (from this mechanism's rng) or the given (p, d) ones."""
        if vectors is None:
            vectors = draw_projections(self.n_projections, self.dim, self._rng)
        elif not isinstance(vectors, np.ndarray):
            raise InvalidTypeError(f"projection vectors must be a numpy array (p, d), not {type(vectors).__name__}")
        return ProjectionSet.build(vectors, self.candidates)

    def _projection_set(self, projections: ProjectionSet | np.ndarray | None) -> ProjectionSet:
        if isinstance(projections, ProjectionSet):
            if projections.candidates_digest != self._digest:
                raise InvalidParameterError("this projection set was built for other candidates; build it with "
                                            "this mechanism's .projections()")
            return projections
        return self.projections(projections)

    # ------------------------------------------------------------ exact distribution
    def utilities(self, S: np.ndarray, projections: ProjectionSet | np.ndarray | None = None) -> np.ndarray:
        """Depth of every candidate among the document's sentence embeddings, float64 (m,)."""
        S = check_document(S, self.dim)
        return self._utilities_of_depths(depth_fast(S, self._projection_set(projections), self.depth))

    def _utilities_of_depths(self, depths: np.ndarray) -> np.ndarray:
        """The utilities the mechanism samples by, from the candidates' depths: the depths themselves (sensitivity 1).

        The one step that both :meth:`utilities` (read by the exact audit) and :meth:`release` go through, so a
        negative control that changes it (:class:`~veil.defenses.sentdp.controls.DoubledSensitivity`) releases what
        it is audited as.
        """
        return depths

    def log_probabilities(self, S: np.ndarray, projections: ProjectionSet | np.ndarray | None = None) -> np.ndarray:
        """log P(f_i | S) for every candidate (log-sum-exp normalised), float64 (m,)."""
        return self.log_probabilities_of(self.utilities(S, projections))

    def probabilities(self, S: np.ndarray, projections: ProjectionSet | np.ndarray | None = None) -> np.ndarray:
        """The exact output distribution for fixed projections, float64 (m,), summing to 1."""
        return np.exp(self.log_probabilities(S, projections))

    def log_probabilities_of(self, utilities: np.ndarray, epsilon: float | None = None) -> np.ndarray:
        """log P(f_i) given the candidates' utilities (m,), at ``epsilon`` (default: this mechanism's), float64 (m,).

        The output distribution as a function of the utilities: the audit
        (:func:`veil.attacks.audit.audit_sentdp`) reads every epsilon it checks through this method, so a
        subclass that changes how probabilities follow from utilities is audited as it is.
        """
        eps = self.epsilon if epsilon is None else check_real(
            "epsilon", epsilon, low=0.0, high=np.inf, low_open=True, high_open=True,
            hint="; the exponential mechanism needs a finite epsilon > 0")
        scores = eps * np.asarray(utilities, dtype=np.float64) / 2.0  # sensitivity 1
        shifted = scores - scores.max()
        return shifted - np.log(np.exp(shifted).sum())

    # ------------------------------------------------------------ sampling
    def _draw(self, utilities: np.ndarray) -> int:
        """One candidate index, exactly from the exponential mechanism over these utilities."""
        return self._sampler.draw(utilities, self._bits)

    def sample(self, S: np.ndarray, projections: ProjectionSet | np.ndarray | None = None) -> Release:
        """Release one document: a candidate drawn exactly from :meth:`probabilities` (fresh projections by default)."""
        S = check_document(S, self.dim)
        index = self._draw(self.utilities(S, projections))
        return Release(index=index, embedding=self.candidates[index].copy(), epsilon=self.epsilon,
                       n_sentences=int(S.shape[0]))

    def release_embeddings(self, documents: Sequence[np.ndarray]) -> np.ndarray:
        """The release verb of a document-embeddings defense: one private embedding per document, (n, d)."""
        return self.release(documents).embeddings

    def release(self, documents: Sequence[np.ndarray], projections: ProjectionSet | np.ndarray | None = None,
                *, progress: bool = False, workers: int | None = None) -> Releases:
        """Release many documents (each spends ``epsilon``), one projection set per call.

        ``documents`` is a sequence of (k_i, d) arrays. The candidates are
        projected once for the whole call; the documents' depths are computed
        in batches (:func:`~veil.defenses.sentdp.levels.iter_depths`) by
        ``workers`` threads (None: the usable CPUs, at most
        :data:`~veil.defenses.sentdp.levels.MAX_WORKERS`), each document's
        utilities identical to :meth:`utilities` of it alone. Sampling happens
        in this thread, in document order, so a seeded mechanism releases the
        same indices with any number of workers.
        """
        docs = check_documents(documents, self.dim, against="the candidates have")
        workers = default_workers() if workers is None else check_int("workers", workers, minimum=1)
        proj = self._projection_set(projections)
        indices = np.empty(len(docs), dtype=np.int64)
        from veil.encoders._inputs import progress_bar

        with progress_bar(len(docs), "DeepCandidate", progress and len(docs) > 1) as advance:
            for n, u in enumerate(iter_depths(docs, proj, self.depth, workers=workers)):
                indices[n] = self._draw(self._utilities_of_depths(u))
                advance(1)
        return Releases(indices=indices, embeddings=self.candidates[indices].copy(), epsilon=self.epsilon,
                        n_sentences=np.asarray([len(S) for S in docs], dtype=np.int64))
