"""Hu et al. 2020, Tables 1 and 2 (random substitution): parsers on obfuscated text and word-recovery attacks.

One result record per cell, written atomically to ``<results>/``; a cell whose file exists is skipped unless
``force`` (so an interrupted sweep resumes; a file made under another budget or treebank is an error, never
passed off as this setup's). Cells:

* ``table1``: share of test tokens hidden at each level (one record);
* ``eval-<parser>-<level>``: UAS/LAS (with and without punctuation, sentence-bootstrap CIs) of ``biaffine``,
  ``spacy-sm`` or ``spacy-md`` on the test sentences obfuscated at ``level`` (``none``: the originals), each
  tree compared by position with the silver tree of the ORIGINAL sentence;
* ``attack-<attacker>-<level>``: MRR, prv, top-1 of ``minilm`` (a head trained over a frozen
  MiniLM, :class:`~veil.attacks.word_recovery.ContextualAttacker`), ``trained``, ``mlm``, ``keep-word`` or
  ``tag-frequency`` on the same obfuscated test sentences.

The obfuscated test set of a level is drawn with the experiment seed (``seed`` + level index), so every
parser and attacker sees the same sentences; seeding the substitution is for the experiment only (a release
uses ``rng=None``), and the :class:`~veil.errors.PrivacyLeakWarning` that says so is silenced here on purpose.
The attackers make their own training obfuscations with another seed (they know the mechanism, not the draws).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veil.errors import InvalidParameterError, PrivacyLeakWarning
from veil.experiments.outputs import tag

__all__ = ["ParsingSetup", "LEVELS", "ATTACKERS", "obfuscated_test", "run_parsing", "cell_path"]

LEVELS = ("none", "P1", "P2", "P3", "P4", "P5")
ATTACKERS = ("minilm", "trained", "mlm", "keep-word", "tag-frequency")


@dataclass(frozen=True)
class ParsingSetup:
    """Shared settings of a sweep (recorded in every record's config)."""

    treebank: str = "silver-sm"
    n_test: int = 2000
    attack_train: int = 20000
    attack_minutes: float = 8.0
    seed: int = 0
    model: str | None = None

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def cell_path(root: Path, experiment: str, setup: ParsingSetup) -> Path:
    return Path(root) / f"{experiment}-{tag(n=setup.n_test, seed=setup.seed)}.json"


def _obfuscator(vocab: Any, level: str, seed: int) -> Any:
    from veil.defenses.obfuscation import RandomSubstitution

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)  # experiment seeds, see the module docstring
        return RandomSubstitution(vocabulary=vocab, level=level, rng=seed)


def obfuscated_test(test: Sequence[Any], vocab: Any, level: str, seed: int) -> list[Any]:
    """The test sentences obfuscated at ``level`` (reproducible from ``seed``)."""
    ob = _obfuscator(vocab, level, seed + LEVELS.index(level))
    return [ob.obfuscate(t.words, t.tags) for t in test]


def _kept(path: Path, setup: ParsingSetup, force: bool, relevant: Sequence[str]) -> bool:
    """True when ``path`` holds this cell already (kept, the sweep resumes); raises when it holds the same cell
    under another setup (a different budget or treebank), which a resume would otherwise pass off as this one."""
    if force or not path.exists():
        return False
    from veil.results import ResultRecord

    old = ResultRecord.read(path).config
    mine = setup.to_dict()
    differ = [k for k in relevant if old.get(k) != mine[k]]
    if differ:
        what = ", ".join(f"{k}={old.get(k)!r}, now {mine[k]!r}" for k in differ)
        raise InvalidParameterError(f"{path} was made with another setup ({what}); pass --force to replace it or "
                                    f"choose another results folder")
    return True


#: setup fields each kind of cell depends on (n_test and seed are in the file name)
_EVAL_FIELDS = ("treebank", "model")
_ATTACK_FIELDS = ("treebank", "attack_train", "attack_minutes")
_NEURAL = ("minilm", "trained", "mlm")


def _record(experiment: str, config: dict[str, Any], metrics: dict[str, Any], seconds: float,
            extra: dict[str, Any] | None = None) -> Any:
    from veil.results import ResultRecord

    return ResultRecord(method="parsing", experiment=experiment, config=config, metrics=metrics,
                        wall_time_s=seconds, extra=extra or {})


def run_parsing(root: str | Path, *, parsers: Sequence[str] = ("biaffine", "spacy-sm", "spacy-md"),
                levels: Sequence[str] = LEVELS, attackers: Sequence[str] = ATTACKERS,
                setup: ParsingSetup = ParsingSetup(), force: bool = False,
                log: Callable[[str], None] = print) -> list[Path]:
    """Run every missing cell (see the module docstring); returns the record paths.

    torch runs with one CPU thread here (several times faster than two on a shared 2-core machine).
    """
    from veil.parsing.train import torch_threads

    with torch_threads(1):
        return _run(root, parsers, levels, attackers, setup, force, log)


def _run(root: str | Path, parsers: Sequence[str], levels: Sequence[str], attackers: Sequence[str],
         setup: ParsingSetup, force: bool, log: Callable[[str], None]) -> list[Path]:
    from veil.defenses.obfuscation import DEFAULT_SPECTRUM, TagVocabulary
    from veil.parsing.evaluate import PARSER_NAMES
    from veil.parsing.treebank import load_treebank
    from veil.results import Metric, Timer

    for name, given, valid in (("parser", parsers, PARSER_NAMES), ("level", levels, LEVELS),
                               ("attacker", attackers, ATTACKERS)):
        bad = [g for g in given if g not in valid]
        if bad:
            raise InvalidParameterError(f"unknown {name} {bad}; valid: {', '.join(valid)}")
    root = Path(root)
    train = load_treebank("train", setup.treebank)
    test = load_treebank("test", setup.treebank, limit=setup.n_test)
    vocab = TagVocabulary.from_sentences((t.words, t.tags) for t in train)
    base = {**setup.to_dict(), "test_sentences": len(test), "test_words": sum(map(len, test))}
    paths: list[Path] = []

    path = cell_path(root, "table1", setup)
    if not _kept(path, setup, force, ("treebank",)):
        metrics = {f"share_{lv}": Metric(mean=100 * DEFAULT_SPECTRUM.share_hidden([t.tags for t in test], lv),
                                         n=base["test_words"]) for lv in LEVELS[1:]}
        sizes = {lv: {t: len(vocab.candidates(t)) for t in sorted(DEFAULT_SPECTRUM.hidden_tags(lv))}
                 for lv in LEVELS[1:]}
        _record("table1", {**base, "groups": {k: list(v) for k, v in DEFAULT_SPECTRUM.groups.items()}}, metrics,
                0.0, {"vocabulary_sizes": sizes}).write(path)
    paths.append(path)
    cache: dict[str, list[Any]] = {}

    def sentences(level: str) -> list[Any]:
        if level not in cache:
            cache[level] = [t for t in test] if level == "none" else [
                t.with_words(o.words) for t, o in zip(test, obfuscated_test(test, vocab, level, setup.seed))]
        return cache[level]

    for parser in parsers:
        for level in levels:
            path = cell_path(root, f"eval-{parser}-{level}", setup)
            paths.append(path)
            if _kept(path, setup, force, _EVAL_FIELDS):
                continue
            from veil.parsing.evaluate import attachment_scores, parse_with

            with Timer() as timer:
                pred = parse_with(parser, sentences(level), model=setup.model)
                metrics = attachment_scores(test, pred, seed=setup.seed)
            _record(f"eval-{parser}-{level}", {**base, "parser": parser, "level": level}, metrics,
                    timer.seconds).write(path)
            log(f"{parser} {level}: UAS {metrics['uas'].mean:.2f} LAS {metrics['las'].mean:.2f} "
                f"({timer.seconds:.0f} s)")
    for attacker in attackers:
        for level in [lv for lv in levels if lv != "none"]:
            path = cell_path(root, f"attack-{attacker}-{level}", setup)
            paths.append(path)
            if _kept(path, setup, force, _ATTACK_FIELDS if attacker in _NEURAL else ("treebank",)):
                continue
            with Timer() as timer:
                metrics, config = _attack(attacker, level, train, test, vocab, setup)
            _record(f"attack-{attacker}-{level}", {**base, "attacker": attacker, "level": level, "attack": config},
                    metrics, timer.seconds).write(path)
            log(f"{attacker} {level}: prv {metrics['prv'].mean:.2f} top-1 {metrics['top1'].mean:.2f} "
                f"({timer.seconds:.0f} s)")
    return paths


def _attack(attacker: str, level: str, train: list[Any], test: list[Any], vocab: Any,
            setup: ParsingSetup) -> tuple[dict[str, Any], dict[str, Any]]:
    import numpy as np

    from veil.attacks.word_recovery import AttackVocabulary, KeepWord, TagFrequency, observe, score_attack

    obf = obfuscated_test(test, vocab, level, setup.seed)
    text, originals = observe(obf), [list(o.key.originals) for o in obf]
    avocab = AttackVocabulary.build(t.words for t in train)
    public = [train[i] for i in np.random.default_rng(setup.seed).permutation(len(train))[:setup.attack_train]]
    if attacker == "keep-word":
        atk: Any = KeepWord(avocab)
    elif attacker == "tag-frequency":
        atk = TagFrequency(avocab, ((t.words, t.tags) for t in train))
    elif attacker in ("trained", "minilm"):
        from veil.attacks.word_recovery import ContextualAttacker, TrainedAttacker

        own = _obfuscator(vocab, level, setup.seed + 1000)  # the attacker's own draws, not the client's
        made = [own.obfuscate(t.words, t.tags) for t in public]
        if attacker == "trained":
            atk = TrainedAttacker(avocab, vocab.words.keys(), seed=setup.seed).fit(
                observe(made), [list(o.key.originals) for o in made], max_minutes=setup.attack_minutes)
        else:
            atk = ContextualAttacker(avocab, vocab.words.keys(), seed=setup.seed).fit(
                observe(made), [list(o.key.originals) for o in made], max_minutes=setup.attack_minutes,
                progress=True)
    else:
        atk = _mlm(avocab, vocab, public, setup)
    return score_attack(atk, text, originals, seed=setup.seed), atk.config()


def _mlm(avocab: Any, vocab: Any, public: list[Any], setup: ParsingSetup) -> Any:
    """The masked-LM attacker, trained once per (treebank, size, seed, budget) and cached under VEIL_HOME."""
    from veil._io import veil_home
    from veil.attacks.word_recovery import MaskedLMAttacker

    path = veil_home() / "parsing" / "attackers" / (
        f"mlm-{setup.treebank}-{tag(n=len(public), min=setup.attack_minutes, seed=setup.seed)}.pt")
    if path.is_file():
        return MaskedLMAttacker.load(path)
    atk = MaskedLMAttacker(avocab, vocab.words.keys(), seed=setup.seed).fit(
        [(t.words, t.tags) for t in public], max_minutes=setup.attack_minutes)
    atk.save(path)
    return atk
