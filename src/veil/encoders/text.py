"""The text encoder: a transformers model plus pooling, for inference and fine-tuning.

``TextEncoder("minilm")`` (mean pooling, L2 normalisation, 256 tokens)
reproduces ``SentenceTransformer(path).encode(texts, normalize_embeddings=True)``
for all-MiniLM-L6-v2. :meth:`TextEncoder.encode` runs under
``torch.inference_mode`` with length-sorted batches, each padded to its
longest text; :meth:`TextEncoder.tokenize` + :meth:`TextEncoder.forward_tokens`
are the differentiable path used for fine-tuning.

``backend`` picks the engine of :meth:`TextEncoder.encode` (see
:mod:`veil.encoders.backends`): ``"torch"`` (float32, the reference),
``"onnx"`` (the same weights in ONNX Runtime; its vectors equal torch's to
float rounding) or ``"bf16"`` (torch under bfloat16 autocast in shape-stable
batches; rounded, within the cosine bar). The default on CPU is bf16 where the
CPU has AMX bf16 tiles and onnx elsewhere. A non-torch backend is
part of :attr:`TextEncoder.model_id` (``minilm-<fingerprint>-onnx``,
``-bf16``), so its embeddings
never share a cache entry with torch's, and result records compare it
(:func:`~veil.encoders.backends.backend_identity`); the torch
backend's ids are unchanged. Gradients and fine-tuned weights always run in
torch.

torch and transformers are imported when an encoder is built, not when this
module is imported. The library never changes torch's thread count.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from veil.encoders._inputs import check_bool, check_int, check_texts, progress_bar
from veil.encoders.backends import resolve_backend
from veil.encoders.registry import resolve_model
from veil.errors import DataFormatError, DataWarning, InvalidParameterError, InvalidTypeError

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from transformers import BatchEncoding, PreTrainedModel, PreTrainedTokenizerBase

    from veil.corpora.base import Corpus
    from veil.encoders.cache import EmbeddingCache

__all__ = ["TextEncoder", "POOLINGS"]

POOLINGS = ("mean", "cls")  # the keys of veil.encoders.pooling.POOLERS (kept here to avoid importing torch)


def _load(folder: os.PathLike, device: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load model and tokenizer offline, without transformers' weight-loading progress bar."""
    import torch
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    try:
        torch_device = torch.device(device)
    except RuntimeError as exc:
        raise InvalidParameterError(f"device {device!r} is not a torch device ({exc}); use 'cpu' or 'cuda'") from None
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        model = AutoModel.from_pretrained(folder, local_files_only=True)
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    pooler = getattr(model, "pooler", None)  # BERT's [CLS] dense+tanh head: veil's pooling never uses it
    if isinstance(pooler, torch.nn.Module):
        pooler.requires_grad_(False)  # so optimizers and DP-SGD only see weights that get gradients
    try:
        model = model.to(torch_device)
    except (RuntimeError, AssertionError) as exc:
        raise InvalidParameterError(f"device {device!r} is not usable here ({exc}); use device='cpu'") from None
    return model.eval(), tokenizer


class TextEncoder:
    """Encode texts into fixed-size vectors with a (fine-tunable) transformer.

    Parameters
    ----------
    model: a registered name (see :func:`veil.encoders.encoder_names`) or the
        path of a local transformers / sentence-transformers model folder.
    pooling: ``"mean"`` (attention-mask-weighted mean of the last hidden
        states) or ``"cls"`` (first token).
    max_length: tokens per text, special tokens included; longer texts are
        truncated with a :class:`~veil.errors.DataWarning`. None uses the
        folder's sentence-transformers ``max_seq_length`` (256 for minilm), else
        the model's position limit.
    normalize: L2-normalise the output vectors (the default of :meth:`encode`
        and :meth:`forward_tokens`).
    device: torch device string, e.g. ``"cpu"`` or ``"cuda:0"``.
    backend: ``"torch"``, ``"onnx"`` or ``"bf16"`` (see :mod:`veil.encoders.backends`);
        None uses ``$VEIL_ENCODER_BACKEND``, else
        :func:`~veil.encoders.backends.default_backend` (``"bf16"`` on CPUs with AMX bf16 tiles, ``"onnx"`` on
        other CPUs, ``"torch"`` elsewhere). It only
        changes :meth:`encode` while the weights
        are as loaded; the ONNX export is made on first use and cached.
    """

    def __init__(self, model: str | os.PathLike = "minilm", *, pooling: str = "mean", max_length: int | None = None,
                 normalize: bool = True, device: str = "cpu", backend: str | None = None) -> None:
        if not isinstance(pooling, str):
            raise InvalidTypeError(f"pooling must be a str ({', '.join(POOLINGS)}), not {type(pooling).__name__}")
        if pooling not in POOLINGS:
            raise InvalidParameterError(f"unknown pooling {pooling!r}; use one of {', '.join(POOLINGS)}")
        if max_length is not None:
            check_int("max_length", max_length, low=2)
        self._normalize = check_bool("normalize", normalize)
        if not isinstance(device, str):
            raise InvalidTypeError(f"device must be a str such as 'cpu', not {type(device).__name__}")
        self._backend = resolve_backend(backend, device)
        resolved = resolve_model(model)
        self._module, self._tokenizer = _load(resolved.folder, device)
        limit = self._position_limit()
        if max_length is None:
            max_length = min(resolved.st_max_seq_length or limit, limit)
        elif max_length > limit:
            raise InvalidParameterError(f"max_length={max_length} exceeds this model's limit of {limit} tokens; "
                                        f"use max_length <= {limit}")
        self._resolved = resolved
        self._pooling = pooling
        self._max_length = int(max_length)
        self._device = device
        self._dim = int(self._module.config.hidden_size)
        self._n_special = int(self._tokenizer.num_special_tokens_to_add(pair=False))
        self._loaded_state = self._weights_state()
        self._tuned_id: tuple[tuple, str] | None = None
        self._runner: Any = None  # the backend's session, made on the first encode() that uses it

    # ------------------------------------------------------------ properties
    @property
    def model_name(self) -> str:
        """The registry name, or the model folder's name."""
        return self._resolved.name

    @property
    def model_id(self) -> str:
        """Identifies the current weights (the cache key's model part).

        While the weights are as loaded this is ``name-<fingerprint of the
        folder's files>``. Once they change in place (fine-tuning, an optimizer
        step, ``load_state_dict``) it becomes ``name-<...>-tuned-<sha256 of the
        weights>``, so cached embeddings of the old weights are never reused.
        A non-torch backend appends its name while the weights are as loaded
        (``name-<fingerprint>-onnx``); tuned weights run in torch and get the
        tuned id.
        """
        state = self._weights_state()
        if state == self._loaded_state:
            base = self._resolved.model_id
            return base if self._backend == "torch" else f"{base}-{self._backend}"
        if self._tuned_id is None or self._tuned_id[0] != state:
            import torch

            h = hashlib.sha256()
            for name, tensor in sorted(self._module.state_dict().items()):
                flat = tensor.detach().cpu().contiguous().reshape(-1)
                h.update(f"{name}\0{flat.dtype}\0{tuple(tensor.shape)}\n".encode())
                h.update(flat.view(torch.uint8).numpy())
            self._tuned_id = (state, f"{self._resolved.model_id}-tuned-{h.hexdigest()[:12]}")
        return self._tuned_id[1]

    @property
    def backend(self) -> str:
        """The backend chosen at construction (a name of :data:`~veil.encoders.backends.BACKENDS`)."""
        return self._backend

    @property
    def active_backend(self) -> str:
        """The backend :meth:`encode` runs now: ``"torch"`` once the weights differ from the loaded ones."""
        return self._backend if self._weights_state() == self._loaded_state else "torch"

    @property
    def backend_note(self) -> str:
        """``""`` for torch, else ``", <backend> backend"``: append it to hand-written encoder descriptions."""
        active = self.active_backend
        return "" if active == "torch" else f", {active} backend"

    def describe(self) -> str:
        """One line for result records: ``minilm (minilm-<id>), pooling=mean, max_length=256, normalize=True``.

        The id carries a non-torch backend's name; the torch backend's line is
        the one veil's records always held.
        """
        return (f"{self.model_name} ({self.model_id}), pooling={self._pooling}, max_length={self._max_length}, "
                f"normalize={self._normalize}")

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def pooling(self) -> str:
        return self._pooling

    @property
    def max_length(self) -> int:
        return self._max_length

    @property
    def normalize(self) -> bool:
        return self._normalize

    @property
    def device(self) -> str:
        return self._device

    @property
    def module(self) -> torch.nn.Module:
        """The trainable transformer (``AutoModel``); pooling has no parameters.

        A model's own pooler head (BERT's ``pooler``), which veil's pooling does
        not use, is frozen (``requires_grad=False``), so every trainable
        parameter receives a gradient from :meth:`forward_tokens`.
        """
        return self._module

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        return self._tokenizer

    def __repr__(self) -> str:
        return (f"TextEncoder(model={self.model_name!r}, pooling={self._pooling!r}, max_length={self._max_length}, "
                f"normalize={self._normalize}, device={self._device!r}, dim={self._dim}"
                + ("" if self._backend == "torch" else f", backend={self._backend!r}") + ")")

    # ------------------------------------------------------------- inference
    def encode(self, texts: Sequence[str], *, batch_size: int = 64, normalize: bool | None = None,
               progress: bool = True) -> np.ndarray:
        """Encode ``texts`` into a float32 array of shape ``(len(texts), dim)``.

        Texts are sorted by token count (longest first), batched, each batch
        padded to its longest text, and the rows are returned in input order.
        ``normalize=None`` uses the encoder's setting. ``progress`` draws a bar on
        stderr when there is more than one batch.
        """
        import torch

        texts = check_texts(texts)
        batch_size = check_int("batch_size", batch_size, low=1)
        normalize = self._normalize if normalize is None else check_bool("normalize", normalize)
        progress = check_bool("progress", progress)
        out = np.empty((len(texts), self._dim), dtype=np.float32)
        if not texts:
            return out
        lengths = self._token_lengths(texts)
        order = np.argsort(-lengths, kind="stable")
        runner = self._backend_runner()
        batches = (list(runner.batches(order, lengths, batch_size)) if hasattr(runner, "batches")
                   else [order[start:start + batch_size] for start in range(0, len(texts), batch_size)])
        n_batches = len(batches)
        was_training = self._module.training
        self._module.eval()
        try:
            with torch.inference_mode(), progress_bar(n_batches, "encoding", progress and n_batches > 1) as advance:
                for idx in batches:
                    batch = self._batch([texts[i] for i in idx])
                    pooled = self._pooled(batch, normalize) if runner is None else self._pooled_by(runner, batch,
                                                                                                  normalize)
                    out[idx] = pooled.float().cpu().numpy()
                    advance(1)
        finally:
            self._module.train(was_training)
        return out

    def encode_corpus(self, corpus: Corpus, split: str | None = None, *, cache: bool | EmbeddingCache = True,
                      batch_size: int = 64, normalize: bool | None = None, progress: bool = True) -> np.ndarray:
        """Encode a corpus (or one split, in corpus order), through the on-disk cache.

        See :func:`veil.encoders.cache.encode_corpus`.
        """
        from veil.encoders.cache import encode_corpus

        return encode_corpus(self, corpus, split, cache=cache, batch_size=batch_size, normalize=normalize,
                             progress=progress)

    def warn_truncated(self, texts: Sequence[str]) -> None:
        """Warn (:class:`~veil.errors.DataWarning`) as :meth:`encode` does about texts longer than ``max_length``,
        without running the model: a cache hit (:func:`veil.encoders.cache.encode_cached`) warns as the encoding
        did, so what a record keeps of a run does not depend on what was cached before it."""
        texts = check_texts(texts)
        if texts:
            self._token_lengths(texts)

    # -------------------------------------------------------- differentiable
    def tokenize(self, texts: Sequence[str]) -> BatchEncoding:
        """Tokenize ``texts`` into one padded batch of tensors (truncation warns)."""
        texts = check_texts(texts)
        if not texts:
            raise DataFormatError("texts is empty; tokenize needs at least one text")
        self._token_lengths(texts)
        return self._batch(texts)

    def forward_tokens(self, batch: Mapping[str, Any], *, normalize: bool | None = None) -> torch.Tensor:
        """Pooled vectors ``(b, dim)`` of a tokenized batch, with autograd.

        Runs the module in its current mode (call ``encoder.module.train()`` for
        dropout), so ``loss.backward()`` reaches the encoder's weights.
        """
        if not isinstance(batch, Mapping):
            raise InvalidTypeError(f"batch must be the mapping returned by tokenize(), not {type(batch).__name__}")
        missing = {"input_ids", "attention_mask"} - set(batch)
        if missing:
            raise DataFormatError(f"batch lacks {sorted(missing)}; build it with encoder.tokenize(texts)")
        normalize = self._normalize if normalize is None else check_bool("normalize", normalize)
        return self._pooled(batch, normalize)

    # --------------------------------------------------------------- helpers
    def _batch(self, texts: list[str]) -> BatchEncoding:
        return self._tokenizer(texts, padding=True, truncation=True, max_length=self._max_length,
                               return_tensors="pt")

    def _pooled(self, batch: Mapping[str, Any], normalize: bool) -> torch.Tensor:
        from veil.encoders.pooling import pool

        device = self._module.device
        inputs = {k: v.to(device) for k, v in batch.items()}
        hidden = self._module(**inputs).last_hidden_state
        return pool(self._pooling, hidden, inputs["attention_mask"], normalize=normalize)

    def _backend_runner(self) -> Any:
        """The non-torch engine for :meth:`encode`, or None for torch (the backend, or tuned weights)."""
        if self.active_backend == "torch":
            return None
        if self._runner is None:
            if self._backend == "bf16":
                self._runner = _Bf16Runner(self._module, self._tokenizer.pad_token_id, self._max_length)
            else:
                from veil.encoders.onnx_backend import OnnxRunner, ensure_exported

                self._runner = OnnxRunner(ensure_exported(self._resolved))
        return self._runner

    def _pooled_by(self, runner: Any, batch: Mapping[str, Any], normalize: bool) -> torch.Tensor:
        import torch

        from veil.encoders.pooling import pool

        hidden = torch.as_tensor(runner.hidden(batch))  # onnx: a numpy array (shared, not copied); bf16: a tensor
        return pool(self._pooling, hidden, batch["attention_mask"], normalize=normalize)

    def _token_lengths(self, texts: list[str]) -> np.ndarray:
        """Tokens per text after truncation; warns once per call about truncated texts."""
        ids = self._tokenizer(texts, add_special_tokens=False, return_attention_mask=False,
                              return_token_type_ids=False, verbose=False)["input_ids"]
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(texts)) + self._n_special
        truncated = int((lengths > self._max_length).sum())
        if truncated:
            warnings.warn(f"{truncated} of {len(texts)} texts are longer than max_length={self._max_length} tokens "
                          f"and were truncated; split long texts into sentences or raise max_length (this model "
                          f"allows up to {self._position_limit()})", DataWarning, stacklevel=3)
        return np.minimum(lengths, self._max_length)

    def _position_limit(self) -> int:
        limits = [int(getattr(self._module.config, "max_position_embeddings", 0) or 0),
                  int(min(self._tokenizer.model_max_length, 1 << 30))]
        return min(x for x in limits if x > 0) if any(x > 0 for x in limits) else 512

    def _weights_state(self) -> tuple[tuple[int, int], ...]:
        """(storage address, in-place version counter) of every parameter: changes when weights do."""
        return tuple((p.data_ptr(), p._version) for p in self._module.parameters())



class _Bf16Runner:
    """The ``"bf16"`` backend: the loaded module under CPU bfloat16 autocast, in shape-stable batches.

    Autocast runs the linear layers and attention products in bf16 (oneDNN
    uses AMX tiles where the CPU has them) and keeps layer norms and softmax in
    float32; the hidden states are cast back to float32 before pooling, so
    pooling and normalisation are exact float32 as for torch. The loaded
    module's weights stay float32 (casting it would round them for every later
    use); the linear layers run from a bf16 copy (:func:`_with_bf16_linears`).

    bf16 rounding depends on the kernel oneDNN picks, and the kernel depends
    on the shapes of the products: a text padded to another width, or run in
    a batch of few rows, gets a slightly different vector. So the shapes are
    made a function of each text alone: a text is padded to its own token
    count rounded up to a multiple of :attr:`WIDTH_STEP` (batches hold texts
    of one width only), and a batch has at least :attr:`MIN_TOKENS` tokens
    (rows are filled with copies of its first text, whose outputs are
    dropped). In a probe, batches of 256 tokens or fewer (and one of 432)
    gave a text other vectors than a large batch did, and batches of 512 or
    more gave the same vectors at every width from 8 to 256. A text then
    gets the same vector alone or among any others
    (``tests/encoders/test_backends.py`` checks it on real text). A lone
    text thus costs a batch of 512 tokens.
    """

    WIDTH_STEP = 8
    MIN_TOKENS = 512

    def __init__(self, module: Any, pad_token_id: int, max_length: int) -> None:
        self.module = _with_bf16_linears(module)
        self.pad_token_id = int(pad_token_id)
        self.max_length = int(max_length)

    def width(self, n_tokens: Any) -> Any:
        """The padded width of a text of ``n_tokens`` tokens (an int, or an array of them)."""
        return np.minimum(-(-np.asarray(n_tokens) // self.WIDTH_STEP) * self.WIDTH_STEP, self.max_length)

    def batches(self, order: np.ndarray, lengths: np.ndarray, batch_size: int) -> list[np.ndarray]:
        """``order`` (longest first) cut into batches of at most ``batch_size`` texts of one padded width."""
        cuts = np.flatnonzero(np.diff(self.width(lengths[order]))) + 1
        return [group[start:start + batch_size] for group in np.split(order, cuts)
                for start in range(0, len(group), batch_size)]

    def hidden(self, batch: Mapping[str, Any]) -> torch.Tensor:
        import torch

        n, w = batch["input_ids"].shape
        width = int(self.width(w))
        rows = max(n, -(-self.MIN_TOKENS // width))
        inputs = {}
        for key, value in batch.items():
            fill = self.pad_token_id if key == "input_ids" else 0
            padded = torch.full((rows, width), fill, dtype=value.dtype)
            padded[:n, :w] = value
            padded[n:, :w] = value[:1]
            inputs[key] = padded
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = self.module(**inputs).last_hidden_state
        return out[:n, :w].float()


def _with_bf16_linears(module: Any) -> Any:
    """A copy of ``module`` whose linear layers hold their weights and biases in bf16; ``module`` is not touched.

    Autocast casts a float32 weight to bf16 on every forward pass (cached only until its context exits). A weight
    already in bf16 is passed through as it is, and its values are exactly what that cast would give, so the copy
    computes bit for bit what autocast on the float32 module computes (checked on 600 rt-polarity texts: no
    difference), without casting the weights for every batch. Everything else (embeddings, layer norms) stays
    float32 as autocast's policy has it. For MiniLM the copy adds about three quarters of the module's memory (its
    embeddings stay float32); the float32 module keeps serving ``forward_tokens`` and fine-tuning.
    """
    import copy

    import torch

    clone = copy.deepcopy(module).eval()
    for layer in clone.modules():
        if isinstance(layer, torch.nn.Linear):
            layer.to(torch.bfloat16)
    for param in clone.parameters():
        param.requires_grad_(False)
    return clone
