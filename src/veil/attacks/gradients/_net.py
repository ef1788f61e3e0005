"""A functional MLP head (the same function as :class:`veil.models.heads.MLPHead` in eval mode) for gradient attacks.

Gradient matching needs the gradient of the loss with respect to the weights as a differentiable function of
dummy inputs (double backpropagation); writing the head as a function of explicit ``(W, b)`` pairs keeps the
weights fixed tensors and the dummies the only leaves. Dropout is off: the attacker cannot know the client's
dropout masks (a departure every matching attack makes; the analytic first-layer inversion is unaffected).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from veil.attacks.gradients.tap import linear_keys
from veil.errors import DataFormatError

__all__ = ["ACTIVATIONS", "Layers", "layers_from_state", "forward", "soft_cross_entropy", "loss_gradients",
           "gradient_distance", "minimise_distance"]

ACTIVATIONS = ("relu", "sigmoid")
Layers = list  # list[tuple[torch.Tensor, torch.Tensor]]: (W (out, in), b (out,)) per Linear layer


def layers_from_state(state: Mapping[str, Any], hidden_layers: int, *, dtype: Any = None,
                      requires_grad: bool = False) -> Layers:
    """``[(W, b), ...]`` torch tensors (float64 by default) from an MLPHead state_dict."""
    import torch

    dtype = torch.float64 if dtype is None else dtype
    out = []
    for w, b in linear_keys(hidden_layers):
        if w not in state or b not in state:
            raise DataFormatError(f"the weights lack {w} / {b}: not an MLPHead with {hidden_layers} hidden layer(s)")
        W = torch.tensor(np.array(state[w]), dtype=dtype).requires_grad_(requires_grad)
        B = torch.tensor(np.array(state[b]), dtype=dtype).requires_grad_(requires_grad)
        out.append((W, B))
    return out


def _act(name: str) -> Callable[[Any], Any]:
    import torch

    return torch.relu if name == "relu" else torch.sigmoid


def forward(layers: Layers, x: Any, *, activation: str = "relu", hook_at: int | None = None,
            hook: Callable[[Any], Any] | None = None) -> Any:
    """Logits of ``x`` (n, in); ``hook`` (e.g. TextHide's mix and mask) is applied to the input of Linear layer
    ``hook_at`` (0 = the head's input, 1 = the first hidden layer's output, ...)."""
    act = _act(activation)
    h = x
    last = len(layers) - 1
    for i, (W, b) in enumerate(layers):
        if hook is not None and i == hook_at:
            h = hook(h)
        h = h @ W.T + b
        if i < last:
            h = act(h)
    return h


def soft_cross_entropy(logits: Any, target: Any) -> Any:
    """Mean soft-label cross-entropy, as veil's training loop computes it."""
    import torch.nn.functional as F

    return -(target * F.log_softmax(logits, dim=-1)).sum(-1).mean()


def loss_gradients(layers: Layers, loss: Any, *, create_graph: bool = False) -> list[Any]:
    """d loss / d (W, b) for every layer, flattened as [W0, b0, W1, b1, ...]."""
    import torch

    flat = [t for pair in layers for t in pair]
    return list(torch.autograd.grad(loss, flat, create_graph=create_graph))


def gradient_distance(dummy: Sequence[Any], target: Sequence[Any], norm: Any) -> Any:
    """``sum ||g' - g||^2 / norm`` (Zhu et al. 2019's distance, scaled by the target's squared norm)."""
    total = None
    for a, b in zip(dummy, target):
        term = ((a - b) ** 2).sum()
        total = term if total is None else total + term
    return total / norm


def minimise_distance(params: Sequence[Any], distance: Callable[[], Any], *, max_evals: int, tol: float,
                      history_size: int = 100, max_iter: int = 20) -> tuple[float, int]:
    """Minimise ``distance()`` over ``params`` (the dummies) with L-BFGS and a strong-Wolfe line search.

    Only ``params`` get gradients (the weights in ``distance`` stay fixed tensors). Stops after ``max_evals``
    evaluations, when the distance is non-finite or <= ``tol``, or after 3 steps without progress.
    Returns (the last distance, the evaluations used).
    """
    import math

    import torch

    opt = torch.optim.LBFGS(params, lr=1.0, history_size=history_size, max_iter=max_iter,
                            line_search_fn="strong_wolfe", tolerance_grad=0.0, tolerance_change=0.0)
    evals, last = [0], [math.inf]

    def closure() -> Any:
        opt.zero_grad()
        dist = distance()
        for p, g in zip(params, torch.autograd.grad(dist, params)):  # the weights stay fixed: no .grad on them
            p.grad = g
        evals[0] += 1
        last[0] = float(dist.detach())
        return dist

    best, stall = math.inf, 0
    while evals[0] < max_evals:
        opt.step(closure)
        if not math.isfinite(last[0]) or last[0] <= tol:
            break
        stall = stall + 1 if last[0] >= best * (1 - 1e-9) else 0
        best = min(best, last[0])
        if stall >= 3:
            break
    return last[0], evals[0]
