"""veil's embedding inverter: text from a sentence vector (GEIA, Li et al., ACL Findings 2023; the base decoder of
Vec2Text, Morris et al., EMNLP 2023, Sec. 3).

The model (the choice, and why). A causal decoder initialised from all-MiniLM-L6-v2's own BERT weights:
``BertLMHeadModel`` with ``is_decoder=True`` (causal self-attention), its output layer tied to the word
embeddings, its MLM transform fresh (no registry package ships a trained one, RESOURCES.md). It is conditioned
on the target vector ``v`` in two ways: ``k`` learned prefix embeddings, ``P(v) = W2 gelu(W1 (v sqrt(d)))``
reshaped to ``k`` positions of the decoder's width, placed before ``[CLS]`` (the start token; ``[SEP]`` ends a
sentence), and a learned shift ``S v sqrt(d)`` added to the decoder's last hidden state at every position before
the output layer (zero at the start, so training starts from the prefix model), a direct path from the vector to
the word predictions, as a bag-of-words predictor from the vector has (Vec2Text's strong baseline).
It is trained with teacher forcing on (MiniLM vector of a public sentence, its WordPiece tokens)
(:mod:`veil.training.inverter`). Why this and not GEIA's GPT-2: no registry package ships a pretrained
generative model, while MiniLM's weights are the encoder's own (the decoder starts with the encoder's
vocabulary, embeddings and some of its language knowledge; BERT-initialised decoders work, Rothe et al., TACL
2020); the prefix is GEIA's and Vec2Text's way of feeding the vector (Vec2Text's MLP that maps the embedding to
a sequence of inputs), and needs no fresh cross-attention layers. The output shift is veil's addition, measured:
on the quick slice (8000 news-articles sentences, 300 steps of 32 sentences, the same seed and rates; 200
held-out sentences) it took token F1 from 12.5 (prefix only) to 22.1; 8 prefix positions instead of 4 gave 12.4.
Departures from the papers: a 6-layer, 384-wide decoder (GEIA: GPT-2 small or larger; Vec2Text: T5-base), the
uncased WordPiece vocabulary of the encoder (reconstructions are lower-cased, accents stripped), at most
``max_tokens`` tokens (Vec2Text: 32).

Decoding: :meth:`Inverter.generate` (greedy, or beam search with ``beam`` hypotheses: the highest summed
log-probability divided by the hypothesis length, ``[SEP]`` counted, as transformers' length penalty 1);
:meth:`Inverter.hypotheses` keeps the ``n_best`` best of the beam (for correction by re-embedding,
:mod:`veil.attacks.inversion.correct`).

Where it lives (written by :func:`save_inverter`, read by :func:`load_inverter`)::

    VEIL_HOME/models/<name>/        name "inverter" (the full model) or "inverter-quick" (tests, the quick bench)
        model.safetensors           the decoder, the prefix map and the shift (tied weights stored once)
        config.json tokenizer files the decoder's BERT configuration and the encoder's tokenizer
        manifest.json               the encoder it inverts, the data, steps, learning curve, held-out token F1,
                                    and the sha256 of model.safetensors (checked on every load)
        .veil-owned                 veil wrote the folder (only such a folder is replaced)

An inverter records the encoder it was trained for (model id, pooling, normalisation, dimension:
:func:`encoder_identity`); vectors of another dimension, with NaN or infinite values, or from another encoder
are typed errors, never a silent reconstruction.

Token F1 (:func:`token_f1`): SQuAD-style bag-of-words F1 of a reconstruction against the original, over word
tokens: both texts Unicode-decomposed with accents removed and lower-cased (as MiniLM's tokenizer sees them),
then the runs of letters and digits (regex ``\\w+``; punctuation dropped), counted with multiplicity. Two empty
texts score 1, one empty text 0. (Vec2Text reports a set-based F1 over the tokenizer's tokens; this one counts
repeated words and ignores subword splits.)
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from veil._bf16 import autocast
from veil.errors import CacheCorruptError, DataFormatError, InvalidParameterError, ResourceMissingError

__all__ = ["INVERTER_NAMES", "Inverter", "InversionPairs", "inverter_dir", "train_command", "encoder_identity", "build_inverter",
           "save_inverter", "load_inverter", "read_manifest", "word_tokens", "token_f1", "mean_token_f1",
           "greedy_ids", "beam_ids", "beam_hypotheses", "IDENTITY_KEYS"]

#: the models ``veil models train inverter`` makes: the full one and ``--quick``
INVERTER_NAMES = ("inverter", "inverter-quick")
WEIGHTS = "model.safetensors"
MANIFEST = "manifest.json"
#: what must agree between the encoder an inverter was trained for and the vectors it inverts (the texts'
#: max_length is not compared: vectors of texts shorter than either limit are the same)
IDENTITY_KEYS = ("model_id", "pooling", "normalize", "dim")


def train_command(name: str) -> str:
    """The command that (re)builds the inverter ``name``."""
    return ("veil models train inverter --quick --force" if name == "inverter-quick"
            else "veil models train inverter --force")


def inverter_dir(name: str = "inverter") -> Path:
    """Where the inverter ``name`` lives: ``VEIL_HOME/models/<name>``."""
    from veil._io import veil_home

    if name not in INVERTER_NAMES:
        raise InvalidParameterError(f"unknown inverter {name!r}; veil makes {', '.join(INVERTER_NAMES)}")
    return veil_home() / "models" / name


def encoder_identity(encoder: Any) -> dict[str, Any]:
    """What identifies the vectors of a :class:`~veil.encoders.TextEncoder`: its name, model id (the weights'
    fingerprint; the ONNX backend's suffix removed, its vectors match torch's to float rounding), pooling,
    normalisation, max_length and dimension."""
    model_id = str(encoder.model_id)
    backend = str(getattr(encoder, "active_backend", "torch"))
    if backend != "torch" and model_id.endswith(f"-{backend}"):
        model_id = model_id[:-len(backend) - 1]
    return {"name": str(encoder.model_name), "model_id": model_id, "pooling": str(encoder.pooling),
            "normalize": bool(encoder.normalize), "max_length": int(encoder.max_length), "dim": int(encoder.dim)}


# --------------------------------------------------------------------------- token F1
_WORD = re.compile(r"\w+")


def word_tokens(text: str) -> list[str]:
    """The word tokens token F1 compares: accents removed, lower-cased, runs of ``\\w`` (punctuation dropped)."""
    plain = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
    return _WORD.findall(plain.lower())


def token_f1(reference: str, hypothesis: str) -> float:
    """Bag-of-words F1 in [0, 1] of ``hypothesis`` against ``reference`` over :func:`word_tokens`."""
    ref, hyp = Counter(word_tokens(reference)), Counter(word_tokens(hypothesis))
    if not ref or not hyp:
        return float(not ref and not hyp)
    common = sum((ref & hyp).values())
    if common == 0:
        return 0.0
    precision, recall = common / sum(hyp.values()), common / sum(ref.values())
    return 2 * precision * recall / (precision + recall)


# --------------------------------------------------------------------------- the network
@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """transformers without its progress bars and load reports."""
    from transformers.utils import logging as hf_logging

    bars, level = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


@functools.cache
def _net_class() -> type:
    import torch
    from torch import nn

    class InverterNet(nn.Module):
        """A causal BERT decoder (``decoder``) and the map from a vector to ``k`` prefix embeddings (``prefix``)."""

        def __init__(self, decoder: nn.Module, vector_dim: int, prefix_tokens: int) -> None:
            super().__init__()
            hidden = int(decoder.config.hidden_size)
            self.decoder = decoder
            self.prefix = nn.Sequential(nn.Linear(vector_dim, hidden), nn.GELU(),
                                        nn.Linear(hidden, prefix_tokens * hidden))
            self.shift = nn.Linear(vector_dim, hidden)  # the vector's direct path to every output position
            nn.init.zeros_(self.shift.weight)
            nn.init.zeros_(self.shift.bias)
            self.vector_dim, self.prefix_tokens, self.hidden = int(vector_dim), int(prefix_tokens), hidden

        def prefix_embeds(self, vectors: torch.Tensor) -> torch.Tensor:
            p = self.prefix(vectors * math.sqrt(self.vector_dim))
            return p.view(len(vectors), self.prefix_tokens, self.hidden)

        def output_shift(self, vectors: torch.Tensor) -> torch.Tensor:
            """What the vector adds to the decoder's last hidden state at every position, (n, hidden)."""
            return self.shift(vectors * math.sqrt(self.vector_dim))

        def start(self, vectors: torch.Tensor, ids: torch.Tensor, att: torch.Tensor | None = None,
                  use_cache: bool = False) -> Any:
            """The decoder run on the prefix and the token ids ``ids`` (right-padded, ``att`` their mask)."""
            emb = torch.cat([self.prefix_embeds(vectors), self.decoder.bert.embeddings.word_embeddings(ids)], 1)
            mask = None
            if att is not None:
                mask = torch.cat([torch.ones(len(ids), self.prefix_tokens, dtype=att.dtype, device=att.device),
                                  att], 1)
            return self.decoder.bert(inputs_embeds=emb, attention_mask=mask, use_cache=use_cache)

        def logits(self, hidden: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
            """Next-token logits (fp32) from last hidden states and the matching rows of :meth:`output_shift`."""
            return self.decoder.cls(hidden + shift).float()

        def loss(self, vectors: torch.Tensor, ids: torch.Tensor, att: torch.Tensor) -> tuple[torch.Tensor, int]:
            """Teacher-forced cross-entropy of the tokens after ``[CLS]`` (``ids``: ``[CLS] ... [SEP]`` rows),
            and how many tokens it averages over."""
            labels = ids[:, 1:].masked_fill(att[:, 1:] == 0, -100)
            hidden = self.start(vectors, ids[:, :-1], att[:, :-1]).last_hidden_state[:, self.prefix_tokens:]
            shift = self.output_shift(vectors)[:, None].expand(-1, hidden.shape[1], -1)
            sel = labels >= 0
            return (nn.functional.cross_entropy(self.logits(hidden[sel], shift[sel]), labels[sel]),
                    int(sel.sum()))

    return InverterNet


def build_inverter(encoder: str = "minilm", *, vector_dim: int, prefix_tokens: int) -> tuple[Any, Any, str]:
    """``(net, tokenizer, base model id)``: a fresh inverter whose decoder starts from the weights of the
    registered encoder ``encoder`` (MiniLM), its prefix map drawn from torch's generator."""
    from transformers import AutoTokenizer, BertLMHeadModel

    from veil.encoders.registry import resolve_model

    resolved = resolve_model(encoder)
    with _quiet():
        decoder = BertLMHeadModel.from_pretrained(resolved.folder, is_decoder=True, add_cross_attention=False,
                                                  local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(resolved.folder, local_files_only=True)
    return _net_class()(decoder, vector_dim, prefix_tokens), tokenizer, resolved.model_id


# --------------------------------------------------------------------------- decoding
def greedy_ids(net: Any, vectors: Any, *, start_id: int, end_id: int, max_tokens: int, bf16: bool = True
               ) -> list[list[int]]:
    """The greedy decode of each vector (a tensor on the net's device): token ids without ``[CLS]``/``[SEP]``,
    at most ``max_tokens`` of them. Uses the decoder's key-value cache."""
    import torch

    n = len(vectors)
    starts = torch.full((n, 1), start_id, dtype=torch.long, device=vectors.device)
    out = torch.zeros((n, 0), dtype=torch.long, device=vectors.device)
    done = torch.zeros(n, dtype=torch.bool, device=vectors.device)
    with autocast(vectors.device, bf16):
        step = net.start(vectors, starts, use_cache=True)
        shift = net.output_shift(vectors)
        for t in range(max_tokens):
            nxt = net.logits(step.last_hidden_state[:, -1], shift).argmax(-1)
            nxt = torch.where(done, torch.full_like(nxt, end_id), nxt)
            out = torch.cat([out, nxt[:, None]], 1)
            done |= nxt == end_id
            if bool(done.all()) or t == max_tokens - 1:
                break
            step = net.decoder.bert(input_ids=nxt[:, None], past_key_values=step.past_key_values, use_cache=True)
    return [_until_end(row, end_id) for row in out.tolist()]


def beam_ids(net: Any, vectors: Any, *, beam: int, start_id: int, end_id: int, max_tokens: int,
             bf16: bool = True) -> list[list[int]]:
    """Beam search with ``beam`` hypotheses per vector: the finished (or ``max_tokens``-long) hypothesis with the
    highest summed log-probability per token (``[SEP]`` counted). A finished hypothesis stays in the beam with its
    score; ``beam=1`` is the greedy decode."""
    return [rows[0] for rows in beam_hypotheses(net, vectors, beam=beam, n_best=1, start_id=start_id, end_id=end_id,
                                                max_tokens=max_tokens, bf16=bf16)]


def beam_hypotheses(net: Any, vectors: Any, *, beam: int, n_best: int, start_id: int, end_id: int, max_tokens: int,
                    bf16: bool = True) -> list[list[list[int]]]:
    """The ``n_best`` (at most ``beam``) best hypotheses of :func:`beam_ids`' search for each vector, best first
    (by summed log-probability per token; ties keep the beam's order), so ``[0]`` is :func:`beam_ids`' answer.
    The hypotheses of one vector are distinct token sequences (their decoded texts may still coincide)."""
    import torch

    if not 1 <= n_best <= beam:
        raise InvalidParameterError(f"n_best must be between 1 and beam={beam}, got {n_best}; widen the beam to "
                                    "keep more hypotheses")
    n, w = len(vectors), beam
    dev = vectors.device
    starts = torch.full((n * w, 1), start_id, dtype=torch.long, device=dev)
    with autocast(dev, bf16):
        step = net.start(vectors.repeat_interleave(w, 0), starts, use_cache=True)
        shift = net.output_shift(vectors).repeat_interleave(w, 0)
        scores = torch.full((n, w), -math.inf, device=dev)
        scores[:, 0] = 0.0  # the beams start identical: only the first one expands at the first step
        seqs = torch.zeros((n * w, 0), dtype=torch.long, device=dev)
        done = torch.zeros(n * w, dtype=torch.bool, device=dev)
        length = torch.zeros(n * w, device=dev)
        for t in range(max_tokens):
            logp = torch.log_softmax(net.logits(step.last_hidden_state[:, -1], shift), -1)
            vocab = logp.shape[-1]
            logp[done] = -math.inf
            logp[done, end_id] = 0.0  # a finished hypothesis continues only with [SEP], at no cost
            top, idx = (scores.view(-1, 1) + logp).view(n, w * vocab).topk(w, dim=1)
            src = (torch.arange(n, device=dev)[:, None] * w + idx // vocab).view(-1)
            tok = (idx % vocab).view(-1)
            length = length[src] + (~done[src]).float()
            done = done[src] | (tok == end_id)
            seqs = torch.cat([seqs[src], tok[:, None]], 1)
            scores = top
            if bool(done.all()) or t == max_tokens - 1:
                break
            step.past_key_values.reorder_cache(src)
            step = net.decoder.bert(input_ids=tok[:, None], past_key_values=step.past_key_values, use_cache=True)
    ranked = (scores.view(-1) / length.clamp(min=1.0)).view(n, w).sort(dim=1, descending=True, stable=True).indices
    rows = seqs.tolist()
    return [[_until_end(rows[i * w + int(j)], end_id) for j in ranked[i, :n_best]] for i in range(n)]


def _until_end(row: Sequence[int], end_id: int) -> list[int]:
    return list(row[:row.index(end_id)] if end_id in row else row)


# --------------------------------------------------------------------------- pairs
@dataclass(frozen=True)
class InversionPairs:
    """Public sentences and their vectors: ``texts[i]`` was encoded to ``vectors[i]`` by ``encoder``
    (:func:`veil.models.inverter.encoder_identity`); ``corpora[i]`` names where the sentence came from."""

    texts: list[str]
    vectors: np.ndarray
    encoder: dict[str, Any]
    corpora: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        from veil.validation import as_vectors

        if not isinstance(self.texts, list) or not all(isinstance(t, str) for t in self.texts):
            raise DataFormatError("texts must be a list of str")
        x = as_vectors("vectors", self.vectors, allow_empty=True)
        if len(x) != len(self.texts):
            raise DataFormatError(f"{len(self.texts)} texts for {len(x)} vectors")
        if self.corpora and len(self.corpora) != len(self.texts):
            raise DataFormatError(f"{len(self.corpora)} corpus names for {len(self.texts)} texts")
        if not isinstance(self.encoder, dict) or "dim" not in self.encoder:
            raise DataFormatError("encoder must be the identity of the encoder (veil.models.inverter."
                                  "encoder_identity)")
        if int(self.encoder["dim"]) != x.shape[1]:
            raise DataFormatError(f"the vectors have dimension {x.shape[1]}, the encoder {self.encoder['dim']}")
        object.__setattr__(self, "vectors", np.ascontiguousarray(x, dtype=np.float32))

    def __len__(self) -> int:
        return len(self.texts)


# --------------------------------------------------------------------------- the loaded model
@dataclass
class Inverter:
    """A loaded inverter: the network, the encoder's tokenizer, its manifest and where it came from."""

    net: Any
    tokenizer: Any
    manifest: dict[str, Any]
    folder: Path

    @property
    def encoder(self) -> dict[str, Any]:
        """The identity of the encoder this inverter was trained for (:func:`encoder_identity`)."""
        return dict(self.manifest["encoder"])

    @property
    def dim(self) -> int:
        return int(self.manifest["encoder"]["dim"])

    @property
    def max_tokens(self) -> int:
        return int(self.manifest["config"]["max_tokens"])

    def check_encoder(self, encoder: Any) -> None:
        """Raise :class:`~veil.errors.InvalidParameterError` unless ``encoder`` (a TextEncoder, or an identity
        mapping) makes the vectors this inverter was trained on."""
        other = dict(encoder) if isinstance(encoder, Mapping) else encoder_identity(encoder)
        mine = self.encoder
        diff = [k for k in IDENTITY_KEYS if other.get(k) != mine.get(k)]
        if diff:
            shown = "; ".join(f"{k}: trained for {mine.get(k)!r}, given {other.get(k)!r}" for k in diff)
            raise InvalidParameterError(
                f"the inverter {self.folder.name} was trained for the vectors of {mine.get('name')} "
                f"({mine.get('model_id')}), not these ({shown}); invert vectors of the encoder it was trained for, "
                f"or train an inverter for that encoder")

    def check_vectors(self, vectors: Any) -> np.ndarray:
        """``vectors`` as a float32 (n, dim) array; another dimension, NaN or inf is a
        :class:`~veil.errors.DataFormatError`."""
        from veil.validation import as_vectors

        return np.ascontiguousarray(as_vectors("vectors", vectors, dim=self.dim), dtype=np.float32)

    def generate_ids(self, vectors: Any, *, beam: int = 1, max_tokens: int | None = None, batch_size: int = 64,
                     encoder: Any = None, bf16: bool = True) -> list[list[int]]:
        """Token ids (no ``[CLS]``/``[SEP]``) reconstructed from each vector; see :meth:`generate`."""
        from veil.validation import check_int

        beam = check_int("beam", beam, minimum=1)
        if beam == 1:
            return self._decode(vectors, lambda v, ids: greedy_ids(self.net, v, **ids), max_tokens=max_tokens,
                                batch_size=batch_size, encoder=encoder, bf16=bf16)
        return self._decode(vectors, lambda v, ids: beam_ids(self.net, v, beam=beam, **ids), max_tokens=max_tokens,
                            batch_size=batch_size, encoder=encoder, bf16=bf16)

    def _decode(self, vectors: Any, search: Any, *, max_tokens: int | None, batch_size: int, encoder: Any,
                bf16: bool) -> list[Any]:
        """``search(v, ids)`` on batches of the checked vectors (``ids``: start and end ids, length limit)."""
        import torch

        from veil.validation import check_int

        batch_size = check_int("batch_size", batch_size, minimum=1)
        max_tokens = self.max_tokens if max_tokens is None else check_int("max_tokens", max_tokens, minimum=1)
        if encoder is not None:
            self.check_encoder(encoder)
        x = self.check_vectors(vectors)
        device = next(self.net.parameters()).device
        ids = dict(start_id=int(self.tokenizer.cls_token_id), end_id=int(self.tokenizer.sep_token_id),
                   max_tokens=max_tokens, bf16=bf16)
        out: list[Any] = []
        was = self.net.training
        self.net.eval()
        try:
            with torch.inference_mode():
                for s in range(0, len(x), batch_size):
                    out += search(torch.as_tensor(x[s:s + batch_size], device=device), ids)
        finally:
            self.net.train(was)
        return out

    def generate(self, vectors: Any, *, beam: int = 1, max_tokens: int | None = None, batch_size: int = 64,
                 encoder: Any = None, bf16: bool = True) -> list[str]:
        """The text reconstructed from each vector (lower-cased WordPiece text): greedy (``beam=1``) or beam
        search, at most ``max_tokens`` tokens (default: the length it was trained to). ``encoder`` (a
        TextEncoder or its identity), when given, must be the one it was trained for."""
        rows = self.generate_ids(vectors, beam=beam, max_tokens=max_tokens, batch_size=batch_size, encoder=encoder,
                                 bf16=bf16)
        return [self.decode(r) for r in rows]

    def hypotheses(self, vectors: Any, *, beam: int, n_best: int, max_tokens: int | None = None,
                   batch_size: int = 64, encoder: Any = None, bf16: bool = True) -> list[list[str]]:
        """The texts of the ``n_best`` best hypotheses of a beam search of width ``beam`` for each vector, best
        first (:func:`beam_hypotheses`; ``[0]`` is :meth:`generate`'s text with the same ``beam``); two
        hypotheses may decode to the same text."""
        from veil.validation import check_int

        beam = check_int("beam", beam, minimum=1)
        n_best = check_int("n_best", n_best, minimum=1, maximum=beam)
        rows = self._decode(vectors, lambda v, ids: beam_hypotheses(self.net, v, beam=beam, n_best=n_best, **ids),
                            max_tokens=max_tokens, batch_size=batch_size, encoder=encoder, bf16=bf16)
        return [[self.decode(r) for r in hyps] for hyps in rows]

    def decode(self, ids: Sequence[int]) -> str:
        """The text of token ids (lower-cased WordPiece text, special tokens dropped)."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=True).strip()

    def identity(self) -> dict[str, Any]:
        """What a record says about the inverter it used (name, sha256, encoder, steps, held-out token F1, and how
        its training stopped)."""
        m = self.manifest
        return {"name": m.get("name"), "sha256": m.get("sha256"), "encoder": m.get("encoder"),
                "steps": m.get("steps"), "train_sentences": m.get("train_sentences"),
                "heldout_token_f1": (m.get("heldout") or {}).get("token_f1"),
                # "budget": cut short by its minute cap (a weaker model than its configuration asks for)
                "stopped": m.get("stopped"), "planned_steps": m.get("planned_steps")}


# --------------------------------------------------------------------------- files
def read_manifest(folder: str | os.PathLike, name: str = "inverter") -> dict[str, Any]:
    from veil._io import read_json

    path = Path(folder) / MANIFEST
    manifest = read_json(path, what="inverter manifest", fix=f"run `{train_command(name)}` to rebuild it")
    need = ("sha256", "encoder", "config", "architecture")
    if not isinstance(manifest, dict) or any(k not in manifest for k in need) or \
            not isinstance(manifest["encoder"], dict):
        raise CacheCorruptError(f"the inverter {folder}", f"its manifest.json lacks one of {', '.join(need)}",
                                train_command(name))
    return manifest


def load_inverter(name: str | os.PathLike = "inverter", *, device: str = "cpu") -> Inverter:
    """The inverter ``name`` (``inverter`` or ``inverter-quick`` under VEIL_HOME, or a folder that
    :func:`save_inverter` wrote), in eval mode, after its weights' sha256 matched its manifest."""
    from safetensors.torch import load_model
    from transformers import AutoTokenizer, BertConfig, BertLMHeadModel

    from veil.models.files import file_problem

    label = str(name)
    known = label in INVERTER_NAMES
    folder = inverter_dir(label) if known else Path(name)
    fix = train_command(label if known else "inverter")
    if not (folder / WEIGHTS).is_file() or not (folder / MANIFEST).is_file():
        cmd = fix.removesuffix(" --force")
        if cmd.endswith("--quick"):
            how = f"train it with `{cmd}`"
        else:  # the full model: minutes on a GPU, or brought from a machine that has it
            cmd = "veil models import DIR"
            how = ("bring one with `veil models import DIR` (a folder that `veil models export inverter DIR` wrote "
                   "where the model is), or train it with `veil models train inverter --device cuda` on a machine "
                   "with a GPU (about 5 minutes on an H200; docs/inversion.md)")
        raise ResourceMissingError(f"the inverter {folder}", cmd,
                                   message=f"veil's inverter {folder} does not exist (or is incomplete); {how}")
    manifest = read_manifest(folder, label if known else "inverter")
    problem = file_problem(folder / WEIGHTS, sha256=manifest["sha256"])
    if problem is not None:
        raise CacheCorruptError(f"the inverter {folder}", problem, fix)
    arch = manifest["architecture"]
    try:
        with _quiet():
            config = BertConfig.from_pretrained(folder, local_files_only=True)
            tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        net = _net_class()(BertLMHeadModel(config), int(arch["vector_dim"]), int(arch["prefix_tokens"]))
        missing, unexpected = load_model(net, folder / WEIGHTS, strict=False)
    except Exception as exc:  # noqa: BLE001  a damaged config.json or tokenizer file: transformers' many errors
        raise CacheCorruptError(f"the inverter {folder}", f"its files do not load ({type(exc).__name__}: "
                                f"{str(exc)[:120]})", fix) from None
    if missing or unexpected:
        raise CacheCorruptError(f"the inverter {folder}", f"{WEIGHTS} does not fit its configuration (missing "
                                f"{sorted(missing)[:3]}, unexpected {sorted(unexpected)[:3]})", fix)
    net.to(device).eval()
    return Inverter(net, tokenizer, manifest, folder)


def save_inverter(net: Any, tokenizer: Any, folder: str | os.PathLike, manifest: dict[str, Any]) -> Path:
    """Write the network, its decoder's configuration, the tokenizer and ``manifest`` (plus the weights' sha256)
    to ``folder``: into a new sibling folder first, swapped in at the end, so a reader never sees a half-written
    model; an existing ``folder`` is replaced only if veil wrote it (its ``.veil-owned`` marker)."""
    from safetensors.torch import save_model

    from veil._io import atomic_write_json, publish_owned_dir, sha256_file
    from veil.models.mlm import check_replaceable

    folder = Path(folder)
    check_replaceable(folder)

    def fill(tmp: Path) -> None:
        with _quiet():
            net.decoder.config.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        save_model(net, str(tmp / WEIGHTS))
        atomic_write_json(tmp / MANIFEST, {**manifest, "sha256": sha256_file(tmp / WEIGHTS)})

    publish_owned_dir(folder, fill, f"veil's inverter ({manifest.get('name')}, veil models train inverter)")
    return folder


def mean_token_f1(references: Sequence[str], hypotheses: Sequence[str]) -> float:
    """The mean :func:`token_f1` of paired texts, in percent."""
    if len(references) != len(hypotheses):
        raise DataFormatError(f"{len(references)} references for {len(hypotheses)} reconstructions")
    if not references:
        return 0.0
    return 100.0 * float(np.mean([token_f1(r, h) for r, h in zip(references, hypotheses)]))
