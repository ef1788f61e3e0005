"""Hu et al. 2020, Tables 1 and 2 (random substitution): parsers on obfuscated text and word-recovery attacks.

One result record per cell, written atomically to ``<results>/``; a cell whose file exists is skipped unless
``force`` (so an interrupted sweep resumes; a file made under another budget or treebank is an error, never
passed off as this setup's). Cells:

* ``table1``: share of test tokens hidden at each level (one record);
* ``eval-<parser>-<level>``: UAS/LAS (with and without punctuation, sentence-bootstrap CIs) of ``biaffine``,
  ``spacy-sm`` or ``spacy-md`` on the test sentences obfuscated at ``level`` (``none``: the originals), each
  tree compared by position with the silver tree of the ORIGINAL sentence;
* ``attack-<attacker>-<level>``: MRR, prv, top-1 of ``minilm`` (a head trained over a frozen
  MiniLM, :class:`~veil.attacks.word_recovery.ContextualAttacker`), ``trained``, ``mlm``, ``veil-mlm`` and
  ``veil-mlm-tuned`` (veil's own masked LM, zero-shot and fine-tuned), ``keep-word`` or ``tag-frequency`` on the
  same obfuscated test sentences; ``trained`` and ``veil-mlm-tuned`` records carry their learning curve
  (``extra["curve"]``: their own dev MRR and the test prv at each evaluation).

These are the cells of the ``random`` defense (random substitution). The ``neural`` defense (Hu et al.'s neural
obfuscator, :mod:`veil.defenses.obfuscation.neural`) adds ``eval-<parser>-<level>-neural-s<seed>`` and
``attack-<attacker>-<level>-neural-s<seed>`` for each training seed: one obfuscator per level and training seed,
trained through the biaffine parser (``setup.model``) and cached under ``VEIL_HOME/parsing/models/`` as
``neural-<level>-s<seed>-<key>.pt``, where the key hashes the treebank, the parser file's sha256 and the
obfuscator's configs (:func:`neural_model_path`). Each neural record carries the obfuscator's config, training
summary, fingerprint and key; a record made by another obfuscator setup is refused as a record of another setup.
An obfuscator trained with the privacy knob (``privacy_weight`` lambda > 0) has cells of its own,
``...-neural-pw<lambda>-s<seed>`` (:func:`neural_suffix`), beside the lambda = 0 ones it is compared with.

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
from veil.outputs import tag

__all__ = ["ParsingSetup", "LEVELS", "ATTACKERS", "DEFENSES", "obfuscated_test", "run_parsing", "cell_path",
           "build_attacker",
           "neural_model_path", "neural_suffix", "train_neural"]

LEVELS = ("none", "P1", "P2", "P3", "P4", "P5")


def __getattr__(name: str) -> Any:
    """``ATTACKERS`` and ``DEFENSES``: asked of the registries (obfuscated-text attacks and defenses) on first use."""
    if name == "ATTACKERS":
        from veil.attacks.word_recovery import attacker_names

        return tuple(attacker_names())
    if name == "DEFENSES":
        from veil.defenses.obfuscation import method_names

        return tuple(method_names())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class ParsingSetup:
    """Shared settings of a sweep (recorded in every record's config)."""

    treebank: str = "silver-sm"
    n_test: int = 2000
    attack_train: int = 20000
    attack_minutes: float = 8.0
    seed: int = 0
    model: str | None = None
    mlm: str = "mlm"
    #: a cap on the optimiser steps of the attackers that stop on their own dev MRR (``trained``,
    #: ``veil-mlm-tuned``): unlike minutes, the same budget whatever else the machine runs. None: no cap (only
    #: ``attack_minutes``), and left out of the record (records made before the cap existed match it)
    attack_steps: int | None = None

    def __post_init__(self) -> None:
        s = self.attack_steps
        if s is not None and (isinstance(s, bool) or not isinstance(s, int) or s < 1):
            raise InvalidParameterError(f"attack_steps must be an int >= 1 or None, got {s!r}")

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        out = asdict(self)
        if self.attack_steps is None:
            del out["attack_steps"]
        return out


def cell_path(root: Path, experiment: str, setup: ParsingSetup) -> Path:
    return Path(root) / f"{experiment}-{tag(n=setup.n_test, seed=setup.seed)}.json"


def _obfuscator(vocab: Any, level: str, seed: int) -> Any:
    from veil.defenses.obfuscation import RandomSubstitution

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)  # experiment seeds, see the module docstring
        return RandomSubstitution(vocabulary=vocab, level=level, rng=seed)


def _seeded_neural(network: Any, seed: int) -> Any:
    from veil.defenses.obfuscation.neural import NeuralObfuscator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)  # experiment seeds, see the module docstring
        return NeuralObfuscator(network=network, rng=seed)


def obfuscated_test(test: Sequence[Any], vocab: Any, level: str, seed: int,
                    make: Callable[[int], Any] | None = None) -> list[Any]:
    """The test sentences obfuscated at ``level`` (reproducible from ``seed``) by random substitution, or by the
    obfuscator ``make(seed)`` returns (e.g. a seeded neural obfuscator)."""
    ob = (make or (lambda sd: _obfuscator(vocab, level, sd)))(seed + LEVELS.index(level))
    return ob.transform((t.words, t.tags) for t in test)


def neural_suffix(seed: int, training: Any = None) -> str:
    """The cell-name suffix of the neural obfuscator of training ``seed``: ``-neural-s<seed>``, or
    ``-neural-pw<lambda>-s<seed>`` when trained with the privacy knob lambda > 0."""
    weight = float(getattr(training, "privacy_weight", 0.0) or 0.0)
    return f"-neural-pw{weight:g}-s{seed}" if weight > 0 else f"-neural-s{seed}"


def neural_model_path(level: str, seed: int, setup: ParsingSetup, config: Any = None,
                      training: Any = None) -> tuple[Path, str, Any, Any]:
    """Where the neural obfuscator of ``level`` and training ``seed`` is cached, its key, and its two configs."""
    import json
    from dataclasses import replace

    from veil._io import sha256_file, sha256_text, veil_home
    from veil.defenses.obfuscation.neural import NeuralTraining, ObfuscatorConfig
    from veil.parsing.train import default_model_path

    config = replace(config or ObfuscatorConfig(), level=level)
    training = replace(training or NeuralTraining(), seed=seed)
    parser = Path(setup.model) if setup.model is not None else default_model_path()
    if not parser.is_file():
        from veil.errors import ResourceMissingError

        from veil.parsing.train import _TRAIN_HINT

        raise ResourceMissingError(f"the biaffine parser {parser}", "veil parse train",
                                   message=f"the neural obfuscator trains through the biaffine parser {parser}, "
                                           f"which does not exist; {_TRAIN_HINT}")
    key = sha256_text(json.dumps({"treebank": str(setup.treebank), "parser_sha256": sha256_file(parser),
                                  "config": config.to_dict(), "training": {k: v for k, v in training.to_dict().items()
                                                                           if k != "threads"}}, sort_keys=True))[:12]
    return veil_home() / "parsing" / "models" / f"neural-{level}-s{seed}-{key}.pt", key, config, training


def train_neural(level: str, seed: int, *, setup: ParsingSetup = ParsingSetup(), config: Any = None,
                 training: Any = None, force: bool = False, train: Sequence[Any] | None = None,
                 log: Callable[[str], None] = print) -> tuple[Any, Path, str]:
    """The neural obfuscator of ``level`` and training ``seed`` (trained through ``setup.model`` on
    ``setup.treebank``, or loaded from its cache unless ``force``): ``(obfuscator, path, key)``; it draws from
    the OS CSPRNG."""
    from veil.defenses.obfuscation.neural import NeuralObfuscator, train_obfuscator
    from veil.parsing.train import load_parser
    from veil.parsing.treebank import load_treebank

    path, key, config, training = neural_model_path(level, seed, setup, config, training)
    if path.is_file() and not force:
        log(f"neural obfuscator {level} seed {seed}: {path} (cached)")
        return NeuralObfuscator.load(path), path, key
    train = list(train) if train is not None else load_treebank("train", setup.treebank)
    dev = load_treebank("dev", setup.treebank, limit=training.dev_sentences)
    ob = train_obfuscator(load_parser(setup.model), train, dev, config=config, training=training, log=log)
    ob.save(path)
    log(f"neural obfuscator {level} seed {seed}: best dev UAS {ob.summary['best_dev_uas']:.2f} "
        f"(start {ob.summary['start_dev_uas']:.2f}) after {ob.summary['steps']} steps; wrote {path}")
    return ob, path, key


def _kept(path: Path, setup: ParsingSetup, force: bool, relevant: Sequence[str], key: str | None = None,
          inputs: dict[str, Any] | None = None) -> bool:
    """True when ``path`` holds this cell already (kept, the sweep resumes). A record made under another setup
    (a different budget, training size or treebank, or another obfuscator ``key``) or from other ``inputs`` (the
    biaffine parser's sha256: a parser trained again at the same path is another parser) raises
    :class:`~veil.errors.StaleResultError` naming the keys and --force; a damaged one (empty, not UTF-8, not a
    record) raises :class:`~veil.errors.DataFormatError` naming its path: neither is ever counted as done."""
    if force or not path.exists():
        return False
    from veil.results import ResultRecord, check_same_config

    old = ResultRecord.read(path).config
    mine = {**setup.to_dict(), "obfuscator_key": key, **(inputs or {})}
    fields = (*relevant, *(("obfuscator_key",) if key else ()), *(inputs or {}))
    # attack_steps is in neither when unset (to_dict leaves it out; records made before it existed lack it)
    check_same_config({k: old[k] for k in fields if k in old}, {k: mine[k] for k in fields if k in mine}, path)
    return True


#: setup fields each kind of cell depends on (n_test and seed are in the file name)
_EVAL_FIELDS = ("treebank", "model")
_ATTACK_FIELDS = ("treebank", "attack_train", "attack_minutes", "attack_steps")
_NEURAL = ("minilm", "trained", "mlm", "veil-mlm-tuned")  # every attack record is checked on _ATTACK_FIELDS
#: the attackers whose training is drawn as a learning curve (test prv at each of their dev evaluations)
CURVED = ("trained", "veil-mlm-tuned")
#: how many test sentences (the first ones) each point of a learning curve is scored on
CURVE_SENTENCES = 500


def _record(experiment: str, config: dict[str, Any], metrics: dict[str, Any], seconds: float,
            extra: dict[str, Any] | None = None) -> Any:
    from veil.results import ResultRecord

    return ResultRecord(method="parsing", experiment=experiment, config=config, metrics=metrics,
                        wall_time_s=seconds, extra=extra or {})


def run_parsing(root: str | Path, *, parsers: Sequence[str] = ("biaffine", "spacy-sm", "spacy-md"),
                levels: Sequence[str] = LEVELS, attackers: Sequence[str] | None = None,
                setup: ParsingSetup = ParsingSetup(), force: bool = False, defenses: Sequence[str] = ("random",),
                training_seeds: Sequence[int] = (0, 1, 2), obfuscator: Any = None, training: Any = None,
                log: Callable[[str], None] = print) -> list[Path]:
    """Run every missing cell (see the module docstring); returns the record paths.

    ``defenses``: ``random`` and/or ``neural``; the neural cells use one obfuscator per level and training seed
    in ``training_seeds``, built from ``obfuscator`` (an ObfuscatorConfig; its level is each cell's) and
    ``training`` (a NeuralTraining; its seed is each training seed); None: their defaults.
    torch runs with one CPU thread here (several times faster than two on a shared 2-core machine).
    """
    from veil.parsing.train import torch_threads

    from veil.attacks.word_recovery import attacker_names
    from veil.defenses.obfuscation import method_names

    attackers = attacker_names() if attackers is None else attackers
    valid = method_names()
    bad = [d for d in defenses if d not in valid]
    if bad or not defenses:
        raise InvalidParameterError(f"unknown defense {bad}; valid: {', '.join(valid)}")
    if "neural" in defenses and (not training_seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0
                                                           for s in training_seeds)):
        raise InvalidParameterError(f"training_seeds must be ints >= 0, got {list(training_seeds)}")
    with torch_threads(1):
        return _run(root, parsers, levels, attackers, setup, force, log, defenses, training_seeds, obfuscator,
                    training)


def _run(root: str | Path, parsers: Sequence[str], levels: Sequence[str], attackers: Sequence[str],
         setup: ParsingSetup, force: bool, log: Callable[[str], None], defenses: Sequence[str] = ("random",),
         training_seeds: Sequence[int] = (), obfuscator: Any = None, training: Any = None) -> list[Path]:
    from veil.defenses.obfuscation import DEFAULT_SPECTRUM
    from veil.attacks.word_recovery import attacker_names
    from veil.experiments._sweep import Sweep, run_records
    from veil.parsing.evaluate import PARSER_NAMES
    from veil.parsing.treebank import load_treebank
    from veil.results import Metric, Timer

    for name, given, valid in (("parser", parsers, PARSER_NAMES), ("level", levels, LEVELS),
                               ("attacker", attackers, attacker_names())):
        bad = [g for g in given if g not in valid]
        if bad:
            raise InvalidParameterError(f"unknown {name} {bad}; valid: {', '.join(valid)}")
    root = Path(root)
    if "biaffine" in parsers:  # a missing, damaged or foreign model file fails before any record is written
        from veil.parsing.train import load_parser

        load_parser(setup.model)
    train = load_treebank("train", setup.treebank)
    test = load_treebank("test", setup.treebank, limit=setup.n_test)
    if len(test) < setup.n_test:
        log(f"veil: warning: the test split has {len(test)} sentences, fewer than --n-test {setup.n_test}; using all "
            f"{len(test)} (records say so in test_sentences)")
    if attackers and any(a in _NEURAL for a in attackers) and len(train) < setup.attack_train:
        log(f"veil: warning: the train split has {len(train)} sentences, fewer than --train-sentences "
            f"{setup.attack_train}; the attackers learn from all {len(train)}")
    from veil.defenses.defaults import tag_vocabulary

    vocab = tag_vocabulary(train)
    base = {**setup.to_dict(), "test_sentences": len(test), "test_words": sum(map(len, test))}
    parser_sha: dict[str, str] = {}

    def parser_input(parser: str) -> dict[str, str]:
        """What an eval cell of ``parser`` reads beyond its setup: the biaffine model file's sha256."""
        if parser != "biaffine":
            return {}
        if not parser_sha:
            from veil._io import sha256_file
            from veil.parsing.train import default_model_path

            parser_sha["parser_sha256"] = sha256_file(Path(setup.model) if setup.model else default_model_path())
        return dict(parser_sha)

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

    def cells(suffix: str, lvls: Sequence[str], make: Callable[[int], Any] | None, extra: dict[str, Any],
              key: str | None = None) -> None:
        """The eval and attack cells of one defense: ``<kind>-<name>-<level><suffix>``."""
        cache: dict[str, list[Any]] = {}

        def sentences(level: str) -> list[Any]:
            if level not in cache:
                cache[level] = [t for t in test] if level == "none" else [
                    t.with_words(o.words) for t, o in zip(test, obfuscated_test(test, vocab, level, setup.seed,
                                                                                make))]
            return cache[level]

        def run_cell(spec: tuple[str, str, str]) -> Any:
            kind, who, level = spec
            if kind == "eval":
                from veil.parsing.evaluate import attachment_scores, parse_with

                with Timer() as timer:
                    pred = parse_with(who, sentences(level), model=setup.model)
                    metrics = attachment_scores(test, pred, seed=setup.seed)
                return _record(_experiment(spec, suffix), {**base, "parser": who, "level": level, **extra,
                                                           **parser_input(who)}, metrics, timer.seconds)
            with Timer() as timer:
                metrics, config, curve = _attack(who, level, train, test, vocab, setup, make, log=log)
            return _record(_experiment(spec, suffix), {**base, "attacker": who, "level": level, "attack": config,
                                                        **extra}, metrics, timer.seconds,
                           {"curve": curve, "curve_sentences": min(CURVE_SENTENCES, len(test))} if curve else None)

        def finished(spec: tuple[str, str, str], path: Path) -> bool:
            if spec[0] == "eval":
                return _kept(path, setup, False, _EVAL_FIELDS, key, parser_input(spec[1]))
            return _kept(path, setup, False, _ATTACK_FIELDS, key)

        # sequential: the cells share the obfuscated test sentences of each level (and a neural obfuscator)
        specs = [("eval", p, lv) for p in parsers for lv in lvls] + [
            ("attack", a, lv) for a in attackers for lv in lvls if lv != "none"]
        sweep = Sweep(name=f"parsing{suffix}", path=lambda spec: cell_path(root, _experiment(spec, suffix), setup),
                      cell_id=lambda spec: _experiment(spec, suffix), finished=finished, run=run_cell,
                      summary=_summary, skip_log="none")
        paths.extend(run_records(sweep, specs, root, force=force, progress=False, log=log))

    if any(str(a).startswith("veil-mlm") for a in attackers):
        paths.append(_model_record(root, setup, force))
    if "random" in defenses:
        cells("", levels, None, {})
    if "neural" in defenses:
        for seed in training_seeds:
            for level in [lv for lv in levels if lv != "none"]:
                suffix = neural_suffix(seed, training)
                key = neural_model_path(level, seed, setup, obfuscator, training)[1]
                names = [(f"eval-{p}-{level}{suffix}", _EVAL_FIELDS, parser_input(p)) for p in parsers] + [
                    (f"attack-{a}-{level}{suffix}", _ATTACK_FIELDS, None) for a in attackers]
                if all(_kept(cell_path(root, n, setup), setup, force, fields, key, inputs)
                       for n, fields, inputs in names):
                    paths += [cell_path(root, n, setup) for n, _, _ in names]  # every cell there: no obfuscator needed
                    continue
                ob, _, key = train_neural(level, seed, setup=setup, config=obfuscator, training=training, train=train,
                                          log=log)
                extra = {"defense": "neural", "training_seed": seed, "obfuscator_key": key,
                         "obfuscator": ob.config()}
                cells(suffix, [level], lambda sd, net=ob.network: _seeded_neural(net, sd), extra, key)
    return paths


def _model_record(root: Path, setup: ParsingSetup, force: bool) -> Path:
    """``model-<name>``: what veil's masked LM ``setup.mlm`` was trained on and its held-out learning curve, from
    its manifest (the attack records name its sha256). A record of another model is refused unless ``force``."""
    from veil.models.mlm import load_mlm, mlm_dir, read_manifest
    from veil.results import Metric, ResultRecord, check_same_config

    load_mlm(setup.mlm)  # missing or damaged: a typed error naming `veil models train mlm`
    m = read_manifest(mlm_dir(setup.mlm), setup.mlm)
    path = cell_path(root, f"model-{setup.mlm}", setup)
    config = {k: m.get(k) for k in ("name", "base", "data", "train_sentences", "train_tokens", "tokens_seen", "steps",
                                     "epochs_done", "minutes", "stopped", "selected_step", "sha256", "config", "veil",
                                     "torch", "device", "created")}
    if path.exists() and not force:
        check_same_config({"sha256": ResultRecord.read(path).config.get("sha256")}, {"sha256": m["sha256"]}, path)
        return path
    held = m["heldout"]
    ResultRecord(method="parsing", experiment=f"model-{setup.mlm}", config=config,
                 metrics={"heldout_accuracy": Metric(mean=float(held["accuracy"]), n=int(held["masked_tokens"])),
                          "start_accuracy": Metric(mean=float(held["start_accuracy"]), n=int(held["masked_tokens"]))},
                 wall_time_s=60.0 * float(m.get("minutes") or 0.0),
                 extra={"curve": m.get("curve", []), "heldout": held}).write(path)
    return path


def _experiment(spec: tuple[str, str, str], suffix: str) -> str:
    """``eval-<parser>-<level><suffix>`` or ``attack-<attacker>-<level><suffix>``."""
    kind, who, level = spec
    return f"{kind}-{who}-{level}{suffix}"


def _summary(rec: Any) -> str:
    m = rec.metrics
    if "uas" in m:
        return f"UAS {m['uas'].mean:.2f} LAS {m['las'].mean:.2f}"
    return f"prv {m['prv'].mean:.2f} top-1 {m['top1'].mean:.2f}"


def _attack(attacker: str, level: str, train: list[Any], test: list[Any], vocab: Any, setup: ParsingSetup,
            make: Callable[[int], Any] | None = None, log: Callable[[str], None] | None = None
            ) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """Score ``attacker`` on the test sentences obfuscated by random substitution or by ``make(seed)``; for the
    attackers of :data:`CURVED`, also its learning curve: at each of its own dev evaluations, prv and top-1 on the
    first :data:`CURVE_SENTENCES` test sentences (scored only: the attacker selects on its own dev split)."""
    from veil.attacks.word_recovery import ObfuscatedText, observe, score_attack

    make = make or (lambda sd: _obfuscator(vocab, level, sd))
    obf = obfuscated_test(test, vocab, level, setup.seed, make)
    text, originals = observe(obf), [list(o.key.originals) for o in obf]
    curve: list[dict[str, Any]] = []
    on_eval = None
    if attacker in CURVED:
        n = min(CURVE_SENTENCES, len(text))
        head = ObfuscatedText(text.words[:n], text.tags[:n], text.positions[:n])

        def on_eval(atk: Any, row: dict[str, Any]) -> None:
            scored = score_attack(atk, head, originals[:n], n_boot=200, seed=setup.seed)
            curve.append({**row, "test_prv": round(scored["prv"].mean, 3), "test_top1": round(scored["top1"].mean, 3)})

    atk = build_attacker(attacker, train, vocab, setup, make, on_eval=on_eval, log=log)
    return score_attack(atk, text, originals, seed=setup.seed), atk.config(), curve


def build_attacker(attacker: str, train: list[Any], vocab: Any, setup: ParsingSetup,
                   make: Callable[[int], Any], *, on_eval: Callable[[Any, dict[str, Any]], None] | None = None,
                   log: Callable[[str], None] | None = None) -> Any:
    """The word-recovery ``attacker`` (``keep-word``, ``tag-frequency``, ``trained``, ``minilm``, ``mlm``,
    ``veil-mlm`` or ``veil-mlm-tuned``), trained where it learns on its own obfuscations of public ``train``
    sentences made by ``make(seed)`` (the mechanism, with the attacker's own draws: seed ``setup.seed + 1000``).
    ``trained`` and ``veil-mlm-tuned`` stop when their own dev MRR stops rising, within ``setup.attack_minutes``
    and ``setup.attack_steps`` (``on_eval(attacker, row)`` sees each of their evaluations); the others train for
    ``setup.attack_minutes``.
    ``veil-mlm`` and ``veil-mlm-tuned`` use veil's masked LM ``setup.mlm`` (``veil models train mlm``)."""
    import numpy as np

    from veil.attacks.word_recovery import AttackVocabulary, KeepWord, TagFrequency, observe

    avocab = AttackVocabulary.build(t.words for t in train)
    public = [train[i] for i in np.random.default_rng(setup.seed).permutation(len(train))[:setup.attack_train]]
    tagged = [(t.words, t.tags) for t in train]
    if attacker == "keep-word":
        return KeepWord(avocab)
    if attacker == "tag-frequency":
        return TagFrequency(avocab, tagged)
    if attacker == "veil-mlm":
        from veil.attacks.word_recovery import ZeroShotMLMAttacker

        return ZeroShotMLMAttacker(tagged, model=setup.mlm)
    if attacker in ("trained", "minilm", "veil-mlm-tuned"):
        from veil.attacks.word_recovery import ContextualAttacker, TrainedAttacker, TunedMLMAttacker

        own = make(setup.seed + 1000)  # the same mechanism (and network), the attacker's own draws
        made = own.transform((t.words, t.tags) for t in public)
        pairs = (observe(made), [list(o.key.originals) for o in made])
        if attacker == "veil-mlm-tuned":
            return TunedMLMAttacker(tagged, model=setup.mlm, seed=setup.seed).fit(
                *pairs, max_minutes=setup.attack_minutes, max_steps=setup.attack_steps, on_eval=on_eval, log=log)
        if attacker == "trained":
            return TrainedAttacker(avocab, vocab.words.keys(), seed=setup.seed).fit(
                *pairs, max_minutes=setup.attack_minutes, max_steps=setup.attack_steps, on_eval=on_eval)
        return ContextualAttacker(avocab, vocab.words.keys(), seed=setup.seed).fit(
            *pairs, max_minutes=setup.attack_minutes, progress=True)
    return _mlm(avocab, vocab, public, setup)


def _mlm(avocab: Any, vocab: Any, public: list[Any], setup: ParsingSetup) -> Any:
    """The masked-LM attacker, trained once per (treebank, size, seed, budget) and cached under VEIL_HOME."""
    from veil._io import veil_home
    from veil.attacks.word_recovery import MaskedLMAttacker

    from veil.parsing.treebank import treebank_fingerprint

    # keyed by the treebank's content (a rebuilt silver treebank or a folder of your own gets its own attacker)
    path = veil_home() / "parsing" / "attackers" / (
        f"mlm-{treebank_fingerprint(setup.treebank)[:12]}-"
        f"{tag(n=len(public), min=setup.attack_minutes, seed=setup.seed)}.pt")
    if path.is_file():
        return MaskedLMAttacker.load(path)
    atk = MaskedLMAttacker(avocab, vocab.words.keys(), seed=setup.seed).fit(
        [(t.words, t.tags) for t in public], max_minutes=setup.attack_minutes)
    atk.save(path)
    return atk
