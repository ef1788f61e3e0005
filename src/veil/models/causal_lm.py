"""A small causal language model for the ``generative-model`` release (issue 52): MiniLM's own BERT weights as a
decoder (``BertLMHeadModel`` with ``is_decoder=True``: causal self-attention; the output layer tied to the word
embeddings, the MLM transform fresh, as the inverter's decoder), fine-tuned on text to predict each next token.

A text is ``[CLS] tokens [SEP]``: the model predicts every token after ``[CLS]``, ``[SEP]`` included, so a text's
log-perplexity (:func:`log_perplexities`: the mean negative log-likelihood per predicted token, in nats) covers its
end too. :func:`train_steps` fine-tunes for a fixed number of optimiser steps (the same model on a busy or an idle
machine), drawing batches with the given seed. Only what the model released can be queried through these
functions: scores of given texts, and (later) samples; the training text never reaches an attack.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError

__all__ = ["CausalLM", "build_causal_lm", "log_perplexities", "token_nll", "token_hits", "predicted_tokens",
           "train_steps", "sample"]


class CausalLM:
    """The model (``net``: a ``BertLMHeadModel`` decoder), its tokenizer, the base model's id and ``max_tokens``
    (texts are cut to this many word pieces)."""

    def __init__(self, net: Any, tokenizer: Any, base: str, max_tokens: int = 64) -> None:
        self.net, self.tokenizer, self.base, self.max_tokens = net, tokenizer, base, int(max_tokens)

    def __repr__(self) -> str:
        return f"CausalLM(base={self.base!r}, max_tokens={self.max_tokens})"

    def batch(self, texts: list[str]) -> tuple[Any, Any]:
        """(input ids, attention mask) of ``texts``, each ``[CLS] ... [SEP]``, padded."""
        enc = self.tokenizer(list(texts), padding=True, truncation=True, max_length=self.max_tokens + 2,
                             return_tensors="pt")
        return enc["input_ids"], enc["attention_mask"]


def build_causal_lm(encoder: str = "minilm", *, max_tokens: int = 64, seed: int = 0,
                    dropout: bool = True) -> CausalLM:
    """A fresh causal LM whose decoder starts from the registered encoder's weights (offline); the layers no
    registry package ships trained (the MLM transform) are initialised from ``seed``, leaving torch's global
    generator as it was. ``dropout`` False: built with no dropout (DP-SGD's deterministic training pass); the
    weights are the same either way."""
    import copy

    from veil.encoders.registry import resolve_model

    resolved = resolve_model(encoder)
    net, tokenizer = _pretrained(str(resolved.folder), int(seed), bool(dropout))
    # a copy of the process' one loaded build (public weights only): the same weights a fresh load from this seed
    # gives, in a few hundredths of the load's time
    return CausalLM(copy.deepcopy(net), copy.deepcopy(tokenizer), resolved.model_id, max_tokens)


@functools.lru_cache(maxsize=4)
def _pretrained(folder: str, seed: int, dropout: bool) -> tuple[Any, Any]:
    """The decoder loaded from ``folder`` (the fresh layers drawn from ``seed``) and its tokenizer, once per process
    and setting; callers get copies (:func:`build_causal_lm`), never these."""
    import torch
    from transformers import AutoTokenizer, BertLMHeadModel

    from veil.models.inverter import _quiet

    with _quiet(), torch.random.fork_rng():
        torch.manual_seed(seed)
        off = {} if dropout else {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
        net = BertLMHeadModel.from_pretrained(folder, is_decoder=True, add_cross_attention=False,
                                              local_files_only=True, **off)
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return net, tokenizer


def _texts(texts: Any, what: str) -> list[str]:
    if isinstance(texts, str) or not isinstance(texts, (list, tuple)):
        raise InvalidTypeError(f"{what}: give a list of texts, not {type(texts).__name__}")
    out = list(texts)
    if not out:
        raise DataFormatError(f"{what}: no text given")
    if not all(isinstance(t, str) and t.strip() for t in out):
        raise DataFormatError(f"{what}: every text must be a non-empty string")
    return out


def _token_nll(lm: CausalLM, texts: list[str]) -> tuple[Any, Any]:
    """Per text: the summed negative log-likelihood of its predicted tokens, and their number (torch tensors)."""
    import torch

    ids, mask = lm.batch(texts)
    logits = lm.net(input_ids=ids, attention_mask=mask).logits[:, :-1]
    target, keep = ids[:, 1:], mask[:, 1:].bool()
    nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), target, reduction="none")
    return (nll * keep).sum(1), keep.sum(1)


def token_nll(lm: CausalLM, texts: Any, *, batch_size: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Per text: the summed negative log-likelihood of its predicted tokens (nats) and their number; a corpus'
    per-token perplexity is ``exp(nll.sum() / count.sum())``."""
    import torch

    texts = _texts(texts, "texts")
    lm.net.eval()
    nll, count = [], []
    with torch.no_grad():
        for i in range(0, len(texts), batch_size):
            total, n = _token_nll(lm, texts[i:i + batch_size])
            nll.append(total.double().numpy())
            count.append(n.numpy())
    return np.concatenate(nll), np.concatenate(count).astype(np.int64)


def token_hits(lm: CausalLM, texts: Any, *, batch_size: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Per text: how many of its predicted tokens are the model's top-1 guess given the tokens before them, and
    their number (the tokens :func:`token_nll` scores)."""
    import torch

    texts = _texts(texts, "texts")
    lm.net.eval()
    hits, count = [], []
    with torch.no_grad():
        for i in range(0, len(texts), batch_size):
            ids, mask = lm.batch(texts[i:i + batch_size])
            guess = lm.net(input_ids=ids, attention_mask=mask).logits[:, :-1].argmax(-1)
            keep = mask[:, 1:].bool()
            hits.append(((guess == ids[:, 1:]) & keep).sum(1).numpy())
            count.append(keep.sum(1).numpy())
    return np.concatenate(hits).astype(np.int64), np.concatenate(count).astype(np.int64)


def predicted_tokens(lm: CausalLM, texts: Any) -> list[np.ndarray]:
    """Per text: the ids of its predicted tokens (every token after ``[CLS]``, ``[SEP]`` included, cut as
    :meth:`CausalLM.batch` cuts), the targets :func:`token_nll` and :func:`token_hits` score."""
    texts = _texts(texts, "texts")
    enc = lm.tokenizer(texts, truncation=True, max_length=lm.max_tokens + 2)
    return [np.asarray(ids[1:], dtype=np.int64) for ids in enc["input_ids"]]


def log_perplexities(lm: CausalLM, texts: Any, *, batch_size: int = 64) -> np.ndarray:
    """Each text's log-perplexity under ``lm``: its mean negative log-likelihood per predicted token (nats)."""
    import torch

    texts = _texts(texts, "texts")
    lm.net.eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(texts), batch_size):
            total, count = _token_nll(lm, texts[i:i + batch_size])
            out.append((total / count).double().numpy())
    return np.concatenate(out)


def train_steps(lm: CausalLM, texts: Any, *, steps: int, batch_size: int = 16, lr: float = 1e-4, seed: int = 0,
                log: Callable[[str], None] | None = None, checkpoint: str | os.PathLike | None = None,
                save_every: int = 50) -> list[float]:
    """Fine-tune ``lm`` on ``texts`` for exactly ``steps`` AdamW steps (batches drawn uniformly with ``seed``);
    returns the training loss (mean NLL per token) of each step.

    ``checkpoint``: a file where the run's whole state (weights, optimiser, both generators, losses, the step) is
    saved atomically every ``save_every`` steps; a run that finds it resumes there and ends where an uninterrupted
    run ends. It belongs to these ``texts`` and this seed: the caller keys it by them (a file of another run,
    per its step count or size, is refused). The file is removed once the run is done."""
    import torch

    from veil.validation import check_int

    texts = _texts(texts, "texts")
    steps = check_int("steps", steps, minimum=1)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    save_every = check_int("save_every", save_every, minimum=1)
    if not (np.isfinite(lr) and 0 < lr <= 1):
        raise InvalidParameterError(f"lr must be in (0, 1], got {lr}")
    gen = np.random.default_rng(seed)
    opt = torch.optim.AdamW(lm.net.parameters(), lr=lr, fused=True)
    lm.net.train()
    losses: list[float] = []
    with torch.random.fork_rng():  # dropout's draws: reproducible per seed, torch's global generator untouched
        torch.manual_seed(int(gen.integers(2**31)))
        start = 0
        if checkpoint is not None and Path(checkpoint).is_file():
            start = _resume(lm, opt, gen, losses, Path(checkpoint), steps, log)
        _steps(lm, texts, opt, gen, range(start, steps), batch_size, losses, log,
               None if checkpoint is None else (Path(checkpoint), save_every))
    lm.net.eval()
    if checkpoint is not None:
        Path(checkpoint).unlink(missing_ok=True)
    return losses


_STATE_KEYS = ("net", "opt", "torch_rng", "numpy_rng", "losses", "step", "steps")


def _resume(lm: CausalLM, opt: Any, gen: Any, losses: list[float], path: Path, steps: int,
            log: Callable[[str], None] | None) -> int:
    import json

    import torch

    from veil.models.files import load_tensors

    fix = f"delete {path} to train from the start"
    state = load_tensors(path, what="the causal LM's training state", fix=fix, keys=_STATE_KEYS)
    if int(state["steps"]) != steps or not 0 < int(state["step"]) <= steps:
        raise DataFormatError(f"the causal LM's training state {path} belongs to a run of {int(state['steps'])} "
                              f"steps, not {steps}; {fix}")
    lm.net.load_state_dict(state["net"])
    opt.load_state_dict(state["opt"])
    torch.set_rng_state(state["torch_rng"])
    gen.bit_generator.state = json.loads(state["numpy_rng"])
    losses.extend(float(x) for x in state["losses"])
    if log is not None:
        log(f"causal LM: resumed at step {int(state['step'])}/{steps}")
    return int(state["step"])


def _save(lm: CausalLM, opt: Any, gen: Any, losses: list[float], path: Path, step: int, steps: int) -> None:
    import json

    import torch

    from veil._io import atomic_write

    with atomic_write(path, "wb") as fh:
        torch.save({"net": lm.net.state_dict(), "opt": opt.state_dict(), "torch_rng": torch.get_rng_state(),
                    "numpy_rng": json.dumps(gen.bit_generator.state), "losses": torch.tensor(losses),
                    "step": step, "steps": steps}, fh)


def _steps(lm: CausalLM, texts: list[str], opt: Any, gen: Any, todo: range, batch_size: int, losses: list[float],
           log: Callable[[str], None] | None, save: tuple[Path, int] | None) -> None:
    steps = todo.stop
    for step in todo:
        batch = [texts[i] for i in gen.integers(0, len(texts), size=min(batch_size, len(texts)))]
        total, count = _token_nll(lm, batch)
        loss = total.sum() / count.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if log is not None and (step + 1) % max(1, steps // 10) == 0:
            log(f"causal LM: step {step + 1}/{steps}, loss {losses[-1]:.3f}")
        if save is not None and (step + 1) % save[1] == 0 and step + 1 < steps:
            _save(lm, opt, gen, losses, save[0], step + 1, steps)


def sample(lm: CausalLM, n: int, *, prompt: str = "", max_tokens: int = 32, min_tokens: int = 0, top_k: int = 40,
           temperature: float = 1.0, seed: int = 0, batch_size: int = 32) -> list[str]:
    """``n`` texts sampled from ``lm`` after ``prompt`` (its word pieces, then free), each token drawn from the
    ``top_k`` likeliest at ``temperature`` (``top_k=1``: greedy), until ``[SEP]`` or ``max_tokens`` new tokens
    (``[SEP]`` is never drawn before ``min_tokens``: fixed-length samples, as extraction draws them); draws from
    ``seed`` (reproducible). Returns each sample's text, the prompt included."""
    import torch

    from veil.validation import check_int

    n, max_tokens = check_int("n", n, minimum=1), check_int("max_tokens", max_tokens, minimum=1)
    top_k = check_int("top_k", top_k, minimum=1)
    min_tokens = check_int("min_tokens", min_tokens, minimum=0)
    if min_tokens > max_tokens:
        raise InvalidParameterError(f"min_tokens ({min_tokens}) must be at most max_tokens ({max_tokens})")
    if not (np.isfinite(temperature) and temperature > 0):
        raise InvalidParameterError(f"temperature must be > 0, got {temperature}")
    if not isinstance(prompt, str):
        raise InvalidTypeError(f"prompt must be a str, got {type(prompt).__name__}")
    tok = lm.tokenizer
    start = [tok.cls_token_id] + tok(prompt, add_special_tokens=False)["input_ids"]
    gen = torch.Generator().manual_seed(int(seed))
    lm.net.eval()
    out: list[str] = []
    with torch.no_grad():
        for first in range(0, n, batch_size):
            b = min(batch_size, n - first)
            ids = torch.tensor([start] * b)
            done = torch.zeros(b, dtype=torch.bool)
            past = None
            step_ids = ids
            for t in range(max_tokens):
                res = lm.net(input_ids=step_ids, past_key_values=past, use_cache=True)
                past = res.past_key_values
                logits = res.logits[:, -1] / temperature
                if t < min_tokens:
                    logits[:, tok.sep_token_id] = float("-inf")
                top = torch.topk(logits, min(top_k, logits.shape[-1]))
                pick = torch.multinomial(torch.softmax(top.values, -1), 1, generator=gen)
                nxt = top.indices.gather(1, pick)[:, 0]
                nxt = torch.where(done, torch.full_like(nxt, tok.sep_token_id), nxt)
                ids = torch.cat([ids, nxt[:, None]], 1)
                done |= nxt == tok.sep_token_id
                if bool(done.all()):
                    break
                step_ids = nxt[:, None]
            for row in ids.tolist():
                body = row[1:]
                if tok.sep_token_id in body:
                    body = body[:body.index(tok.sep_token_id)]
                out.append(tok.decode(body))
    return out
