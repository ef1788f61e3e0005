"""Training veil's masked LM (:mod:`veil.models.mlm`): continued masked-LM training of MiniLM on public text.

What one step does: a batch of tagged public sentences (about ``batch_tokens`` subword tokens, sentences of
similar length) goes to the tokenizer as pre-split words; whole words are masked (every subword of a chosen word
becomes ``[MASK]``, as the word-recovery attackers mask obfuscated words): each sentence draws a rate r uniformly
from ``open_rate`` and masks each open-class word (the tags of the obfuscation levels P1-P5: nouns, proper
nouns, adjectives, verbs, adverbs) with probability r, and each other word with probability ``other_rate``.
The loss is the cross-entropy of the original subwords at the masked tokens only (the decoder runs on those
tokens alone). AdamW (weight decay 0.01; the fresh MLM transform and decoder bias at ``head_lr``, the
pretrained weights at ``lr``), linear warm-up over ``warmup`` steps then constant rates, gradient
norm clipped at 1, matrix products in bfloat16 (``bf16``; these CPUs have AVX512-BF16) with fp32 weights.

Held-out accuracy: ``heldout`` sentences of the treebank's dev split (never its test split), masked once with a
fixed seed (open-class words at rate 0.3, other words at ``other_rate``); the share of masked subword tokens
whose top-1 prediction is the original. It is measured every ``eval_every`` steps, giving the learning curve
(accuracy against minutes) the manifest keeps; the weights of the best evaluation are the ones saved
(``selected_step``).

Resuming: every evaluation writes ``<folder>.state.pt`` beside the model folder (weights, optimizer, step,
the position in the epoch, torch's generator, minutes spent, the curve), atomically; a run of the same
configuration (up to its budget) resumes from it and continues exactly as the uninterrupted run would have
(masks are drawn per batch from the seed, the epoch and the batch's index). The finished model is written by :func:`veil.models.mlm.save_mlm`, then the state file
is removed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from veil._bf16 import precision as _precision
from veil.errors import DataFormatError, InvalidParameterError

__all__ = ["MLMConfig", "QUICK_MLM", "FULL_MLM", "GPU_MLM", "train_mlm", "heldout_accuracy", "OPEN_TAGS",
           "state_path"]

#: tags whose words are masked at the open-class rate: every tag of the obfuscation levels P1-P5
OPEN_TAGS = frozenset({"NNP", "NNPS", "NN", "NNS", "JJ", "JJR", "JJS", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ",
                       "RB", "RBR", "RBS"})
_HELDOUT_RATE = 0.3
_HELDOUT_SEED = 12345


@dataclass(frozen=True)
class MLMConfig:
    """One training run of the masked LM (``name`` says where it is saved, :func:`veil.models.mlm.mlm_dir`)."""

    name: str = "mlm"
    encoder: str = "minilm"
    treebank: str = "silver-sm"
    epochs: int = 2
    max_minutes: float = 45.0
    batch_tokens: int = 2048
    lr: float = 2e-4
    head_lr: float = 3e-3
    warmup: int = 200
    open_rate: tuple[float, float] = (0.15, 0.6)
    other_rate: float = 0.1
    max_length: int = 128
    max_train: int | None = None
    heldout: int = 1000
    eval_every: int = 250
    bf16: bool = True
    threads: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        import math

        for key in ("epochs", "batch_tokens", "warmup", "max_length", "heldout", "eval_every", "threads"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InvalidParameterError(f"{key} must be an int >= 1, got {v!r}")
        for key in ("max_minutes", "lr", "head_lr"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise InvalidParameterError(f"{key} must be a finite number > 0, got {v!r}")
        lo, hi = self.open_rate
        if not 0 < lo <= hi < 1 or not 0 <= self.other_rate < 1:
            raise InvalidParameterError(f"mask rates must lie in (0, 1): open_rate {self.open_rate}, other_rate "
                                        f"{self.other_rate}")
        if self.max_train is not None and (isinstance(self.max_train, bool) or not isinstance(self.max_train, int)
                                           or self.max_train < 1):
            raise InvalidParameterError(f"max_train must be None or an int >= 1, got {self.max_train!r}")
        if self.max_length > 512:
            raise InvalidParameterError(f"max_length must be <= 512 (MiniLM's positions), got {self.max_length}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["open_rate"] = list(self.open_rate)
        return d


#: the full model: two passes over the silver treebank's train split (about 3.4M subword tokens each); the
#: 45-minute cap bounds one session: a run it cuts short is saved marked ``stopped: budget``, keeps its state, and
#: the next `veil models train mlm` resumes it to where an uninterrupted run ends
FULL_MLM = MLMConfig()
#: the full model as ``deploy/gpu/train.py mlm`` trains it on one GPU: 28 passes over the same text in batches
#: of 16,384 tokens (about 5,600 steps, about 6 minutes on one H100 or H200); its budget is the passes, and the
#: 7-minute cap only marks a run cut short (``stopped: budget`` in its manifest)
GPU_MLM = MLMConfig(epochs=28, max_minutes=7.0, batch_tokens=16384, eval_every=250, threads=8)
#: the quick model (tests, the quick bench): three passes over the quick silver treebank's train split (its epochs end
#: it; the 30-minute cap only guards a very loaded machine, and the first use resumes a run it cut short)
QUICK_MLM = MLMConfig(name="mlm-quick", treebank="silver-sm-quick", epochs=3, max_minutes=30.0, heldout=300,
                      eval_every=50, warmup=50)

#: config keys a resumed run may change (the budget of each session)
_BUDGET = ("max_minutes", "threads", "epochs")


def state_path(folder: str | os.PathLike) -> Path:
    folder = Path(folder)
    return folder.with_name(folder.name + ".state.pt")


class _Encoded:
    """Tagged sentences tokenised once: subword ids, the word of each subword, and which words are open-class."""

    def __init__(self, tokenizer: Any, sentences: Sequence[tuple[Sequence[str], Sequence[str]]],
                 max_length: int) -> None:
        self.ids: list[np.ndarray] = []
        self.word_of: list[np.ndarray] = []
        self.open: list[np.ndarray] = []
        for s in range(0, len(sentences), 2000):
            chunk = sentences[s:s + 2000]
            enc = tokenizer([list(w) for w, _ in chunk], is_split_into_words=True, truncation=True,
                            max_length=max_length)
            for b, (words, tags) in enumerate(chunk):
                wid = enc.word_ids(b)
                self.ids.append(np.asarray(enc["input_ids"][b], dtype=np.int64))
                self.word_of.append(np.asarray([-1 if w is None else w for w in wid], dtype=np.int64))
                self.open.append(np.asarray([t in OPEN_TAGS for t in tags], dtype=bool))
        self.lengths = np.asarray([len(x) for x in self.ids], dtype=np.int64)
        self.tokens = int(self.lengths.sum())

    def __len__(self) -> int:
        return len(self.ids)

    def batches(self, batch_tokens: int, rng: np.random.Generator) -> list[np.ndarray]:
        """Sentences of similar length, about ``batch_tokens`` (padded) tokens a batch, in a shuffled order."""
        order = np.lexsort((rng.random(len(self)), self.lengths))
        out, cur, width = [], [], 0
        for i in order:
            n = int(self.lengths[i])
            if cur and max(width, n) * (len(cur) + 1) > batch_tokens:
                out.append(np.asarray(cur))
                cur, width = [], 0
            cur.append(int(i))
            width = max(width, n)
        if cur:
            out.append(np.asarray(cur))
        rng.shuffle(out)
        return out

    def masked(self, rows: np.ndarray, rng: np.random.Generator, open_rate: tuple[float, float] | float,
               other_rate: float, mask_id: int, pad_id: int) -> tuple[Any, Any, Any]:
        """``(input_ids, attention_mask, labels)`` with whole words masked (labels -100 where not masked)."""
        import torch

        width = int(self.lengths[rows].max())
        ids = np.full((len(rows), width), pad_id, dtype=np.int64)
        att = np.zeros((len(rows), width), dtype=np.int64)
        labels = np.full((len(rows), width), -100, dtype=np.int64)
        for b, i in enumerate(rows):
            x, w, op = self.ids[i], self.word_of[i], self.open[i]
            rate = open_rate if isinstance(open_rate, float) else rng.uniform(*open_rate)
            n_words = int(w.max()) + 1 if (w >= 0).any() else 0
            chosen = rng.random(n_words) < np.where(op[:n_words], rate, other_rate)
            if n_words and not chosen.any():
                chosen[rng.integers(n_words)] = True
            hit = (w >= 0) & chosen[np.maximum(w, 0)] if n_words else np.zeros(len(x), dtype=bool)
            ids[b, :len(x)] = np.where(hit, mask_id, x)
            att[b, :len(x)] = 1
            labels[b, :len(x)] = np.where(hit, x, -100)
        return torch.as_tensor(ids), torch.as_tensor(att), torch.as_tensor(labels)


def _masked_loss(model: Any, ids: Any, att: Any, labels: Any, bf16: bool) -> tuple[Any, Any]:
    """Cross-entropy at the masked tokens (the decoder runs on those alone) and the top-1 hits there."""
    import torch

    device = next(model.parameters()).device
    ids, att, labels = ids.to(device), att.to(device), labels.to(device)
    sel = labels >= 0
    from veil._bf16 import autocast

    with autocast(device, bf16):
        hidden = model.bert(input_ids=ids, attention_mask=att).last_hidden_state
        logits = model.cls(hidden[sel])
    logits = logits.float()
    return torch.nn.functional.cross_entropy(logits, labels[sel]), (logits.argmax(-1) == labels[sel])


def _heldout_accuracy(model: Any, data: _Encoded, batches: list[tuple[Any, Any, Any]], bf16: bool) -> dict[str, Any]:
    import torch

    model.eval()
    hits = total = 0
    loss = 0.0
    with torch.inference_mode():
        for ids, att, labels in batches:
            lo, hit = _masked_loss(model, ids, att, labels, bf16)
            hits, total, loss = hits + int(hit.sum()), total + int(hit.numel()), loss + float(lo) * int(hit.numel())
    model.train()
    return {"accuracy": round(100.0 * hits / max(total, 1), 3), "loss": round(loss / max(total, 1), 4),
            "masked_tokens": total, "sentences": len(data)}


def _heldout_batches(tokenizer: Any, heldout: Sequence[Any], config: MLMConfig) -> tuple[_Encoded, list[Any]]:
    """The held-out sentences tokenised and masked once (the same masks on every machine and at every step)."""
    dev = _Encoded(tokenizer, heldout[:config.heldout], config.max_length)
    drng = np.random.default_rng(_HELDOUT_SEED)
    mask_id, pad_id = int(tokenizer.mask_token_id), int(tokenizer.pad_token_id)
    return dev, [dev.masked(rows, drng, _HELDOUT_RATE, config.other_rate, mask_id, pad_id)
                 for rows in dev.batches(config.batch_tokens, np.random.default_rng(_HELDOUT_SEED))]


def heldout_accuracy(model: Any, tokenizer: Any, heldout: Sequence[tuple[Sequence[str], Sequence[str]]],
                     config: MLMConfig) -> dict[str, Any]:
    """The held-out masked-token accuracy of ``model`` as training measures it (the first ``config.heldout``
    sentences, masked with the fixed seed): how a model brought from another machine is checked here."""
    import torch

    dev, batches = _heldout_batches(tokenizer, heldout, config)
    with torch.random.fork_rng(devices=[]):
        return _heldout_accuracy(model, dev, batches, config.bf16)


def _check_state(st: dict[str, Any], config: MLMConfig, path: Path) -> None:
    from veil.results import check_same_config

    if not isinstance(st.get("config"), dict):
        raise DataFormatError(f"the masked LM's resume state {path} holds no configuration; pass --force to start "
                              "afresh")
    check_same_config(st["config"], config.to_dict(), path, ignore=_BUDGET)


def train_mlm(config: MLMConfig, train: Sequence[tuple[Sequence[str], Sequence[str]]],
              heldout: Sequence[tuple[Sequence[str], Sequence[str]]], *, data: dict[str, Any] | None = None,
              out: str | os.PathLike | None = None, resume: bool = True, force: bool = False,
              device: str = "cpu", log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train (or resume) the masked LM on public tagged ``train`` sentences; returns its manifest.

    ``heldout``: tagged sentences for the held-out accuracy (the treebank's dev split); ``data``: what the
    manifest says about the text (corpora, treebank, fingerprint). ``out``: the model folder (default
    ``VEIL_HOME/models/<config.name>``). An existing model is replaced only with ``force``; a state file of an
    interrupted run of this configuration is resumed (``resume``). torch's global generator is forked for the run.
    ``device``: where the model trains ("cpu", or "cuda" where a GPU is lent: the manifest records which); the
    saved model is on the CPU either way.
    """
    import torch

    from veil._threads import torch_threads
    from veil.models.files import load_tensors
    from veil.models.mlm import check_replaceable, mlm_dir

    folder = Path(out) if out is not None else mlm_dir(config.name)
    spath = state_path(folder)
    if not train or not heldout:
        raise DataFormatError(f"no {'training' if not train else 'held-out'} sentences: the masked LM needs both; "
                              "build the treebank with `veil parse treebank` (or --quick for the small one)")
    check_replaceable(folder)
    if folder.exists() and not force and not (resume and spath.is_file()):
        raise InvalidParameterError(f"the masked LM {folder} already exists; pass --force to train it again")
    state = None
    if spath.is_file():
        if resume and not force:
            state = load_tensors(spath, what="the masked LM's resume state",
                                 fix=f"pass --force to start afresh (it replaces {spath})",
                                 keys=("config", "model", "opt", "step", "epoch", "batch", "spent", "curve"))
            _check_state(state, config, spath)
    with torch_threads(config.threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        return _train(config, list(train), list(heldout), data or {}, folder, spath, state, log, device)


def _train(config: MLMConfig, train: list[Any], heldout: list[Any], data: dict[str, Any], folder: Path,
           spath: Path, st: dict[str, Any] | None, log: Callable[[str], None], device: str = "cpu") -> dict[str, Any]:
    import datetime

    import torch

    from veil import __version__
    from veil._io import atomic_write
    from veil.models.mlm import base_mlm, save_mlm
    from veil.progress import format_seconds

    model, tokenizer, base_id = base_mlm(config.encoder)
    model.to(device)
    if config.max_train is not None and config.max_train < len(train):
        keep = np.sort(np.random.default_rng(config.seed).permutation(len(train))[:config.max_train])
        train = [train[i] for i in keep]
    t0 = time.monotonic()
    enc = _Encoded(tokenizer, train, config.max_length)
    dev, dev_batches = _heldout_batches(tokenizer, heldout, config)
    mask_id, pad_id = int(tokenizer.mask_token_id), int(tokenizer.pad_token_id)
    log(f"masked LM {config.name}: {len(enc)} training sentences ({enc.tokens} subword tokens), held-out "
        f"{len(dev)} sentences; tokenised in {time.monotonic() - t0:.0f} s")
    head = [p for n, p in model.named_parameters() if n.startswith("cls.") and "decoder.weight" not in n]
    body = [p for n, p in model.named_parameters() if not any(p is q for q in head)]
    opt = torch.optim.AdamW([{"params": body, "lr": config.lr, "base": config.lr},
                             {"params": head, "lr": config.head_lr, "base": config.head_lr}], weight_decay=0.01,
                            fused=True)
    # the budget is steps (every epoch's batches); the minute cap only bounds one session and marks a run cut short
    planned = sum(len(enc.batches(config.batch_tokens, np.random.default_rng([config.seed, e])))
                  for e in range(config.epochs))
    step, epoch, batch_at, spent, seen = 0, 0, 0, 0.0, 0
    resumed_running: list[float] = []
    curve: list[dict[str, Any]] = []
    best: list[Any] = []  # [held-out accuracy, step, weights] of the best evaluation so far
    if st is not None:
        try:
            model.load_state_dict(st["model"])
            opt.load_state_dict(st["opt"])
        except (RuntimeError, KeyError, ValueError, TypeError) as exc:
            raise DataFormatError(f"the masked LM's resume state {spath} does not fit this model "
                                  f"({type(exc).__name__}); pass --force to start afresh") from None
        step, epoch, batch_at, spent = int(st["step"]), int(st["epoch"]), int(st["batch"]), float(st["spent"])
        if isinstance(st.get("torch_rng"), torch.Tensor):
            torch.set_rng_state(st["torch_rng"])  # dropout goes on as it would have
        if isinstance(st.get("best"), list) and len(st["best"]) == 3:
            best[:] = st["best"]
        curve = list(st["curve"])
        seen = int(curve[-1].get("tokens", 0)) if curve else 0
        if "seen" in st:  # a run paused between evaluations (its minute cap) counts to where it paused
            seen = int(st["seen"])
        resumed_running = [float(x) for x in st.get("running") or []]  # the losses since the last evaluation
        log(f"resumed at step {step} of {planned} (epoch {epoch + 1}, {spent:.1f} min spent before)")
    if not curve:
        curve.append({"step": 0, "minutes": 0.0, "tokens": 0, **_heldout_accuracy(model, dev, dev_batches,
                                                                                    config.bf16)})
        log(f"step 0: held-out masked-token accuracy {curve[-1]['accuracy']:.2f}% (MiniLM with a fresh MLM head)")
    start = time.monotonic()

    def minutes() -> float:  # the whole run's, over every session
        return spent + (time.monotonic() - start) / 60

    def session() -> float:  # this session's: what the minute cap bounds
        return (time.monotonic() - start) / 60

    def save_state() -> None:
        with atomic_write(spath, "wb") as fh:
            torch.save({"config": config.to_dict(), "model": model.state_dict(), "opt": opt.state_dict(),
                        "step": step, "epoch": epoch, "batch": batch_at, "spent": minutes(), "curve": curve,
                        "torch_rng": torch.get_rng_state(), "best": best, "running": list(running),
                        "seen": seen}, fh)

    def checkpoint(loss: float | None) -> None:
        row = {"step": step, "epoch": epoch, "minutes": round(minutes(), 2), "tokens": seen,
               "train_loss": None if loss is None else round(loss, 4),
               **_heldout_accuracy(model, dev, dev_batches, config.bf16)}
        curve.append(row)
        if not best or row["accuracy"] > best[0]:  # the held-out best is what is saved at the end
            best[:] = [row["accuracy"], step, {k: v.detach().to("cpu", copy=True)
                                               for k, v in model.state_dict().items()}]
        save_state()
        rate = seen / max(minutes() * 60, 1e-9)
        log(f"step {step} epoch {min(epoch + 1, config.epochs)}/{config.epochs} {format_seconds(minutes() * 60)} "
            f"{rate:,.0f} tokens/s train loss {'-' if loss is None else f'{loss:.3f}'} held-out accuracy "
            f"{row['accuracy']:.2f}%")

    model.train()
    stopped = "epochs"
    running: list[float] = resumed_running
    n_batches = 1
    while epoch < config.epochs:
        rng = np.random.default_rng([config.seed, epoch])
        batches = enc.batches(config.batch_tokens, rng)
        n_batches = len(batches)
        while batch_at < len(batches):
            mrng = np.random.default_rng([config.seed, epoch, batch_at])  # per batch: a resumed run draws the same
            ids, att, labels = enc.masked(batches[batch_at], mrng, config.open_rate, config.other_rate, mask_id,
                                          pad_id)
            for group in opt.param_groups:
                group["lr"] = group["base"] * min(1.0, (step + 1) / config.warmup)
            loss, _ = _masked_loss(model, ids, att, labels, config.bf16)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            running.append(loss.item())
            step, batch_at, seen = step + 1, batch_at + 1, seen + int(att.sum())
            if step % config.eval_every == 0:
                checkpoint(float(np.mean(running)))
                running = []
            if session() > config.max_minutes and step < planned:
                stopped = "budget"
                break
        if stopped == "budget":
            break
        epoch, batch_at = epoch + 1, 0
    shown = curve  # the manifest's curve
    if stopped == "budget":
        # cut short by the minute cap (a busy machine): the run pauses where it is, with no evaluation off the
        # schedule, so that resuming it (the next `veil models train mlm`, or the first use) ends exactly where an
        # uninterrupted run ends; the model saved meanwhile is the best so far, marked cut short
        save_state()
        log(f"masked LM {config.name}: cut short by its {config.max_minutes:g}-minute cap at step {step} of "
            f"{planned}: the model saved is marked cut short, and the next run of this configuration resumes it")
        if not best:  # no evaluation of trained weights yet: this step's weights, scored here
            row = {"step": step, "epoch": epoch, "minutes": round(minutes(), 2), "tokens": seen, "train_loss": None,
                   **_heldout_accuracy(model, dev, dev_batches, config.bf16)}
            shown = curve + [row]
            best = [row["accuracy"], step, None]
    elif curve[-1]["step"] != step:
        checkpoint(float(np.mean(running)) if running else None)
    if best and best[1] != step and best[2] is not None:
        model.load_state_dict(best[2])  # the held-out best
    final = next(r for r in shown if r["step"] == (best[1] if best else step))
    manifest = {"name": config.name, "kind": "masked-lm", "base": base_id, "veil": __version__,
                "torch": torch.__version__, "precision": _precision(config.bf16, device),
                "device": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
                "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "data": data, "train_sentences": len(enc), "train_tokens": enc.tokens, "tokens_seen": seen,
                "steps": step, "epochs_done": round(epoch + batch_at / max(n_batches, 1), 2),
                "minutes": round(minutes(), 2), "stopped": stopped, "planned_steps": planned,
                "selected_step": final["step"],
                "heldout": {"split": "dev", "sentences": len(dev), "masked_tokens": final["masked_tokens"],
                            "open_rate": _HELDOUT_RATE, "other_rate": config.other_rate,
                            "accuracy": final["accuracy"], "loss": final["loss"],
                            "start_accuracy": curve[0]["accuracy"]},
                "curve": shown, "config": config.to_dict()}
    save_mlm(model.to("cpu"), tokenizer, folder, manifest)
    if stopped != "budget":  # a run cut short keeps its state, to be resumed
        spath.unlink(missing_ok=True)
    log(f"masked LM {config.name}: held-out accuracy {final['accuracy']:.2f}% (from {curve[0]['accuracy']:.2f}%) "
        f"after {step} steps, {seen:,} tokens, {format_seconds(minutes() * 60)}; wrote {folder}")
    from veil.models.mlm import read_manifest

    return read_manifest(folder, config.name)
