"""Defense hooks: what happens to representations between encoder and head.

A hook has two sides: ``train(e, y)`` turns a training batch of
representations and labels into what the head trains on (TextHide: mixed,
masked vectors and mixed soft labels), and ``infer(e)`` turns representations
at evaluation time (TextHide: a pool mask, no mixing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from veil.defenses.texthide import TextHide

__all__ = ["TrainHook", "PlainHook", "TextHideHook"]


class TrainHook(Protocol):
    min_batch_size: int

    def train(self, e: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]: ...

    def infer(self, e: torch.Tensor) -> torch.Tensor: ...


class PlainHook:
    """No defense: one-hot targets for classification, raw values for regression."""

    min_batch_size = 1

    def __init__(self, task: str, num_classes: int | None) -> None:
        self.task, self.num_classes = task, num_classes

    def train(self, e, y):
        import torch

        if self.task == "classification":
            return e, torch.nn.functional.one_hot(y.long(), self.num_classes).to(e.dtype)
        return e, y.to(e.dtype)

    def infer(self, e):
        return e


class TextHideHook:
    """TextHide between encoder and head (Huang et al. 2020, Alg. 1 for training, a pool mask at inference)."""

    def __init__(self, texthide: TextHide, task: str, num_classes: int | None) -> None:
        self.texthide, self.task, self.num_classes = texthide, task, num_classes
        self.min_batch_size = texthide.min_batch_size

    def train(self, e, y):
        out = self.texthide.encrypt(e, y, task=self.task, num_classes=self.num_classes)
        return out.e, out.y

    def infer(self, e):
        return self.texthide.encrypt_inference(e)

    def set_public(self, public):
        """Inter mode: swap in public representations re-encoded by the current (fine-tuned) encoder."""
        self.texthide.set_public(public)
