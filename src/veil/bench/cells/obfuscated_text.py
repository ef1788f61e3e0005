"""Obfuscated text (Hu et al. 2020): word recovery on obfuscated sentences, and the parsers' utility.

The private sentences are the bench treebank's test sentences (:mod:`veil.bench.data_parsing`); each cell
obfuscates them with the cell's defense (keys from the OS CSPRNG unless the bench seeds them).

Attack cells: the attacker observes the obfuscated words, their POS tags and which positions were replaced
(:class:`~veil.attacks.word_recovery.ObfuscatedText`); it knows the mechanism, so a learning attacker trains on its
own obfuscations of public (train) sentences made with the same obfuscator and its own draws
(:func:`veil.experiments.obfuscation.parsing.build_attacker`). Success is top-1 word recovery: the share of
replaced words whose original the attacker ranks first (lower-cased), with a sentence-bootstrap 95% interval.
Two references, on the same positions: random guessing among the public words of the position's tag (rate
1 / number of such words, averaged), and the tag-frequency floor (the tag's most frequent public word, which learns
nothing from context). A floor cell is tested against random guessing (exact Poisson-binomial); every other
attack against the tag-frequency floor by an exact one-sided McNemar test on the positions where exactly one of
the two is right: the attack is credited only for beating what needs no context.

Utility cells: UAS and LAS against the silver trees of the ORIGINAL sentences (by position) of the obfuscated
sentences parsed by spaCy en_core_web_md, a parser that never saw the obfuscator (the headline utility), and in the
full bench also of the target parser (the biaffine parser) where ``veil parse train`` has trained it (the record's
``target_parser`` says whether it ran). The same parser on the original sentences is the reference.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np

from veil.bench.cells.common import ALPHA, bench_block, finish, make_defense
from veil.errors import PrivacyLeakWarning
from veil.results import Metric, ResultRecord

__all__ = ["word_recovery_cell", "score_word_recovery", "attackers_mechanism", "parsing_utility", "budget_note",
           "PREFIX"]

#: registry names of the learning word-recovery attacks start with this; the parsing runner's names do not
PREFIX = "word-recovery-"
#: the parser whose UAS is the headline utility (it never saw the obfuscator)
HEADLINE_PARSER = "spacy-md"


def _network(cell: Any, data: Any) -> Any:
    """The neural obfuscator's network of the cell's level: trained through the target parser on the public train
    split, or loaded from its cache (:func:`~veil.experiments.obfuscation.parsing.train_neural`); once per
    process."""
    key = ("network", cell.setting_json)
    if key not in data._cache:
        from veil.experiments.obfuscation.parsing import train_neural

        ob, _, _ = train_neural(cell.setting["level"], 0, setup=data.setup(0), train=data.train)
        data._cache[key] = ob.network
    return data._cache[key]


def _options(cell: Any, data: Any) -> dict[str, Any]:
    from veil.defenses.base import get_defense
    from veil.defenses.obfuscation.neural import NeuralObfuscator

    return {"network": _network(cell, data)} if issubclass(get_defense(cell.defense), NeuralObfuscator) else {}


def _release(cell: Any, data: Any, options: dict[str, Any] | None = None) -> tuple[Any, list[Any]]:
    """The defense, and the private test sentences as it releases them (the obfuscated sentences with their keys;
    the keys reach the scorer only)."""
    defense = make_defense(cell, data, **(_options(cell, data) if options is None else options))
    return defense, defense.transform((t.words, t.tags) for t in data.test)


def attackers_mechanism(cell: Any, data: Any, options: dict[str, Any]) -> Any:
    """``make(seed)``: the cell's mechanism with the attacker's own seeded draws (it knows the mechanism, never the
    client's key; seeding its own obfuscations leaks nothing of the client's)."""
    from veil.defenses.base import get_defense

    def make(seed: int) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)
            return get_defense(cell.defense).bench_make(cell.setting, data, rng=seed, **options)

    return make


def _random_rates(text: Any, vocab: Any) -> np.ndarray:
    """Per replaced position, 1 / the number of distinct (lower-cased) public words of its tag: guessing uniformly."""
    sizes: dict[str, int] = {}
    out = []
    for tags, positions in zip(text.tags, text.positions):
        for p in positions:
            t = tags[p]
            if t not in sizes:
                sizes[t] = max(1, len({w.lower() for w in vocab.candidates(t)}))
            out.append(1.0 / sizes[t])
    return np.asarray(out, dtype=np.float64)


def _mcnemar(hits: np.ndarray, floor_hits: np.ndarray) -> dict[str, Any]:
    """Exact one-sided McNemar test: does the attack get right more of the positions on which it and the floor
    disagree? p = P(Binomial(b + c, 1/2) >= b), b = attack right and floor wrong, c = the other way."""
    from veil.metrics.stats import Verdict, binomial_test

    b = int(np.sum(hits & ~floor_hits))
    c = int(np.sum(~hits & floor_hits))
    null = "the attack is right no more often than the tag-frequency floor (exact McNemar, one-sided)"
    if b + c == 0:
        return Verdict(test="exact McNemar, one-sided", statistic=0.0, p_value=1.0, alpha=ALPHA, reject=False,
                       null=null, n=0).to_dict()
    v = binomial_test(b, b + c, 0.5, alpha=ALPHA)
    return {**v.to_dict(), "test": "exact McNemar, one-sided", "null": null, "statistic": b, "n": b + c,
            "discordant": {"attack_only": b, "floor_only": c}}


def budget_note(history: list[dict[str, Any]], minutes: float, stopped: str | None = None) -> str:
    """How a learning attacker's budget ended, from its training history (and ``stopped``, what an attacker that
    stops on its own dev MRR says ended it): whether the wall-clock budget stopped it, and whether its own dev MRR
    (or, without a dev split, its training loss) had stopped improving. A budget that ran out with the curve still
    rising means the attacker was cut short, and its success is a lower bound."""
    if not history:
        return ""
    last = history[-1]
    used = float(last.get("minutes", 0.0))
    unit = "evaluations" if "step" in last else "epochs"
    if stopped == "flattened":
        stop = f"stopped after {used:.2f} min when its own dev MRR stopped rising (early stopping)"
    elif stopped == "steps":
        stop = f"stopped at its optimiser-step cap after {used:.2f} min"
    else:
        stop = (f"stopped by the {minutes:g}-minute budget" if used >= 0.98 * minutes or stopped == "budget" else
                f"{len(history)} {unit} in {used:.2f} min (its epoch limit)")
    tail = history[-4:]
    if all("dev_mrr" in h for h in tail) and len(tail) >= 2:
        first, end = tail[0]["dev_mrr"], tail[-1]["dev_mrr"]
        best_before = max(h["dev_mrr"] for h in tail[:-1])
        trend = "still rising" if end > best_before + 0.001 else "flat"
        return f"{stop}; dev MRR {first:.3f} -> {end:.3f} over its last {len(tail)} {unit} ({trend})"
    if all("loss" in h for h in tail) and len(tail) >= 2:
        first, end = tail[0]["loss"], tail[-1]["loss"]
        trend = "still falling" if end < 0.99 * tail[-2]["loss"] else "flat"
        return f"{stop}; training loss {first:.2f} -> {end:.2f} ({trend}; no dev split)"
    return stop


def _fraction(m: Metric) -> dict[str, Any]:
    """A percent metric as a share in [0, 1] (the report's scale)."""
    d = m.to_dict()
    for k in ("mean", "ci_low", "ci_high"):
        if d.get(k) is not None:
            d[k] = d[k] / 100.0
    return d


def word_recovery_cell(cell: Any, data: Any) -> ResultRecord:
    """One word-recovery attack on the cell's obfuscation of the private sentences (module docstring): the release
    half here, the scoring half :func:`score_word_recovery` (which :func:`veil.attack` calls too)."""
    from veil.attacks.word_recovery import observe

    start = time.perf_counter()
    options = _options(cell, data)
    defense, obf = _release(cell, data, options)
    text, originals = observe(obf), [list(o.key.originals) for o in obf]
    rec, bench = score_word_recovery(cell.attack, text, originals, train=data.train, vocab=data.vocab,
                                     setup=data.setup(cell.config.seed),
                                     make=attackers_mechanism(cell, data, options), defense=defense.config(),
                                     setting=cell.id)
    return finish(rec, cell, data, start, bench)


def score_word_recovery(attack: str, text: Any, originals: list[list[str]], *, train: list[Any], vocab: Any,
                        setup: Any, make: Any, defense: dict[str, Any], setting: str = ""
                        ) -> tuple[ResultRecord, dict[str, Any]]:
    """Build the word-recovery attack registered as ``attack`` from the public ``train`` sentences and ``vocab``
    (``make(seed)``: the mechanism with the attacker's own draws), run it on ``text`` (what it observes: words,
    tags, replaced positions) and score it as a bench cell does: the record and its ``extra["bench"]`` block (top-1
    against random guessing for a floor, against the tag-frequency floor by exact McNemar otherwise). ``originals``
    (the true words at the replaced positions) are the scorer's; the attacker never sees them."""
    from veil.attacks.base import get_attack
    from veil.attacks.word_recovery import score_attack
    from veil.experiments.obfuscation.parsing import build_attacker
    from veil.metrics.stats import hit_rate_test

    targets = [[w.lower() for w in o] for o in originals]
    short = attack[len(PREFIX):] if attack.startswith(PREFIX) else attack
    attacker = build_attacker(short, train, vocab, setup, make)
    ranks = np.asarray(attacker.rank(text, targets), dtype=np.int64)
    metrics = score_attack(attacker, text, originals, seed=setup.seed, ranks=ranks)
    hits = ranks == 1
    rates = _random_rates(text, vocab)
    floor = bool(get_attack(attack).floor)
    if floor:
        test = hit_rate_test(hits.astype(int), rates, alpha=ALPHA).to_dict()
        floor_top1 = None
    else:
        tf = build_attacker("tag-frequency", train, vocab, setup, make)
        floor_hits = np.asarray(tf.rank(text, targets), dtype=np.int64) == 1
        test = _mcnemar(hits, floor_hits)
        floor_top1 = Metric(mean=float(floor_hits.mean()), n=int(len(floor_hits)))
        metrics["floor_top1"] = Metric(mean=100.0 * floor_top1.mean, n=floor_top1.n)
    metrics["random_top1"] = Metric(mean=100.0 * float(rates.mean()), n=int(len(rates)))
    budget = budget_note(list(attacker.config().get("history") or []), setup.attack_minutes,
                         attacker.config().get("stopped"))
    rec = ResultRecord(method="bench", experiment=setting,
                       config={"attack": attacker.config(), "setup": setup.to_dict(), "defense": defense,
                               "sentences": len(text), "positions": int(text.n_positions)},
                       metrics=metrics, wall_time_s=0.0)
    bench = bench_block(success="top1", success_metric=_fraction(metrics["top1"]), comparable=not floor,
                        floor=floor or None, random_rate=float(rates.mean()), test=test,
                        floor_success=floor_top1.to_dict() if floor_top1 else None,
                        measure="word recovery: the share of replaced words whose original the attacker ranks first",
                        versus="random guessing among the tag's public words" if floor else
                        "the tag-frequency floor", budget=budget or None)
    return rec, bench


def _scores(parser: str, gold: list[Any], sentences: list[Any], seed: int, model: Any = None) -> dict[str, Metric]:
    from veil.parsing.evaluate import attachment_scores, parse_with

    return attachment_scores(gold, parse_with(parser, sentences, model=model), seed=seed)


def parsing_utility(cell: Any, data: Any) -> ResultRecord:
    """UAS/LAS of the cell's obfuscated private sentences (module docstring); the headline is spaCy md's UAS."""
    start = time.perf_counter()
    _, obf = _release(cell, data)
    gold = data.test
    sentences = [t.with_words(o.words) for t, o in zip(gold, obf)]
    from veil.parsing.train import default_model_path

    # the target parser, in the full bench, where `veil parse train` has trained it (the record says which ran)
    target = not data.quick and default_model_path().is_file()
    parsers = (HEADLINE_PARSER, "biaffine") if target else (HEADLINE_PARSER,)
    metrics: dict[str, Metric] = {}
    for parser in parsers:
        for name, m in _scores(parser, gold, sentences, cell.config.seed).items():
            metrics[f"{name}[{parser}]"] = m
        ref_key = ("reference", parser, cell.config.seed)
        if ref_key not in data._cache:  # the same parser on the original sentences: once per process
            data._cache[ref_key] = _scores(parser, gold, list(gold), cell.config.seed)
        for name, m in data._cache[ref_key].items():
            metrics[f"{name}[{parser} on originals]"] = m
    words = sum(map(len, gold))
    headline = metrics[f"uas[{HEADLINE_PARSER}]"]
    reference = metrics[f"uas[{HEADLINE_PARSER} on originals]"]
    rec = ResultRecord(method="bench", experiment=cell.id,
                       config={"utility": "UAS/LAS against the silver trees of the original sentences",
                               "parsers": list(parsers), "sentences": len(gold), "words": words,
                               "target_parser": ("biaffine" if target else "quick bench: not run" if data.quick
                                                 else "not trained here (`veil parse train`, about 45 minutes)")},
                       metrics=metrics, wall_time_s=0.0)
    bench = bench_block(utility="UAS", utility_metric={**_fraction(headline), "n": words},
                        utility_parser=HEADLINE_PARSER, reference_metric={**_fraction(reference), "n": words},
                        reference="the same parser on the original sentences")
    return finish(rec, cell, data, start, bench)
