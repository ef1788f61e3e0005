"""Defenses that release a language model fine-tuned on private text (the ``generative-model`` kind, issue 52).

``lm-plain`` is the undefended reference: veil's causal LM (:mod:`veil.models.causal_lm`: MiniLM's weights as a
decoder) fine-tuned on the private texts as they are, for a fixed number of optimiser steps (the same model on a
busy or an idle machine). Two data defenses change only what it is trained on:

* ``lm-scrub``: every text scrubbed by Presidio (:class:`veil.defenses.redaction.PresidioRedaction`, with its
  operator) before training, as Lukas et al. 2023 scrub before fine-tuning; what Presidio misses stays;
* ``lm-dedup``: exact duplicate texts (lowercased, whitespace collapsed) kept once (Kandpal et al. 2022); a secret
  repeated inside different texts stays as often as it was written.

Neither gives a formal guarantee. DP-SGD fine-tuning is still to come.

What is released is a :class:`TrainedLM`: the model and how it was trained. An attack observes it only through
:class:`veil.attacks.generation.observe.LMAccess` (samples and the likelihood of given texts), never the texts it
was trained on.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from veil.defenses.base import GenerativeModelDefense, Guarantee
from veil.errors import InvalidParameterError

__all__ = ["PlainFineTuning", "ScrubbedFineTuning", "DeduplicatedFineTuning", "TrainedLM", "deduplicate"]


@dataclass(frozen=True, repr=False)
class TrainedLM:
    """A released language model: ``lm`` (a :class:`veil.models.causal_lm.CausalLM`), the ``guarantee`` it was
    trained under, the public ``config`` of its training, its training ``losses`` per step, ``n_train`` (texts)
    and the wall ``seconds`` it took."""

    lm: Any
    guarantee: Guarantee
    config: dict[str, Any] = field(default_factory=dict)
    losses: tuple[float, ...] = ()
    n_train: int = 0
    seconds: float = 0.0

    def __repr__(self) -> str:
        return (f"TrainedLM({self.config.get('defense', '?')}, {len(self.losses)} steps on {self.n_train} texts, "
                f"base={getattr(self.lm, 'base', '?')!r})")


class PlainFineTuning(GenerativeModelDefense):
    """Fine-tune veil's causal LM on the private texts with no protection (the kind's undefended reference).

    ``steps`` AdamW steps at ``lr`` on batches of ``batch_size`` texts drawn uniformly (texts cut to ``max_tokens``
    word pieces); ``init_seed`` seeds the layers the base model does not ship trained; ``rng`` (an int) seeds the
    batch order and dropout, None draws that seed from OS entropy (nothing secret depends on it)."""

    name = "lm-plain"
    undefended = True
    citation = ("plain causal-LM fine-tuning: the undefended reference of the generation-leakage defenses (the "
                "models Carlini et al. 2019 and 2021 attack)")
    guarantee = Guarantee("none", "no formal guarantee: fine-tuned on the private text as it is")

    def __init__(self, *, steps: int = 200, batch_size: int = 16, lr: float = 1e-4, max_tokens: int = 64,
                 init_seed: int = 0, rng: int | None = None) -> None:
        from veil.validation import check_int

        self.steps = check_int("steps", steps, minimum=1)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.max_tokens = check_int("max_tokens", max_tokens, minimum=4)
        self.init_seed = check_int("init_seed", init_seed, minimum=0)
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr <= 1:
            raise InvalidParameterError(f"lr must be a number in (0, 1], got {lr!r}")
        self.lr = float(lr)
        if rng is not None:
            rng = check_int("rng", rng, minimum=0)
        self._seed = rng

    def __repr__(self) -> str:
        return f"PlainFineTuning(steps={self.steps}, batch_size={self.batch_size}, lr={self.lr:g})"

    def config(self) -> dict[str, Any]:
        return {**super().config(), "steps": self.steps, "batch_size": self.batch_size, "lr": self.lr,
                "max_tokens": self.max_tokens, "init_seed": self.init_seed,
                "order": "os-entropy" if self._seed is None else f"seed {self._seed}"}

    def train_lm(self, texts: Any, *, checkpoint: Any = None, log: Any = None) -> TrainedLM:
        """Fine-tune a fresh causal LM on ``texts`` (a list of strings) for ``steps`` steps; the released model.
        ``checkpoint`` (a file) makes the run resumable; it needs a seeded order (``rng``), since a run drawn from
        OS entropy cannot be resumed to the same model."""
        from veil.models.causal_lm import build_causal_lm, train_steps

        if checkpoint is not None and self._seed is None:
            raise InvalidParameterError("a resumable run (checkpoint=...) needs a seeded batch order: give rng=SEED")
        start = time.perf_counter()
        trained_on = self.prepare(texts, log=log)
        lm = build_causal_lm(max_tokens=self.max_tokens, seed=self.init_seed)
        seed = secrets.randbits(31) if self._seed is None else self._seed
        losses = train_steps(lm, trained_on, steps=self.steps, batch_size=self.batch_size, lr=self.lr, seed=seed,
                             checkpoint=checkpoint, log=log)
        return TrainedLM(lm=lm, guarantee=self.guarantee, config=self.config(), losses=tuple(losses),
                         n_train=len(trained_on), seconds=time.perf_counter() - start)

    def prepare(self, texts: Any, *, log: Any = None) -> list[str]:
        """What the model is trained on, made from the owner's ``texts`` (here: the texts as they are; a data
        defense overrides this)."""
        from veil.models.causal_lm import _texts

        return _texts(texts, "texts")


class ScrubbedFineTuning(PlainFineTuning):
    """Scrub the texts with Presidio, then fine-tune as ``lm-plain`` does (module docstring). ``operator``: what a
    detected span becomes (:data:`veil.defenses.redaction.OPERATORS`; ``type`` writes ``<PERSON>``); ``model``: the
    spaCy pipeline Presidio's NER runs on. The other parameters are :class:`PlainFineTuning`'s."""

    name = "lm-scrub"
    undefended = False
    citation = ("Lukas et al. 2023, Analyzing Leakage of PII in Language Models (IEEE S&P): scrubbing PII "
                "with a NER tagger before fine-tuning (Presidio here)")
    guarantee = Guarantee("none", "no formal guarantee: the PII Presidio detects is replaced before training; what "
                                  "it misses is trained on as it is")

    def __init__(self, *, operator: str = "type", model: str = "sm", steps: int = 200, batch_size: int = 16,
                 lr: float = 1e-4, max_tokens: int = 64, init_seed: int = 0, rng: int | None = None) -> None:
        from veil.defenses.redaction import PresidioRedaction

        super().__init__(steps=steps, batch_size=batch_size, lr=lr, max_tokens=max_tokens, init_seed=init_seed,
                         rng=rng)
        scope = "release" if operator == "pseudonym" else "document"  # one consistent pseudonym per value
        self.redaction = PresidioRedaction(operator=operator, model=model, scope=scope)

    def __repr__(self) -> str:
        return f"ScrubbedFineTuning(operator={self.redaction.operator!r}, steps={self.steps})"

    def config(self) -> dict[str, Any]:
        red = self.redaction.config()
        return {**super().config(), "operator": red["operator"],
                "scrubber": {k: v for k, v in red.items() if k not in ("defense", "operator", "citation", "guarantee")}}

    def train_lm(self, texts: Any, *, checkpoint: Any = None, log: Any = None) -> TrainedLM:
        """:meth:`PlainFineTuning.train_lm` on the scrubbed texts. A resumable run (``checkpoint``) must scrub the
        same way again when it resumes: the ``type`` and ``mask`` operators do; ``hash`` and ``pseudonym`` draw a
        fresh secret key or fresh pseudonyms from the OS CSPRNG, so they are refused there."""
        if checkpoint is not None and self.redaction.operator in ("hash", "pseudonym"):
            raise InvalidParameterError(f"a resumable run scrubs its texts again when it resumes, and the "
                                        f"{self.redaction.operator!r} operator draws fresh secrets each time; use "
                                        "operator='type' or 'mask', or train without a checkpoint")
        return super().train_lm(texts, checkpoint=checkpoint, log=log)

    def prepare(self, texts: Any, *, log: Any = None) -> list[str]:
        texts = super().prepare(texts)
        if log is not None:
            log(f"scrubbing {len(texts):,} texts with Presidio ({self.redaction.operator})")
        done = self.redaction.redact(texts)
        if log is not None:
            log(f"scrubbed {sum(len(r.spans) for r in done):,} spans in {sum(bool(r.spans) for r in done):,} texts")
        return [r.text for r in done]


def deduplicate(texts: Any) -> list[str]:
    """``texts`` with every exact duplicate after the first dropped (compared lowercased, whitespace collapsed);
    the first copy keeps its place."""
    import re

    seen: set[str] = set()
    out = []
    for text in texts:
        key = re.sub(r"\s+", " ", text.lower()).strip()
        if key not in seen:
            seen.add(key)
            out.append(text)
    return out


class DeduplicatedFineTuning(PlainFineTuning):
    """Keep one copy of each text, then fine-tune as ``lm-plain`` does (module docstring; :func:`deduplicate`)."""

    name = "lm-dedup"
    undefended = False
    citation = ("Kandpal et al. 2022, Deduplicating Training Data Mitigates Privacy Risks in Language Models (ICML): "
                "exact duplicates removed before training")
    guarantee = Guarantee("none", "no formal guarantee: each distinct text is trained on once; a secret written in "
                                  "several different texts stays as often as it was written")

    def prepare(self, texts: Any, *, log: Any = None) -> list[str]:
        texts = super().prepare(texts)
        kept = deduplicate(texts)
        if log is not None:
            log(f"deduplicated: {len(kept):,} distinct texts of {len(texts):,}")
        return kept
