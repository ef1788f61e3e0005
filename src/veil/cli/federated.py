"""``veil federated run | sweep | analytic-sweep | chain-sweep``: federated TextHide on Flower (simulation), one
result JSON per run."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Optional

import typer

from veil.cli.common import ForceOpt, JsonOpt, console, echo_json, parse_floats, parse_ints, parse_seeds, usage_errors

__all__ = ["register", "federated_app"]

federated_app = typer.Typer(help="Federated TextHide on Flower: clients encrypt their own batches with their own "
                                 "secret pools; only head weights leave them.", no_args_is_help=True)


@federated_app.command("run")
def run(
    corpus: Annotated[str, typer.Option(help="A labelled built-in corpus (see `veil corpora list`).")] = "rt-polarity",
    clients: Annotated[int, typer.Option(min=1, help="Number of clients (virtual SuperNodes).")] = 3,
    rounds: Annotated[int, typer.Option(min=1, help="Federated rounds.")] = 5,
    mode: Annotated[str, typer.Option(help="alg2: one plain SGD step per round (the update is lr x gradient, as "
                                           "Algorithm 2 sends); fedavg: local epochs of AdamW.")] = "alg2",
    m: Annotated[int, typer.Option(min=0, help="Mask pool size per client (0 with --k 1: no defense).")] = 256,
    k: Annotated[int, typer.Option(min=1, help="Examples mixed per encoding.")] = 4,
    mixing: Annotated[str, typer.Option(help="TextHide intra- or inter-dataset mixing.")] = "intra",
    alpha: Annotated[Optional[float], typer.Option(min=0.0, help="Per-class Dirichlet(alpha) non-IID partition; "
                                                                 "leave out for IID.")] = None,
    batch_size: Annotated[int, typer.Option(min=1, help="Batch size (>= k).")] = 32,
    lr: Annotated[Optional[float], typer.Option(min=0.0, help="Learning rate (default 0.5 alg2, 1e-3 fedavg).")]
    = None,
    local_epochs: Annotated[int, typer.Option(min=1, help="fedavg: local epochs per round.")] = 1,
    max_train: Annotated[int, typer.Option(min=0, help="Use this many training examples (0 = all).")] = 0,
    max_test: Annotated[int, typer.Option(min=0, help="Use this many test examples (0 = all).")] = 0,
    seed: Annotated[int, typer.Option(min=0, help="Partition, head init, batch order; never a client's key.")] = 0,
    finetune: Annotated[bool, typer.Option("--finetune", help="Also fine-tune MiniLM on every client (fedavg "
                                                              "only; replies then carry the encoder, 91 MB).")]
    = False,
    encoder_lr: Annotated[float, typer.Option(help="--finetune: the encoder's AdamW "
                                                                         "learning rate.")] = 2e-5,
    engine: Annotated[str, typer.Option(help="flower (simulation on Ray) or reference (the in-process loop).")]
    = "flower",
    record: Annotated[Optional[Path], typer.Option(help="Record every global model and client reply here (the "
                                                        "eavesdropper's tap; the input of `veil attack analytic`).")]
    = None,
    truth: Annotated[bool, typer.Option("--truth", help="With --record: clients also write the ground truth of "
                                                        "their head inputs to RECORD.truth (experiments only: it "
                                                        "holds what the keys protect).")] = False,
    results: Annotated[Optional[Path], typer.Option(help="Folder for the result JSON (default "
                                                         "./veil-results/federated).")] = None,
    timeout: Annotated[float, typer.Option(min=1.0, help="Seconds to wait for clients, per round.")] = 600.0,
    dp: Annotated[Optional[str], typer.Option(help="Differential privacy: server (the server clips each update "
                                                   "and noises the average), client (clients clip, the server "
                                                   "noises) or local (clients clip and noise their own replies). "
                                                   "Needs --clip and --noise.")] = None,
    clip: Annotated[Optional[float], typer.Option(help="--dp: the L2 bound on each client's update.")] = None,
    noise: Annotated[Optional[float], typer.Option(help="--dp: the noise multiplier z (std z x clip on the sum).")]
    = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Train a classifier head (and with --finetune MiniLM) on TextHide-encrypted vectors across clients with
    Flower."""
    from veil._io import atomic_write_json
    from veil.federated.checks import check_engine, check_run_options, prepare_run
    from veil.federated.config import FederatedConfig
    from veil.federated.run import run_federated

    with usage_errors():
        check_engine(engine)
        check_run_options(lr=lr, alpha=alpha, encoder_lr=encoder_lr, timeout=timeout, truth=truth, record=record,
                          dp=dp, clip=clip, noise=noise)
    cfg = FederatedConfig(corpus=corpus, clients=clients, rounds=rounds, client_mode=mode, m=m, k=k, mode=mixing,
                          alpha=alpha or 0.0, batch_size=batch_size, lr=lr or 0.0, local_epochs=local_epochs,
                          max_train=max_train, max_test=max_test, seed=seed, timeout=timeout, finetune=finetune,
                          encoder_lr=encoder_lr, dp=dp or "", dp_clip=clip or 0.0, dp_noise=noise or 0.0)
    path = prepare_run(cfg, results=results, record=record, truth=truth, force=force)
    con = console(as_json)
    con.print(f"federated {cfg.run_name}: {clients} clients x {rounds} rounds on Flower ({engine})", markup=False)
    rec, _ = run_federated(cfg, engine=engine, record=record, truth=truth, force=force,
                           progress=lambda row: _round_line(row, rounds))
    atomic_write_json(path, rec.to_dict())
    _print_run(cfg, rec, path, record, con, as_json)


def _print_run(cfg, rec, path: Path, record: Optional[Path], con, as_json: bool) -> None:
    if as_json:
        echo_json({"result": str(path), **rec.to_dict()})
        return
    for row in rec.extra["rounds"]:
        acc = row.get("test_accuracy")
        con.print(f"round {row['round']}: train loss {row['train_loss']:.4f}"
                  + (f", test accuracy {acc:.3f}" if acc is not None else ""), markup=False)
    if cfg.dp:
        acc = rec.config["differential_privacy"]
        con.print(f"differential privacy ({cfg.dp}): epsilon {acc['epsilon']:.3f} (RDP {acc['epsilon_rdp']:.3f}) at "
                  f"delta {acc['delta']:.3g} for {acc['unit']}, protecting {acc['protects']}", markup=False)
    con.print(f"wrote {path}" + (f"; tap in {record}" if record else ""), markup=False)


def _round_line(row: dict, rounds: int) -> None:
    """Progress on stderr as each round ends (the run can take minutes)."""
    import sys

    acc = row.get("test_accuracy")
    print(f"veil: federated round {row['round']}/{rounds}: train loss {row['train_loss']:.4f}"
          + (f", test accuracy {acc:.3f}" if acc is not None else ""), file=sys.stderr, flush=True)


@federated_app.command("sweep")
def sweep(
    corpus: Annotated[str, typer.Option(help="A labelled built-in corpus.")] = "rt-polarity",
    seeds: Annotated[str, typer.Option(help="Comma-separated seeds.")] = "0,1,2",
    clients: Annotated[str, typer.Option(help="Comma-separated client counts (1 = centralised is always run).")]
    = "3,5,10",
    alphas: Annotated[str, typer.Option(help="Comma-separated Dirichlet alphas (0 = IID).")] = "0,0.5,0.1",
    rounds: Annotated[int, typer.Option(min=1, help="Rounds (= epochs over the data: one local epoch each).")] = 20,
    engine: Annotated[str, typer.Option(help="flower or reference.")] = "flower",
    results: Annotated[Optional[Path], typer.Option(help="Folder for the result JSONs (default "
                                                         "./veil-results/federated).")] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """The utility grid: centralised vs federated, plain vs TextHide (256,4), IID and non-IID; resumable."""
    from veil.experiments.federated.utility import run_cells, utility_grid
    from veil.federated.checks import check_engine, check_sizes
    from veil.outputs import check_output_dir, default_results_dir

    with usage_errors():
        check_engine(engine)
    counts = parse_ints(clients, "--clients", minimum=1)
    alpha_values = parse_floats(alphas, "--alphas", low_open=False, distinct=True)
    out = check_output_dir(results if results is not None else default_results_dir("federated"))
    cells = utility_grid(corpus=corpus, seeds=parse_seeds(seeds), clients=counts, alphas=alpha_values, rounds=rounds)
    check_sizes(cells[0])
    con = console(as_json)
    paths = run_cells(cells, out, engine=engine, force=force, log=lambda msg: con.print(msg, markup=False))
    if as_json:
        echo_json({"results": [str(p) for p in paths]})


def _tap_sweep_args(batch_sizes: str, engine: str, results: Optional[Path]) -> tuple[tuple[int, ...], Path]:
    """The recorded-run sweeps' checked batch sizes and result folder (default ./veil-results/gradients)."""
    from veil.federated.checks import check_engine
    from veil.outputs import check_output_dir, default_results_dir

    with usage_errors():
        check_engine(engine)
    sizes = parse_ints(batch_sizes, "--batch-sizes", minimum=1)
    return sizes, check_output_dir(results if results is not None else default_results_dir("gradients"))


# the options the two tap sweeps share
TapCorpusOpt = Annotated[str, typer.Option(help="A labelled built-in corpus.")]
BatchSizesOpt = Annotated[str, typer.Option(help="Comma-separated alg2 batch sizes.")]
TapsOpt = Annotated[Path, typer.Option(help="Folder for the recorded runs and their truth (data; not for git).")]
GradientResultsOpt = Annotated[Optional[Path], typer.Option(help="Folder for the attack results (default "
                                                                 "./veil-results/gradients).")]
TapEngineOpt = Annotated[str, typer.Option(help="flower or reference.")]


@federated_app.command("analytic-sweep")
def analytic_sweep(
    corpus: TapCorpusOpt = "rt-polarity",
    batch_sizes: BatchSizesOpt = "1,2,4,8,16,32",
    taps: TapsOpt = Path("veil-results/taps"),
    results: GradientResultsOpt = None,
    engine: TapEngineOpt = "flower",
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Record small TextHide (256,4) runs on Flower and read their encodings off the updates, by batch size."""
    from veil.experiments.federated.taps import analytic_grid, run_analytic_cells

    sizes, out = _tap_sweep_args(batch_sizes, engine, results)
    from veil.outputs import check_distinct_outputs

    check_distinct_outputs({"--taps": taps, "--results": out})
    con = console(as_json)
    paths = run_analytic_cells(analytic_grid(corpus=corpus, batch_sizes=sizes), out, taps, engine=engine,
                               force=force, log=lambda msg: con.print(msg, markup=False))
    if as_json:
        echo_json({"results": [str(p) for p in paths]})


@federated_app.command("chain-sweep")
def chain_sweep(
    corpus: TapCorpusOpt = "rt-polarity",
    batch_sizes: BatchSizesOpt = "1,2,4,8,16,32",
    rounds: Annotated[int, typer.Option(min=1, help="Rounds per recorded run (3 clients each).")] = 5,
    taps: TapsOpt = Path("veil-results/taps"),
    results: GradientResultsOpt = None,
    engine: TapEngineOpt = "flower",
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Record TextHide (256,4) runs on Flower and attack them end to end: updates -> encodings -> sentences."""
    from veil.experiments.federated.chain import chain_grid, run_chain_cells

    sizes, out = _tap_sweep_args(batch_sizes, engine, results)
    from veil.outputs import check_distinct_outputs

    check_distinct_outputs({"--taps": taps, "--results": out})
    con = console(as_json)
    paths = run_chain_cells(chain_grid(corpus=corpus, batch_sizes=sizes, rounds=rounds), out, taps,
                            engine=engine, force=force, log=lambda msg: con.print(msg, markup=False))
    if as_json:
        echo_json({"results": [str(p) for p in paths]})


@federated_app.command("dp-sweep")
def dp_sweep(
    corpus: TapCorpusOpt = "sms-spam",
    rounds: Annotated[int, typer.Option(min=1, help="Rounds per recorded run (3 clients each).")] = 2,
    batch_size: Annotated[int, typer.Option(min=1, help="alg2 batch size.")] = 8,
    clip: Annotated[float, typer.Option(help="The L2 bound on each client's update.")] = 1.0,
    noise: Annotated[float, typer.Option(help="The noise multiplier z.")] = 1.0,
    taps: TapsOpt = Path("veil-results/taps"),
    results: GradientResultsOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Record plain alg2 runs on Flower without DP and with server, client and local DP, and run the end-to-end
    chain on each: what the server reads off the updates of a DP run."""
    from veil.experiments.federated.chain import dp_grid, run_chain_cells

    for option, value in (("--clip", clip), ("--noise", noise)):
        if not (math.isfinite(value) and value > 0):
            raise typer.BadParameter(f"{option} must be a finite number > 0, got {value:g}")
    _, out = _tap_sweep_args(str(batch_size), "flower", results)
    from veil.outputs import check_distinct_outputs

    check_distinct_outputs({"--taps": taps, "--results": out})
    con = console(as_json)
    paths = run_chain_cells(dp_grid(corpus=corpus, rounds=rounds, batch_size=batch_size, clip=clip, noise=noise),
                            out, taps, engine="flower", force=force, log=lambda msg: con.print(msg, markup=False))
    if as_json:
        echo_json({"results": [str(p) for p in paths]})


def register(app: typer.Typer) -> None:
    app.add_typer(federated_app, name="federated")
