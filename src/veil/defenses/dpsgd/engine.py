"""The one training loop behind :class:`~veil.defenses.dpsgd.DPSGD` and :class:`~veil.defenses.dpsgd.PlainTraining`.

Per step: a Poisson lot (:func:`~veil.defenses.dpsgd.noise.poisson_lot`), then

* private: Opacus' ghost clipping (``GradSampleModuleFastGradientClipping`` + ``DPLossFastGradientClipping``, Li et
  al. 2022; Bu et al. 2023) computes every example's gradient norm without materialising per-example gradients and
  backpropagates the sum of the clipped per-example gradients, each scaled by ``min(1, clip / (norm + 1e-6))``;
  :class:`CSPRNGOptimizer` (Opacus' ``DPOptimizerFastGradientClipping`` with veil's noise) adds N(0, (sigma *
  clip)^2) per coordinate, divides by the expected lot size ``q * n`` and steps the wrapped optimizer; Opacus'
  accountant hook records (sigma, q) for the step. An empty lot is a step too: its clipped sum is zero, the noise
  is added and the step is accounted.
* plain: the mean cross-entropy over the lot, backpropagated and stepped (no clipping, no noise); an empty lot
  leaves the weights as they are. Everything else (lots, steps, optimizer, initial weights) is the same.

:func:`check_module` turns what Opacus cannot train into :class:`UnsupportedModelError` before any work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from veil.defenses.dpsgd.accounting import quiet_opacus
from veil.defenses.dpsgd.errors import UnsupportedModelError
from veil.defenses.dpsgd.noise import gaussian, poisson_lot
from veil.errors import InvalidParameterError

__all__ = ["OPTIMIZERS", "UnsupportedModelError", "check_module", "fit", "FitLog", "CSPRNGOptimizer", "Scale"]

OPTIMIZERS = ("adam", "sgd")


def check_module(module: Any) -> nn.Module:
    """``module`` if Opacus can compute its per-example gradients, else :class:`UnsupportedModelError`."""
    from opacus.validators import ModuleValidator

    if not isinstance(module, nn.Module):
        from veil.errors import InvalidTypeError

        raise InvalidTypeError(f"model must be a torch.nn.Module (n, d) -> (n, classes), not {type(module).__name__}")
    problems = ModuleValidator.validate(module, strict=False)
    buffers = [name for name, _ in module.named_buffers()]
    if problems or buffers:
        reasons = [str(p).split("\n")[0] for p in problems]
        if buffers:
            reasons.append(f"it holds buffers ({', '.join(buffers[:5])}), which per-example gradients cannot "
                           "account for")
        raise UnsupportedModelError(f"Opacus cannot train this {type(module).__name__} with DP-SGD: "
                                    f"{'; '.join(reasons)}. Replace BatchNorm with GroupNorm or LayerNorm "
                                    "(opacus.validators.ModuleValidator.fix does), nn.LSTM with opacus.layers.DPLSTM, "
                                    "and keep state out of buffers")
    if not any(p.requires_grad for p in module.parameters()):
        raise InvalidParameterError("the model has no trainable parameters; unfreeze the layers to train")
    return module


class Scale(nn.Module):
    """Multiply the input by a public constant (veil's heads see unit-norm embeddings scaled by sqrt(d), so that
    their coordinates are of size ~1, as :func:`veil.training.train_head` does). No parameters."""

    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = float(factor)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.factor

    def extra_repr(self) -> str:
        return f"factor={self.factor:g}"


def _make_optimizer(name: str, params: Any, lr: float) -> torch.optim.Optimizer:
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    raise InvalidParameterError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {name!r}")


def _noise_optimizer_class() -> type:
    from opacus.optimizers import DPOptimizerFastGradientClipping
    from opacus.optimizers.optimizer import _check_processed_flag, _mark_as_processed

    class _CSPRNGOptimizer(DPOptimizerFastGradientClipping):
        """Opacus' ghost-clipping optimizer whose Gaussian noise comes from :func:`~veil.defenses.dpsgd.noise.gaussian`
        (``noise_rng`` None: the OS CSPRNG; a seeded numpy Generator for experiments and tests only)."""

        def __init__(self, *args: Any, noise_rng: np.random.Generator | None, noise_scale: float = 1.0,
                     **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.noise_rng, self.noise_scale = noise_rng, float(noise_scale)

        def add_noise(self) -> None:
            std = self.noise_multiplier * self.max_grad_norm * self.noise_scale
            for p in self.params:
                _check_processed_flag(p.summed_grad)
                draw = gaussian(self.noise_rng, p.summed_grad.numel(), std) if std > 0 else \
                    np.zeros(p.summed_grad.numel())
                noise = torch.from_numpy(draw).to(p.summed_grad.dtype).view_as(p.summed_grad)
                p.grad = (p.summed_grad + noise).view_as(p)
                _mark_as_processed(p.summed_grad)

    return _CSPRNGOptimizer


def __getattr__(name: str) -> Any:  # CSPRNGOptimizer subclasses an Opacus class: built on first use
    if name == "CSPRNGOptimizer":
        return _noise_optimizer_class()
    raise AttributeError(name)


@dataclass
class FitLog:
    """What a run did: its steps, and (private) the accountant's history ``[(sigma, q, steps)]``, read from the
    optimizer's own step hook. Lot sizes are not kept (they are not part of what is released)."""

    steps: int
    history: list[tuple[float, float, int]] = field(default_factory=list)


def fit(module: nn.Module, X: torch.Tensor, y: torch.Tensor, *, private: bool, sigma: float, clip: float, q: float,
        accounted_q: float, steps: int, lr: float, optimizer: str, sampling_rng: np.random.Generator | None,
        noise_rng: np.random.Generator | None, noise_scale: float = 1.0, clip_applied: float | None = None,
        transcript: Callable[[int, list[torch.Tensor], list[torch.Tensor]], None] | None = None,
        public_n: int | None = None,
        encode: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = None,
        min_lot: int = 1) -> FitLog:
    """Train ``module`` in place for ``steps`` Poisson lots of rate ``q`` (module docstring). ``accounted_q`` is
    the exact rate the lots are drawn at (:func:`~veil.defenses.dpsgd.noise.sampling_rate`), recorded by the
    accountant hook; ``sigma`` and ``clip`` are ignored when ``private`` is False. ``noise_scale`` multiplies the
    noise actually drawn (not what is accounted) and ``clip_applied`` (None: ``clip``) is the bound actually
    applied to each example's gradient (the noise is always ``sigma * clip``): both are the accounted values
    always, except in the negative controls (:mod:`veil.defenses.dpsgd.controls`).

    ``transcript`` (private only): called at every step, after the noise is added and before the weights move,
    with ``(step, weights, gradients)``: the trainable parameters as they are (detached) and the noisy gradient
    each receives (the noisy clipped sum divided by ``q * n``, n = ``public_n``, by default ``len(X)``: the
    divisor must not depend on the data where the number of examples is private, as in the one-run audit). That
    is what the mechanism releases at that step (the DP guarantee covers it); the one-run audit's white-box
    auditor reads it (:mod:`veil.attacks.audit.one_run`).

    ``encode`` (plain training only): maps each lot ``(X, y)`` to ``(inputs, soft labels (b, classes))`` before the
    model sees it (TextHide's mixing and masking: :class:`veil.defenses.texthide.model.TextHideTraining`); the loss
    is then the soft-label cross-entropy, and lots smaller than ``min_lot`` are skipped as empty ones are."""
    n = len(X)
    module.train()
    if not private:
        opt = _make_optimizer(optimizer, [p for p in module.parameters() if p.requires_grad], lr)
        for _ in range(steps):
            idx = torch.from_numpy(poisson_lot(sampling_rng, n, q))
            if len(idx) < max(1, min_lot):
                continue
            opt.zero_grad(set_to_none=True)
            if encode is None:
                loss = nn.functional.cross_entropy(module(X[idx]), y[idx])
            else:
                inputs, soft = encode(X[idx], y[idx])
                loss = -(soft * torch.log_softmax(module(inputs), dim=1)).sum(1).mean()
            loss.backward()
            opt.step()
        return FitLog(steps=steps)

    from opacus.accountants import PRVAccountant
    from opacus.grad_sample import GradSampleModuleFastGradientClipping
    from opacus.utils.fast_gradient_clipping_utils import DPLossFastGradientClipping

    expected = q * (n if public_n is None else public_n)
    with quiet_opacus():
        gsm = GradSampleModuleFastGradientClipping(module, batch_first=True, loss_reduction="mean",
                                                   max_grad_norm=clip if clip_applied is None else clip_applied,
                                                   use_ghost_clipping=True)
        try:
            params = [p for p in gsm.parameters() if p.requires_grad]
            opt = _noise_optimizer_class()(_make_optimizer(optimizer, params, lr), noise_multiplier=sigma,
                                           max_grad_norm=clip, expected_batch_size=expected, loss_reduction="mean",
                                           noise_rng=noise_rng, noise_scale=noise_scale)
            acct = PRVAccountant()
            account_step = acct.get_optimizer_hook_fn(sample_rate=accounted_q)
            counter = [0]

            def hook(optim: Any) -> None:  # Opacus calls it after the noise, before the weights move
                account_step(optim)
                if transcript is not None:
                    transcript(counter[0], [p.detach() for p in params], [p.grad.detach() for p in params])
                counter[0] += 1

            opt.attach_step_hook(hook)
            criterion = DPLossFastGradientClipping(gsm, opt, nn.CrossEntropyLoss(), loss_reduction="mean")
            for _ in range(steps):
                idx = torch.from_numpy(poisson_lot(sampling_rng, n, q))
                opt.zero_grad(set_to_none=True)
                if len(idx) == 0:
                    for p in params:
                        p.grad = torch.zeros_like(p)
                else:
                    criterion(gsm(X[idx]), y[idx]).backward()
                opt.step()
        finally:
            gsm.to_standard_module()  # hooks and per-example state removed: the plain module is released
    return FitLog(steps=steps, history=[tuple(h) for h in acct.history])
