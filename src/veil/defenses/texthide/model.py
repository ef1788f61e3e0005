"""A classifier trained on TextHide encodings, released as a model: what membership inference sees of TextHide.

:class:`TextHideTraining` (registry ``texthide-model``, release kind ``model``) trains veil's MLP head on frozen
sentence embeddings with the very loop of :class:`~veil.defenses.dpsgd.PlainTraining` (Poisson lots at q =
batch_size / n, the same steps, optimizer and initial weights), except that every lot is TextHide-encrypted first
(intra-dataset mixing of k examples with a secret pool of m sign masks, Huang et al. 2020, Alg. 1) and the loss is
the cross-entropy against the mixed soft labels. The released model is the owner's deployment: each query is masked
with a fresh mask from the same pool (the authors' inference, k = 1) before the head. The pool and the mixing are
secret (OS CSPRNG); the recipe (m, k, the hyperparameters) is public, so an attacker can train shadow models the
same way with pools of its own.

No formal guarantee (TextHide's is heuristic and about the encodings, not about membership in the model).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any, ClassVar

from veil.defenses.dpsgd.mechanism import DEFAULT_HIDDEN, TrainedModel, _Trainer
from veil.defenses.texthide.mechanism import TEXTHIDE_GUARANTEE
from veil.validation import check_int, check_rng

__all__ = ["TextHideTraining", "TextHideModel"]


def _model_class() -> type:
    from torch import nn

    class _TextHideModel(nn.Module):
        """The owner's deployed classifier: a fresh pool mask on every query, then the head."""

        def __init__(self, head: nn.Module, texthide: Any) -> None:
            super().__init__()
            self.head = head
            self._texthide = texthide  # holds the secret pool; never serialised by veil

        def forward(self, x: Any) -> Any:
            return self.head(self._texthide.encrypt_inference(x))

    return _TextHideModel


def __getattr__(name: str) -> Any:  # subclasses torch's Module: built on first use (no torch import here)
    if name == "TextHideModel":
        return _model_class()
    raise AttributeError(name)


class TextHideTraining(_Trainer):
    """Train a head on TextHide encodings ((m, k)-TextHide, intra-dataset) and release it behind its pool.

    Parameters (keyword-only): ``m`` (pool size, 256) and ``k`` (examples mixed, 4), then as
    :class:`~veil.defenses.dpsgd.PlainTraining`: epochs, batch_size (the expected lot; lots smaller than k are
    skipped), lr, optimizer, hidden, num_classes, model, init_seed. ``rng``: None (default) draws the pool, the
    mixing and the lots from the OS CSPRNG; a seed makes them reproducible (experiments and tests only; warns).
    """

    name = "texthide-model"
    citation = ("Huang, Song, Chen, Li & Arora 2020, TextHide (Findings of EMNLP): a classifier trained on TextHide "
                "encodings, queried through its pool")
    guarantee = TEXTHIDE_GUARANTEE
    private: ClassVar[bool] = False

    def __init__(self, *, m: int = 256, k: int = 4, epochs: int = 10, batch_size: int = 256, lr: float = 1e-3,
                 optimizer: str = "adam", hidden: Sequence[int] = DEFAULT_HIDDEN, num_classes: int | None = None,
                 model: Any = None, init_seed: int | None = None, rng: Any = None) -> None:
        self.m = check_int("m", m, minimum=1, hint="; TextHide's pool of sign masks (the paper uses 256)")
        self.k = check_int("k", k, minimum=1, hint="; examples mixed per encoding (the paper uses 4)")
        self._init_common(epochs=epochs, batch_size=batch_size, lr=lr, optimizer=optimizer, hidden=hidden,
                          num_classes=num_classes, model=model, init_seed=init_seed)
        if self.batch_size < self.k:
            from veil.errors import InvalidParameterError

            raise InvalidParameterError(f"batch_size={self.batch_size} is below k={self.k}: TextHide mixes k "
                                        "examples of one lot; use batch_size >= k")
        check_rng(rng)
        from veil.random import as_generator

        self._rng = None if rng is None else as_generator(rng)

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        from veil.defenses.dpsgd.mechanism import BENCH_EPOCHS

        # as plain and DP-SGD: the three targets at one budget; (m, k) named, so the bench report can set the model
        # beside the training encodings of the same TextHide setting
        return [{"epochs": BENCH_EPOCHS, "m": 256, "k": 4}]

    def _recipe_extra(self) -> dict[str, Any]:
        return {"m": self.m, "k": self.k}

    def config(self) -> dict[str, Any]:
        return {**super().config(), "m": self.m, "k": self.k, "mode": "intra",
                "rng": "OS CSPRNG" if self._rng is None else "seeded (not private)"}

    def __repr__(self) -> str:
        return f"TextHideTraining(m={self.m}, k={self.k}, epochs={self.epochs}, batch_size={self.batch_size})"

    def train(self, data: Any) -> TrainedModel:
        """Train on ``data = (X, y)`` (embeddings (n, d), labels (n,)) through TextHide; the deployed model."""
        from veil.defenses.texthide.mechanism import TextHide

        start = time.perf_counter()
        X, y, num_classes = self._data(data)
        q, accounted_q, steps = self._steps(len(X))
        pool_rng, mix_rng = (None, None) if self._rng is None else self._rng.spawn(2)
        from veil.defenses.defaults import mask_pool

        texthide = TextHide(k=self.k, pool=mask_pool(self.m, X.shape[1], rng=pool_rng), rng=mix_rng)

        def encode(xb: Any, yb: Any) -> tuple[Any, Any]:
            out = texthide.encrypt(xb, yb, num_classes=num_classes)
            return out.e, out.y

        head, _ = self._fit(X, y, num_classes, sigma=0.0, clip=math.inf, q=q, accounted_q=accounted_q, steps=steps,
                            encode=encode, min_lot=self.k)
        released = _model_class()(head, texthide).eval()
        return TrainedModel(model=released, guarantee=self.guarantee, accounting=None, num_classes=num_classes,
                            n_train=len(X), steps=steps, sample_rate=accounted_q, config=self.config(),
                            seconds=time.perf_counter() - start)
