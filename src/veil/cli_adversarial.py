"""``veil adversarial train | sweep`` and ``veil attack attribute``: thin commands over veil.experiments.attributes.

Results go to ``./veil-results/attributes/`` (or ``$VEIL_RESULTS/attributes``) unless ``--results`` names another
folder; values and the output folder are checked before any work starts, and an existing record is kept unless
``--force``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from veil.cli_common import ForceOpt, JsonOpt, console, echo_json, parse_seeds

__all__ = ["register", "adversarial_app"]

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


def _run(corpus: str, defense: str, width: int, seed: int, encoder: str, epochs: int, max_train: Optional[int],
         alpha: Optional[float], reduction: str):
    from veil.experiments.attributes import AttributeRun

    return AttributeRun(corpus=corpus, defense=defense, width=width, seed=seed, encoder=encoder, epochs=epochs,
                        max_train=max_train, alpha=alpha, reduction=reduction)


def _root(results: Optional[Path]) -> Path:
    from veil.outputs import check_output_dir, default_results_dir

    return check_output_dir(results if results is not None else default_results_dir("attributes"))


def _summary(rec) -> dict:
    m = rec.metrics
    keys = ["test_accuracy", "majority_accuracy", "floor_privacy",
            *[k for k in m if k.startswith(("privacy[", "advantage["))]]
    return {k: m[k].to_dict() for k in keys if k in m}


def _print(rec, path: Path, out) -> None:
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
    from veil.experiments.attributes import run_or_skip
    from veil.results import ResultRecord

    cfg = _run(corpus, defense, width, seed, encoder, epochs, max_train, alpha, reduction)
    root = _root(results)
    path, ran = run_or_skip(cfg, root, force=force, progress=True)
    rec = ResultRecord.read(path)
    if as_json:
        echo_json({"result": str(path), "ran": ran, "metrics": _summary(rec)})
        return
    out = console()
    if not ran:
        out.print(f"{path} exists (pass --force to run again); showing it", highlight=False)
    _print(rec, path, out)


AttackEncoderOpt = Annotated[str, typer.Option(help="minilm (default: a width-W projection of frozen MiniLM, the "
                                                    "setting where the attack shows a leak on news-articles: "
                                                    "privacy well below the constant-predictor floor) or lstm "
                                                    "(the paper's own encoder, which on news passages shows no "
                                                    "leak: privacy at the floor; see docs/results/attributes.md).")]


def attack_attribute(
    corpus: CorpusOpt = "news-articles",
    defense: DefenseOpt = "none",
    width: WidthOpt = 64,
    seed: SeedOpt = 0,
    encoder: AttackEncoderOpt = "minilm",
    epochs: EpochsOpt = 16,
    max_train: MaxTrainOpt = None,
    results: ResultsOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """The eavesdropper: attackers trained on r(x) of a (defended) model; privacy = 1 - their score.

    Uses the record of `veil adversarial train` with the same settings when it exists (no retraining), else
    trains the model first and writes that record. The default encoder is minilm, the setting that demonstrates
    the leak (the paper's LSTM, --encoder lstm, leaves news passages at the floor; see docs/results/attributes.md).
    """
    from veil.experiments.attributes import run_or_skip
    from veil.results import ResultRecord

    cfg = _run(corpus, defense, width, seed, encoder, epochs, max_train, None, "sum")
    path, _ = run_or_skip(cfg, _root(results), force=force, progress=True)
    rec = ResultRecord.read(path)
    if as_json:
        echo_json({"result": str(path), "config": rec.config, "metrics": _summary(rec),
                   "attacks": rec.extra.get("attacks", {})})
        return
    _print(rec, path, console())


@adversarial_app.command("sweep")
def sweep(
    corpus: CorpusOpt = "news-articles",
    seeds: Annotated[str, typer.Option(help="Comma-separated seeds.")] = "0,1,2",
    width: WidthOpt = 64,
    defenses: Annotated[str, typer.Option(help="Comma-separated defenses.")]
    = "none,multidetask,grl,generation,decluster,leace",
    encoder: EncoderOpt = "lstm",
    epochs: EpochsOpt = 16,
    max_train: MaxTrainOpt = None,
    results: ResultsOpt = None,
    force: ForceOpt = False,
    jobs: Annotated[int, typer.Option(min=1, help="Runs at once, each in its own process with one torch thread "
                                                  "(2 on a 2-core machine).")] = 1,
    as_json: JsonOpt = False,
) -> None:
    """Every defense x seed on one corpus (resumable: existing records are kept unless --force)."""
    from veil.defenses.adversarial import defense_names
    from veil.experiments.attributes import sweep as run_sweep

    names = tuple(d.strip() for d in defenses.split(",") if d.strip())
    valid = defense_names()
    bad = [d for d in names if d not in valid]
    if bad or not names:
        raise typer.BadParameter(f"--defenses must name some of {', '.join(valid)}; got {defenses!r}")
    root = _root(results)
    out = console(as_json)
    paths = run_sweep(corpus, root, defenses=names, seeds=parse_seeds(seeds), width=width, force=force,
                      encoder=encoder, epochs=epochs, max_train=max_train, jobs=jobs,
                      log=lambda line: out.print(line, highlight=False, markup=False))
    if as_json:
        echo_json({"results": [str(p) for p in paths]})


adversarial_app.command("train")(train)


def register(app: typer.Typer, attack_app: typer.Typer) -> None:
    app.add_typer(adversarial_app, name="adversarial")
    attack_app.command("attribute")(attack_attribute)
