"""``veil texthide eval | sweep``: thin commands over veil.experiments.texthide.eval (the attacks on TextHide are in
:mod:`veil.cli.attack`).

Results go to ``./veil-results/texthide/`` (or ``$VEIL_RESULTS/texthide``) unless ``--results``/``--out``
names another place; every value and output location is checked before training starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from veil.cli.common import ForceOpt, JsonOpt, RayOpt, WorkersOpt, console, echo_json, finite, parse_m, parse_seeds

__all__ = ["register", "texthide_app", "check_mode"]

texthide_app = typer.Typer(help="TextHide (Huang et al. 2020): train and evaluate on encrypted representations.",
                           no_args_is_help=True)

_MODES = ("intra", "inter")


def check_mode(mode: str) -> str:
    if mode not in _MODES:
        raise typer.BadParameter(f"--mode must be intra or inter, got {mode!r}")
    return mode


@texthide_app.command("eval")
def texthide_eval(
    corpus: Annotated[str, typer.Option(help="Labelled corpus to train and test on.")] = "rt-polarity",
    m: Annotated[str, typer.Option("--m", help="Mask pool size: 0 (no mask), an integer, or inf.")] = "256",
    k: Annotated[int, typer.Option("--k", min=1, help="Representations mixed per encryption (1 = no mixing).")] = 4,
    mode: Annotated[str, typer.Option(help="intra (private only) or inter (half public).")] = "intra",
    finetune: Annotated[bool, typer.Option("--finetune", help="Fine-tune the encoder (default: frozen encoder, MLP head).")] = False,
    seeds: Annotated[str, typer.Option(help="Experiment seeds (head init, data order), comma-separated.")] = "0,1,2",
    epochs: Annotated[Optional[int], typer.Option(min=1, help="Training epochs (default 300 frozen, 4 fine-tuned).")] = None,
    patience: Annotated[Optional[int], typer.Option(min=1, help="Early-stopping patience in epochs (default 50 frozen, 2 fine-tuned).")] = None,
    batch_size: Annotated[Optional[int], typer.Option(min=1, help="Batch size (default 64 frozen, 32 fine-tuned).")] = None,
    head_warmup: Annotated[Optional[int], typer.Option(min=0, help="Fine-tuned: head-only epochs on the frozen encoder first (default 60; 0 = none).")] = None,
    encoder_lr: Annotated[float, typer.Option(help="Fine-tuned: encoder learning rate (finite, > 0).")] = 2e-5,
    max_train: Annotated[Optional[int], typer.Option(min=1, help="Use at most this many training examples.")] = None,
    public: Annotated[str, typer.Option(help="Public corpus for inter mode.")] = "health-tweets",
    out: Annotated[Optional[Path], typer.Option(help="Result JSON (default <results>/<cell>-<budget>.json).")] = None,
    results: Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/texthide).")] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Train with (m,k)-TextHide and report test metrics, mean +- std over seeds (JSON saved)."""
    import veil.corpora as vc
    from veil.outputs import check_output_file
    from veil.experiments.texthide.eval import TextHideEval, existing_result, result_path, run_texthide_eval

    cfg = TextHideEval(corpus=corpus, m=parse_m(m), k=k, mode=check_mode(mode), finetune=finetune,
                       seeds=parse_seeds(seeds), epochs=epochs, patience=patience, batch_size=batch_size,
                       head_warmup=head_warmup, encoder_lr=finite("--encoder-lr", encoder_lr, low=0.0),
                       max_train=max_train, public=public)
    for name in (corpus,) + ((public,) if cfg.mode == "inter" else ()):
        if name not in vc.names():
            from veil.errors import UnknownNameError

            raise UnknownNameError("corpus", name, vc.names())
    if results is not None and out is None:
        from veil.outputs import check_output_dir

        check_output_dir(results)
    path = check_output_file(out if out is not None else result_path(cfg, results), force=True,
                             suffixes=(".json",))
    existing_result(cfg, path, force=force, keep=False)  # damaged, another configuration, or this one: refused
    msg = console(as_json)
    record = run_texthide_eval(cfg, log=lambda line: msg.print(line, highlight=False))
    record.write(path)
    if as_json:
        echo_json(record.to_dict())
        return
    for key, metric in record.metrics.items():
        if key.startswith("test_"):
            msg.print(f"{cfg.name}: {key.removeprefix('test_')} = {metric}", highlight=False)
    msg.print(f"wrote {path}")


@texthide_app.command("sweep")
def texthide_sweep(
    which: Annotated[str, typer.Argument(help="table1 (baseline/intra/inter on 4 tasks) or grid ((m,k) on rt-polarity).")],
    finetune: Annotated[bool, typer.Option("--finetune", help="Fine-tune the encoder (table1 only).")] = False,
    seeds: Annotated[Optional[str], typer.Option(help="Seeds (default 0,1,2 for table1, 0,1 for grid).")] = None,
    epochs: Annotated[Optional[int], typer.Option(min=1, help="Training epochs (default 300 frozen, 60 grid, 4 fine-tuned).")] = None,
    patience: Annotated[Optional[int], typer.Option(min=1, help="Early-stopping patience (default 50 frozen, 15 grid, 2 fine-tuned).")] = None,
    head_warmup: Annotated[Optional[int], typer.Option(min=0, help="Fine-tuned: head-only epochs first (default 60).")] = None,
    max_train: Annotated[Optional[int], typer.Option(min=1, help="Use at most this many training examples.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Re-run configurations whose result file exists.")] = False,
    results: Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/texthide).")] = None,
    workers: WorkersOpt = 1,
    ray: RayOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a whole TextHide experiment; one JSON per configuration (finished ones are skipped unless --force)."""
    from veil.experiments.texthide.eval import grid_configs, run_sweep, table1_configs

    opts = {"epochs": epochs, "patience": patience, "head_warmup": head_warmup, "max_train": max_train}
    if which == "table1":
        configs = table1_configs(finetune=finetune, **({"seeds": parse_seeds(seeds)} if seeds else {}), **opts)
    elif which == "grid":
        if finetune:
            raise typer.BadParameter("the grid runs with the frozen encoder only; leave out --finetune")
        configs = grid_configs(**({"seeds": parse_seeds(seeds)} if seeds else {}), **opts)
    else:
        raise typer.BadParameter(f"unknown sweep {which!r}; use table1 or grid")
    msg = console(as_json)
    paths = run_sweep(configs, results, skip_existing=not force, log=lambda line: msg.print(line, highlight=False),
                      workers=workers, ray_address=ray)
    if as_json:
        echo_json({"results": [str(p) for p in paths]})


def register(app: typer.Typer) -> None:
    app.add_typer(texthide_app, name="texthide")
