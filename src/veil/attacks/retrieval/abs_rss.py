"""abs-RSS: sign-invariant similarity search, the first step of Carlini et al.'s attack on InstaHide.

Idea: Carlini, Deng, Garg, Jha, Mahloujifar, Mahmoody, Song, Thakurta, Tramer,
"An Attack on InstaHide: Is Private Learning Possible with Instance Encoding?"
(arXiv 2011.05315; IEEE S&P 2021), Sec. 4 and step 1 of their code
(tensorflow/privacy research/instahide_attack_2020/step_1_create_graph.py):
a random sign mask keeps every coordinate's magnitude, ``|sigma o x| = |x|``,
so comparing ABSOLUTE values removes the mask. TextHide (Huang et al. 2020)
multiplies each mixture by a secret +-1 mask exactly as InstaHide does, so

    e~ = sigma o sum_j lambda_j e_{pi_j}   =>   |e~| = |sum_j lambda_j e_{pi_j}|

and at k = 1 (inference-time TextHide, masks only) ``|e~| = |e|``: the mask
hides nothing from an attacker holding the original representations.

:class:`AbsRSS` answers each observed vector e~ with

    argmax_i cos(|e~| - mu, |e_i| - mu),   mu = mean_i |e_i| over the index

(coordinate-wise absolute values; ``mu`` uses the index only, i.e. public
statistics of the attacker's own data). Threat model: that of RSS (TextHide
Sec. 4.4): it observes protected vectors and holds an index of (text,
original representation) pairs; it does not know the mask pool, the mixing
or any other part of the key.

Departures from Carlini et al.:

* InstaHide's attacker has no index of the private images; it trains a
  WideResNet on ``concat(|x|, |y|)`` to decide whether two ENCODINGS share a
  private image and clusters the resulting graph. TextHide's RSS threat model
  gives the attacker the public encoder and an index of original
  representations, so a fixed similarity of absolute values between an
  encoding and an INDEX entry replaces the learned encoding-encoding network.
* Centring by ``mu`` (veil's choice, from issue 11): sentence embeddings are
  anisotropic (MiniLM's mean vector has norm ~0.46), so all ``|e|`` share a
  common part; subtracting the index mean of ``|e|`` compares what is
  specific to each sentence. Measured on 400 trec-questions MiniLM vectors
  (three draws each), it changed little: at (256, 1) centred and uncentred
  both found every original; at (256, 4) slot-0 Identity was 0.26-0.30
  centred and 0.26-0.30 uncentred, any-source 0.998-1.0 and 0.995-1.0.
* Scale: when the index is a cosine index (``normalize=True``, the default)
  the observed vector is first L2-normalised, like the index's own vectors and
  RSS's queries, so ``|e~|`` is on the scale ``mu`` was computed at (a
  mixture's norm is below 1). On the same slice this also changed slot-0
  Identity at (256, 4) by at most 0.0125.
* It stops at retrieval (top-1 answer per encoding). It does not use labels,
  does not cluster encodings by shared source or mask, and does not solve for
  the mixture (step 2-5 of Carlini et al.; veil's mask-recovery and unmix
  attacks go further).
* Search is exact (:class:`~veil.attacks.retrieval.index.SimilaritySearch`
  over the centred absolute index vectors; ties to the lowest index).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from veil.attacks.base import Attack, Observation, ThreatModel
from veil.attacks.retrieval.index import Retrieved, SimilaritySearch
from veil.errors import DataFormatError, InvalidTypeError

__all__ = ["AbsRSS", "centred_abs"]


def centred_abs(vectors: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """``|vectors| - mu`` in float64 (rows are vectors)."""
    return np.abs(vectors.astype(np.float64)) - mu


class AbsRSS(Attack):
    """Sign-invariant similarity search: argmax over the index of cos(|e~| - mu, |e| - mu).

    Deterministic and exact, so it takes no rng. ``index`` holds the original
    representations (as for :class:`~veil.attacks.retrieval.rss.RSS`); a second
    exact index over its centred absolute vectors is built once.

    >>> AbsRSS(index).retrieve(observation, top_k=1).top1     # (n,) index positions
    """

    name = "abs-rss"
    citation = ("Carlini et al. 2020, 'An Attack on InstaHide' (IEEE S&P 2021), Sec. 4 / step 1 (absolute values "
                "remove sign masks), applied as a similarity search in TextHide's RSS threat model (Huang et al. "
                "2020, Sec. 4.4)")
    threat = ThreatModel(observes="protected query representations",
                         needs=("a search index of (text, original representation) pairs of the corpus",))
    observes = "vectors"
    bench_cell = "veil.bench.cells.vectors:retrieval_cell"

    def run(self, observation: Observation) -> Any:
        """The attack's one verb: :meth:`retrieve` (top-1) on the observation."""
        return self.retrieve(observation)

    @classmethod
    def for_bench(cls, resources: Any) -> "AbsRSS":
        return cls(resources.index)

    def __init__(self, index: SimilaritySearch) -> None:
        if not isinstance(index, SimilaritySearch):
            raise InvalidTypeError(f"index must be a SimilaritySearch, not {type(index).__name__}")
        if len(index) < 2:
            raise DataFormatError(f"abs-rss needs an index of at least 2 entries (it has {len(index)}): with one "
                                  "entry |e| - mean|e| is the zero vector and the cosine is undefined")
        self.index = index
        stored = index.vectors.astype(np.float64)  # unit rows when the index is a cosine index
        self._mu = np.abs(stored).mean(axis=0)
        self._mu.flags.writeable = False
        centred = centred_abs(stored, self._mu)
        zero = np.flatnonzero(~centred.any(axis=1))
        if len(zero):
            raise DataFormatError(f"{len(zero)} index entr{'y' if len(zero) == 1 else 'ies'} (first: {int(zero[0])}) "
                                  "equal the mean absolute vector, so their centred cosine is undefined; drop them")
        # cosine search over |e| - mu: the inner index normalises rows, and the exact re-scoring of the outer
        # index applies unchanged (same texts, same positions, same tie rule)
        self._abs_index = SimilaritySearch(index.texts, centred, backend=index.backend, normalize=True)

    @property
    def mu(self) -> np.ndarray:
        """The centring vector: mean |e| over the index (float64, read-only)."""
        return self._mu

    def config(self) -> dict[str, Any]:
        return {**super().config(), "index": self.index.config(),
                "similarity": "cosine of |e| - mu (coordinate-wise absolute values), mu = mean |e| over the index",
                "query_scaling": "L2-normalised before abs" if self.index.normalize else "as observed"}

    def transform(self, vectors: Any) -> np.ndarray:
        """The observed vectors as the attack compares them: ``|q| - mu`` (q L2-normalised for a cosine index)."""
        q = self.index.prepare_queries(vectors)  # validated, dims checked, normalised like the index's vectors
        return centred_abs(q, self._mu)

    def retrieve(self, observation: Observation, top_k: int = 1) -> Retrieved:
        if not isinstance(observation, Observation):
            raise InvalidTypeError(f"observation must be an Observation (observe, protect_with_texthide), "
                                   f"not {type(observation).__name__}")
        q = self.transform(observation.vectors)
        if len(q):
            zero = np.flatnonzero(~q.any(axis=1))
            if len(zero):
                raise DataFormatError(f"{len(zero)} observed vector(s) (first: {int(zero[0])}) equal the index's "
                                      "mean absolute vector after centring; their cosine is undefined")
        return Retrieved(*self._abs_index.query(q, top_k=top_k))
