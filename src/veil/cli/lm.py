"""``veil lm train`` and ``veil lm attack``: a language model fine-tuned on a corpus with planted secrets, and what
the attacks get out of it (veil.experiments.generation).

Both commands name the same run (corpus, defense, steps, seed, sizes); ``train`` fine-tunes its model (resumable,
cached under ``VEIL_HOME/lm/``) and writes its utility record, ``attack`` reads that model and writes one record per
attack. Results go to ``./veil-results/generation/`` (or ``$VEIL_RESULTS/generation``) unless ``--results`` names
another folder; a record of the same configuration and model is kept, one of another is refused unless ``--force``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from veil.cli.common import ForceOpt, JsonOpt, console, echo_json, parse_names

__all__ = ["register", "lm_app"]

lm_app = typer.Typer(help="Language models fine-tuned on private text (release kind: generative-model): canary "
                          "exposure and training-data extraction on a corpus with planted secrets.",
                     no_args_is_help=True)

CorpusOpt = Annotated[str, typer.Option(help="Base corpus whose sentences are the private text, e.g. rt-polarity.")]
DefenseOpt = Annotated[str, typer.Option(help="A generative-model defense (`veil defenses list`), e.g. lm-plain.")]
StepsOpt = Annotated[Optional[int], typer.Option(min=1, help="Optimiser steps (default 1,000; --quick 60).")]
SeedOpt = Annotated[int, typer.Option(min=0, help="Seed of the planted corpus, the batch order and the attacks' "
                                                  "draws (the canaries' secrets come from the OS CSPRNG).")]
QuickOpt = Annotated[bool, typer.Option("--quick", help="The small run (a few hundred texts, 60 steps; a minute or "
                                                        "two on 2 cores).")]
EpsilonOpt = Annotated[Optional[float], typer.Option(help="lm-dpsgd's target epsilon per training text (default 8; "
                                                           "delta 1/(10 n)); only with --defense lm-dpsgd.")]
ResultsOpt = Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/generation).")]


def _run(corpus: str, defense: str, steps: int | None, seed: int, quick: bool, epsilon: float | None) -> Any:
    from veil.experiments.generation import lm_run

    return lm_run(corpus=corpus, defense=defense, steps=steps, seed=seed, quick=quick, epsilon=epsilon)


def _root(results: Path | None) -> Path:
    from veil.outputs import check_output_dir, default_results_dir

    return check_output_dir(results if results is not None else default_results_dir("generation"))


def _row(rec: Any, path: Path, kept: bool) -> dict[str, Any]:
    return {"path": str(path), "experiment": rec.experiment, "kept": kept,
            "metrics": {k: m.to_dict() for k, m in rec.metrics.items()}}


def _logger(say: Any) -> tuple[Any, set[str]]:
    """A log that prints each line and remembers the records the library kept rather than wrote."""
    kept: set[str] = set()

    def log(line: str) -> None:
        if line.startswith("kept "):
            kept.add(line.split()[1])
        say.print(line, highlight=False, soft_wrap=True)

    return log, kept


def _done(path: Path, kept: set[str]) -> str:
    return f"kept {path} (same configuration and model)" if str(path) in kept else f"wrote {path}"


@lm_app.command("train")
def train(corpus: CorpusOpt = "rt-polarity", defense: DefenseOpt = "lm-plain", epsilon: EpsilonOpt = None,
          steps: StepsOpt = None, seed: SeedOpt = 0, quick: QuickOpt = False, results: ResultsOpt = None,
          force: ForceOpt = False, as_json: JsonOpt = False) -> None:
    """Fine-tune the run's model on the planted corpus (resumable) and record its held-out perplexity."""
    from veil.experiments.generation import record_path, train_lm_run

    run = _run(corpus, defense, steps, seed, quick, epsilon)
    root = _root(results)
    say = console(as_json)
    log, kept = _logger(say)
    rec = train_lm_run(run, root, force=force, log=log)
    path = record_path(root, run, "utility")
    say.print(f"held-out perplexity {rec.metrics['heldout_perplexity']} (before fine-tuning "
              f"{rec.metrics['base_perplexity']}); {_done(path, kept)}", highlight=False, soft_wrap=True)
    if as_json:
        echo_json([_row(rec, path, str(path) in kept)])


@lm_app.command("attack")
def attack(corpus: CorpusOpt = "rt-polarity", defense: DefenseOpt = "lm-plain", epsilon: EpsilonOpt = None,
           steps: StepsOpt = None, seed: SeedOpt = 0, quick: QuickOpt = False,
           attacks: Annotated[str, typer.Option(help="Comma-separated: canary-exposure, extraction, pii-inference, "
                                                     "pii-reconstruction, membership.")]
           = "canary-exposure,extraction,pii-inference,pii-reconstruction,membership",
           results: ResultsOpt = None, force: ForceOpt = False, as_json: JsonOpt = False) -> None:
    """Attack the run's trained model (`veil lm train` first); one record per attack."""
    from veil.experiments.generation import ATTACKS, attack_lm_run, record_path, load_run_model

    names = parse_names(attacks, "--attacks", valid=ATTACKS, what="attack")
    run = _run(corpus, defense, steps, seed, quick, epsilon)
    root = _root(results)
    load_run_model(run)  # no trained model: the typed error naming `veil lm train`, before any work
    say = console(as_json)
    log, kept = _logger(say)
    recs = attack_lm_run(run, root, names, force=force, log=log)
    rows = []
    for rec in recs:
        path = record_path(root, run, rec.experiment)
        shown = ", ".join(f"{k} {m}" for k, m in rec.metrics.items())
        say.print(f"{rec.experiment}: {shown}; {_done(path, kept)}", highlight=False, soft_wrap=True)
        rows.append(_row(rec, path, str(path) in kept))
    if as_json:
        echo_json(rows)


def register(app: typer.Typer) -> None:
    app.add_typer(lm_app, name="lm")
