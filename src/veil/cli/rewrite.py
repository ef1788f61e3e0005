"""``veil rewrite utility``: a thin command over veil.experiments.rewriting.utility (what DP-MLM's rewritten text
still serves); its audit is ``veil audit dp-mlm``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from veil.cli.common import ForceOpt, JsonOpt, console, echo_json, parse_floats

__all__ = ["register", "rewrite_app"]

rewrite_app = typer.Typer(help="Text rewritten with a formal guarantee (DP-MLM): its utility (utility); its audit is "
                               "`veil audit dp-mlm`.", no_args_is_help=True)


@rewrite_app.command("utility")
def rewrite_utility(
    corpus: Annotated[str, typer.Option(help="Labelled corpus (its clean train split trains the classifier, its test "
                                             "split is rewritten).")] = "rt-polarity",
    epsilons: Annotated[str, typer.Option("--epsilons", "--epsilon", help="Comma-separated epsilons per word "
                                                                          "piece.")] = "10,25,50,100",
    n_test: Annotated[Optional[int], typer.Option(min=10, help="A seeded subsample of N test texts (default: the "
                                                               "whole test split).")] = None,
    calibration: Annotated[int, typer.Option(min=1, help="Public train texts the clipping bounds are calibrated "
                                                         "on.")] = 200,
    mlm: Annotated[Optional[str], typer.Option(help="mlm or mlm-quick (default: the strongest in VEIL_HOME).")]
    = None,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the calibration texts and the test subsample; the "
                                                  "rewrites draw from the OS CSPRNG.")] = 0,
    results: Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/rewriting).")] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """DP-MLM's utility per epsilon: a clean-trained classifier on rewritten test text, the meaning kept, examples.

    The masked LM reads every word piece of every test text once (rt-polarity's 1,283 test texts: minutes on 2
    cores with the quick masked LM); each epsilon then only draws. One record per epsilon; existing records are kept.
    """
    from veil.experiments.rewriting.utility import run_dp_mlm_utility
    from veil.outputs import default_results_dir
    from veil.results import ResultRecord

    msg = console(as_json)
    paths = run_dp_mlm_utility(results if results is not None else default_results_dir("rewriting"), corpus=corpus,
                               epsilons=parse_floats(epsilons, "--epsilons"), n_test=n_test,
                               calibration=calibration, mlm=mlm, seed=seed, force=force,
                               log=lambda line: msg.print(line, highlight=False, soft_wrap=True))
    if as_json:
        echo_json([ResultRecord.read(p).to_dict() for p in paths])


def register(app: typer.Typer) -> None:
    app.add_typer(rewrite_app, name="rewrite")
