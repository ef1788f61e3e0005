"""``veil parse treebank | train | eval | sweep | serve | client`` and ``veil parse obfuscator train``: thin commands
over veil.parsing, veil.defenses.obfuscation and veil.experiments.obfuscation.parsing (Hu et al. 2020); ``serve``
and ``client`` are defined in :mod:`veil.cli.parse_service`.

Results go to ``./veil-results/parsing/`` (or ``$VEIL_RESULTS/parsing``) unless ``--results`` names another
folder; every value and output location is checked before any work starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from veil.cli.common import ForceOpt, JsonOpt, console, echo_json, finite, parse_seeds, split_names
from veil.cli.obfuscate import LevelOpt, TreebankOpt, check_level, check_treebank
from veil.cli.parse_service import parse_client, parse_serve

__all__ = ["register", "parse_app", "run_one_cell"]

parse_app = typer.Typer(help="Dependency parsing on silver trees (Hu et al. 2020): treebank, parser, evaluation.",
                        no_args_is_help=True)
ResultsOpt = Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/parsing).")]
NTestOpt = Annotated[int, typer.Option(min=1, help="Test sentences (the first N of the test split).")]
SeedOpt = Annotated[int, typer.Option(min=0, help="Experiment seed (obfuscation draws of the test set, attackers).")]
obfuscator_app = typer.Typer(help="The neural obfuscator (Hu et al. 2020, Sec. 3-4), trained through veil's biaffine "
                                  "parser.", no_args_is_help=True)
parse_app.add_typer(obfuscator_app, name="obfuscator")
AttackStepsOpt = Annotated[int | None, typer.Option(min=1, help="Cap on the optimiser steps of trained and "
                                                     "veil-mlm-tuned (the same budget on a busy or an idle machine; "
                                                     "--minutes still applies). Default: no cap.")]
NeuralMinutesOpt = Annotated[float, typer.Option(min=0.05, help="Training budget of each neural obfuscator (minutes; "
                                                            "with --neural-steps a safety cap that marks a run cut "
                                                            "short).")]
NeuralStepsOpt = Annotated[Optional[int], typer.Option(min=1, help="Step budget of each neural obfuscator (the "
                                                               "temperature anneals over it; the same budget on a busy "
                                                               "or an idle machine). Default: the minute budget.")]
PrivacyWeightOpt = Annotated[float, typer.Option(min=0.0, help="Entropy bonus lambda over V_t (0: the paper).")]


MLMOpt = Annotated[str, typer.Option(help="veil's masked LM for the veil-mlm attackers: mlm (`veil models train mlm`) "
                                           "or mlm-quick.")]


def check_mlm(name: str, attackers: Any) -> str:
    """``--mlm``: a masked LM veil makes; when a veil-mlm attacker is asked for, it must be cached (checked before
    any work; the quick one is trained here if missing, about 6 minutes on 2 idle cores)."""
    from veil.models.mlm import MLM_NAMES

    if name not in MLM_NAMES:
        raise typer.BadParameter(f"--mlm must be one of {', '.join(MLM_NAMES)}, got {name!r}")
    if any(str(a).startswith("veil-mlm") for a in attackers):
        from veil.parsing.mlm import ensure_mlm

        ensure_mlm(name)
    return name


def _root(results: Optional[Path]) -> Path:
    from veil.outputs import check_output_dir, default_results_dir

    return check_output_dir(results if results is not None else default_results_dir("parsing"))


def _names(value: str, option: str, valid: Any) -> list[str]:
    """A comma-separated list of names: at least one, each valid, none twice."""
    got = split_names(value, option)
    if not got:
        raise typer.BadParameter(f"{option} needs at least one of {', '.join(valid)}, got {value!r}")
    bad = [g for g in got if g not in valid]
    if bad:
        raise typer.BadParameter(f"{option}: unknown {', '.join(map(repr, bad))}; valid: {', '.join(valid)}")
    return got


def run_one_cell(experiment: str, setup: Any, results: Optional[Path], force: bool, as_json: bool,
                 **grid: Any) -> None:
    """Run (or keep) the one sweep cell ``experiment`` and print its record (JSON, or one metric per line)."""
    from veil.experiments.obfuscation.parsing import cell_path, run_parsing
    from veil.results import ResultRecord

    root = _root(results)
    msg = console(as_json)
    run_parsing(root, setup=setup, force=force, log=lambda line: msg.print(line, highlight=False), **grid)
    rec = ResultRecord.read(cell_path(root, experiment, setup))
    if as_json:
        echo_json(rec.to_dict())
        return
    for key, metric in rec.metrics.items():
        msg.print(f"{key} = {metric}", highlight=False)


@parse_app.command("treebank")
def parse_treebank(
    max_docs: Annotated[Optional[int], typer.Option(min=1, help="Documents per corpus (trial builds).")] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Build (or resume) the silver treebank: spaCy sm parses of news-articles and brown, as CoNLL-U."""
    from veil.parsing.treebank import build_silver, treebank_info

    msg = console(as_json)
    root = build_silver(force=force, max_docs=max_docs, progress=True)
    info = treebank_info()
    if as_json:
        echo_json({"folder": str(root), **info})
        return
    for split, c in info["counts"].items():
        msg.print(f"{split}: {c['sentences']} sentences, {c['words']} words", highlight=False)
    msg.print(f"wrote {root}")


@parse_app.command("train")
def parse_train(
    treebank: TreebankOpt = "silver-sm",
    vectors: Annotated[str, typer.Option(help="md (initialise words from en_core_web_md's vectors) or none.")] = "md",
    max_minutes: Annotated[float, typer.Option(min=0.1, help="Training budget in minutes (with --max-steps: a safety "
                                                             "cap that marks the run cut short).")] = 45.0,
    max_steps: Annotated[Optional[int], typer.Option(min=1, help="Cap on the optimiser steps (the same budget on a "
                                                                 "busy or an idle machine). Default: none.")] = None,
    max_train: Annotated[Optional[int], typer.Option(min=1, help="Training sentences (a random subset).")] = None,
    hidden: Annotated[int, typer.Option(min=8, help="BiLSTM units per direction.")] = 128,
    seed: SeedOpt = 0,
    out: Annotated[Optional[Path], typer.Option(help="Model file (default VEIL_HOME/parsing/models/biaffine.pt).")]
    = None,
    resume: Annotated[bool, typer.Option("--resume/--no-resume", help="Continue an interrupted run of the same "
                                                                     "configuration (its state beside --out).")] = True,
    force: Annotated[bool, typer.Option("--force", help="Start afresh and replace an existing model at --out (and "
                                                        "its .json and .state.pt).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Train veil's biaffine parser on the treebank (best dev UAS kept; resumable). With the defaults it takes
    about 45 minutes (the --max-minutes budget) after `veil parse treebank`."""
    from veil.outputs import check_output_dir
    from veil.parsing.train import TrainConfig, default_model_path, resume_state, train_parser

    if vectors not in ("md", "none"):
        raise typer.BadParameter(f"--vectors must be md or none, got {vectors!r}")
    finite("--max-minutes", max_minutes, low=0.0)
    config = TrainConfig(treebank=check_treebank(treebank), vectors=vectors, max_minutes=max_minutes,
                         max_steps=max_steps, max_train=max_train, hidden=hidden, seed=seed)
    target = out if out is not None else default_model_path(config.name)
    check_output_dir(target.parent, option="--out")
    resume_state(config, target, resume=resume, force=force)  # existing outputs checked before any work
    msg = console(as_json)
    summary = train_parser(config, out=target, resume=resume, force=force,
                           log=lambda line: msg.print(line, highlight=False))
    if as_json:
        echo_json({k: v for k, v in summary.items() if k != "history"})
        return
    written = [p for p in (Path(summary["model"]), Path(summary["model"]).with_suffix(".json")) if p.is_file()]
    msg.print(f"best dev UAS {summary['best_dev_uas']:.2f} after {summary['steps']} steps "
              f"({summary['minutes']:.1f} min); wrote {' and '.join(map(str, written))}", highlight=False)


@parse_app.command("eval")
def parse_eval(
    parser: Annotated[str, typer.Option(help="biaffine, spacy-sm or spacy-md.")] = "biaffine",
    level: Annotated[str, typer.Option(help="none (original sentences) or P1..P5.")] = "none",
    treebank: TreebankOpt = "silver-sm",
    n_test: NTestOpt = 2000,
    model: Annotated[Optional[Path], typer.Option(help="Biaffine model file (default: the trained one).")] = None,
    seed: SeedOpt = 0,
    results: ResultsOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """UAS/LAS of a parser on (obfuscated) test sentences, against the silver trees of the originals."""
    from veil.experiments.obfuscation.parsing import ParsingSetup
    from veil.parsing.evaluate import PARSER_NAMES

    if parser not in PARSER_NAMES:
        raise typer.BadParameter(f"--parser must be one of {', '.join(PARSER_NAMES)}, got {parser!r}")
    setup = ParsingSetup(treebank=check_treebank(treebank), n_test=n_test, seed=seed,
                         model=None if model is None else str(model))
    run_one_cell(f"eval-{parser}-{level}", setup, results, force, as_json, parsers=[parser],
                 levels=[check_level(level, True)], attackers=[])


@obfuscator_app.command("train")
def obfuscator_train(
    level: LevelOpt = "P3",
    seed: Annotated[int, typer.Option(min=0, help="Training seed (initialisation, batch order, Gumbel noise; "
                                                  "public).")] = 0,
    treebank: TreebankOpt = "silver-sm",
    model: Annotated[Optional[Path], typer.Option(help="The biaffine parser to train through (default: the trained "
                                                       "one).")] = None,
    minutes: NeuralMinutesOpt = 4.0,
    steps: Annotated[Optional[int], typer.Option("--steps", min=1, help="Step budget (the temperature anneals over "
                                                                        "it; --minutes becomes a safety cap). "
                                                                        "Default: the minute budget.")] = None,
    max_train: Annotated[int, typer.Option(min=1, help="Training sentences (a random subset of the train split).")]
    = 20000,
    max_candidates: Annotated[int, typer.Option(min=2, help="Cap K on each tag's substitution vocabulary V_t (its K "
                                                            "most frequent words).")] = 2000,
    privacy_weight: PrivacyWeightOpt = 0.0,
    force: Annotated[bool, typer.Option("--force", help="Train again even if this obfuscator is cached.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Train (or load from VEIL_HOME/parsing/models) the neural obfuscator of one level and training seed."""
    from veil.defenses.obfuscation.neural import NeuralTraining, ObfuscatorConfig
    from veil.experiments.obfuscation.parsing import ParsingSetup, train_neural

    if model is not None and not model.is_file():
        raise typer.BadParameter(f"--model {model} is not a file")
    finite("--minutes", minutes, low=0.0)
    finite("--privacy-weight", privacy_weight, low=0.0, low_open=False)
    setup = ParsingSetup(treebank=check_treebank(treebank), model=None if model is None else str(model))
    msg = console(as_json)
    ob, path, key = train_neural(check_level(level), seed, setup=setup,
                                 config=ObfuscatorConfig(level=level, max_candidates=max_candidates),
                                 training=NeuralTraining(max_minutes=minutes, max_train=max_train,
                                                         privacy_weight=privacy_weight, max_steps=steps),
                                 force=force, log=lambda line: msg.print(line, highlight=False))
    if as_json:
        echo_json({"model": str(path), "key": key, **ob.config()})
        return
    msg.print(f"{path}: best dev UAS {ob.summary.get('best_dev_uas')} (start {ob.summary.get('start_dev_uas')}); "
              f"fingerprint {ob.fingerprint[:16]}", highlight=False)


@parse_app.command("sweep")
def parse_sweep(
    parsers: Annotated[str, typer.Option(help="Comma-separated parsers.")] = "biaffine,spacy-sm,spacy-md",
    levels: Annotated[str, typer.Option(help="Comma-separated levels (none, P1..P5).")] = "none,P1,P2,P3,P4,P5",
    attackers: Annotated[str, typer.Option(help="Comma-separated attackers (veil-mlm and veil-mlm-tuned need "
                                                "veil's masked LM: `veil models train mlm`).")] =
    "minilm,trained,mlm,keep-word,tag-frequency",
    treebank: TreebankOpt = "silver-sm",
    n_test: NTestOpt = 2000,
    train_sentences: Annotated[int, typer.Option(min=1, help="Public sentences each attacker learns from.")] = 20000,
    minutes: Annotated[float, typer.Option(min=0.1, help="Training budget of each neural attacker (a cap for trained "
                                                         "and veil-mlm-tuned, which stop when their own dev MRR "
                                                         "stops rising).")] = 8.0,
    attack_steps: AttackStepsOpt = None,
    mlm: MLMOpt = "mlm",
    seed: SeedOpt = 0,
    defense: Annotated[str, typer.Option(help="Comma-separated defenses: random (substitution) and/or neural (the "
                                              "neural obfuscator, one per level and training seed).")] = "random",
    training_seeds: Annotated[str, typer.Option(help="Comma-separated training seeds of the neural obfuscators.")]
    = "0,1,2",
    neural_minutes: NeuralMinutesOpt = 4.0,
    neural_steps: NeuralStepsOpt = None,
    privacy_weight: PrivacyWeightOpt = 0.0,
    results: ResultsOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Table 1 and Table 2 (Hu et al.): every parser and attacker at every level, for random substitution and/or
    the neural obfuscator.

    Resumable: cells already in --results are kept (an interrupted sweep goes on where it stopped).
    """
    from veil.defenses.obfuscation.neural import NeuralTraining
    from veil.experiments.obfuscation.parsing import ATTACKERS, DEFENSES, LEVELS, ParsingSetup, run_parsing
    from veil.parsing.evaluate import PARSER_NAMES
    from veil.results import ResultRecord

    lvls = _names(levels, "--levels", LEVELS)
    parser_names = _names(parsers, "--parsers", PARSER_NAMES)
    attacker_names = _names(attackers, "--attackers", ATTACKERS)
    defenses = _names(defense, "--defense", DEFENSES)
    try:
        parse_seeds(training_seeds)
    except typer.BadParameter:
        raise typer.BadParameter(f"--training-seeds must be comma-separated distinct ints >= 0, got "
                                 f"{training_seeds!r}") from None
    for option, value in (("--minutes", minutes), ("--neural-minutes", neural_minutes)):
        finite(option, value, low=0.0)
    finite("--privacy-weight", privacy_weight, low=0.0, low_open=False)
    setup = ParsingSetup(treebank=check_treebank(treebank), n_test=n_test, attack_train=train_sentences,
                         attack_minutes=minutes, seed=seed, mlm=check_mlm(mlm, attacker_names),
                         attack_steps=attack_steps)
    root = _root(results)
    msg = console(as_json)
    paths = run_parsing(root, parsers=parser_names, levels=lvls, attackers=attacker_names, setup=setup,
                        force=force, defenses=defenses, training_seeds=list(parse_seeds(training_seeds)),
                        training=NeuralTraining(max_minutes=neural_minutes, privacy_weight=privacy_weight,
                                                max_steps=neural_steps),
                        log=lambda line: msg.print(line, highlight=False))
    if as_json:
        echo_json({"results": str(root), "records": [ResultRecord.read(p).to_dict() for p in paths]})
        return
    msg.print(f"{len(paths)} records in {root}; render them with `veil report --results {root.parent}`",
              highlight=False)


parse_app.command("serve")(parse_serve)  # after sweep: `veil parse --help` lists serve and client last
parse_app.command("client")(parse_client)


def register(app: typer.Typer) -> None:
    app.add_typer(parse_app, name="parse")
