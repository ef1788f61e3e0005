"""MiniLM's top transformer layers with veil's head on top: the model DP-SGD fine-tunes in the ``top-layers``
setting (veil.experiments.dpsgd).

The bottom ``6 - trained`` layers of all-MiniLM-L6-v2 (and its embeddings) stay frozen, so their output is computed
once per text (:func:`frozen_inputs`); :class:`TopLayers` holds copies of the last ``trained`` ``BertLayer``s
(dropout off, eager attention), mean-pools their output over the text's tokens, L2-normalises it and scales it by
sqrt(d) (exactly what the frozen encoder and veil's heads do: with untouched layers, the pooled vector is MiniLM's
sentence embedding), then applies :class:`~veil.models.heads.MLPHead`.

Its input is one flat row per text, (max_length x (d + 1)): the hidden states entering the trained layers and, in
the last channel, the attention mask, so that DP-SGD's per-example machinery (Opacus' ghost clipping) sees a plain
batch of vectors. Every parameter is trained: the copied layers and the head.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from veil.errors import InvalidParameterError

__all__ = ["LAYERS", "SPEC_KIND", "frozen_inputs", "build_top_layers", "from_spec", "load_minilm"]

#: the ``kind`` of a :class:`TopLayers` model's public spec (its ``spec`` attribute, in DP-SGD recipes)
SPEC_KIND = "minilm-top-layers"

LAYERS = 6  # all-MiniLM-L6-v2


def load_minilm() -> tuple[Any, Any]:
    """(BertModel with eager attention, in eval mode; its tokenizer) from the shipped MiniLM weights (offline)."""
    from transformers import AutoModel, AutoTokenizer

    from veil.encoders.registry import resolve_model
    from veil.models.mlm import _quiet_load

    resolved = resolve_model("minilm")
    tokenizer = _quiet_load(AutoTokenizer, resolved.folder)
    model = AutoModel.from_pretrained(resolved.folder, local_files_only=True, attn_implementation="eager")
    return model.eval(), tokenizer


def _check_trained(trained: int) -> int:
    from veil.validation import check_int

    trained = check_int("trained_layers", trained, minimum=1)
    if trained > LAYERS:
        raise InvalidParameterError(f"trained_layers={trained}: MiniLM has {LAYERS} layers")
    return trained


def frozen_inputs(texts: Sequence[str], *, trained: int = 2, max_length: int = 48, batch: int = 128,
                  bert: Any = None, tokenizer: Any = None) -> np.ndarray:
    """The flat inputs of :class:`TopLayers` for ``texts``: (n, max_length * (d + 1)) float32, the hidden states
    entering the last ``trained`` layers and the attention mask (texts longer than ``max_length`` tokens are
    truncated)."""
    import torch

    trained = _check_trained(trained)
    if bert is None or tokenizer is None:
        bert, tokenizer = load_minilm()
    d = int(bert.config.hidden_size)
    out = np.zeros((len(texts), max_length, d + 1), dtype=np.float32)
    with torch.no_grad():
        for start in range(0, len(texts), batch):
            enc = tokenizer(list(texts[start:start + batch]), padding="max_length", truncation=True,
                            max_length=max_length, return_tensors="pt")
            hidden = bert(**enc, output_hidden_states=True).hidden_states[LAYERS - trained]
            out[start:start + len(hidden), :, :d] = hidden.numpy()
            out[start:start + len(hidden), :, d] = enc["attention_mask"].numpy()
    return out.reshape(len(texts), -1)


def _top_layers_class() -> type:
    import torch
    from torch import nn

    class TopLayers(nn.Module):
        """The last MiniLM layers (trained), mean pooling, L2 normalisation times sqrt(d), an MLP head."""

        def __init__(self, layers: Sequence[nn.Module], head: nn.Module, max_length: int, dim: int) -> None:
            super().__init__()
            import copy

            self.layers = nn.ModuleList(copy.deepcopy(layer) for layer in layers)
            for module in self.layers.modules():
                if isinstance(module, nn.Dropout):
                    module.p = 0.0  # DP-SGD's noise is the randomness; dropout would only cost utility
            self.head = head
            self.max_length, self.dim = int(max_length), int(dim)

        def pooled(self, x: torch.Tensor) -> torch.Tensor:
            x = x.view(len(x), self.max_length, self.dim + 1)
            h, mask = x[..., :self.dim], x[..., self.dim]
            additive = (1.0 - mask)[:, None, None, :] * torch.finfo(h.dtype).min
            for layer in self.layers:
                h = layer(h, attention_mask=additive)
                h = h[0] if isinstance(h, tuple) else h
            return (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1.0)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            p = self.pooled(x)
            p = p / p.norm(dim=1, keepdim=True).clamp(min=1e-12) * math.sqrt(self.dim)
            return self.head(p)

    return TopLayers


def build_top_layers(*, num_classes: int, trained: int = 2, max_length: int = 48, hidden: Sequence[int] = (128,),
                     init_seed: int | None = None, bert: Any = None) -> Any:
    """A fresh :class:`TopLayers`: MiniLM's last ``trained`` layers as shipped, veil's head drawn from ``init_seed``
    (None: OS entropy)."""
    from veil.models.heads import MLPHead
    from veil.random import torch_generator

    trained = _check_trained(trained)
    if bert is None:
        bert, _ = load_minilm()
    d = int(bert.config.hidden_size)
    head = MLPHead(d, num_classes, hidden=tuple(hidden), dropout=0.0, rng=torch_generator(init_seed))
    model = _top_layers_class()(bert.encoder.layer[LAYERS - trained:], head, max_length, d)
    # public, JSON-ready: a recipe carries it so that an attacker's shadow models are built the same way
    model.spec = {"kind": SPEC_KIND, "trained": trained, "max_length": int(max_length), "hidden": list(hidden)}
    return model


def from_spec(spec: Any, *, num_classes: int, init_seed: int | None) -> Any:
    """The model a ``spec`` (a :class:`TopLayers`' ``spec``) describes, fresh: MiniLM's layers as shipped, the
    head from ``init_seed``."""
    from collections.abc import Mapping

    from veil.errors import InvalidTypeError

    if not isinstance(spec, Mapping) or spec.get("kind") != SPEC_KIND:
        raise InvalidTypeError(f"a model spec must be {{'kind': {SPEC_KIND!r}, 'trained': ..., 'max_length': ..., "
                               f"'hidden': [...]}}, got {spec!r}")
    return build_top_layers(num_classes=num_classes, trained=int(spec["trained"]),
                            max_length=int(spec["max_length"]), hidden=tuple(spec.get("hidden", (128,))),
                            init_seed=init_seed)
