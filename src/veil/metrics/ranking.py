"""Ranking metrics of word-recovery attacks (Hu et al. 2020, Sec. 5.2): MRR with pessimistic ties, prv, top-1.

For each obfuscated position the attacker scores every word of its vocabulary. The rank of the true word is
the number of words scoring AT LEAST as high as it (pessimistic ties: a tie does not help the attacker; the
authors' MeanRankReciprocalMetric counts ``>=``). A true word outside the attacker's vocabulary has reciprocal
rank 0. MRR is the mean reciprocal rank over all obfuscated tokens (micro average); the paper's privacy
score is ``prv = 100 - 100 * MRR`` ("attacker error"); top-1 is the share of rank-1 tokens. The breach ratio of
Table 2 is ``UAS / (100 - prv)``: footnote 11 says LAS, but every number of the table is UAS / (100 - prv)
(94.1 / 31.7 = 2.97), so veil follows the numbers.

Intervals: percentile bootstrap over sentences (tokens of one sentence are not independent).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from veil.errors import DataFormatError

__all__ = ["pessimistic_ranks", "reciprocal_ranks", "ranking_metrics", "breach_ratio"]


def pessimistic_ranks(scores: Any, targets: Any) -> np.ndarray:
    """Rank of each target among its row of ``scores`` ``(n, V)``: #{v : score_v >= score_target}.

    ``targets`` ``(n,)`` holds vocabulary indices, or -1 for a word outside the vocabulary (rank 0 = not found).
    Works on numpy arrays or torch tensors (computed in torch when given torch).
    """
    if hasattr(scores, "detach"):
        import torch

        t = torch.as_tensor(targets, dtype=torch.long, device=scores.device)
        inside = t >= 0
        true = scores.gather(1, t.clamp(min=0).unsqueeze(1))
        ranks = (scores >= true).sum(1)
        return torch.where(inside, ranks, torch.zeros_like(ranks)).cpu().numpy().astype(np.int64)
    s = np.asarray(scores, dtype=np.float64)
    t = np.asarray(targets, dtype=np.int64)
    if s.ndim != 2 or t.shape != (s.shape[0],):
        raise DataFormatError(f"scores must be (n, V) and targets (n,), got {s.shape} and {t.shape}")
    if (t >= s.shape[1]).any():
        raise DataFormatError("a target index is past the vocabulary; use -1 for words outside it")
    true = s[np.arange(len(t)), np.maximum(t, 0)]
    ranks = (s >= true[:, None]).sum(1)
    return np.where(t >= 0, ranks, 0).astype(np.int64)


def reciprocal_ranks(ranks: Any) -> np.ndarray:
    """1 / rank, and 0 for rank 0 (the true word was not among the attacker's candidates)."""
    r = np.asarray(ranks, dtype=np.float64)
    return np.where(r > 0, 1.0 / np.maximum(r, 1.0), 0.0)


def ranking_metrics(ranks: Sequence[int], groups: Sequence[int] | None = None, *, n_boot: int = 1000,
                    seed: int = 0, level: float = 0.95) -> dict[str, Any]:
    """``mrr``, ``prv`` (100 - 100 MRR) and ``top1`` (percent) as veil Metrics with bootstrap CIs.

    ``groups`` gives each token's sentence (resampled together); None resamples tokens.
    """
    from veil.results import Metric

    ranks = np.asarray(ranks, dtype=np.int64)
    if ranks.size == 0:
        raise DataFormatError("no obfuscated tokens to score; pick a level that hides some words")
    rr = reciprocal_ranks(ranks)
    top = (ranks == 1).astype(np.float64)
    g = np.arange(len(ranks)) if groups is None else np.unique(np.asarray(groups), return_inverse=True)[1]
    n_groups = int(g.max()) + 1
    sums = np.stack([np.bincount(g, rr, n_groups), np.bincount(g, top, n_groups),
                     np.bincount(g, minlength=n_groups).astype(np.float64)], axis=1)
    rng = np.random.default_rng(seed)
    boot = sums[rng.integers(0, n_groups, size=(n_boot, n_groups))].sum(1)
    mrr_b, top_b = boot[:, 0] / np.maximum(boot[:, 2], 1), boot[:, 1] / np.maximum(boot[:, 2], 1)
    q = [(1 - level) / 2, (1 + level) / 2]

    def metric(mean: float, samples: np.ndarray) -> Metric:
        lo, hi = np.quantile(samples, q)
        return Metric(mean=float(mean), n=int(len(ranks)), ci_low=float(lo), ci_high=float(hi), ci_level=level)

    mrr = float(rr.mean())
    return {"mrr": metric(mrr, mrr_b), "prv": metric(100 - 100 * mrr, np.sort(100 - 100 * mrr_b)),
            "top1": metric(100 * float(top.mean()), 100 * top_b)}


def breach_ratio(uas: float, prv: float) -> float:
    """Hu et al.'s Table 2 ratio UAS / (100 - prv) (higher: more accuracy per unit of leaked privacy)."""
    if not 0 <= prv < 100:
        raise DataFormatError(f"prv must be in [0, 100), got {prv}")
    return float(uas) / (100.0 - float(prv))
