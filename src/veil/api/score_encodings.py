"""``veil.attack`` on a ``training-encodings`` release (TextHide's encodings of a training run): mask recovery and
unmixing, scored by the bench cell's own functions (:func:`veil.bench.cells.training_encodings.score_mask_recovery_run`
and :func:`~veil.bench.cells.training_encodings.score_unmix_run`).

The release is what :func:`veil.protect` returned for ``texthide``: the encodings of one pass over the data, and
in its key the mask pool and that pass's one-time mixing (:attr:`veil.api.SecretKey.mixing`), which reach the
scorer only. The attacker observes the encodings. Mask recovery learns the public statistics it needs (mean and
covariance of unprotected vectors) from the ``public`` resource (texts or vectors; default: the quick bench's public
texts). Unmixing starts from the masks it recovered itself (never the true pool) and looks each encoding's sources up
in an index of the private texts (``private=``, the bench's worst case: the attacker's candidates hold every private
text), plus the release's public texts in inter mode; at most ``queries`` encodings (default: the bench's) are split.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

import numpy as np

from veil.errors import InvalidParameterError

__all__ = ["texthide_run"]


def _truth(release: Any) -> Any:
    mixing = None if release.key is None else release.key.mixing
    if mixing is None:
        raise InvalidParameterError("a training-encodings release scored by veil.attack needs its one-time mixing: "
                                    "pass what veil.protect(..., 'texthide') returned, key included")
    return mixing


def _stats(s: dict[str, Any], quick: bool) -> Any:
    from veil.api.score import _public
    from veil.attacks.texthide.observe import PublicStats

    P = _public(s, quick)
    what = "the given public vectors" if s["public"] is not None else "the quick bench's public texts"
    return PublicStats.from_vectors(P, source=f"{what} ({len(P)})")


def texthide_run(release: Any, attack: str, private: Any, s: dict[str, Any],
                 make_cell: Callable[..., Any]) -> tuple[Any, dict[str, Any], Any, int]:
    """(record, bench block, the cell it stands for, encodings scored) of ``attack`` on ``release``."""
    from veil.api.score import _private
    from veil.attacks.base import Observation, get_attack
    from veil.bench.cells.training_encodings import score_mask_recovery_run, score_unmix_run
    from veil.bench.plan import BenchConfig

    truth = _truth(release)
    encodings = release.release
    vectors = np.ascontiguousarray(getattr(encodings, "e", encodings).detach().cpu().numpy(), dtype=np.float32)
    obs = Observation(vectors, defense={**release.defense.config(), "observed": "one pass over the data"},
                      source="defense")
    quick = bool(s["quick"])
    if attack == "mask-recovery":
        cell = make_cell(release, attack, len(obs), s)
        resources = SimpleNamespace(stats=_stats(s, quick), seed=cell.config.seed)
        rec, bench = score_mask_recovery_run(get_attack(attack).for_bench(resources), obs, truth, cell.id)
        return rec, bench, cell, len(obs)
    from veil.attacks.retrieval import SimilaritySearch
    from veil.attacks.texthide.mask_recovery import MaskRecovery, score_mask_recovery

    texts, X = _private(private, "vectors", truth.n_examples)
    want = s["queries"] if s["queries"] is not None else BenchConfig(quick=quick).n_queries
    n = min(int(want), len(obs))
    cell = make_cell(release, attack, n, s)
    stats = _stats(s, quick)
    recovered = MaskRecovery(stats, rng=cell.config.seed).recover(obs)
    recovery = score_mask_recovery(recovered, truth, observation=obs)
    if release.defense.mode == "inter":  # the public slots' texts are candidates too
        from veil.api import PUBLIC_SIZE
        from veil.defenses.defaults import public_vectors

        ptexts, P = public_vectors(PUBLIC_SIZE, corpus=release.settings["public"])
        texts, X = texts + list(ptexts), np.concatenate([X, P])
    resources = SimpleNamespace(index=SimilaritySearch(texts, X), k=int(release.settings["k"]),
                                recovered_masks=lambda: recovered.masks)
    sel = np.sort(np.random.default_rng(cell.config.seed).choice(len(obs), size=n, replace=False))
    seen = Observation(obs.vectors[sel], defense=dict(obs.defense), source=obs.source)
    rec, bench = score_unmix_run(get_attack(attack).for_bench(resources), seen, np.asarray(truth.sources)[sel],
                                 recovery, truth.n_examples, cell.id)
    return rec, bench, cell, n
