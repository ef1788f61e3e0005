"""DP-SGD on a causal language model (issue 52): the loop behind :class:`veil.defenses.lm.DPFineTuning`.

One example is one training text. Per step: a Poisson lot of texts (:func:`~veil.defenses.dpsgd.noise.poisson_lot`,
rate ``q``), each text's loss its mean negative log-likelihood per predicted token (padding excluded), Opacus'
ghost clipping (``GradSampleModuleFastGradientClipping`` with ``DPLossFastGradientClipping`` in its sequence form:
Li et al. 2022) scaling each text's gradient, over the trainable parameters only, to L2 norm at most ``clip``;
veil's optimizer (:class:`~veil.defenses.dpsgd.engine.CSPRNGOptimizer`) adds N(0, (sigma clip)^2) per coordinate
from the OS CSPRNG, divides by the expected lot ``q n`` and steps Adam. An empty lot is a step too (zero sum, the
noise added, accounted). That is the mechanism :mod:`veil.defenses.dpsgd` accounts for, with one text as the unit.

Only ``trainable`` parameters move; every other one stays as the public base model shipped it (frozen). The tied
word embeddings (the output layer) are never trainable here: Opacus computes a shared parameter's per-example norm
per use, which would understate it.

Dropout is off (the model is built without it): the noise dominates the gradient anyway, and a deterministic
forward pass is what lets the tests check the clipped sum against a slow loop over texts. A run is not resumable:
its lots and noise come from the OS CSPRNG and cannot be replayed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from veil.errors import InvalidParameterError

__all__ = ["top_layer_parameters", "fit_sequences", "SequenceFitLog"]


def top_layer_parameters(net: Any, layers: int) -> list[str]:
    """The names of the parameters of ``net``'s top ``layers`` transformer layers and of its output transform (the
    MLM head's dense + LayerNorm), in ``net.named_parameters()`` order; the word embeddings and the output bias
    are left out (module docstring)."""
    from veil.validation import check_int

    total = len(net.bert.encoder.layer)
    layers = check_int("layers", layers, minimum=1)
    if layers > total:
        raise InvalidParameterError(f"layers={layers}: the model has {total} transformer layers; use 1 to {total}")
    prefixes = tuple(f"bert.encoder.layer.{i}." for i in range(total - layers, total)) + (
        "cls.predictions.transform.",)
    return [name for name, _ in net.named_parameters() if name.startswith(prefixes)]


class SequenceFitLog:
    """What a run did: ``steps``, the training ``losses`` (the mean of the lot's per-text losses before clipping,
    nan for an empty lot; the lot sizes are not kept) and the accountant's ``history`` ``[(sigma, q, steps)]`` read
    from the optimizer's own step hook."""

    def __init__(self, steps: int, losses: list[float], history: list[tuple[float, float, int]]) -> None:
        self.steps, self.losses, self.history = steps, losses, history


def fit_sequences(lm: Any, texts: Sequence[str], *, trainable: Sequence[str], sigma: float, clip: float, q: float,
                  accounted_q: float, steps: int, lr: float, optimizer: str = "adam",
                  sampling_rng: np.random.Generator | None, noise_rng: np.random.Generator | None,
                  noise_scale: float = 1.0, clip_applied: float | None = None,
                  log: Callable[[str], None] | None = None) -> SequenceFitLog:
    """Train ``lm`` (a :class:`veil.models.causal_lm.CausalLM`) in place with DP-SGD (module docstring).

    ``noise_scale`` multiplies the noise drawn and ``clip_applied`` (None: ``clip``) is the bound actually applied:
    both are the accounted values always, except in the negative controls (:mod:`veil.defenses.dpsgd.controls`).
    ``optimizer``: ``"adam"`` or ``"sgd"`` (momentum 0.9; the tests read the noise off its first step).
    ``sampling_rng`` and ``noise_rng``: None draws from the OS CSPRNG (seeds are for tests only)."""
    import torch
    from opacus.grad_sample import GradSampleModuleFastGradientClipping
    from opacus.utils.fast_gradient_clipping_utils import DPLossFastGradientClipping
    from torch import nn

    from veil.defenses.dpsgd.accounting import quiet_opacus
    from veil.defenses.dpsgd.engine import _make_optimizer, _noise_optimizer_class
    from veil.defenses.dpsgd.noise import poisson_lot

    names = set(trainable)
    net = lm.net
    known = {name for name, _ in net.named_parameters()}
    if not names or not names <= known:
        raise InvalidParameterError(f"trainable parameters not in the model: {sorted(names - known)[:5]}")
    for name, p in net.named_parameters():
        p.requires_grad_(name in names)
    params = [p for name, p in net.named_parameters() if name in names]
    n = len(texts)
    losses: list[float] = []
    pad = -100
    net.train()  # Opacus hooks only modules in training mode; the model has no dropout (module docstring)
    with quiet_opacus():
        gsm = GradSampleModuleFastGradientClipping(net, batch_first=True, loss_reduction="mean",
                                                   max_grad_norm=clip if clip_applied is None else clip_applied,
                                                   use_ghost_clipping=True)
        try:
            opt = _noise_optimizer_class()(_make_optimizer(optimizer, params, lr), noise_multiplier=sigma,
                                           max_grad_norm=clip, expected_batch_size=q * n, loss_reduction="mean",
                                           noise_rng=noise_rng, noise_scale=noise_scale)
            from opacus.accountants import PRVAccountant

            acct = PRVAccountant()
            opt.attach_step_hook(acct.get_optimizer_hook_fn(sample_rate=accounted_q))
            criterion = DPLossFastGradientClipping(gsm, opt, nn.CrossEntropyLoss(ignore_index=pad),
                                                   loss_reduction="mean")
            for step in range(steps):
                idx = poisson_lot(sampling_rng, n, q)
                opt.zero_grad(set_to_none=True)
                if len(idx) == 0:
                    for p in params:
                        p.grad = torch.zeros_like(p)
                    losses.append(float("nan"))
                else:
                    ids, mask = lm.batch([texts[i] for i in idx])
                    logits = gsm(input_ids=ids, attention_mask=mask).logits[:, :-1]
                    target = ids[:, 1:].masked_fill(mask[:, 1:] == 0, pad)
                    b, t, v = logits.shape
                    loss = criterion(logits.reshape(b * t, v), target.reshape(b * t), shape=(b, t))
                    losses.append(float(loss.loss_per_sample.detach().mean()))
                    loss.backward()
                opt.step()
                if log is not None and (step + 1) % max(1, steps // 10) == 0:
                    log(f"DP-SGD causal LM: step {step + 1}/{steps}, loss {losses[-1]:.3f}")
        finally:
            gsm.to_standard_module()
            for p in net.parameters():
                p.requires_grad_(True)
    net.eval()
    return SequenceFitLog(steps=steps, losses=losses, history=[tuple(h) for h in acct.history])

