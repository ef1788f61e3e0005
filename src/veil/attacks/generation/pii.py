"""PII reconstruction and inference (Lukas et al. 2023, *Analyzing Leakage of Personally Identifiable Information in
Language Models*, IEEE S&P; arXiv 2302.00539) against a released language model.

Both attacks know a sentence of the training text with one PII value masked (``[MASK]``: "... Call [MASK]."), and
the model's black-box access (:class:`~veil.attacks.generation.observe.LMAccess`); neither reads the training text
or the value. Each fills the mask with candidate values and takes the candidate whose filled sentence the model
finds likeliest (lowest log-perplexity), as the paper ranks its candidates:

* **inference** (:class:`PIIInference`) is given the candidates: a list (the paper's 100 values) that holds the true
  value among values of the same kind. Chance is one over the list's length;
* **reconstruction** (:class:`PIIReconstruction`) has no list. It makes its own candidates from the model: it
  samples ``samples`` continuations of the text before the mask, and takes from each its first 1 to ``max_words``
  words and everything before where the text after the mask begins (its longest beginning found in the
  continuation). The paper tags the PII in its samples with a NER model instead; these cuts need no tagger and hold
  the tagged value whenever the model writes it.

Scoring holds the truth (:func:`score_pii`): a guess is right when it equals the true value lowercased with every
space removed (veil's causal LM writes lowercase word pieces and the tokenizer spaces punctuation), and the share of
right guesses per insertion count gets a Wilson 95% interval.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from veil.attacks.base import Attack, ThreatModel
from veil.errors import InvalidParameterError, InvalidTypeError

__all__ = ["MASK", "PIIGuesses", "PIIInference", "PIIReconstruction", "score_pii", "budget_curve", "same_value"]

#: where the value stands in a masked sentence
MASK = "[MASK]"


def same_value(a: str, b: str) -> bool:
    """Whether two written values are the same: lowercased, every space removed."""
    return re.sub(r"\s+", "", a.lower()) == re.sub(r"\s+", "", b.lower())


def _templates(templates: Any) -> tuple[str, ...]:
    out = tuple(templates) if isinstance(templates, (list, tuple)) else None
    if not out or not all(isinstance(t, str) for t in out):
        raise InvalidTypeError("templates must be a non-empty list of masked sentences (str)")
    bad = [t for t in out if t.count(MASK) != 1]
    if bad:
        raise InvalidParameterError(f"every template must hold {MASK} exactly once; {len(bad)} do not, e.g. "
                                    f"{bad[0][:60]!r}")
    return out


@dataclass(frozen=True, repr=False)
class PIIGuesses:
    """What either attack recovers: per template, its ``guesses`` (the likeliest candidate), the ``candidates`` it
    ranked and their ``scores`` (log-perplexities of the filled sentences, lower is likelier); reconstruction's
    ``origins`` say which sample first gave each candidate, so :func:`budget_curve` can replay smaller budgets."""

    guesses: tuple[str, ...]
    candidates: tuple[tuple[str, ...], ...]
    scores: tuple[np.ndarray, ...]
    #: reconstruction only: per template, the sample each candidate first came from (its budget curve)
    origins: tuple[np.ndarray, ...] | None = None

    def __repr__(self) -> str:
        return f"PIIGuesses({len(self.guesses)} masked sentences, {sum(map(len, self.candidates)):,} candidates)"


def _rank(observation: Any, templates: tuple[str, ...], candidates: list[tuple[str, ...]],
          batch_size: int) -> PIIGuesses:
    filled = [t.replace(MASK, c) for t, cs in zip(templates, candidates) for c in cs]
    scores = np.concatenate([observation.scores(filled[i:i + batch_size]) for i in range(0, len(filled), batch_size)])
    out, at = [], 0
    for cs in candidates:
        out.append(scores[at:at + len(cs)])
        at += len(cs)
    guesses = tuple(cs[int(np.argmin(s))] for cs, s in zip(candidates, out))
    return PIIGuesses(guesses, tuple(candidates), tuple(out))


def _access(observation: Any, name: str) -> None:
    from veil.attacks.generation.observe import LMAccess

    if not isinstance(observation, LMAccess):
        raise InvalidTypeError(f"{name} observes a released language model (LMAccess.of(model)), not "
                               f"{type(observation).__name__}")


class PIIInference(Attack):
    """Fill each masked sentence with each of its given candidates; guess the likeliest (module docstring).

    ``templates``: masked sentences; ``candidates``: one list per template, each of at least two distinct values."""

    name = "pii-inference"
    observes = "generative-model"
    bench_cell = "veil.bench.cells.generative_model:pii_cell"
    citation = ("Lukas et al. 2023, Analyzing Leakage of PII in Language Models (IEEE S&P): PII "
                "inference, a masked sentence filled with each candidate and ranked by the model's likelihood")
    threat = ThreatModel(observes="the released model's likelihood of given texts (black-box scoring)",
                         needs=("sentences of the training text with the PII masked", "a list of candidate values "
                                "for each, the true one among them"), knows_key=False, trains=False)

    def __init__(self, templates: Any, candidates: Any, *, batch_size: int = 64) -> None:
        from veil.validation import check_int

        self.templates = _templates(templates)
        lists = list(candidates) if isinstance(candidates, (list, tuple)) else None
        if lists is None or len(lists) != len(self.templates):
            raise InvalidParameterError(f"give one candidate list per template ({len(self.templates)})")
        clean = []
        for cs in lists:
            if isinstance(cs, str) or not isinstance(cs, (list, tuple)) or not all(isinstance(c, str) for c in cs):
                raise InvalidTypeError("each candidate list must be a list of str")
            cs = tuple(dict.fromkeys(cs))
            if len(cs) < 2:
                raise InvalidParameterError("each candidate list needs at least two distinct values")
            clean.append(cs)
        self.candidates = clean
        self.batch_size = check_int("batch_size", batch_size, minimum=1)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "templates": len(self.templates),
                "candidates_each": sorted({len(c) for c in self.candidates})}

    def run(self, observation: Any) -> PIIGuesses:
        _access(observation, self.name)
        return _rank(observation, self.templates, self.candidates, self.batch_size)


def _after_prompt(sample: str, prompt: str) -> str:
    """``sample`` without its first characters that spell ``prompt`` (spaces ignored: the tokenizer respaces)."""
    need = len(re.sub(r"\s+", "", prompt.lower()))
    seen = 0
    for i, ch in enumerate(sample):
        if seen == need:
            return sample[i:].strip()
        if not ch.isspace():
            seen += 1
    return ""


def _cuts(continuation: str, suffix: str, max_words: int) -> list[str]:
    """Candidate values in a continuation: its first 1 to ``max_words`` words (each also without trailing
    punctuation: the tokenizer glues a sentence's full stop to the last word), and what comes before the longest
    beginning of ``suffix`` (spaces ignored) found after the continuation's first character."""
    words = continuation.split()
    out = []
    for k in range(1, min(max_words, len(words)) + 1):
        cut = " ".join(words[:k])
        out += [cut, cut.rstrip(".,;:!?")]
    tail = re.sub(r"\s+", "", suffix.lower())
    squashed, positions = "", []
    for i, ch in enumerate(continuation):
        if not ch.isspace():
            squashed += ch.lower()
            positions.append(i)
    for end in range(len(tail), 0, -1):
        at = squashed.find(tail[:end], 1)
        if at > 0:
            out.append(continuation[:positions[at]].strip())
            break
    return list(dict.fromkeys(c for c in out if c))


class PIIReconstruction(Attack):
    """Make candidates by sampling the model after the text before each mask, then guess the likeliest filled
    sentence (module docstring). ``samples`` continuations per template, at most ``max_tokens`` word pieces each
    (top-``top_k``, ``temperature``, the attacker's ``seed``); ``max_words``: the longest word-prefix candidate."""

    name = "pii-reconstruction"
    observes = "generative-model"
    bench_cell = "veil.bench.cells.generative_model:pii_cell"
    citation = ("Lukas et al. 2023, Analyzing Leakage of PII in Language Models (IEEE S&P): PII "
                "reconstruction, candidates sampled from the model, ranked by filling the masked sentence")
    threat = ThreatModel(observes="samples drawn from the released model and its likelihood of given texts "
                                  "(black-box)",
                         needs=("sentences of the training text with the PII masked",), knows_key=False, trains=False)

    def __init__(self, templates: Any, *, samples: int = 16, max_tokens: int = 16, max_words: int = 6,
                 top_k: int = 40, temperature: float = 1.0, seed: int = 0, batch_size: int = 64) -> None:
        from veil.validation import check_int

        self.templates = _templates(templates)
        self.samples = check_int("samples", samples, minimum=1)
        self.max_tokens = check_int("max_tokens", max_tokens, minimum=1)
        self.max_words = check_int("max_words", max_words, minimum=1)
        self.top_k = check_int("top_k", top_k, minimum=1)
        self.seed = check_int("seed", seed, minimum=0)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0:
            raise InvalidParameterError(f"temperature must be a number > 0, got {temperature!r}")
        self.temperature = float(temperature)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "templates": len(self.templates), "samples": self.samples,
                "max_tokens": self.max_tokens, "max_words": self.max_words, "top_k": self.top_k,
                "temperature": self.temperature, "seed": self.seed}

    def run(self, observation: Any) -> PIIGuesses:
        _access(observation, self.name)
        candidates, origins = [], []
        for i, template in enumerate(self.templates):
            prefix, suffix = template.split(MASK)
            drawn = observation.sample(self.samples, prompt=prefix, max_tokens=self.max_tokens, top_k=self.top_k,
                                       temperature=self.temperature, seed=self.seed * 100_003 + i)
            first: dict[str, int] = {}
            for j, sample in enumerate(drawn):
                for cut in _cuts(_after_prompt(sample, prefix), suffix, self.max_words):
                    first.setdefault(cut, j)
            first = first or {"": 0}
            candidates.append(tuple(first))
            origins.append(np.array(list(first.values()), dtype=np.int64))
        ranked = _rank(observation, self.templates, candidates, self.batch_size)
        return PIIGuesses(ranked.guesses, ranked.candidates, ranked.scores, tuple(origins))


def score_pii(found: PIIGuesses, truth: Any, counts: Any = None) -> dict[str, Any]:
    """Each guess against its true value (``truth``, one per template: the scorer's only), the share right overall
    and per insertion count (``counts``, one per template; None: one group) with Wilson 95% intervals, and whether
    the true value was among the candidates at all (reconstruction's ceiling)."""
    from veil.metrics.leakage import wilson_interval

    truth = list(truth) if isinstance(truth, (list, tuple)) else None
    if truth is None or len(truth) != len(found.guesses) or not all(isinstance(t, str) for t in truth):
        raise InvalidParameterError(f"give one true value (str) per masked sentence ({len(found.guesses)})")
    counts = [0] * len(truth) if counts is None else list(counts)
    if len(counts) != len(truth):
        raise InvalidParameterError("give one insertion count per masked sentence")
    right = [same_value(g, t) for g, t in zip(found.guesses, truth)]
    offered = [any(same_value(c, t) for c in cs) for cs, t in zip(found.candidates, truth)]
    out: dict[str, Any] = {}
    for c in sorted(set(counts)):
        idx = [i for i, k in enumerate(counts) if k == c]
        k = int(sum(right[i] for i in idx))
        low, high = wilson_interval(k, len(idx))
        out[str(c)] = {"n": len(idx), "right": k, "share": k / len(idx), "ci_low": low, "ci_high": high,
                       "among_candidates": int(sum(offered[i] for i in idx)),
                       "chance": float(np.mean([1 / len(found.candidates[i]) for i in idx]))}
    return out


def budget_curve(found: PIIGuesses, truth: Any, budgets: Any = None) -> list[dict[str, Any]]:
    """Reconstruction replayed at smaller sample budgets (each a prefix of the samples it drew, so one run gives the
    whole curve): per budget, how many guesses are right and how often the true value is among the candidates.
    ``budgets``: None for 1, 2, 4, ... up to the samples drawn. Whether the curve has flattened at the budget used
    says whether more samples would have found more."""
    if found.origins is None:
        raise InvalidParameterError("only reconstruction's guesses have a sample budget to replay")
    truth = list(truth) if isinstance(truth, (list, tuple)) else None
    if truth is None or len(truth) != len(found.guesses):
        raise InvalidParameterError(f"give one true value (str) per masked sentence ({len(found.guesses)})")
    drawn = 1 + max(int(o.max()) for o in found.origins)
    if budgets is None:
        budgets = sorted({*(2 ** k for k in range(drawn.bit_length()) if 2 ** k <= drawn), drawn})
    out = []
    for b in budgets:
        right = among = 0
        for cs, sc, org, t in zip(found.candidates, found.scores, found.origins, truth):
            keep = np.flatnonzero(org < b)
            if keep.size == 0:
                continue
            among += any(same_value(cs[i], t) for i in keep)
            right += same_value(cs[keep[int(np.argmin(sc[keep]))]], t)
        out.append({"samples": int(b), "right": int(right), "among_candidates": int(among), "n": len(truth)})
    return out
