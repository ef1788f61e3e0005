"""Training veil's embedding inverter (:mod:`veil.models.inverter`): a MiniLM-initialised causal decoder that
writes a sentence back from its MiniLM vector, trained with teacher forcing on public sentences.

Data (:func:`inverter_training_data`): the train splits of the corpora in ``config.sources`` (each with an
optional cap, a seeded random subset), read by :func:`veil.corpora.public_sentences.public_sentences`: sentences
of at least ``min_words`` words and at most ``max_tokens`` WordPiece tokens, distinct, and none that occurs in a
corpus of ``config.exclude`` (rt-polarity, the evaluation corpus, and hutto-movies, snippets of the same
reviews). Each is encoded by the frozen encoder (``TextEncoder(config.encoder)``, through the embedding cache).
Held out: ``heldout`` sentences drawn with a fixed seed from the same corpora's dev splits (their documents are
never in a train split), none equal to a training sentence. Test splits are never read.

What one step does: ``batch_size`` sentences of similar length (a shuffled order of length-sorted batches each
epoch), each as ``[CLS] tokens [SEP]`` after the ``prefix_tokens`` prefix embeddings of its vector; the loss is
the cross-entropy of every token after ``[CLS]`` given the ones before (teacher forcing). AdamW (weight decay
0.01, the fused kernel; the fresh prefix map, output shift and MLM transform at ``head_lr``, the pretrained weights at ``lr``),
linear warm-up over ``warmup`` steps, then a linear decay to a tenth of the rate at the planned last step
(``epochs`` passes); gradient norm clipped at 1; matrix products in bfloat16 (``bf16``) with fp32 weights.

Held-out evaluation, every ``eval_every`` steps and at the end: the greedy decode of each held-out vector,
scored by token F1 against the original (:func:`veil.models.inverter.token_f1`, in percent), exact match (the
same word tokens), and the teacher-forced loss. The curve (scores against steps and minutes) goes to the
manifest; the weights of the best token F1 are the ones saved (``selected_step``).

Resuming: every evaluation writes ``<folder>.state.pt`` beside the model folder (weights, optimizer, step, the
position in the epoch, torch's generator, minutes spent, the curve, the best weights so far), atomically; a run
of the same configuration (up to its budget: ``max_minutes``, ``threads``) resumes from it and ends where the
uninterrupted run would have (each epoch's batch order is drawn from the seed and the epoch). The finished
model is written by :func:`veil.models.inverter.save_inverter`, then the state file is removed.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from veil._bf16 import autocast, precision as _precision
from veil.errors import DataFormatError, InvalidParameterError
from veil.models.inverter import InversionPairs

__all__ = ["InverterConfig", "FULL_INVERTER", "QUICK_INVERTER", "FULL_SOURCES", "inverter_training_texts",
           "inverter_training_data", "train_inverter", "ensure_inverter", "state_path"]

_HELDOUT_SEED = 12345
_DECODE_BATCH = 100

#: the corpora the full inverter learns from (train splits; None: every sentence that passes the filters)
FULL_SOURCES: tuple[tuple[str, int | None], ...] = (
    ("news-articles", None), ("brown", None), ("health-tweets", None), ("spam-assassin", 60000),
    ("hoc-speeches", None), ("convention-speeches", None), ("debates-2016", None), ("hutto-nyt", None),
    ("hutto-amazon", None), ("hutto-tweets", None), ("sms-spam", None), ("trec-questions", None),
    ("drug-reviews", None))
#: never learned from: rt-polarity (the evaluation corpus) and hutto-movies (snippets of the same reviews)
EXCLUDE = ("rt-polarity", "hutto-movies")


@dataclass(frozen=True)
class InverterConfig:
    """One training run of the inverter (``name`` says where it is saved,
    :func:`veil.models.inverter.inverter_dir`)."""

    name: str = "inverter"
    encoder: str = "minilm"
    sources: tuple[tuple[str, int | None], ...] = FULL_SOURCES
    exclude: tuple[str, ...] = EXCLUDE
    min_words: int = 3
    max_tokens: int = 48
    prefix_tokens: int = 4
    epochs: int = 3
    max_minutes: float = 600.0
    batch_size: int = 64
    lr: float = 5e-4
    head_lr: float = 2e-3
    warmup: int = 500
    max_train: int | None = None
    heldout: int = 500
    eval_every: int = 1000
    bf16: bool = True
    threads: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        from veil.validation import check_int

        for key in ("min_words", "max_tokens", "prefix_tokens", "epochs", "batch_size", "warmup", "heldout",
                    "eval_every", "threads"):
            check_int(key, getattr(self, key), minimum=1)
        check_int("seed", self.seed, minimum=0)
        if self.max_tokens > 256:
            raise InvalidParameterError(f"max_tokens must be <= 256, got {self.max_tokens}")
        for key in ("max_minutes", "lr", "head_lr"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise InvalidParameterError(f"{key} must be a finite number > 0, got {v!r}")
        if self.max_train is not None:
            check_int("max_train", self.max_train, minimum=1)
        if not isinstance(self.bf16, bool):
            raise InvalidParameterError(f"bf16 must be True or False, got {self.bf16!r}")
        if not self.sources:
            raise InvalidParameterError("sources is empty: name at least one corpus to learn from")
        names = [s[0] if isinstance(s, (tuple, list)) and len(s) == 2 else None for s in self.sources]
        if None in names:
            raise InvalidParameterError(f"sources must be (corpus, cap) pairs, got {self.sources!r}")
        for _, cap in self.sources:
            if cap is not None:
                check_int("a source's cap", cap, minimum=1)
        clash = sorted(set(names) & set(self.exclude))
        if clash:
            raise InvalidParameterError(f"{', '.join(clash)} is both a source and excluded; the inverter never "
                                        "learns from an excluded corpus")
        if len(set(names)) != len(names):
            raise InvalidParameterError(f"a corpus is named twice in sources: {names}")

    def check_corpora(self) -> None:
        """Raise :class:`~veil.errors.UnknownNameError` for a source or excluded corpus veil does not have."""
        import veil.corpora as vc
        from veil.errors import UnknownNameError

        for name in [s for s, _ in self.sources] + list(self.exclude):
            if name not in vc.names():
                raise UnknownNameError("corpus", name, vc.names())

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["sources"] = [[s, c] for s, c in self.sources]
        d["exclude"] = list(self.exclude)
        return d


#: the full model: about 250k public sentences of 13 corpora, four passes, about 10.3k steps of 96 sentences
#: (meant for a GPU, ``device="cuda"``; on a CPU it is resumable, ``max_minutes`` per session, and
#: benchmarks/inverter_training.py extrapolates its cost there from a bounded run)
FULL_INVERTER = InverterConfig(epochs=4, batch_size=96)
#: what training the quick model takes on 2 idle cores of the target machine, in minutes: its 626 planned steps at
#: 1.061 s per step (benchmarks/inverter_training.py, 2026-12-05: 11.1 minutes) and its held-out evaluations; the
#: estimate its messages print before it trains
QUICK_INVERTER_MINUTES = 12
#: the quick model (tests, the quick bench): 10000 news-articles sentences, two passes
QUICK_INVERTER = InverterConfig(name="inverter-quick", sources=(("news-articles", 10000),), max_tokens=32, epochs=2,
                                max_minutes=20.0, batch_size=32, lr=1e-3, head_lr=3e-3, warmup=25, heldout=500,
                                eval_every=125)

#: config keys a resumed run may change (the budget of each session)
_BUDGET = ("max_minutes", "threads")


def state_path(folder: str | os.PathLike) -> Path:
    folder = Path(folder)
    return folder.with_name(folder.name + ".state.pt")


# --------------------------------------------------------------------------- data
def inverter_training_texts(config: InverterConfig, *, log: Callable[[str], None] = print
                            ) -> tuple[Any, dict[str, Any]]:
    """``(selection, data)`` for ``config``: the public sentences (a
    :class:`~veil.corpora.public_sentences.PublicSelection`: training sentences, held-out ones, the corpus of
    each) and what the manifest says about them, without encoding anything. Every corpus must be pulled."""
    from transformers import AutoTokenizer

    from veil.corpora.public_sentences import select_public
    from veil.encoders.cache import texts_sha256
    from veil.encoders.registry import resolve_model

    config.check_corpora()
    tokenizer = AutoTokenizer.from_pretrained(resolve_model(config.encoder).folder, local_files_only=True)

    def fits(texts: Sequence[str]) -> list[bool]:
        ids = tokenizer(list(texts), add_special_tokens=False, truncation=True,
                        max_length=config.max_tokens + 1)["input_ids"]
        return [len(x) <= config.max_tokens for x in ids]

    sel = select_public(config.sources, exclude=config.exclude, min_words=config.min_words, keep=fits,
                        seed=config.seed, max_train=config.max_train, heldout=config.heldout,
                        heldout_seed=_HELDOUT_SEED)
    texts, owners, dev_texts = sel.train, sel.train_corpora, sel.heldout
    counts = {}
    for name, _ in config.sources:
        rows = [i for i, o in enumerate(owners) if o == name]
        lengths = [len(x) for x in tokenizer([texts[i] for i in rows], add_special_tokens=False)["input_ids"]] \
            if rows else []
        counts[name] = {"sentences": len(rows), "tokens": int(sum(lengths)),
                        "words": int(sum(len(texts[i].split()) for i in rows))}
    data = {"split": "train", "heldout_split": "dev", "corpora": counts, "sentences": len(texts),
            "tokens": sum(c["tokens"] for c in counts.values()), "words": sum(c["words"] for c in counts.values()),
            "texts_sha256": texts_sha256(texts), "exclude": list(config.exclude),
            "filters": {"min_words": config.min_words, "max_tokens": config.max_tokens, "distinct": True},
            "heldout": {"sentences": len(dev_texts),
                        "corpora": {n: sel.heldout_corpora.count(n) for n, _ in config.sources},
                        "texts_sha256": texts_sha256(dev_texts)},
            "note": "public sentences: train splits of the corpora named (tokens: WordPiece, no special tokens); "
                    "held out from their dev splits; test splits and the excluded corpora are never learned from"}
    log(f"inverter {config.name}: {len(texts):,} training sentences from {len(config.sources)} corpora, "
        f"{len(dev_texts)} held-out")
    return sel, data


def inverter_training_data(config: InverterConfig, *, log: Callable[[str], None] = print, progress: bool = True,
                           cache: Any = True) -> tuple[InversionPairs, InversionPairs, dict[str, Any]]:
    """``(train, heldout, data)`` for ``config``: the public sentences of :func:`inverter_training_texts` and
    their vectors (encoded through the embedding cache ``cache``: True for the default one, an EmbeddingCache,
    or False), and what the manifest says about them. Every corpus must be pulled."""
    from veil.encoders import TextEncoder
    from veil.encoders.cache import encode_cached
    from veil.encoders.plan import announce_encoding, is_cached
    from veil.models.inverter import encoder_identity

    sel, data = inverter_training_texts(config, log=log)
    encoder = TextEncoder(config.encoder)
    identity = encoder_identity(encoder)
    texts, owners, dev_texts = sel.train, sel.train_corpora, sel.heldout
    log(f"inverter {config.name}: encoding the sentences with {encoder.model_name} (cached after the first run)")
    rows_of = {name: [i for i, o in enumerate(owners) if o == name] for name, _ in config.sources}
    held, missing = [], []  # the sentences of the sources whose vectors are (not) in the cache
    for name, rows in rows_of.items():
        part = [texts[i] for i in rows]
        (held if part and is_cached(encoder, part, name, "inverter-train", cache=cache) else missing).extend(part)
    if missing:  # the first use of these sources (or of this backend): say what it costs before it starts
        announce_encoding(encoder, held + missing, what=f"public sentences of the inverter {config.name}",
                          cached=len(held), log=log)
    vectors = np.zeros((len(texts), encoder.dim), dtype=np.float32)
    for name, rows in rows_of.items():
        if rows:
            vectors[rows] = encode_cached(encoder, [texts[i] for i in rows], name, "inverter-train",
                                          cache=cache, progress=progress)
    dev_vectors = encode_cached(encoder, dev_texts, "public-sentences", "inverter-heldout", cache=cache,
                                progress=progress)
    return (InversionPairs(texts, vectors, identity, owners),
            InversionPairs(dev_texts, dev_vectors, identity, sel.heldout_corpora), data)


# --------------------------------------------------------------------------- training
class _Tokens:
    """Sentences tokenised once as ``[CLS] ... [SEP]`` id arrays."""

    def __init__(self, tokenizer: Any, texts: Sequence[str], max_tokens: int) -> None:
        self.ids: list[np.ndarray] = []
        for s in range(0, len(texts), 4000):
            enc = tokenizer(list(texts[s:s + 4000]), truncation=True, max_length=max_tokens + 2)["input_ids"]
            self.ids += [np.asarray(x, dtype=np.int64) for x in enc]
        self.lengths = np.asarray([len(x) for x in self.ids], dtype=np.int64)
        self.tokens = int(self.lengths.sum() - 2 * len(self.ids))

    def batches(self, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
        """Length-sorted batches of ``batch_size`` sentences (ties broken at random), in a shuffled order."""
        order = np.lexsort((rng.random(len(self.ids)), self.lengths))
        out = [order[s:s + batch_size] for s in range(0, len(order), batch_size)]
        rng.shuffle(out)
        return out

    def padded(self, rows: np.ndarray, pad_id: int) -> tuple[Any, Any]:
        import torch

        width = int(self.lengths[rows].max())
        ids = np.full((len(rows), width), pad_id, dtype=np.int64)
        att = np.zeros((len(rows), width), dtype=np.int64)
        for b, i in enumerate(rows):
            ids[b, :len(self.ids[i])] = self.ids[i]
            att[b, :len(self.ids[i])] = 1
        return torch.as_tensor(ids), torch.as_tensor(att)


def _evaluate(net: Any, tokenizer: Any, heldout: InversionPairs, tokens: _Tokens, config: InverterConfig,
              device: str) -> tuple[dict[str, Any], list[str]]:
    """Held-out token F1 and exact match of greedy decodes, the teacher-forced loss; and the decodes."""
    import torch

    from veil.models.inverter import greedy_ids, mean_token_f1, word_tokens

    net.eval()
    hyps: list[str] = []
    loss_sum, n_tok = 0.0, 0
    pad = int(tokenizer.pad_token_id)
    with torch.inference_mode():
        for s in range(0, len(heldout), _DECODE_BATCH):
            v = torch.as_tensor(heldout.vectors[s:s + _DECODE_BATCH], device=device)
            rows = np.arange(s, min(s + _DECODE_BATCH, len(heldout)))
            ids, att = tokens.padded(rows, pad)
            with autocast(v.device, config.bf16):
                loss, n = net.loss(v, ids.to(device), att.to(device))
            loss_sum, n_tok = loss_sum + float(loss) * n, n_tok + n
            out = greedy_ids(net, v, start_id=int(tokenizer.cls_token_id), end_id=int(tokenizer.sep_token_id),
                             max_tokens=config.max_tokens, bf16=config.bf16)
            hyps += [tokenizer.decode(r, skip_special_tokens=True, clean_up_tokenization_spaces=True).strip()
                     for r in out]
    net.train()
    exact = float(np.mean([word_tokens(r) == word_tokens(h) for r, h in zip(heldout.texts, hyps)]))
    return {"token_f1": round(mean_token_f1(heldout.texts, hyps), 3), "exact_match": round(100 * exact, 3),
            "loss": round(loss_sum / max(n_tok, 1), 4), "sentences": len(heldout)}, hyps


def _check_state(st: dict[str, Any], config: InverterConfig, path: Path) -> None:
    from veil.results import check_same_config

    if not isinstance(st.get("config"), dict):
        raise DataFormatError(f"the inverter's resume state {path} holds no configuration; pass --force to start "
                              "afresh")
    check_same_config(st["config"], config.to_dict(), path, ignore=_BUDGET)


def train_inverter(config: InverterConfig, train: InversionPairs, heldout: InversionPairs, *,
                   data: dict[str, Any] | None = None, out: str | os.PathLike | None = None, resume: bool = True,
                   force: bool = False, device: str = "cpu", log: Callable[[str], None] = print,
                   progress: bool = True) -> dict[str, Any]:
    """Train (or resume) the inverter on the public ``train`` pairs; returns its manifest.

    ``heldout``: the pairs of the learning curve; ``data``: what the manifest says about the text
    (:func:`inverter_training_data` makes all three). ``out``: the model folder (default
    ``VEIL_HOME/models/<config.name>``). An existing model is replaced only with ``force``; a state file of an
    interrupted run of this configuration is resumed (``resume``). torch's global generator is forked for the
    run. ``device``: where it trains ("cpu", or "cuda" where a GPU is lent: the manifest records which); the
    saved model is on the CPU either way. ``log`` gets a line at every evaluation; ``progress`` draws the steps
    (:func:`veil.progress.progress_bar`: a bar in a terminal, a line every 30 s or 10% elsewhere).
    """
    import torch

    from veil._threads import torch_threads
    from veil.models.files import load_tensors
    from veil.models.inverter import inverter_dir
    from veil.models.mlm import check_replaceable

    if not isinstance(config, InverterConfig):
        raise InvalidParameterError(f"config must be an InverterConfig, not {type(config).__name__}")
    for what, pairs in (("training", train), ("held-out", heldout)):
        if not isinstance(pairs, InversionPairs) or not len(pairs):
            raise DataFormatError(f"no {what} pairs: the inverter needs public sentences and their vectors "
                                  "(veil.training.inverter.inverter_training_data makes them)")
    if train.encoder != heldout.encoder:
        raise InvalidParameterError("the training and held-out vectors come from different encoders")
    if not isinstance(device, str) or (device.startswith("cuda") and not torch.cuda.is_available()) or \
            device.split(":")[0] not in ("cpu", "cuda"):
        raise InvalidParameterError(f"device {device!r} is not available here; use 'cpu' (or 'cuda' on a machine "
                                    "with a GPU)")
    folder = Path(out) if out is not None else inverter_dir(config.name)
    spath = state_path(folder)
    check_replaceable(folder)
    if folder.exists() and not force and not (resume and spath.is_file()):
        raise InvalidParameterError(f"the inverter {folder} already exists; pass --force to train it again")
    state = None
    if spath.is_file() and resume and not force:
        state = load_tensors(spath, what="the inverter's resume state",
                             fix=f"pass --force to start afresh (it replaces {spath})",
                             keys=("config", "net", "opt", "step", "epoch", "batch", "spent", "curve"))
        _check_state(state, config, spath)
    with torch_threads(config.threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        return _train(config, train, heldout, data or {}, folder, spath, state, log, device, progress)


def _train(config: InverterConfig, train: InversionPairs, heldout: InversionPairs, data: dict[str, Any],
           folder: Path, spath: Path, st: dict[str, Any] | None, log: Callable[[str], None],
           device: str, progress: bool) -> dict[str, Any]:
    import datetime

    import torch

    from veil import __version__
    from veil._io import atomic_write
    from veil.models.inverter import build_inverter, read_manifest, save_inverter
    from veil.progress import format_seconds, progress_bar

    net, tokenizer, base_id = build_inverter(config.encoder, vector_dim=train.vectors.shape[1],
                                             prefix_tokens=config.prefix_tokens)
    net.to(device)
    t0 = time.monotonic()
    enc = _Tokens(tokenizer, train.texts, config.max_tokens)
    dev = _Tokens(tokenizer, heldout.texts, config.max_tokens)
    pad = int(tokenizer.pad_token_id)
    n_batches = math.ceil(len(train) / config.batch_size)
    planned = n_batches * config.epochs
    log(f"inverter {config.name}: {len(train):,} training sentences ({enc.tokens:,} tokens), {len(heldout)} "
        f"held-out; {planned:,} steps planned; tokenised in {time.monotonic() - t0:.0f} s")
    fresh = [p for n, p in net.named_parameters() if n.startswith(("prefix.", "shift.")) or
             (n.startswith("decoder.cls.") and "decoder.weight" not in n)]
    body = [p for p in net.parameters() if not any(p is q for q in fresh)]
    opt = torch.optim.AdamW([{"params": body, "lr": config.lr, "base": config.lr},
                             {"params": fresh, "lr": config.head_lr, "base": config.head_lr}], weight_decay=0.01,
                            fused=True)  # one kernel: ten times faster than the default on these CPUs
    step, epoch, batch_at, spent, seen, seen_tok = 0, 0, 0, 0.0, 0, 0
    resumed_running: list[float] = []
    curve: list[dict[str, Any]] = []
    best: list[Any] = []  # [held-out token F1, step, weights, examples] of the best evaluation so far
    if st is not None:
        try:
            net.load_state_dict(st["net"])
            opt.load_state_dict(st["opt"])
        except (RuntimeError, KeyError, ValueError, TypeError) as exc:
            raise DataFormatError(f"the inverter's resume state {spath} does not fit this model "
                                  f"({type(exc).__name__}); pass --force to start afresh") from None
        step, epoch, batch_at, spent = int(st["step"]), int(st["epoch"]), int(st["batch"]), float(st["spent"])
        if isinstance(st.get("torch_rng"), torch.Tensor):
            torch.set_rng_state(st["torch_rng"])  # dropout goes on as it would have
        if isinstance(st.get("best"), list) and len(st["best"]) == 4:
            best[:] = st["best"]
            if best[2] is None and best[1] == step:  # stored once: the best weights are the current ones
                best[2] = {k: v.detach().to("cpu", copy=True) for k, v in net.state_dict().items()}
        curve = list(st["curve"])
        resumed_running = [float(x) for x in st.get("running") or []]  # the losses since the last evaluation
        seen, seen_tok = (int(curve[-1].get("sentences_seen", 0)), int(curve[-1].get("tokens_seen", 0))) \
            if curve else (0, 0)
        if "seen" in st:  # a run paused between evaluations (its minute cap) counts to where it paused
            seen, seen_tok = int(st["seen"]), int(st["seen_tokens"])
        log(f"resumed at step {step} of {planned} (epoch {epoch + 1}, {spent:.1f} min spent before)")
    start = time.monotonic()

    def minutes() -> float:  # the whole run's, over every session
        return spent + (time.monotonic() - start) / 60

    def session() -> float:  # this session's: what the minute cap bounds
        return (time.monotonic() - start) / 60

    def examples(hyps: list[str]) -> list[dict[str, str]]:
        return [{"original": r, "reconstruction": h} for r, h in zip(heldout.texts[:5], hyps[:5])]

    if not curve:
        scores, hyps = _evaluate(net, tokenizer, heldout, dev, config, device)
        curve.append({"step": 0, "epochs_done": 0.0, "minutes": round(minutes(), 2), "sentences_seen": 0, "tokens_seen": 0,
                      "train_loss": None, **scores})
        best[:] = [scores["token_f1"], 0, None, examples(hyps)]
        log(f"step 0: held-out token F1 {scores['token_f1']:.2f} (the untrained decoder)")

    def save_state() -> None:
        with atomic_write(spath, "wb") as fh:
            torch.save({"config": config.to_dict(), "net": net.state_dict(), "opt": opt.state_dict(),
                        "step": step, "epoch": epoch, "batch": batch_at, "spent": minutes(), "curve": curve,
                        "torch_rng": torch.get_rng_state(), "running": list(running),
                        "seen": seen, "seen_tokens": seen_tok,
                        # the best weights are the current ones most of the time: stored once, as "net"
                        "best": best if best[1] != step else [best[0], best[1], None, best[3]]}, fh)

    def checkpoint(loss: float | None) -> None:
        scores, hyps = _evaluate(net, tokenizer, heldout, dev, config, device)
        row = {"step": step, "epochs_done": round(epoch + batch_at / max(n_batches, 1), 3), "minutes": round(minutes(), 2), "sentences_seen": seen,
               "tokens_seen": seen_tok, "train_loss": None if loss is None else round(loss, 4), **scores}
        curve.append(row)
        if best[2] is None or row["token_f1"] > best[0]:  # the held-out best (of trained weights) is saved
            best[:] = [row["token_f1"], step, {k: v.detach().to("cpu", copy=True)
                                               for k, v in net.state_dict().items()}, examples(hyps)]
        save_state()
        rate = seen / max(minutes() * 60, 1e-9)
        log(f"step {step}/{planned} epoch {min(epoch + 1, config.epochs)}/{config.epochs} "
            f"{format_seconds(minutes() * 60)} {rate:,.1f} sentences/s train loss "
            f"{'-' if loss is None else f'{loss:.3f}'} held-out token F1 {row['token_f1']:.2f} "
            f"exact {row['exact_match']:.1f}%")

    net.train()
    stopped = "epochs"
    running: list[float] = resumed_running
    with progress_bar(max(planned - step, 0), f"inverter {config.name}: training", progress) as advance:
        while epoch < config.epochs:
            batches = enc.batches(config.batch_size, np.random.default_rng([config.seed, epoch]))
            while batch_at < len(batches):
                rows = batches[batch_at]
                ids, att = enc.padded(rows, pad)
                v = torch.as_tensor(train.vectors[rows]).to(device)
                scale = min(1.0, (step + 1) / config.warmup) * (1.0 - 0.9 * min(1.0, step / planned))
                for group in opt.param_groups:
                    group["lr"] = group["base"] * scale
                with autocast(v.device, config.bf16):
                    loss, _ = net.loss(v, ids.to(device), att.to(device))
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                opt.step()
                running.append(loss.item())
                step, batch_at = step + 1, batch_at + 1
                seen, seen_tok = seen + len(rows), seen_tok + int(att.sum()) - 2 * len(rows)
                advance(1)
                if step % config.eval_every == 0:
                    checkpoint(float(np.mean(running)))
                    running = []
                if session() > config.max_minutes and step < planned:
                    stopped = "budget"
                    break
            if stopped == "budget":
                break
            epoch, batch_at = epoch + 1, 0
    if stopped == "budget":
        # cut short by the minute cap (a busy machine): the run pauses where it is, with no evaluation off the
        # schedule, so that resuming it (the next `veil models train inverter`, or the bench) ends exactly where an
        # uninterrupted run ends; the model saved meanwhile is the best so far, marked cut short
        save_state()
        log(f"inverter {config.name}: cut short by its {config.max_minutes:g}-minute cap at step {step} of "
            f"{planned}: the model saved is marked cut short, and the next run of this configuration resumes it")
    elif curve[-1]["step"] != step:
        checkpoint(float(np.mean(running)) if running else None)
    shown = curve  # the manifest's curve
    if stopped == "budget" and best[2] is None and best[1] != step:
        # cut short before any evaluation of trained weights: the weights saved are this step's, scored here
        # for the manifest only (the resume state's curve stays on the schedule)
        scores, hyps = _evaluate(net, tokenizer, heldout, dev, config, device)
        shown = curve + [{"step": step, "epochs_done": round(epoch + batch_at / max(n_batches, 1), 3),
                          "minutes": round(minutes(), 2), "sentences_seen": seen, "tokens_seen": seen_tok,
                          "train_loss": None, **scores}]
        best[:] = [scores["token_f1"], step, None, examples(hyps)]
    if best[2] is not None and best[1] != step:
        net.load_state_dict(best[2])  # the held-out best
    final = next(r for r in shown if r["step"] == best[1])
    from veil.models.inverter import IDENTITY_KEYS

    manifest = {"name": config.name, "kind": "inverter", "base": base_id, "encoder": train.encoder,
                "encoder_checked": list(IDENTITY_KEYS),
                "architecture": {"decoder": "BertLMHeadModel (is_decoder=True, output tied to the word embeddings), "
                                            "initialised from the encoder's weights",
                                 "conditioning": "prefix embeddings (Linear-GELU-Linear of the vector times "
                                                 "sqrt(d)) and a linear shift of the last hidden state",
                                 "prefix_tokens": config.prefix_tokens, "vector_dim": int(train.vectors.shape[1]),
                                 "hidden": int(net.hidden), "max_tokens": config.max_tokens},
                "veil": __version__, "torch": torch.__version__,
                "precision": _precision(config.bf16, device),
                "device": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
                "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "data": data, "train_sentences": len(train), "train_tokens": enc.tokens, "sentences_seen": seen,
                "tokens_seen": seen_tok, "steps": step, "epochs_done": round(epoch + batch_at / max(n_batches, 1), 2),
                "minutes": round(minutes(), 2), "stopped": stopped, "planned_steps": planned,
                "selected_step": final["step"],
                "heldout": {"split": "dev", "sentences": final["sentences"], "decoding": "greedy",
                            "token_f1": final["token_f1"], "exact_match": final["exact_match"],
                            "loss": final["loss"], "start_token_f1": curve[0]["token_f1"],
                            "metric": "token F1: bag-of-words F1 (percent) of lower-cased, accent-free word tokens "
                                      "(veil.models.inverter.token_f1); exact match: the same word tokens"},
                "examples": best[3], "curve": shown, "config": config.to_dict()}
    save_inverter(net.to("cpu"), tokenizer, folder, manifest)
    if stopped != "budget":  # a run cut short keeps its state, to be resumed
        spath.unlink(missing_ok=True)
    log(f"inverter {config.name}: held-out token F1 {final['token_f1']:.2f} (from {curve[0]['token_f1']:.2f}) after "
        f"{step} steps, {seen:,} sentences, {format_seconds(minutes() * 60)}; wrote {folder}")
    return read_manifest(folder, config.name)


def ensure_inverter(name: str, log: Callable[[str], None] = print) -> None:
    """Make sure the inverter ``name`` is cached: the quick one is trained here if missing or made by another
    configuration than :data:`QUICK_INVERTER`; the full one must have been trained (``veil models train
    inverter``) and is named in the error."""
    from veil.models.inverter import MANIFEST, WEIGHTS, inverter_dir, load_inverter, read_manifest

    folder = inverter_dir(name)
    cached = (folder / WEIGHTS).is_file() and (folder / MANIFEST).is_file()
    if name != "inverter-quick":
        if not cached:
            load_inverter(name)  # raises ResourceMissingError naming `veil models train inverter`
        return
    if cached:
        manifest = read_manifest(folder, name)
        made = {k: v for k, v in (manifest.get("config") or {}).items() if k not in _BUDGET}
        if made == {k: v for k, v in QUICK_INVERTER.to_dict().items() if k not in _BUDGET}:
            if manifest.get("stopped") != "budget":
                return
            if state_path(folder).is_file():
                log(f"veil's quick inverter was cut short by its minute cap at step {manifest.get('steps')} of "
                    f"{manifest.get('planned_steps')}: resuming it")
                train, heldout, data = inverter_training_data(QUICK_INVERTER, log=log, progress=False)
                train_inverter(QUICK_INVERTER, train, heldout, data=data, log=log, progress=False)
                return
            # cut short by a veil that did not keep the state to resume from: a weaker model for good otherwise
            log(f"veil's quick inverter was cut short by its minute cap at step {manifest.get('steps')}, and no state "
                f"is left to resume it from: training it again (about {QUICK_INVERTER_MINUTES} minutes on 2 idle "
                "cores, longer on a busy machine)")
        else:
            log(f"veil's quick inverter was made by another configuration: training it again (about "
                f"{QUICK_INVERTER_MINUTES} minutes on 2 idle cores, longer on a busy machine)")
    else:
        log(f"veil's quick inverter is not cached yet: training it now (`veil models train inverter --quick`, about "
            f"{QUICK_INVERTER_MINUTES} minutes on 2 idle cores, longer on a busy machine)")
    train, heldout, data = inverter_training_data(QUICK_INVERTER, log=log, progress=False)
    train_inverter(QUICK_INVERTER, train, heldout, data=data, force=cached, log=log, progress=False)
