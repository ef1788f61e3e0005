"""From recorded federated updates to private sentences: analytic inversion, then mask recovery and unmixing.

The strong chain of the federated TextHide issue (PRIOR-ART B.2): with a frozen encoder the head's input is the
TextHide encoding itself, so

1. :class:`~veil.attacks.gradients.analytic.AnalyticInversion` reads the encodings (times the public
   ``rep_scale``) off every client update of a tap;
2. per client (each client has its own secret pool; the server knows which client sent which update),
   :class:`~veil.attacks.texthide.mask_recovery.MaskRecovery` looks for that client's masks among its
   recovered encodings (it needs several encodings per mask, which a short run rarely gives: m = 256 masks
   against a few dozen encodings);
3. :class:`~veil.attacks.texthide.unmix.Unmix` explains each encoding by k sources of the attacker's index.
   The masks it may use are the recovered pool plus, per encoding, the key-free guess ``sign(e o mu)``
   (``mu`` the public mean): sentence embeddings are anisotropic, so most coordinates' signs are those of
   ``mu``, and Unmix's sign repair (alternating minimisation over signs and weights) corrects the rest
   (issue 11 measured all sources of 96% (k=4) / 79% (k=2) of encodings found this way with no key at all).
   Encodings the recovered pool explains (relative residual <= 0.05) keep that fit; the others are fitted
   again with their own guess, and those still unexplained with a third guess, ``sign(e o x*)`` for their
   sign-invariant best match x* (abs-RSS; exact when k = 1 and x* is the source). The smallest residual wins.

Without a defense (``m = 0``, ``k = 1``) step 2 is skipped and the one "mask" is all ones.

The attacker sees the tap (:class:`~veil.attacks.gradients.tap.Tap`), its index of candidate texts' original
representations and public statistics; never the clients' keys, mixing or the tap's ground truth (scoring,
in :mod:`veil.experiments.federated.chain`, reads those).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from veil.attacks.base import Attack, Observation, ThreatModel, rng_description
from veil.attacks.gradients.analytic import AnalyticInversion
from veil.attacks.gradients.tap import Tap, _frozen
from veil.attacks.gradients.truth import TapTruth
from veil.attacks.retrieval.index import SimilaritySearch
from veil.attacks.texthide.observe import PublicStats
from veil.validation import check_rng
from veil.errors import DataFormatError, InvalidTypeError
from veil.random import RngLike

__all__ = ["UpdateChain", "ChainRecovery", "keyfree_masks", "UNEXPLAINED"]

UNEXPLAINED = 0.05  # Unmix's default: relative residual above which an encoding counts as unexplained


def keyfree_masks(E: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """One +-1 guess per encoding: ``sign(e o mean)`` (0 -> +1), float32 (n, d)."""
    s = np.sign(np.asarray(E, dtype=np.float64) * np.asarray(mean, dtype=np.float64)[None, :])
    s[s == 0] = 1.0
    return s.astype(np.float32)


@dataclass(frozen=True, repr=False)
class ChainRecovery:
    """What the chain recovered from a tap: one row per recovered encoding (read-only arrays).

    round, client: the update each encoding was read from; vectors: the recovered encodings (divided by
    ``rep_scale``); ids, weights: the k index entries that explain each (Unmix order); residuals: Unmix's
    relative residual (0 = exact); mask_source: ``"pool"`` (a mask recovered from the client's encodings),
    ``"key-free"`` (its own sign guess, repaired), ``"abs-rss"`` (the signs of its abs-RSS match, repaired),
    ``"unexplained"`` (no fit reached the 0.05 residual: the best one is kept) or ``"none"`` (no defense); per_client: mask recovery's
    count of masks and encodings per client.
    """

    round: np.ndarray
    client: tuple[str, ...]
    vectors: np.ndarray
    ids: np.ndarray
    weights: np.ndarray
    residuals: np.ndarray
    mask_source: tuple[str, ...]
    updates: int
    per_client: Mapping[str, Any] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    wall_time_s: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "round", _frozen(self.round, np.int64))
        object.__setattr__(self, "vectors", _frozen(self.vectors, np.float32))
        object.__setattr__(self, "ids", _frozen(self.ids, np.int64))
        object.__setattr__(self, "weights", _frozen(self.weights, np.float64))
        object.__setattr__(self, "residuals", _frozen(self.residuals, np.float64))
        object.__setattr__(self, "client", tuple(self.client))
        object.__setattr__(self, "mask_source", tuple(self.mask_source))
        object.__setattr__(self, "per_client", MappingProxyType(dict(self.per_client)))
        object.__setattr__(self, "config", MappingProxyType(dict(self.config)))
        n = len(self.round)
        if not (len(self.client) == len(self.mask_source) == len(self.vectors) == len(self.ids) == n):
            raise DataFormatError("inconsistent chain recovery: one round, client, vector, id row and mask source "
                                  "per encoding")

    def __len__(self) -> int:
        return int(len(self.round))

    def __repr__(self) -> str:
        return f"ChainRecovery(encodings={len(self)}, updates={self.updates})"

    def rows_of(self, r: int, client: str) -> np.ndarray:
        """Positions of the encodings read from client ``client``'s update in round ``r``."""
        return np.flatnonzero((self.round == int(r)) & (np.asarray(self.client, dtype=object) == str(client)))


class UpdateChain(Attack):
    """Recorded updates -> encodings -> sources in the attacker's index (see the module docstring).

    Parameters
    ----------
    index: :class:`~veil.attacks.retrieval.index.SimilaritySearch` of the candidate texts' ORIGINAL
        representations (the encoder is public; the private texts are among the candidates).
    stats: :class:`~veil.attacks.texthide.observe.PublicStats` of public in-domain representations.
    inversion: the first-layer attack (default :class:`AnalyticInversion` with ``rng``).
    pool_recovery: run :class:`MaskRecovery` per client (False: key-free guesses only).
    rng: the attacker's own randomness (matching initialisation, mask-recovery seeding): an int for
        reproducible experiments, None for OS entropy. It protects nothing.
    """

    name = "update-chain"
    citation = ("first-layer inversion (Geiping et al. 2020) + mask recovery and unmixing (Carlini et al. 2020, "
                "An Attack on InstaHide) on TextHide's federated updates (Huang et al. 2020, Alg. 2)")
    threat = ThreatModel(observes="each client's model updates and the global weights (a tap)",
                         needs=("the head's architecture, learning rate, optimizer and batch size (tap.json)",
                                "an index of original representations of the candidate texts",
                                "public in-domain representations (their mean and covariance)"))
    observes = "updates"

    def run(self, observation: Any) -> Any:
        """The attack's one verb: :meth:`attack` a tap of every round's updates."""
        return self.attack(observation)

    def __init__(self, index: SimilaritySearch, stats: PublicStats, *, inversion: AnalyticInversion | None = None,
                 pool_recovery: bool = True, rng: RngLike = None) -> None:
        if not isinstance(index, SimilaritySearch):
            raise InvalidTypeError(f"index must be a SimilaritySearch, not {type(index).__name__}")
        if not isinstance(stats, PublicStats):
            raise InvalidTypeError(f"stats must be PublicStats, not {type(stats).__name__}")
        if stats.dim != index.dim:
            raise DataFormatError(f"the public statistics have dimension {stats.dim} but the index {index.dim}; "
                                  "compute both with the same public encoder")
        if inversion is not None and not isinstance(inversion, AnalyticInversion):
            raise InvalidTypeError(f"inversion must be an AnalyticInversion, not {type(inversion).__name__}")
        if not isinstance(pool_recovery, bool):
            raise InvalidTypeError(f"pool_recovery must be a bool, not {type(pool_recovery).__name__}")
        check_rng(rng)
        self.index, self.stats, self.pool_recovery = index, stats, pool_recovery
        self.inversion = inversion if inversion is not None else AnalyticInversion(rng=rng)
        self._rng, self._rng_desc = rng, rng_description(rng)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "index": self.index.config(), "public": self.stats.describe(),
                "inversion": self.inversion.config(), "pool_recovery": self.pool_recovery, "rng": self._rng_desc,
                "masks": "per client: mask recovery's pool (if any) + one key-free guess sign(e o mean) per "
                         "encoding; Unmix keeps the fit with the smallest residual"}

    def attack(self, tap: Tap, *, progress: bool = False) -> ChainRecovery:
        """Run the chain on every update of ``tap``."""
        from veil.progress import progress_bar

        if not isinstance(tap, Tap):
            hint = " (the truth is for scoring only)" if isinstance(tap, TapTruth) else ""
            raise InvalidTypeError(f"tap must be a veil Tap (Tap(DIR)){hint}, not {type(tap).__name__}")
        meta = tap.meta
        if meta.model.in_dim != self.index.dim:
            raise DataFormatError(f"the tap's head reads {meta.model.in_dim}-dimensional inputs but the index holds "
                                  f"{self.index.dim}-dimensional vectors; build the index with the run's encoder")
        start = time.perf_counter()
        pairs = list(tap.updates())
        found: dict[str, list[tuple[int, np.ndarray]]] = {}
        with progress_bar(len(pairs), f"inverting {tap.path.name}", progress) as advance:
            for r, c in pairs:
                rec = self.inversion.recover_update(tap.update(r, c), meta)
                if len(rec):
                    found.setdefault(c, []).append((r, np.asarray(rec.vectors) / meta.rep_scale))
                advance(1)
        parts, per_client = [], {}
        for c in sorted(found):
            rounds = np.concatenate([np.full(len(v), r) for r, v in found[c]])
            E = np.concatenate([v for _, v in found[c]]).astype(np.float32)
            part, info = self._unmix_client(E, meta.defense)
            per_client[c] = info
            parts.append((rounds, [c] * len(E), E, *part))
        d, k = self.index.dim, int(meta.defense.get("k", 1))
        if not parts:
            empty = np.zeros((0, k))
            return ChainRecovery(round=np.zeros(0), client=(), vectors=np.zeros((0, d)), ids=empty.astype(int),
                                 weights=empty, residuals=np.zeros(0), mask_source=(), updates=len(pairs),
                                 config=self.config(), wall_time_s=time.perf_counter() - start)
        return ChainRecovery(round=np.concatenate([p[0] for p in parts]), client=sum((p[1] for p in parts), []),
                             vectors=np.concatenate([p[2] for p in parts]),
                             ids=np.concatenate([p[3] for p in parts]), weights=np.concatenate([p[4] for p in parts]),
                             residuals=np.concatenate([p[5] for p in parts]),
                             mask_source=sum((p[6] for p in parts), []), updates=len(pairs),
                             per_client=per_client, config=self.config(), wall_time_s=time.perf_counter() - start)

    def _absrss_masks(self, E: np.ndarray, defense: Mapping[str, Any]) -> np.ndarray:
        """One guess per encoding: the signs that map its sign-invariant (abs-RSS) best match onto it."""
        from veil.attacks.retrieval.abs_rss import AbsRSS

        top = np.asarray(AbsRSS(self.index).retrieve(Observation(E, defense=dict(defense)), top_k=1).top1)
        s = np.sign(np.asarray(E, dtype=np.float64) * np.asarray(self.index.vectors, dtype=np.float64)[top])
        s[s == 0] = 1.0
        return s.astype(np.float32)

    def _unmix_client(self, E: np.ndarray, defense: Mapping[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        from veil.attacks.texthide.mask_recovery import MaskRecovery
        from veil.attacks.texthide.unmix import Unmix

        k = int(defense.get("k", 1))
        obs = Observation(E, defense=dict(defense))
        defended = str(defense.get("name", "none")) != "none"
        pool = np.zeros((0, E.shape[1]), dtype=np.float32)
        if defended and self.pool_recovery:
            pool = MaskRecovery(self.stats, rng=self._rng).recover(obs).masks.astype(np.float32)
        if not defended:
            out = Unmix(self.index, np.ones((1, E.shape[1]), dtype=np.float32), k=k).attack(obs)
            ids, weights, residuals, source = out.ids, out.weights, out.residuals, ["none"] * len(E)
        else:
            ids, weights = np.zeros((len(E), k), dtype=np.int64), np.zeros((len(E), k))
            residuals, source = np.full(len(E), np.inf), ["unexplained"] * len(E)
            todo = np.arange(len(E))
            if len(pool):  # pass 1: the recovered pool alone
                out = Unmix(self.index, pool, k=k).attack(obs)
                ids[:], weights[:], residuals[:] = out.ids, out.weights, out.residuals
                source = ["pool"] * len(E)
                todo = np.flatnonzero(out.residuals > UNEXPLAINED)
            guesses = (("key-free", lambda rows: keyfree_masks(E[rows], self.stats.mean)),
                       ("abs-rss", lambda rows: self._absrss_masks(E[rows], defense)))
            for name, make in guesses:  # passes 2-3 for what is still unexplained; the smaller residual wins
                if not len(todo):
                    break
                sub = Observation(E[todo], defense=dict(defense))
                out = Unmix(self.index, make(todo), k=k).attack(sub)
                for j in np.flatnonzero(out.residuals < residuals[todo]):
                    i = todo[j]
                    ids[i], weights[i], residuals[i], source[i] = out.ids[j], out.weights[j], out.residuals[j], name
                todo = todo[residuals[todo] > UNEXPLAINED]
            for i in todo:  # no guess reached the residual: the best fit is kept, labelled as such
                source[i] = "unexplained"
        info = {"encodings": int(len(E)), "pool_masks_recovered": int(len(pool)),
                "explained_by_pool": int(sum(s == "pool" for s in source))}
        return (ids, weights, residuals, source), info
