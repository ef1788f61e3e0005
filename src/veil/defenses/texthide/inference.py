"""TextHide at inference time: what a deployed TextHide model releases for each query (Huang et al. 2020, Sec. 3).

The authors train on mixed, masked encodings and, at test time, send each input's encoding with no mixing (k = 1)
under a fresh sign mask drawn from the same secret pool of m masks (:meth:`TextHide.encrypt_inference`).
:class:`TextHideInference` is that release as a ``vectors`` defense: ``protect(X)`` masks each row with a pool mask.
With m masks in the pool an eavesdropper who sees many queries faces m unknown sign patterns, and the sign-blind
attacks (abs-RSS) ignore them altogether; the bench measures both.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from veil.defenses.base import VectorsDefense
from veil.defenses.texthide.mechanism import TEXTHIDE_GUARANTEE
from veil.validation import check_int

__all__ = ["TextHideInference"]


class TextHideInference(VectorsDefense):
    """One secret pool of ``m`` sign masks (OS CSPRNG unless ``rng`` is given); ``protect(X)`` multiplies each row
    by a mask drawn from the pool, as TextHide's inference step does."""

    name = "texthide-inference"
    guarantee = TEXTHIDE_GUARANTEE
    citation = "Huang, Song, Chen, Li & Arora 2020, TextHide (Findings of EMNLP): inference-time masking"
    paper_attack = "rss"  # Huang et al. 2020, Tables 3-4
    tasks: ClassVar[tuple[str, ...]] = ("sentence-classification",)

    def __init__(self, *, m: int | None = None, dim: int | None = None, pool: Any = None, rng: Any = None) -> None:
        """A fresh pool of ``m`` masks of width ``dim`` (OS CSPRNG unless ``rng``), or the given ``pool`` (a
        :class:`~veil.defenses.texthide.masks.MaskPool` of at least one mask; ``m`` and ``dim`` then left out)."""
        from veil.defenses.defaults import key_seeds, mask_pool
        from veil.defenses.texthide.masks import MaskPool
        from veil.defenses.texthide.mechanism import TextHide
        from veil.errors import InvalidParameterError, InvalidTypeError

        seeds = key_seeds(rng)
        if pool is not None:
            if not isinstance(pool, MaskPool):
                raise InvalidTypeError(f"pool must be a MaskPool, got {type(pool).__name__}; build one with "
                                       "MaskPool(m, dim), or pass m and dim instead")
            if m is not None or dim is not None:
                raise InvalidParameterError("give either pool= (a MaskPool) or m= and dim=, not both")
            if pool.m is None or pool.m < 1:
                raise InvalidParameterError(f"texthide-inference needs a finite pool of at least one mask, got m="
                                            f"{pool.m}")
            self._m = int(pool.m)
        else:
            if m is None or dim is None:
                raise InvalidParameterError("texthide-inference needs m= and dim= (a fresh secret pool), or pool=")
            self._m = check_int("m", m, minimum=1, hint=" (the number of secret masks in the pool)")
            pool = mask_pool(self._m, check_int("dim", dim, minimum=1), rng=seeds[0])
        self._texthide = TextHide(k=1, pool=pool, rng=seeds[1])

    @property
    def pool(self) -> Any:
        """The secret pool of masks (the key: never log it; ``pool.save(path)`` writes it owner-only)."""
        return self._texthide.pool

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        """The paper's pool (m = 256); the full bench adds a small and a large pool."""
        return [{"m": 256}] if quick else [{"m": 16}, {"m": 256}, {"m": 1024}]

    @classmethod
    def bench_make(cls, setting: dict[str, Any], data: Any, rng: Any = None, **options: Any) -> "TextHideInference":
        """A fresh pool of ``setting["m"]`` masks over the corpus' embedding width."""
        return cls(m=int(setting["m"]), dim=data.dim, rng=rng)

    def protect(self, X: Any) -> np.ndarray:
        """Each row of ``X`` (n, d) times a sign mask drawn from the secret pool, as float32."""
        import torch

        e = torch.from_numpy(np.ascontiguousarray(X, dtype=np.float32))
        return self._texthide.encrypt_inference(e).numpy().astype(np.float32, copy=False)

    def training_hook(self, task: str = "classification", num_classes: int | None = None) -> Any:
        """How the owner trains the model that reads this release: TextHide with k = 1 over the same secret pool
        (a fresh pool mask per example and epoch; its ``infer`` masks as :meth:`protect` does)."""
        return self._texthide.hook(task, num_classes)

    def config(self) -> dict[str, Any]:
        cfg = self._texthide.config()
        return {**super().config(), "m": self._m, "dim": cfg["dim"], "mask_key": cfg["mask_key"],
                "mixing_rng": cfg["mixing_rng"]}
