"""Unmixing TextHide encodings: recover the k sources of each encoding with recovered (not true) masks.

TextHide (Huang et al., Findings of EMNLP 2020, Alg. 1) publishes ``e~ = sigma o sum_j lambda_j x_{s_j}``
(times a public scale): ``sigma`` a +-1 mask from a secret pool, ``lambda`` convex; its security rests on
the worst-case hardness of "k-vector subset sum" (App. A). This is step 5 of Carlini et al., "An Attack on
InstaHide" (IEEE S&P 2021, arXiv 2011.05315: solve the mixtures) for an attacker holding a retrieval index:
with the pool recovered (:mod:`.mask_recovery`), unmask each encoding and find its sources by non-negative
k-sparse regression over the index ``X``. Per encoding ``e`` (in blocks, by matrix products with ``X``;
``u = e o s`` unmasks with signs ``s``; "exact" = relative residual ``|u - X^T w| / |e| <= 1e-6``):

1. Mask choice. Sentence embeddings are anisotropic (MiniLM: |index mean ``mu``| ~0.46), so the right mask
   gives a large ``<sigma o e, mu> = <mix, mu>``; a wrong one scrambles the signs. Masks are ranked by
   ``|<M o e, mu>|`` (one product), its sign fixing the mask's (a mask recovered as ``-sigma`` works too).
   The best is fitted (step 2); if not exact, the next ``mask_candidates - 1`` too, and the fit with the
   smallest residual BEFORE any sign repair (which could make a wrong mask fit) goes on to step 3. (On
   rt-polarity the mean score alone is right for 99.7% of k=2 encodings: a few have ``<x, mu> <= 0``.)
2. Greedy: non-negative orthogonal matching pursuit over the WHOLE index: k times, add the entry most
   correlated with the residual (one product), refit all weights by NNLS (batched normal equations; scipy's
   ``nnls`` where a weight comes out negative). No cosine shortlist: on rt-polarity (k=4) the top 128
   entries by ``<u, x>`` hold all 4 sources of only 8% of encodings (small-coefficient sources rank below
   neighbours of the dominant one).
3. Polish (``polish_passes``, non-exact encodings; never increases a residual): sign repair alone where it
   makes the fit exact, else (a) swaps: per chosen entry, refit the others and try the ``swap_candidates``
   best entries of the whole index in its place, ranked by orthogonal-least-squares gain
   ``<r, x>^2 / |P x|^2`` (``P`` projects off the others' span), which, unlike raw correlation, finds a
   source that paraphrases a chosen one; (b) sign repair: ``s_d = sign(e_d (X^T w)_d)`` + NNLS refit,
   i.e. alternating minimisation of ``|e o s - X^T w|`` over signs and weights (sign retrieval), which
   corrects mask bits the recovery got wrong.
4. Fallback (``exhaustive``): encodings still unexplained (``unexplained_above``) get every mask scored by
   its best match in the index, ``max_x |<M o e, x>|`` (m' products each); the best ``mask_candidates``
   go through steps 2-3 again and the better fit is kept.

Measured on rt-polarity (12,752 index vectors, intra, m=256, 2 shared cores): with the true masks, or those
mask-recovery finds from 1 or 5 epochs, all sources of >= 99.96% of encodings (k=2 and 4; 100% counting
identical index vectors as one), ~1 ms per encoding; with 5% or 20% of every mask's bits flipped, >= 99%
(slower: ~4-8 ms). An encoding whose mask is missing from the recovered set is mostly lost. With no key
at all (m = None; masks = sign(e o mu), one per encoding) step 3b alone found all sources of 96% (k=4)
and 79% (k=2) of 1,000 encodings (one run). Limits: coefficients below ~1e-3 under mask errors.

Output: :class:`Unmixed`. :func:`score_unmix` needs the true source ids and lives apart from the attack.
Departures from Carlini et al.: the index replaces their similarity network and clustering of encodings;
mixtures are solved by sparse non-negative regression over a fixed dictionary, not gradient descent on
unknown images; coefficients are not read from labels; mask errors are repaired per encoding (3b).
Inter-dataset TextHide: put the public corpus in the index, k = all slots.

>>> attack = Unmix(index, recovered_masks, k=4)          # index: SimilaritySearch
>>> out = attack.attack(observation)                      # Unmixed: out.ids (n, 4), out.weights
>>> score_unmix(out, truth.index_ids(query_ids)).metrics["all_sources"]
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from veil.attacks.base import Attack, AttackResult, Observation, ThreatModel, rng_description
from veil.validation import as_vectors
from veil.attacks.retrieval.index import SimilaritySearch
from veil.validation import check_int, check_real, check_rng
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.random import RngLike, as_generator

__all__ = ["Unmix", "Unmixed", "score_unmix", "evaluate_unmix", "check_masks"]

_BLOCK_BYTES = 64 << 20  # float32 bytes of one block's (encodings x index) score rows
_EXACT = 1e-6  # relative residual below which an encoding counts as explained exactly (float32 data: ~1e-7)


def check_masks(masks: Any, dim: int) -> np.ndarray:
    """Recovered masks as a read-only float32 (m', dim) array of +-1, or a typed error."""
    x = as_vectors("masks", masks)
    if x.shape[1] != dim:
        raise DataFormatError(f"masks have dimension {x.shape[1]} but the index has {dim}; recover the masks from "
                              "encodings made with the index's encoder")
    bad = ~((x == 1) | (x == -1))
    if bad.any():
        raise DataFormatError(f"masks must hold only -1 and +1, but {int(bad.any(axis=1).sum())} row(s) hold other "
                              "values; map recovered bits with np.where(bits, -1, 1) or np.sign (no zeros)")
    out = np.ascontiguousarray(x, dtype=np.float32)
    out.flags.writeable = False
    return out


@dataclass(frozen=True, repr=False)
class Unmixed:
    """What :meth:`Unmix.attack` returns: the recovered sources of each of n encodings (read-only arrays).

    ids: int64 (n, k) index ids, ordered by weight (largest first); distinct within a row.
    weights: float64 (n, k) their non-negative NNLS weights, in the encodings' scale
        (a weight can be 0: the fit did not need that entry).
    mask_ids: int64 (n,) the recovered mask (row of the masks given) nearest to the signs that explain each
        encoding (after the sign repair of step 3b; with the right mask, that mask).
    mask_signs: int8 (n,) +1, or -1 when the encoding was explained by the negated mask.
    sign_flips: int64 (n,) coordinates where those signs differ from that mask (the bits the repair fixed).
    residuals: float64 (n,) ``|u - sum_j w_j x_ids_j| / |u|`` of the unmasked vector u (0 = exact).
    defense: the observation's public defense configuration; config: the attack's.
    """

    ids: np.ndarray
    weights: np.ndarray
    mask_ids: np.ndarray
    mask_signs: np.ndarray
    sign_flips: np.ndarray
    residuals: np.ndarray
    index_size: int
    defense: Mapping[str, Any] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    wall_time_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("ids", "weights", "mask_ids", "mask_signs", "sign_flips", "residuals"):
            object.__setattr__(self, name, np.array(getattr(self, name), copy=True))
            getattr(self, name).flags.writeable = False
        object.__setattr__(self, "defense", MappingProxyType(dict(self.defense)))
        object.__setattr__(self, "config", MappingProxyType(dict(self.config)))

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @property
    def k(self) -> int:
        return int(self.ids.shape[1])

    @property
    def coefficients(self) -> np.ndarray:
        """The weights normalised to sum 1 per row (estimates of TextHide's lambda; rows of zeros stay 0)."""
        total = self.weights.sum(axis=1, keepdims=True)
        return np.divide(self.weights, total, out=np.zeros_like(self.weights), where=total > 0)

    def __repr__(self) -> str:
        return f"Unmixed(n={len(self)}, k={self.k}, index_size={self.index_size})"


class Unmix(Attack):
    """Unmask each TextHide encoding with the recovered mask that explains it best, then solve for its k sources.

    Parameters (steps as in the module docstring)
    ----------
    index: a :class:`~veil.attacks.retrieval.index.SimilaritySearch` of the candidate texts' ORIGINAL
        representations (private corpus; private + public corpus for inter-dataset TextHide). Its stored
        vectors (unit rows when built with ``normalize=True``) form the dictionary.
    masks: (m', d) array of +-1: the masks the attacker RECOVERED; a mask and its negation are equivalent.
    k: TextHide's k (public): sources per encoding, all slots (private and public) in inter mode.
    mask_candidates: recovered masks tried per encoding (step 1; the 2nd.. only when the 1st's fit is not exact).
    polish_passes: at most this many passes of step 3 (0 = the greedy fit as is).
    swap_candidates: entries tried per slot in a swap (step 3a).
    repair_signs: step 3b; False unmasks strictly with the recovered mask.
    unexplained_above: relative residual above which an encoding counts as unexplained after step 3 (right
        mask: ~0, even with 20% of its bits wrong; wrong or missing mask: mostly ~0.6-0.7) and goes to step 4.
    exhaustive: run step 4 for encodings still unexplained.
    batch_size: encodings per block (capped so one block's (k + 2) x index score rows stay near 64 MB).

    Deterministic. The attacker sees only the observation, the index, the masks and k (no mixing details,
    pool or labels): :meth:`attack` takes an :class:`~veil.attacks.base.Observation` and nothing else.
    """

    name = "unmix"
    citation = ("Carlini et al. 2020, An Attack on InstaHide (IEEE S&P 2021), step 5 (solve the mixtures), as "
                "k-sparse non-negative regression over a retrieval index; target: Huang et al. 2020, TextHide, Alg. 1")
    threat = ThreatModel(observes="TextHide training encodings (mixed and sign-masked representations)",
                         needs=("the mask pool as recovered from encodings (not the true key)",
                                "an index of original representations of the candidate texts "
                                "(private, plus the public corpus in inter mode)",
                                "k, the defense's public parameter"))
    observes = "training-encodings"
    bench_cell = "veil.bench.cells.training_encodings:unmix_cell"

    def run(self, observation: Observation) -> Any:
        """The attack's one verb: :meth:`attack` (split each encoding into its k sources)."""
        return self.attack(observation)

    @classmethod
    def bench_applies(cls, defense: str, setting: Any) -> bool:
        """A finite, non-empty pool only (m=0 has no mask, m=inf no pool to recover)."""
        return setting.get("m") not in (0, "inf", None)

    @classmethod
    def for_bench(cls, resources: Any) -> "Unmix":
        """Built from the masks the attacker RECOVERED (never the true pool), the index and the public k."""
        return cls(resources.index, resources.recovered_masks(), k=resources.k)

    def __init__(self, index: SimilaritySearch, masks: Any, *, k: int, mask_candidates: int = 3,
                 polish_passes: int = 8, swap_candidates: int = 4, repair_signs: bool = True,
                 unexplained_above: float = 0.05, exhaustive: bool = True, batch_size: int = 256) -> None:
        if not isinstance(index, SimilaritySearch):
            raise InvalidTypeError(f"index must be a SimilaritySearch, not {type(index).__name__}")
        self.index = index
        self._masks = check_masks(masks, index.dim)
        n = len(index)
        self.k = check_int("k", k, minimum=1, maximum=min(n, index.dim),
                           hint=f" (sources per encoding; at most the index size {n} and the dimension {index.dim})")
        self.mask_candidates = min(len(self._masks), check_int("mask_candidates", mask_candidates, minimum=1))
        self.polish_passes = check_int("polish_passes", polish_passes, minimum=0)
        self.swap_candidates = min(n, check_int("swap_candidates", swap_candidates, minimum=1))
        if not isinstance(repair_signs, bool):
            raise InvalidTypeError(f"repair_signs must be a bool, not {type(repair_signs).__name__}")
        self.repair_signs = repair_signs
        self.unexplained_above = check_real("unexplained_above", unexplained_above, low=0.0, high=1.0,
                                            hint=" (a relative residual |e o s - X^T w| / |e| in [0, 1])")
        if not isinstance(exhaustive, bool):
            raise InvalidTypeError(f"exhaustive must be a bool, not {type(exhaustive).__name__}")
        self.exhaustive = exhaustive
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self._x = np.ascontiguousarray(index.vectors, dtype=np.float32)  # (N, d)
        self._mu = self._x.astype(np.float64).mean(axis=0).astype(np.float32)
        self._sq = np.einsum("nd,nd->n", self._x, self._x)  # |x_i|^2 (1 for a normalised index)

    @property
    def masks(self) -> np.ndarray:
        """The recovered masks given (read-only float32 +-1)."""
        return self._masks

    def config(self) -> dict[str, Any]:
        return {**super().config(), "index": self.index.config(), "k": self.k, "n_masks": int(len(self._masks)),
                "mask_candidates": self.mask_candidates, "polish_passes": self.polish_passes,
                "swap_candidates": self.swap_candidates, "repair_signs": self.repair_signs,
                "unexplained_above": self.unexplained_above, "exhaustive": self.exhaustive,
                "batch_size": self.batch_size,
                "mask_choice": "top |<M o e, mean(index)>|, then least residual of the k-sparse fit",
                "solver": "non-negative OMP (NNLS refits) over the whole index, then OLS-ranked whole-index swaps "
                          "and sign repair"}

    # ------------------------------------------------------------ attack
    def attack(self, observation: Observation) -> Unmixed:
        """Recover the k sources of every encoding in ``observation`` (see the module docstring)."""
        if not isinstance(observation, Observation):
            raise InvalidTypeError("observation must be an Observation (what the attacker sees: "
                                   f"veil.attacks.retrieval.observe.observe(...)), not {type(observation).__name__}")
        if observation.dim != self.index.dim:
            raise DataFormatError(f"the encodings have dimension {observation.dim} but the index has "
                                  f"{self.index.dim}; use an index built with the defended encoder")
        declared = observation.defense.get("k")
        if declared is not None and declared != self.k:
            raise InvalidParameterError(f"the observation's defense mixes k={declared} representations but the "
                                        f"attack was built with k={self.k}; pass k={declared}")
        start = time.perf_counter()
        e = np.asarray(observation.vectors, dtype=np.float32)
        n, k = e.shape[0], self.k
        block = max(1, min(self.batch_size, _BLOCK_BYTES // (4 * len(self.index) * (k + 2))))
        parts = [self._unmix_block(e[s:s + block]) for s in range(0, n, block)]
        out = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
        return Unmixed(**out, index_size=len(self.index), defense=dict(observation.defense), config=self.config(),
                       wall_time_s=time.perf_counter() - start)

    def _unmix_block(self, e: np.ndarray) -> dict[str, np.ndarray]:
        b = e.shape[0]
        norm = np.linalg.norm(e.astype(np.float64), axis=1)
        state = self._empty_state(b, e.shape[1])
        # step 1: masks ranked by agreement of the unmasked vector with the index mean; the one whose greedy fit
        # (step 2, before any sign repair) explains the encoding best is polished (step 3)
        score = (e * self._mu) @ self._masks.T  # (b, m')
        cand = _top(np.abs(score), self.mask_candidates)
        signs = np.where(np.take_along_axis(score, cand, axis=1) < 0, -1, 1).astype(np.int8)
        self._choose(state, np.arange(b), e, norm, cand, signs)
        self._polish(state, np.arange(b), e, norm)
        # step 4 for the encodings left unexplained: every mask scored by its best match in the index
        rows = np.flatnonzero(state.res > self.unexplained_above * norm)
        if self.exhaustive and len(rows):
            sub, local = self._empty_state(len(rows), e.shape[1]), np.arange(len(rows))
            self._choose(sub, local, e[rows], norm[rows], *self._rank_all_masks(e[rows]))
            self._polish(sub, local, e[rows], norm[rows])
            better = sub.res < state.res[rows]
            state.take(rows[better], sub, np.flatnonzero(better))
        # the recovered mask nearest to the signs that explain each encoding (the repair may have moved them)
        agree = state.s @ self._masks.T
        mid = np.abs(agree).argmax(axis=1)
        sign = np.where(agree[np.arange(b), mid] < 0, -1, 1).astype(np.int8)
        order = np.argsort(-state.w, axis=1, kind="stable")
        return {"ids": np.take_along_axis(state.sel, order, axis=1), "weights": np.take_along_axis(state.w, order, 1),
                "mask_ids": mid, "mask_signs": sign,
                "sign_flips": (state.s != self._masks[mid] * sign[:, None]).sum(axis=1),
                "residuals": np.divide(state.res, norm, out=np.zeros_like(state.res), where=norm > 0)}

    def _empty_state(self, b: int, d: int) -> _State:
        return _State(sel=np.zeros((b, self.k), dtype=np.int64), w=np.zeros((b, self.k)), res=np.full(b, np.inf),
                      s=np.ones((b, d), dtype=np.float32))

    def _choose(self, state: _State, rows: np.ndarray, e: np.ndarray, norm: np.ndarray, mids: np.ndarray,
                signs: np.ndarray) -> None:
        """Step 2 with candidate masks ``mids[:, j]`` in turn (the next only for rows not yet explained exactly);
        each row keeps the fit with the smallest residual."""
        for j in range(mids.shape[1]):
            todo = rows if j == 0 else rows[state.res[rows] > _EXACT * norm[rows]]
            if not len(todo):
                return
            s = self._masks[mids[todo, j]] * signs[todo, j, None].astype(np.float32)
            sel, w, res = self._greedy(e[todo] * s)
            better = res < state.res[todo]
            r = todo[better]
            state.sel[r], state.w[r], state.res[r], state.s[r] = sel[better], w[better], res[better], s[better]

    def _polish(self, state: _State, rows: np.ndarray, e: np.ndarray, norm: np.ndarray) -> None:
        """Step 3 on ``rows``, each until it is exact or a pass shrinks its residual by < 0.1%. A repair is kept
        before the swaps only if exact: moving the signs towards a wrong support would hide the right one."""
        for _ in range(self.polish_passes):
            act = rows[state.res[rows] > _EXACT * norm[rows]]
            if self.repair_signs and len(act):
                s, w, res = self._repair(state, act, e, steps=4)
                exact = res <= _EXACT * norm[act]
                a = act[exact]
                state.s[a], state.w[a], state.res[a] = s[exact], w[exact], res[exact]
                act = act[~exact]
            if not len(act):
                return
            before = state.res[act].copy()
            state.sel[act], state.w[act], state.res[act] = self._refine(e[act] * state.s[act], state.sel[act],
                                                                       state.w[act], state.res[act])
            if self.repair_signs:
                s, w, res = self._repair(state, act, e, steps=1)
                better = res < state.res[act]
                a = act[better]
                state.s[a], state.w[a], state.res[a] = s[better], w[better], res[better]
            rows = act[state.res[act] < before * (1.0 - 1e-3)]  # rows that stopped improving are done

    def _repair(self, state: _State, act: np.ndarray, e: np.ndarray,
                steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Step 3b on rows ``act`` (support fixed): ``steps`` rounds of s_d = sign(e_d (X^T w)_d) + NNLS refit."""
        atoms = self._x[state.sel[act]]
        s, w, res = state.s[act], state.w[act], state.res[act]
        for _ in range(steps):
            agree = np.einsum("bt,btd->bd", w, atoms) * e[act]  # the sign making e_d s_d agree with the fit
            s = np.where(agree > 0, 1.0, np.where(agree < 0, -1.0, s)).astype(np.float32)
            w, r = _nnls_rows(atoms, e[act] * s)
            res = np.linalg.norm(r, axis=1)
        return s, w, res

    def _rank_all_masks(self, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per encoding, the ``mask_candidates`` masks whose unmasked vector has the largest |inner product| with
        an index entry, and their signs: (mask ids (r, c), signs (r, c))."""
        m = len(self._masks)
        chunk = max(1, _BLOCK_BYTES // (4 * len(self.index)))  # masks per product
        best, sign = np.empty((len(e), m), dtype=np.float32), np.empty((len(e), m), dtype=np.int8)
        for i, row in enumerate(e):
            for s in range(0, m, chunk):
                prod = self._products(row * self._masks[s:s + chunk])  # (masks, N)
                pos, neg = prod.max(axis=1), -prod.min(axis=1)
                best[i, s:s + chunk], sign[i, s:s + chunk] = np.maximum(pos, neg), np.where(pos >= neg, 1, -1)
        top = _top(best, self.mask_candidates)
        return top, np.take_along_axis(sign, top, axis=1)

    def _products(self, v: np.ndarray) -> np.ndarray:
        """``v @ X.T``: (rows, N) float32 inner products with every index entry."""
        return np.ascontiguousarray(v, dtype=np.float32) @ self._x.T

    def _ols_scores(self, cu: np.ndarray, g: np.ndarray, sel: np.ndarray, w: np.ndarray) -> np.ndarray:
        """OLS gain of every entry next to support ``sel`` (b, t) with weights ``w``, ``g`` (b, t, N) its products
        with the index: <r, x_i>^2 / |P x_i|^2 for <r, x_i> = cu_i - w . g_i > 0, with |P x_i|^2 = |x_i|^2 -
        g_i^T Gram^-1 g_i (x_i off the support's span). Others score -1 (no gain, in the span), chosen ones -2."""
        b, t = sel.shape
        if t == 0:
            corr, den = cu, self._sq
        else:
            corr = cu - np.einsum("bt,btn->bn", w.astype(np.float32), g)
            gram = np.take_along_axis(g, sel[:, None, :], axis=2) + np.float32(1e-6) * np.eye(t, dtype=np.float32)
            den = self._sq - np.einsum("btn,btn->bn", g, np.linalg.inv(gram) @ g)  # float32 keeps (b, t, N) small
        out = np.full(cu.shape, -1.0, dtype=np.float32)
        np.divide(corr * corr, den, out=out, where=(corr > 0) & (den > 1e-6 * self._sq))
        if t:
            out[np.arange(b)[:, None], sel] = -2.0
        return out

    def _greedy(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Step 2, non-negative OMP with k picks over the whole index: (ids, weights, |residual|)."""
        b, k = u.shape[0], self.k
        rows = np.arange(b)[:, None]
        sel = np.empty((b, k), dtype=np.int64)
        r = u.astype(np.float64)
        for t in range(k):
            corr = self._products(r)  # <r, x_i> for every entry
            corr[rows, sel[:, :t]] = -np.inf
            sel[:, t] = corr.argmax(axis=1)
            w, r = _nnls_rows(self._x[sel[:, :t + 1]], u)
        return sel, w, np.linalg.norm(r, axis=1)

    def _refine(self, u: np.ndarray, sel: np.ndarray, w: np.ndarray,
                res: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One pass of whole-index swaps: slot by slot, try the ``swap_candidates`` best entries (OLS score
        against the other slots' fit) in its place; keep the best if it shrinks the residual."""
        b, k = sel.shape
        sel, w, res = sel.copy(), w.copy(), res.copy()
        cu = self._products(u)
        g = np.stack([self._products(self._x[sel[:, j]]) for j in range(k)], axis=1)  # (b, k, N)
        for slot in range(k):
            others = [j for j in range(k) if j != slot]
            keep = sel[:, others]
            wk = _nnls_rows(self._x[keep], u)[0] if k > 1 else np.zeros((b, 0))
            scores = self._ols_scores(cu, g[:, others], keep, wk)
            changed = np.zeros(b, dtype=bool)
            for new in _top(scores, self.swap_candidates).T:
                trial = sel.copy()
                trial[:, slot] = new
                tw, tr = _nnls_rows(self._x[trial], u)
                tres = np.linalg.norm(tr, axis=1)
                better = (tres < res * (1.0 - 1e-9)) & (scores[np.arange(b), new] >= 0)
                sel[better], w[better], res[better] = trial[better], tw[better], tres[better]
                changed |= better
            if changed.any() and slot + 1 < k:
                g[changed, slot] = self._products(self._x[sel[changed, slot]])
        return sel, w, res


@dataclass
class _State:
    """The best fit so far of each encoding of a block (mutable, internal): support, weights, |residual| and
    the sign vector ``s`` it unmasks with (e o s ~ X^T w)."""

    sel: np.ndarray
    w: np.ndarray
    res: np.ndarray
    s: np.ndarray

    def take(self, rows: np.ndarray, other: _State, other_rows: np.ndarray) -> None:
        for name in ("sel", "w", "res", "s"):
            getattr(self, name)[rows] = getattr(other, name)[other_rows]


def _top(scores: np.ndarray, c: int) -> np.ndarray:
    """Column ids of the ``c`` largest entries of each row, largest first, int64 (rows, c)."""
    if c >= scores.shape[1]:
        return np.argsort(-scores, axis=1, kind="stable")[:, :c]
    import torch

    return torch.topk(torch.from_numpy(np.ascontiguousarray(scores, dtype=np.float32)), c, dim=1,
                      sorted=True).indices.numpy()


def _nnls_rows(atoms: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, ``w = argmin_{w >= 0} |u - atoms^T w|``: (weights (b, t), residuals (b, d)), float64. Batched
    normal equations (exact when that optimum is interior); ``scipy.optimize.nnls`` for the other rows."""
    a = atoms.astype(np.float64)  # (b, t, d)
    y = u.astype(np.float64)
    gram = a @ a.transpose(0, 2, 1)  # (b, t, t)
    rhs = np.einsum("btd,bd->bt", a, y)
    t = a.shape[1]
    w = np.zeros((a.shape[0], t))
    # a tiny ridge relative to the diagonal keeps exact duplicates solvable; real atoms are far from singular
    ridge = 1e-12 * np.trace(gram, axis1=1, axis2=2)[:, None, None] * np.eye(t)
    try:
        w = np.linalg.solve(gram + ridge, rhs[..., None])[..., 0]
        bad = ~(np.isfinite(w).all(axis=1) & (w >= 0).all(axis=1))
    except np.linalg.LinAlgError:
        bad = np.ones(a.shape[0], dtype=bool)
    if bad.any():
        from scipy.optimize import nnls

        for i in np.flatnonzero(bad):
            w[i] = nnls(a[i].T, y[i])[0]
    return w, y - np.einsum("bt,btd->bd", w, a)


# ---------------------------------------------------------------- scoring (ground truth; never given to the attack)
def score_unmix(unmixed: Unmixed, true_sources: Any, *, index: SimilaritySearch | None = None, ci_level: float = 0.95,
                n_bootstrap: int = 2000, rng: RngLike = 0, n_examples: int = 5) -> AttackResult:
    """Score recovered sources against the true PRIVATE source ids of each encoding: an :class:`AttackResult`.

    ``true_sources``: int (n, kp) index ids of each encoding's private sources (``MixTruth.index_ids(query_ids)``;
    slot 0 = the example itself), compared as sets (TextHide may put one example in two slots). Metrics:

    * ``all_sources``: fraction of encodings whose every true private source is among the k recovered ids
      (intra mode, distinct sources: recovered set == true set). Wilson score interval.
    * ``source_recall``: mean over encodings of the fraction of its distinct true private sources recovered.
      Percentile bootstrap over encodings (``n_bootstrap`` resamples; ``rng``: the default seed 0 makes
      records reproducible, this randomness protects nothing).
    * ``query_recovered``: fraction of encodings whose own example (slot 0) is recovered. Wilson interval.

    Ids are compared exactly unless ``index`` (the attacked index) is given: then ids whose stored vectors
    are bit-identical count as one source (no attack on representations can tell them apart, e.g. texts
    that differ only in case under an uncased encoder).
    """
    from veil.metrics.leakage import wilson_interval
    from veil.results import Metric

    if not isinstance(unmixed, Unmixed):
        raise InvalidTypeError(f"unmixed must be the Unmixed returned by Unmix.attack, not {type(unmixed).__name__}")
    truth, found, n = np.asarray(true_sources), unmixed.ids, len(unmixed)
    truth = truth[:, None] if truth.ndim == 1 else truth
    if truth.ndim != 2 or truth.dtype.kind not in "iu":
        raise InvalidTypeError(f"true_sources must be an integer array (n, private slots) of index ids, got "
                               f"{truth.dtype} {truth.shape}; use MixTruth.index_ids(query_ids)")
    if truth.shape[0] != n or truth.shape[1] < 1:
        raise DataFormatError(f"true_sources has shape {truth.shape} but {n} encodings were unmixed; pass one row "
                              "of source ids per encoding")
    if truth.min() < 0 or truth.max() >= unmixed.index_size:
        raise InvalidParameterError(f"true source ids must be index ids in [0, {unmixed.index_size - 1}]")
    ci_level = check_real("ci_level", ci_level, low=0.0, high=1.0, low_open=True, high_open=True)
    n_bootstrap = check_int("n_bootstrap", n_bootstrap, minimum=1)
    n_examples = check_int("n_examples", n_examples, minimum=0)
    check_rng(rng)
    if index is not None:
        if not isinstance(index, SimilaritySearch) or len(index) != unmixed.index_size:
            raise InvalidParameterError(f"index must be the SimilaritySearch that was attacked "
                                        f"({unmixed.index_size} entries)")
        canon = np.unique(index.vectors, axis=0, return_inverse=True)[1].reshape(-1)
        truth, found = canon[truth], canon[found]
    hit = (truth[:, :, None] == found[:, None, :]).any(axis=2)  # true source j of encoding i was recovered
    first = np.ones_like(hit)  # count each distinct true source once per encoding
    for j in range(1, truth.shape[1]):
        first[:, j] = ~(truth[:, :j] == truth[:, j:j + 1]).any(axis=1)
    all_hit, recall = (hit | ~first).all(axis=1), (hit & first).sum(axis=1) / first.sum(axis=1)

    def metric(x: np.ndarray, ci: tuple[float, float]) -> Metric:
        return Metric(mean=float(x.mean()), std=float(x.std(ddof=1)) if n > 1 else None, n=n, ci_low=float(ci[0]),
                      ci_high=float(ci[1]), ci_level=ci_level)

    means = recall[as_generator(rng).integers(0, n, size=(n_bootstrap, n))].mean(axis=1)
    alpha = (1.0 - ci_level) / 2.0
    metrics = {"all_sources": metric(all_hit, wilson_interval(float(all_hit.sum()), n, ci_level)),
               "source_recall": metric(recall, (np.quantile(means, alpha), np.quantile(means, 1 - alpha))),
               "query_recovered": metric(hit[:, 0], wilson_interval(float(hit[:, 0].sum()), n, ci_level))}
    examples = [{"true": truth[i].tolist(), "recovered": found[i].tolist(),
                 "coefficients": np.round(unmixed.coefficients[i], 4).tolist(), "all_sources": bool(all_hit[i])}
                for i in range(min(n_examples, n))]
    scoring = {"ci": f"Wilson (all_sources, query_recovered); percentile bootstrap over encodings, {n_bootstrap} "
                     "resamples (source_recall)", "bootstrap_rng": rng_description(rng),
               "same_vector_same_source": index is not None}
    return AttackResult(attack=Unmix.name, defense=dict(unmixed.defense), n_queries=n, metrics=metrics,
                        config={**dict(unmixed.config), "scoring": scoring}, wall_time_s=unmixed.wall_time_s,
                        examples=tuple(examples))


def evaluate_unmix(attack: Unmix, observation: Observation, true_sources: Any, **score_kwargs: Any) -> AttackResult:
    """Run ``attack.attack(observation)`` (which never sees the truth), then :func:`score_unmix` it."""
    if not isinstance(attack, Unmix):
        raise InvalidTypeError(f"attack must be an Unmix, not {type(attack).__name__}")
    return score_unmix(attack.attack(observation), true_sources, **score_kwargs)
