"""TextHide's training hook: what it does between encoder and head (Huang et al. 2020, Alg. 1 for training, a pool
mask at inference). :meth:`veil.defenses.texthide.TextHide.hook` returns one; the training loops of
:mod:`veil.training` call its ``train`` and ``infer`` sides."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from veil.defenses.texthide.mechanism import TextHide

__all__ = ["TextHideHook"]


class TextHideHook:
    """TextHide between encoder and head: ``train(e, y)`` mixes and masks a batch (and its labels), ``infer(e)``
    masks with the pool only."""

    def __init__(self, texthide: TextHide, task: str, num_classes: int | None) -> None:
        self.texthide, self.task, self.num_classes = texthide, task, num_classes
        self.min_batch_size = texthide.min_batch_size

    def train(self, e: Any, y: Any) -> Any:
        out = self.texthide.encrypt(e, y, task=self.task, num_classes=self.num_classes)
        return out.e, out.y

    def infer(self, e: Any) -> Any:
        return self.texthide.encrypt_inference(e)

    def set_public(self, public: Any) -> None:
        """Inter mode: swap in public representations re-encoded by the current (fine-tuned) encoder."""
        self.texthide.set_public(public)
