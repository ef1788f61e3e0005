"""``veil.attack`` on a ``training-encodings`` release (TextHide's encodings of a training run): mask recovery and
unmixing, scored by the bench cell's own functions (:func:`veil.bench.cells.training_encodings.score_mask_recovery_run`
and :func:`~veil.bench.cells.training_encodings.score_unmix_run`).

The release is what :func:`veil.protect` returned for ``texthide``: every encoding of a training run (``epochs``
passes over the data in shuffled batches of 64, as the bench's), and in its key the mask pool and the run's
one-time mixing (:attr:`veil.api.SecretKey.mixing`), which reach the scorer only. The attacker observes the
encodings. Mask recovery learns the public statistics it needs (mean and covariance of unprotected vectors) from
the ``public`` resource (texts or vectors; default: the quick bench's public texts; the bench uses the corpus' own
held-out split). Unmixing starts from the masks it recovered itself (never the true pool) and looks each encoding's
sources up in an index: by default the protected texts themselves (``private=``, the bench's worst case: the
attacker's candidates hold every private text), plus the release's public texts in inter mode; or ``index`` (a
``SimilaritySearch``) with ``source_ids``, each protected row's position in it. At most ``queries`` encodings
(default: the bench's) are split, and success is tested against 1 / the number of private candidates.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

import numpy as np

from veil.errors import DataFormatError, InvalidParameterError

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
    from veil.api.kinds import TRAINING_BATCH
    from veil.api.score import _private
    from veil.attacks.base import Observation, get_attack
    from veil.bench.cells.training_encodings import score_mask_recovery_run, score_unmix_run
    from veil.bench.plan import BenchConfig

    truth = _truth(release)
    encodings = release.release
    vectors = np.ascontiguousarray(getattr(encodings, "e", encodings).detach().cpu().numpy(), dtype=np.float32)
    run = {"observed": "training run", "epochs": release.settings["epochs"], "batch_size": TRAINING_BATCH,
           "n_examples": truth.n_examples}  # as the bench's observation of a training run describes it
    obs = Observation(vectors, defense={**release.defense.config(), **run}, source="defense")
    quick = bool(s["quick"])
    if attack == "mask-recovery":
        cell = make_cell(release, attack, len(obs), s)
        resources = SimpleNamespace(stats=_stats(s, quick), seed=cell.config.seed)
        rec, bench = score_mask_recovery_run(get_attack(attack).for_bench(resources), obs, truth, cell.id)
        return rec, bench, cell, len(obs)
    from veil.attacks.texthide.mask_recovery import MaskRecovery, score_mask_recovery

    texts, X = _private(private, "vectors", truth.n_examples)
    want = s["queries"] if s["queries"] is not None else BenchConfig(quick=quick).n_queries
    n = min(int(want), len(obs))
    cell = make_cell(release, attack, n, s)
    stats = _stats(s, quick)
    recovered = MaskRecovery(stats, rng=cell.config.seed).recover(obs)
    recovery = score_mask_recovery(recovered, truth, observation=obs)
    index, ids = _index(s, release, texts, X)
    resources = SimpleNamespace(index=index, k=int(release.settings["k"]), recovered_masks=lambda: recovered.masks)
    sel = np.sort(np.random.default_rng(cell.config.seed).choice(len(obs), size=n, replace=False))
    seen = Observation(obs.vectors[sel], defense=dict(obs.defense), source=obs.source)
    rec, bench = score_unmix_run(get_attack(attack).for_bench(resources), seen, ids[np.asarray(truth.sources)[sel]],
                                 recovery, len(index) if s["index"] is not None else len(texts), cell.id)
    return rec, bench, cell, n


def _index(s: dict[str, Any], release: Any, texts: list[str], X: np.ndarray) -> tuple[Any, np.ndarray]:
    """The attacker's index and each protected row's position in it: ``index`` (a SimilaritySearch of the
    candidates, intra mode) with ``source_ids``, or the protected texts themselves (the bench's worst case), plus
    the public slots' texts in inter mode."""
    from veil.attacks.retrieval import SimilaritySearch
    from veil.errors import InvalidTypeError

    if s["index"] is not None:
        if release.defense.mode == "inter":
            raise InvalidParameterError("index: give it in intra mode only; in inter mode veil.attack builds the index "
                                        "from the protected texts and the release's public texts")
        if not isinstance(s["index"], SimilaritySearch):
            raise InvalidTypeError(f"index must be a veil SimilaritySearch, got {type(s['index']).__name__}")
        ids = np.arange(len(texts)) if s["source_ids"] is None else np.asarray(s["source_ids"])
        if ids.shape != (len(texts),) or ids.dtype.kind not in "iu" or ids.min() < 0 or ids.max() >= len(s["index"]):
            raise DataFormatError(f"source_ids: give one index position (0..{len(s['index']) - 1}) per protected "
                                  f"row ({len(texts)})")
        return s["index"], ids
    if s["source_ids"] is not None:
        raise InvalidParameterError("source_ids maps the protected rows into an index you give: pass index= too")
    if release.defense.mode == "inter":  # the public slots' texts are candidates too
        from veil.api import PUBLIC_SIZE
        from veil.defenses.defaults import public_vectors

        ptexts, P = public_vectors(PUBLIC_SIZE, corpus=release.settings["public"])
        texts, X = texts + list(ptexts), np.concatenate([X, P])
    return SimilaritySearch(texts, X), np.arange(len(texts))
