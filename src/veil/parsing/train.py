"""Training veil's biaffine parser on a treebank (silver by default), with dev selection and checkpoints.

The run keeps two files under ``VEIL_HOME/parsing/models/`` (or ``out=``): ``<name>.pt`` (the best parser on
the dev sample so far: weights, vocabulary, sizes) and ``<name>.state.pt`` (optimizer, step, best score,
seed), written atomically at every evaluation, so an interrupted run resumes with ``resume=True``. Training
batches hold about ``batch_tokens`` words of sentences of similar length; unknown-word replacement (words
replaced by the unknown id with probability ``word_dropout``) teaches the parser to rely on tags and context,
which obfuscated input needs. Adam as Dozat & Manning (betas 0.9, 0.9), gradient norm clipped at 5.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from veil._threads import torch_threads
from veil.errors import InvalidParameterError, ResourceMissingError
from veil.parsing.treebank import BUILD_TIME
from veil.parsing.trees import Tree

__all__ = ["TrainConfig", "train_parser", "load_parser", "default_model_path", "torch_threads"]


@dataclass(frozen=True)
class TrainConfig:
    """What a training run does; ``seed`` drives initialisation, batch order and word dropout."""

    treebank: str = "silver-sm"
    vectors: str = "md"  # "md" (en_core_web_md static vectors, 300-d) or "none"
    word_dim: int = 100
    hidden: int = 128
    layers: int = 2
    arc_dim: int = 192
    max_train: int | None = None
    dev_sentences: int = 800
    batch_tokens: int = 1500
    lr: float = 2e-3
    word_dropout: float = 0.25
    max_minutes: float = 45.0
    max_epochs: int = 10
    eval_every: int = 100
    patience: int = 8
    #: a cap on the optimiser steps (the same budget on a busy or an idle machine; ``max_minutes`` stays a safety
    #: cap that marks a run cut short). None: no cap, and left out of to_dict (parsers made before it match)
    max_steps: int | None = None
    seed: int = 0
    name: str = "biaffine"
    threads: int = 1  # torch CPU threads: 1 is several times faster than 2 on a shared 2-core machine (measured)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        import math

        for name in ("lr", "max_minutes", "word_dropout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InvalidParameterError(f"{name} must be a finite number, got {value!r}")
        if not self.lr > 0 or not self.max_minutes > 0:
            raise InvalidParameterError(f"lr and max_minutes must be > 0, got lr={self.lr!r}, "
                                        f"max_minutes={self.max_minutes!r}")
        if not 0 <= self.word_dropout < 1:
            raise InvalidParameterError(f"word_dropout must be in [0, 1), got {self.word_dropout!r}")
        for name in ("word_dim", "hidden", "layers", "arc_dim", "dev_sentences", "batch_tokens", "max_epochs",
                     "eval_every", "patience", "threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidParameterError(f"{name} must be an int >= 1, got {value!r}")
        if self.max_train is not None and (isinstance(self.max_train, bool) or not isinstance(self.max_train, int)
                                           or self.max_train < 1):
            raise InvalidParameterError(f"max_train must be None or an int >= 1, got {self.max_train!r}")
        if self.max_steps is not None and (isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int)
                                           or self.max_steps < 1):
            raise InvalidParameterError(f"max_steps must be None or an int >= 1, got {self.max_steps!r}")
        if self.vectors not in ("md", "none"):
            raise InvalidParameterError(f"vectors must be 'md' or 'none', got {self.vectors!r}")

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        out = asdict(self)
        if self.max_steps is None:
            del out["max_steps"]
        return out


#: how long `veil parse train` takes with its defaults (its --max-minutes budget), for messages
TRAIN_MINUTES = 45
_TRAIN_HINT = (f"train it with `veil parse train` (about {TRAIN_MINUTES} minutes, after `veil parse treebank`: "
               f"{BUILD_TIME}) or pass a model file with --model")


def default_model_path(name: str = "biaffine") -> Path:
    from veil._io import veil_home

    return veil_home() / "parsing" / "models" / f"{name}.pt"


def load_parser(path: str | os.PathLike | None = None) -> Any:
    """The trained parser at ``path`` (default: the one ``veil parse train`` writes)."""
    from veil.models.biaffine import BiaffineParser

    path = Path(path) if path is not None else default_model_path()
    if not path.is_file():
        raise ResourceMissingError(f"the biaffine parser {path}", "veil parse train",
                                   message=f"the biaffine parser {path} does not exist; {_TRAIN_HINT}")
    return BiaffineParser.load(path, fix=_TRAIN_HINT)


def _batches(trees: list[Tree], batch_tokens: int, rng: np.random.Generator) -> list[list[int]]:
    order = sorted(range(len(trees)), key=lambda i: (len(trees[i]), rng.random()))
    out, cur, width = [], [], 0
    for i in order:
        n = len(trees[i])
        if cur and max(width, n) * (len(cur) + 1) > batch_tokens:
            out.append(cur)
            cur, width = [], 0
        cur.append(i)
        width = max(width, n)
    if cur:
        out.append(cur)
    rng.shuffle(out)
    return out


#: config keys a resumed run may change (the budget of each session)
_BUDGET = ("threads", "max_minutes", "max_epochs", "patience", "max_steps")
_STATE_KEYS = ("config", "net", "opt", "step", "best", "bad", "epoch", "spent", "history")


def _outputs(path: Path) -> tuple[Path, Path, Path]:
    """The model file, its summary (.json) and its resume state (.state.pt)."""
    return path, path.with_suffix(".json"), path.with_suffix(".state.pt")


def resume_state(config: TrainConfig, out: str | os.PathLike | None = None, *, resume: bool = True,
                 force: bool = False) -> dict[str, Any] | None:
    """Check the outputs of a run before any work: the saved state to resume from (None: start afresh).

    A run resumes only its own files: the state beside the model was written by a run of this configuration
    (up to its budget). Otherwise an existing model, summary or state is replaced only with ``force``; a
    damaged or foreign state file is a typed error naming it. States are read with ``weights_only=True``.
    """
    from veil.results import check_same_config

    path = Path(out) if out is not None else default_model_path(config.name)
    model, summary, state_path = _outputs(path)
    for p in (model, summary, state_path):
        if p.is_dir():
            raise InvalidParameterError(f"{p} is a folder; give --out a model file name, e.g. {p / 'biaffine.pt'}")
    if path.suffix != ".pt":
        raise InvalidParameterError(f"--out must end in .pt (the model file), got {path}")
    existing = [p for p in (model, summary, state_path) if p.exists()]
    if force or not existing:
        return None
    if resume and state_path.is_file() and model.is_file():
        from veil.models.files import load_tensors

        fix = f"pass --force to start afresh and replace {path} (or --no-resume --force), or choose another --out"
        st = load_tensors(state_path, what="the parser's resume state", fix=fix, keys=_STATE_KEYS)
        if not isinstance(st["config"], dict):
            raise InvalidParameterError(f"the parser's resume state {state_path} holds no configuration; {fix}")
        check_same_config(st["config"], config.to_dict(), state_path, ignore=_BUDGET)
        return st
    names = ", ".join(str(p) for p in existing)
    why = "no resume state of a run is beside it" if resume else "--no-resume was given"
    raise InvalidParameterError(f"{names} already exist(s) ({why}); pass --force to replace them, or choose another "
                                "--out")


def train_parser(config: TrainConfig = TrainConfig(), *, out: str | os.PathLike | None = None, resume: bool = True,
                 force: bool = False, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train (or resume) a parser; returns a summary (best dev UAS/LAS, steps, minutes, where it was saved).

    Existing outputs are resumed (a state of this configuration, ``resume``) or replaced only with ``force``
    (:func:`resume_state`). A run that ends before its first dev evaluation (a small treebank, a short budget)
    is evaluated once at its end, so the model file always exists when this returns.

    torch's global generator is forked for the run (initialisation and dropout draw from it, seeded with
    ``config.seed``) and restored afterwards, so nothing outside is re-seeded.
    """
    import torch

    state = resume_state(config, out, resume=resume, force=force)
    with torch_threads(config.threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        return _train(config, out, state, log)


def _train(config: TrainConfig, out: str | os.PathLike | None, st: dict[str, Any] | None,
           log: Callable[[str], None]) -> dict[str, Any]:
    import torch

    from veil._io import atomic_write, atomic_write_json
    from veil.models.biaffine import Batch, BiaffineParser, ParserConfig, ParserVocab
    from veil.parsing.evaluate import attachment_scores, predict_biaffine
    from veil.parsing.treebank import load_treebank

    path = Path(out) if out is not None else default_model_path(config.name)
    state_path = path.with_suffix(".state.pt")
    train = load_treebank("train", config.treebank)
    if config.max_train is not None:
        if config.max_train > len(train):
            log(f"veil: warning: max_train {config.max_train} is more than the {len(train)} training sentences; "
                f"using all {len(train)}")
        train = [train[i] for i in np.random.default_rng(config.seed).permutation(len(train))[:config.max_train]]
    dev = load_treebank("dev", config.treebank, limit=config.dev_sentences)
    if not train or not dev:
        empty = "train" if not train else "dev"
        raise InvalidParameterError(f"the {empty} split of the treebank {config.treebank} has no sentence, so no "
                                    "parser can be trained and selected on it; build a bigger one with `veil parse "
                                    "treebank --max-docs 50 --force` (or without --max-docs) or pass --treebank DIR")
    rng = np.random.default_rng(config.seed)
    vocab = ParserVocab.build([(t.words, t.tags, t.deprels) for t in train])
    from veil.models.spacy_pipelines import md_vectors

    vectors, hits = (md_vectors(vocab.words, config.word_dim) if config.vectors == "md" else (None, 0))
    pcfg = ParserConfig(word_dim=config.word_dim, hidden=config.hidden, layers=config.layers,
                        arc_dim=config.arc_dim)
    net = BiaffineParser(vocab, pcfg, vectors)
    opt = torch.optim.Adam(net.parameters(), lr=config.lr, betas=(0.9, 0.9))
    step, best, bad, epoch, spent = 0, -1.0, 0, 0, 0.0
    history: list[dict[str, Any]] = []
    if st is not None:
        try:
            net.load_state_dict(st["net"])
            opt.load_state_dict(st["opt"])
            step, best, bad, epoch, spent = (int(st["step"]), float(st["best"]), int(st["bad"]), int(st["epoch"]),
                                             float(st["spent"]))
            history = list(st["history"])
        except (TypeError, ValueError, KeyError, RuntimeError) as exc:
            from veil.errors import DataFormatError

            raise DataFormatError(f"the parser's resume state {state_path} does not fit this parser "
                                  f"({type(exc).__name__}); pass --force to start afresh, or choose another "
                                  "--out") from None
        rng = np.random.default_rng([config.seed, step])
        log(f"resumed at step {step} (best dev UAS {best:.2f})")
    log(f"training on {len(train)} sentences ({sum(map(len, train))} words), dev {len(dev)}; vocabulary "
        f"{len(vocab.words)} words ({hits} with md vectors), {len(vocab.tags)} tags, {len(vocab.labels)} labels")
    start = time.monotonic() - spent * 60
    # a resumed run whose budget is spent: nothing to do
    done = st is not None and (spent > config.max_minutes
                               or (config.max_steps is not None and step >= config.max_steps))
    def evaluate(minutes: float, loss: float | None) -> bool:
        """Score the parser on dev; save it when it is the best so far (and the resume state); True if so."""
        nonlocal best, bad
        scores = attachment_scores(dev, predict_biaffine(net, dev), n_boot=1)
        uas, las = scores["uas"].mean, scores["las"].mean
        history.append({"step": step, "epoch": epoch, "minutes": round(minutes, 2), "loss": loss,
                        "dev_uas": round(uas, 2), "dev_las": round(las, 2)})
        improved = uas > best
        if improved:
            best, bad = uas, 0
            net.save(path)
        else:
            bad += 1
        log(f"step {step} epoch {epoch} {minutes:.1f} min loss {'-' if loss is None else f'{loss:.3f}'} dev UAS "
            f"{uas:.2f} LAS {las:.2f}{' (best)' if improved else ''}")
        with atomic_write(state_path, "wb") as fh:
            torch.save({"config": config.to_dict(), "net": net.state_dict(), "opt": opt.state_dict(),
                        "step": step, "best": best, "bad": bad, "epoch": epoch, "spent": minutes,
                        "history": history}, fh)
        net.train()
        return improved

    loss = None
    stopped = "epochs"
    while epoch < config.max_epochs and not done:
        net.train()
        for chunk in _batches(train, config.batch_tokens, rng):
            b = Batch.make(vocab, [train[i].words for i in chunk], [train[i].tags for i in chunk],
                           [train[i].heads for i in chunk], [train[i].deprels for i in chunk],
                           buckets=pcfg.sub_buckets, word_dropout=config.word_dropout, rng=rng)
            loss = net.loss(b)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 5.0)
            opt.step()
            step += 1
            minutes = (time.monotonic() - start) / 60
            capped = config.max_steps is not None and step >= config.max_steps
            if step % config.eval_every == 0 or minutes > config.max_minutes or capped:
                evaluate(minutes, loss.item())
                if bad >= config.patience or minutes > config.max_minutes or capped:
                    stopped = ("flattened" if bad >= config.patience else "steps" if capped else
                               "budget (cut short)")
                    done = True
                    break
        else:
            epoch += 1
    if not history or history[-1]["step"] != step or not path.is_file():
        # the run ended between evaluations (the epochs ran out first): its last steps are evaluated now
        evaluate((time.monotonic() - start) / 60, None if loss is None else loss.item())
    if not path.is_file():
        raise InvalidParameterError(f"training ended without saving a parser to {path}; re-run with --force")
    summary = {"model": str(path), "best_dev_uas": float(best), "steps": step, "epochs": epoch, "stopped": stopped,
               "minutes": round((time.monotonic() - start) / 60, 2), "train_sentences": len(train),
               "dev_sentences": len(dev), "md_vector_hits": hits, "config": config.to_dict(),
               "parser_config": pcfg.to_dict(), "history": history}
    atomic_write_json(path.with_suffix(".json"), summary)
    return summary


def read_summary(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """The summary ``train_parser`` wrote next to the model (``<name>.json``)."""
    from veil._io import read_json

    p = (Path(path) if path is not None else default_model_path()).with_suffix(".json")
    return read_json(p, what="parser summary", fix="train the parser again with `veil parse train --force`") \
        if p.is_file() else {}
