"""``veil dpsgd train``: DP-SGD against the non-private run of the same setting (veil.experiments.dpsgd).

Results go to ``./veil-results/dpsgd/`` (or ``$VEIL_RESULTS/dpsgd``) unless ``--results`` names another folder;
values and the output folder are checked before any work; a record of the same configuration is kept
(resumable), one of another configuration is refused unless ``--force``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from veil.cli.common import ForceOpt, JsonOpt, console, echo_json, finite, parse_floats, parse_seeds

__all__ = ["register", "dpsgd_app"]

dpsgd_app = typer.Typer(help="DP-SGD (Abadi et al. 2016) on Opacus: a classifier trained with differential "
                             "privacy (release kind: model).", no_args_is_help=True)


@dpsgd_app.command("train")
def train(
    corpus: Annotated[str, typer.Option(help="Labelled corpus, e.g. rt-polarity.")] = "rt-polarity",
    epsilon: Annotated[str, typer.Option(help="Target epsilon(s), comma-separated (each finite, > 0; above 50 "
                                              "warns). delta = 1/(10 n).")] = "1,3,8",
    setting: Annotated[str, typer.Option(help="head: an MLP head on frozen MiniLM embeddings; top-layers: MiniLM's "
                                              "last 2 layers trained with it (slower: about a minute per epoch of "
                                              "2,000 texts on one core).")] = "head",
    epochs: Annotated[int, typer.Option(min=1, help="Epochs (steps = round(epochs * n / batch size)); the "
                                                    "non-private run uses the same.")] = 10,
    batch_size: Annotated[int, typer.Option(min=1, help="Expected lot size (Poisson sampling rate = batch / n).")]
    = 256,
    clip: Annotated[float, typer.Option(help="L2 bound on each example's gradient.")] = 1.0,
    lr: Annotated[float, typer.Option(help="Learning rate.")] = 1e-3,
    optimizer: Annotated[str, typer.Option(help="adam (default) or sgd (momentum 0.9), on the noisy gradient. "
                                                "For --setting top-layers use sgd with --lr 0.1: with Adam, DP-SGD's "
                                                "top layers score about the majority class (docs/dpsgd.md).")]
    = "adam",
    accountant: Annotated[str, typer.Option(help="prv (default) or rdp; both are reported.")] = "prv",
    max_train: Annotated[Optional[int], typer.Option(min=2, help="At most this many training examples (an evenly "
                                                                 "spaced, seed-free subset).")] = None,
    seeds: Annotated[str, typer.Option(help="Comma-separated seeds (initial weights only; lots and noise come from "
                                            "the OS CSPRNG).")] = "0",
    results: Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/dpsgd).")] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Train at each target epsilon and without privacy; one record per (epsilon or none, seed)."""
    import veil.corpora as vc
    from veil.errors import UnknownNameError
    from veil.defenses.dpsgd.engine import OPTIMIZERS
    from veil.experiments.dpsgd import SETTINGS, run_dpsgd
    from veil.outputs import check_output_dir, default_results_dir
    from veil.results import ResultRecord
    from veil.validation import check_epsilon

    if corpus not in vc.names():
        raise UnknownNameError("corpus", corpus, vc.names())
    if setting not in SETTINGS:
        raise typer.BadParameter(f"--setting must be one of {', '.join(SETTINGS)}, got {setting!r}")
    if optimizer not in OPTIMIZERS:
        raise typer.BadParameter(f"--optimizer must be adam or sgd, got {optimizer!r}")
    if accountant not in ("prv", "rdp"):
        raise typer.BadParameter(f"--accountant must be prv or rdp, got {accountant!r}")
    eps = parse_floats(epsilon, "--epsilon", distinct=True)
    for e in eps:
        check_epsilon(e, what="DP-SGD")  # warns above the meaningful range, before any work
    finite("--clip", clip, low=0.0)
    finite("--lr", lr, low=0.0)
    seed_list = parse_seeds(seeds)
    root = check_output_dir(results if results is not None else default_results_dir("dpsgd"))
    say = console(as_json)
    import warnings

    with warnings.catch_warnings():  # warned once above; each run would repeat it
        warnings.filterwarnings("ignore", message=r"epsilon=.* is above", category=Warning)
        paths = run_dpsgd(root, corpus=corpus, epsilons=eps, setting=setting, epochs=epochs, batch_size=batch_size,
                          clip=clip, lr=lr, optimizer=optimizer, accountant=accountant, seeds=seed_list,
                          max_train=max_train, force=force,
                          log=lambda line: say.print(line, highlight=False, soft_wrap=True))
    if as_json:
        rows = []
        for p in paths:
            rec = ResultRecord.read(p)
            rows.append({"path": str(p), "epsilon_target": rec.config["epsilon"], "seed": rec.config["seed"],
                         "metrics": {k: m.to_dict() for k, m in rec.metrics.items()}})
        echo_json(rows)


def register(app: typer.Typer) -> None:
    app.add_typer(dpsgd_app, name="dpsgd")
