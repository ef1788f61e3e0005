"""``veil attack gradmatch-table | analytic | gradmatch | chain``: thin commands over veil.experiments.gradients.

Results go to ``./veil-results/gradients/`` (or ``$VEIL_RESULTS/gradients``) unless ``--results`` names another
folder; every value and the output folder are checked before any work starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from veil.cli_common import ForceOpt, JsonOpt, console, echo_json

__all__ = ["register"]

ResultsOpt = Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/gradients).")]


def _ints(value: str, option: str, minimum: int) -> tuple[int, ...]:
    try:
        out = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise typer.BadParameter(f"{option} must be comma-separated integers, e.g. 1,2,4; got {value!r}") from None
    if not out:
        raise typer.BadParameter(f"{option} needs at least one value")
    if any(v < minimum for v in out):
        raise typer.BadParameter(f"{option} values must be >= {minimum}, got {value!r}")
    if len(set(out)) != len(out):
        raise typer.BadParameter(f"{option} repeats a value ({value!r})")
    return out


def _root(results: Optional[Path]) -> Path:
    from veil.outputs import check_output_dir, default_results_dir

    return check_output_dir(results if results is not None else default_results_dir("gradients"))


def gradmatch_table(
    k: Annotated[str, typer.Option("--k", help="TextHide k values (comma-separated, >= 1).")] = "1,2,4",
    d: Annotated[str, typer.Option("--d", help="Mask dimensions d (comma-separated).")] = "4,16,64,256,1024",
    runs: Annotated[int, typer.Option(min=1, help="Independent attacks per cell (the paper: 50).")] = 50,
    seed: Annotated[int, typer.Option(min=0, help="Picks examples, head weights and dummies; never the key or the "
                                                  "mixing (OS CSPRNG).")] = 0,
    placement: Annotated[str, typer.Option(help="hidden (the paper's mimic: mask on the head's d-wide hidden layer) "
                                                "or input (veil's TextHide on the head's d-dim input).")] = "hidden",
    activation: Annotated[str, typer.Option(help="sigmoid (the DLG code the paper used) or relu (veil's head).")]
    = "sigmoid",
    max_evals: Annotated[int, typer.Option(min=1, help="Loss evaluations per attack (L-BFGS budget).")] = 600,
    baseline: Annotated[bool, typer.Option("--baseline/--no-baseline", help="Also run the no-defense row.")] = True,
    results: ResultsOpt = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Table 2 analogue: Alg. 3 gradient matching with dummy masks, success rate over --runs attacks per (k, d)."""
    from veil.experiments.gradients import run_table2, table2_cells

    if placement not in ("hidden", "input"):
        raise typer.BadParameter(f"--placement must be hidden or input, got {placement!r}")
    if activation not in ("sigmoid", "relu"):
        raise typer.BadParameter(f"--activation must be sigmoid or relu, got {activation!r}")
    cells = table2_cells(ks=_ints(k, "--k", 1), ds=_ints(d, "--d", 1), baseline=baseline, runs=runs, seed=seed,
                         placement=placement, activation=activation, max_evals=max_evals)
    root = _root(results)
    msg = console(as_json)
    paths = run_table2(cells, root, force=force, progress=True, log=lambda line: msg.print(line, highlight=False))
    if as_json:
        from veil.results import ResultRecord

        echo_json({"results": [str(p) for p in paths],
                   "table": [{"k": c.k, "d": c.d, **{name: m.to_dict() for name, m in
                                                      ResultRecord.read(p).metrics.items()}}
                             for c, p in zip(cells, paths)]})
        return
    _print_table(cells, paths, msg)


def _print_table(cells, paths, msg) -> None:
    from rich.table import Table

    from veil.results import ResultRecord

    ds = sorted({c.d for c in cells})
    table = Table(title="Alg. 3 success rate [95% Wilson CI] (encoding recovered)")
    table.add_column("row")
    for d in ds:
        table.add_column(f"d={d}")
    rows: dict[int, dict[int, str]] = {}
    for cell, path in zip(cells, paths):
        rec = ResultRecord.read(path)
        s, e = rec.metrics["success"], rec.metrics["encoding_recovered"]
        rows.setdefault(cell.k, {})[cell.d] = f"{s.mean:.2f} [{s.ci_low:.2f}, {s.ci_high:.2f}] ({e.mean:.2f})"
    for k in sorted(rows):
        table.add_row("baseline" if k == 0 else f"k={k}", *[rows[k].get(d, "-") for d in ds])
    msg.print(table)


def _tap(attack: str, record: Path, results: Optional[Path], seed: int, match: bool, max_evals: int, restarts: int,
         force: bool, as_json: bool) -> None:
    from veil.attacks.gradients.tap import Tap
    from veil.experiments.gradients import run_tap_attack, tap_result_path
    from veil.outputs import refuse_existing

    Tap(record)  # a missing or malformed tap fails here, before any work
    root = _root(results)
    path = tap_result_path(record, attack, root, seed)
    refuse_existing(path, force)
    rec = run_tap_attack(record, attack, seed=seed, match=match, max_evals=max_evals, restarts=restarts,
                         progress=True)
    rec.write(path)
    if as_json:
        echo_json(rec.to_dict())
        return
    out = console()
    from rich.table import Table

    table = Table(title=f"{attack} on {record.name} ({rec.config['client_mode']}, batch {rec.config['batch_size']}, "
                        f"defense {rec.config['defense'].get('name')})")
    for col in ("round", "client", "rows", "recovered", "vectors (correct)", "classes leaked"):
        table.add_column(col)
    for u in rec.extra["updates"]:
        sc = u.get("scores")
        table.add_row(str(u["round"]), u["client"], str(u["rows"]), "-" if sc is None else str(sc["recovered"]),
                      f"{u['vectors']}" + ("" if sc is None else f" ({sc['correct_vectors']})"),
                      ",".join(map(str, u["classes_leaked"])))
    out.print(table)
    for key, metric in rec.metrics.items():
        out.print(f"{key} = {metric}", highlight=False)
    if not rec.config["scored"]:
        out.print(f"no ground truth next to the tap ({record.name}.truth): recovery counts only, not scored")
    out.print(f"wrote {path}")


def attack_analytic(
    record: Annotated[Path, typer.Option(help="Tap folder of a recorded run (veil federated run --record DIR).")],
    results: ResultsOpt = None,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the matching's starts.")] = 0,
    match: Annotated[bool, typer.Option("--match/--no-match", help="Match the rows the ratios leave (alg2).")] = True,
    max_evals: Annotated[int, typer.Option(min=1, help="Matching budget per restart.")] = 400,
    restarts: Annotated[int, typer.Option(min=1, help="Matching restarts.")] = 2,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Read the head's inputs (TextHide encodings) off every client update of a recorded run; label leakage too."""
    _tap("analytic", record, results, seed, match, max_evals, restarts, force, as_json)


def attack_gradmatch(
    record: Annotated[Path, typer.Option(help="Tap folder of a recorded run (veil federated run --record DIR).")],
    results: ResultsOpt = None,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the dummies' starts.")] = 0,
    max_evals: Annotated[int, typer.Option(min=1, help="Loss evaluations per restart.")] = 400,
    restarts: Annotated[int, typer.Option(min=1, help="Restarts (the best match is kept).")] = 2,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Gradient matching in encoding space (Zhu et al. 2019) on every client update of a recorded run."""
    _tap("gradmatch", record, results, seed, True, max_evals, restarts, force, as_json)


def attack_chain(
    record: Annotated[Path, typer.Option(help="Tap folder of a run recorded with --truth (veil federated run "
                                              "--record DIR --truth).")],
    results: ResultsOpt = None,
    seed: Annotated[int, typer.Option(min=0, help="The attacker's own randomness (matching starts, mask-recovery "
                                                  "seeding).")] = 0,
    pool: Annotated[bool, typer.Option("--pool/--no-pool", help="Try to recover each client's mask pool first.")]
    = True,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """End to end: encodings off the updates, then each client's masks and the sentences mixed into them."""
    from veil.attacks.gradients.tap import Tap
    from veil.attacks.gradients.truth import truth_dir
    from veil.experiments.gradient_chain import run_chain
    from veil.outputs import refuse_existing

    Tap(record)  # a missing or malformed tap fails here, before any work
    if not (truth_dir(record) / "run.json").exists():
        from veil.errors import ResourceMissingError

        raise ResourceMissingError(f"{truth_dir(record)}/run.json", "veil federated run --record DIR --truth",
                                   message=f"{record} has no ground truth with its run configuration next to it "
                                           f"({truth_dir(record).name}/run.json): the chain is scored against it; "
                                           "record the run with `veil federated run --record DIR --truth`")
    root = _root(results)
    path = root / f"chain-{record.name}-seed{seed}.json"
    refuse_existing(path, force)
    rec = run_chain(record, seed=seed, pool_recovery=pool, progress=True)
    rec.write(path)
    if as_json:
        echo_json(rec.to_dict())
        return
    out = console()
    for key, metric in rec.metrics.items():
        out.print(f"{key} = {metric}", highlight=False)
    out.print(f"masks that explained the encodings: {rec.extra['mask_source']}", highlight=False)
    out.print(f"wrote {path}")


def register(attack_app: typer.Typer) -> None:
    attack_app.command("gradmatch-table")(gradmatch_table)
    attack_app.command("analytic")(attack_analytic)
    attack_app.command("gradmatch")(attack_gradmatch)
    attack_app.command("chain")(attack_chain)
