"""Defense hooks: what happens to representations between encoder and head.

A hook has two sides: ``train(e, y)`` turns a training batch of
representations and labels into what the head trains on (TextHide: mixed,
masked vectors and mixed soft labels), and ``infer(e)`` turns representations
at evaluation time (TextHide: a pool mask, no mixing). A defense that releases training encodings returns its
hook from its one verb, ``defense.hook(task, num_classes)`` (TextHide's: :mod:`veil.defenses.texthide.hook`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from veil.defenses.texthide.hook import TextHideHook

if TYPE_CHECKING:  # pragma: no cover
    import torch

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
