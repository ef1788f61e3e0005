"""``veil adversarial sweep | train``: thin commands over veil.experiments.adversarial.attributes (``veil attack
attribute``, in :mod:`veil.cli.attack`, shares the run configuration and printing defined here).

Results go to ``./veil-results/attributes/`` (or ``$VEIL_RESULTS/attributes``) unless ``--results`` names another
folder; values and the output folder are checked before any work starts, and an existing record is kept unless
``--force``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from veil.cli.common import ForceOpt, JsonOpt, RayOpt, console, echo_json, parse_seeds, split_names

__all__ = ["register", "adversarial_app", "run_config", "result_folder", "summary", "print_result"]

adversarial_app = typer.Typer(help="Adversarial training against attribute inference from hidden representations "
                                   "(Coavoux et al. 2018).", no_args_is_help=True)

ResultsOpt = Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/attributes).")]
CorpusOpt = Annotated[str, typer.Option(help="news-articles, spam-assassin, drug-reviews or debates-2016.")]
DefenseOpt = Annotated[str, typer.Option(help="none, multidetask, grl, generation, decluster or leace.")]
WidthOpt = Annotated[int, typer.Option(min=1, help="Width W of r(x) (the paper sweeps 8-128).")]
SeedOpt = Annotated[int, typer.Option(min=0, help="Initialisation, batch order, dropout, the attackers' choices.")]
EncoderOpt = Annotated[str, typer.Option(help="lstm (the paper's) or minilm (a projection of frozen MiniLM).")]
EpochsOpt = Annotated[int, typer.Option(min=1, help="Main-model epochs (the paper: 16 for topics).")]
MaxTrainOpt = Annotated[Optional[int], typer.Option(min=2, help="Use at most this many training examples.")]


def run_config(corpus: str, defense: str, width: int, seed: int, encoder: str, epochs: int,
               max_train: Optional[int], alpha: Optional[float], reduction: str):
    from veil.experiments.adversarial.attributes import AttributeRun

    return AttributeRun(corpus=corpus, defense=defense, width=width, seed=seed, encoder=encoder, epochs=epochs,
                        max_train=max_train, alpha=alpha, reduction=reduction)


def result_folder(results: Optional[Path]) -> Path:
    from veil.outputs import check_output_dir, default_results_dir

    return check_output_dir(results if results is not None else default_results_dir("attributes"))


def summary(rec) -> dict:
    m = rec.metrics
    keys = ["test_accuracy", "majority_accuracy", "floor_privacy",
            *[k for k in m if k.startswith(("privacy[", "advantage["))]]
    return {k: m[k].to_dict() for k in keys if k in m}


def print_result(rec, path: Path, out) -> None:
    from rich.table import Table

    m = rec.metrics
    out.print(f"{rec.experiment}: main accuracy {m['test_accuracy']} (majority {m['majority_accuracy'].mean:.3f})",
              highlight=False)
    table = Table(title=f"privacy ({'1 - micro-F' if rec.config['kind'] == 'entities' else '1 - mean accuracy'}; "
                        f"floor {m['floor_privacy'].mean:.3f})")
    for col in ("attacker", "privacy [95% CI]", "advantage over floor [95% CI]"):
        table.add_column(col)
    for who in ("mlp", "mlp-wide", "linear", "adversary"):
        if f"privacy[{who}]" in m:
            table.add_row(who, str(m[f"privacy[{who}]"]), str(m[f"advantage[{who}]"]))
    out.print(table)
    out.print(f"wrote {path}", highlight=False)


@adversarial_app.command("sweep")
def sweep(
    corpus: CorpusOpt = "news-articles",
    seeds: Annotated[str, typer.Option(help="Comma-separated seeds.")] = "0,1,2",
    width: WidthOpt = 64,
    defenses: Annotated[Optional[str], typer.Option(help="Comma-separated defenses (default: none and every "
                                                        "registered representations defense; `veil defenses list`).")]
    = None,
    encoder: EncoderOpt = "lstm",
    epochs: EpochsOpt = 16,
    max_train: MaxTrainOpt = None,
    results: ResultsOpt = None,
    force: ForceOpt = False,
    workers: Annotated[int, typer.Option(min=1, help="Runs at once, as Ray tasks on a local cluster, each with one "
                                                     "torch thread (2 on a 2-core machine; 1: sequential, in this "
                                                     "process).")] = 1,
    ray: RayOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Every defense x seed on one corpus (resumable: existing records are kept unless --force)."""
    from veil.defenses.adversarial import defense_names
    from veil.experiments.adversarial.attributes import sweep as run_sweep

    valid = defense_names()
    names = tuple(valid) if defenses is None else tuple(split_names(defenses, "--defenses"))
    bad = [d for d in names if d not in valid]
    if bad or not names:
        raise typer.BadParameter(f"--defenses must name some of {', '.join(valid)}; got {defenses!r}")
    root = result_folder(results)
    out = console(as_json)
    paths = run_sweep(corpus, root, defenses=names, seeds=parse_seeds(seeds), width=width, force=force,
                      encoder=encoder, epochs=epochs, max_train=max_train, workers=workers, ray_address=ray,
                      log=lambda line: out.print(line, highlight=False, markup=False))
    if as_json:
        echo_json({"results": [str(p) for p in paths]})


@adversarial_app.command("train")  # after sweep: `veil adversarial --help` lists sweep, then train
def train(
    corpus: CorpusOpt = "news-articles",
    defense: DefenseOpt = "none",
    width: WidthOpt = 64,
    seed: SeedOpt = 0,
    encoder: EncoderOpt = "lstm",
    epochs: EpochsOpt = 16,
    max_train: MaxTrainOpt = None,
    alpha: Annotated[Optional[float], typer.Option(min=0.0, help="multidetask/grl/generation: weight of the main "
                                                                 "loss (1); decluster: alpha (0.1).")] = None,
    reduction: Annotated[str, typer.Option(help="generation: sum (the paper) or mean over characters.")] = "sum",
    results: ResultsOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Train the main model with a defense, then run every attacker on its r(x); one result JSON."""
    from veil.experiments.adversarial.attributes import run_or_skip
    from veil.results import ResultRecord

    cfg = run_config(corpus, defense, width, seed, encoder, epochs, max_train, alpha, reduction)
    root = result_folder(results)
    path, ran = run_or_skip(cfg, root, force=force, progress=True)
    rec = ResultRecord.read(path)
    if as_json:
        echo_json({"result": str(path), "ran": ran, "metrics": summary(rec)})
        return
    out = console()
    if not ran:
        out.print(f"{path} exists (pass --force to run again); showing it", highlight=False)
    print_result(rec, path, out)


def register(app: typer.Typer) -> None:
    app.add_typer(adversarial_app, name="adversarial")
