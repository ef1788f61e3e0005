"""``veil texthide ...`` and ``veil attack ...``: thin commands over veil.experiments.texthide and retrieval.

Results go to ``./veil-results/<method>/`` (or ``$VEIL_RESULTS``) unless ``--results``/``--out``
names another place; every value and output location is checked before training starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from veil.cli_common import ForceOpt, JsonOpt, console, echo_json, finite, parse_m, parse_seeds, positive

__all__ = ["register"]

_MODES = ("intra", "inter")


def _check_mode(mode: str) -> str:
    if mode not in _MODES:
        raise typer.BadParameter(f"--mode must be intra or inter, got {mode!r}")
    return mode


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
    from veil.experiments.texthide import TextHideEval, existing_result, result_path, run_texthide_eval

    cfg = TextHideEval(corpus=corpus, m=parse_m(m), k=k, mode=_check_mode(mode), finetune=finetune,
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
    as_json: JsonOpt = False,
) -> None:
    """Run a whole TextHide experiment; one JSON per configuration (finished ones are skipped unless --force)."""
    from veil.experiments.texthide import grid_configs, run_sweep, table1_configs

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
    paths = run_sweep(configs, results, skip_existing=not force, log=lambda line: msg.print(line, highlight=False))
    if as_json:
        echo_json({"results": [str(p) for p in paths]})


_DEFENSES = ("all", "none", "texthide")
_DEFENSE_HELP = "all (baseline, mix-only, TextHide (256,4)), none, or texthide with --m/--k."


def _check_queries(corpus: str, queries: Optional[int], *, split: Optional[str] = None) -> None:
    """``--queries`` at most the examples queries are drawn from (without replacement), checked before any work."""
    if queries is None:
        return
    import veil.corpora as vc

    data = vc.load(corpus)
    available = len(data) if split is None else len(data.indices(split))
    if queries > available:
        where = f"{corpus}'s {split} split" if split else corpus
        raise typer.BadParameter(f"--queries {queries} is more than the {available} examples of {where} (queries "
                                 f"are drawn without replacement); use --queries {available} or fewer")


def _attack(attack: str, corpus: str, defense: str, m: str, k: int, queries: Optional[int], seed: int,
            results: Optional[Path], force: bool, as_json: bool) -> None:
    import veil.corpora as vc
    from veil.errors import UnknownNameError
    from veil.outputs import check_output_dir, default_results_dir
    from veil.experiments.retrieval import check_planned, run_retrieval, write_records

    if defense not in _DEFENSES:
        raise typer.BadParameter(f"--defense must be one of {', '.join(_DEFENSES)}, got {defense!r}")
    if corpus not in vc.names():
        raise UnknownNameError("corpus", corpus, vc.names())
    mm = parse_m(m)
    root = check_output_dir(results if results is not None else default_results_dir("retrieval"))
    _check_queries(corpus, queries, split="dev" if attack == "reprecon" else None)
    check_planned(corpus, attack, defense=defense, m=mm, k=k, queries=queries, seed=seed, root=root, force=force)
    records = run_retrieval(corpus, attack, defense=defense, m=mm, k=k, queries=queries, seed=seed)
    paths = write_records(records, root)
    if as_json:
        echo_json([rec.to_dict() for rec in records])
        return
    from rich.table import Table

    out = console()
    table = Table(title=f"{attack} on {corpus}: mean [95% CI] over {records[0].config['n_queries']} queries")
    table.add_column("metric")
    for rec in records:
        table.add_column(rec.config["setting"])
    for metric in records[0].metrics:
        table.add_row(metric, *[str(rec.metrics[metric]) if metric in rec.metrics else "-" for rec in records])
    out.print(table)
    for path in paths:
        out.print(f"wrote {path}")


def attack_rss(
    corpus: Annotated[str, typer.Option(help="Corpus whose texts form the attacker's index.")] = "rt-polarity",
    defense: Annotated[str, typer.Option(help=_DEFENSE_HELP)] = "all",
    m: Annotated[str, typer.Option("--m", help="TextHide mask pool size (with --defense texthide).")] = "256",
    k: Annotated[int, typer.Option("--k", min=1, help="TextHide k (with --defense texthide).")] = 4,
    queries: Annotated[Optional[int], typer.Option(min=1, help="Number of queries (default 1000); the whole corpus "
                                                               "is still encoded: it is the attacker's index.")]
    = None,
    seed: Annotated[int, typer.Option(min=0, help="Experiment seed (queries, mixing, random guesses; never masks).")] = 0,
    results: Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/retrieval).")] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Similarity search: return the index text whose representation is most similar to the protected query."""
    _attack("rss", corpus, defense, m, k, positive("--queries", queries), seed, results, force, as_json)


def attack_reprecon(
    corpus: Annotated[str, typer.Option(help="Corpus whose texts form the attacker's index.")] = "rt-polarity",
    defense: Annotated[str, typer.Option(help=_DEFENSE_HELP)] = "all",
    m: Annotated[str, typer.Option("--m", help="TextHide mask pool size (with --defense texthide).")] = "256",
    k: Annotated[int, typer.Option("--k", min=1, help="TextHide k (with --defense texthide).")] = 4,
    queries: Annotated[Optional[int], typer.Option(min=1, help="Number of dev queries (default 500); the whole "
                                                               "corpus is still encoded: train fits the "
                                                               "reconstruction, every split is the index.")] = None,
    seed: Annotated[int, typer.Option(min=0, help="Experiment seed (queries, mixing, MLP init; never masks).")] = 0,
    results: Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/retrieval).")] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Reconstruction: an MLP maps protected vectors back to originals (trained on train), then RSS on dev queries."""
    _attack("reprecon", corpus, defense, m, k, positive("--queries", queries), seed, results, force, as_json)


def _adaptive(attack: str, corpus: str, defense: str, m: str, k: int, mode: str, epochs: int, index: str,
              queries: int, seed: int, public: str, results: Optional[Path], force: bool, as_json: bool) -> None:
    import veil.corpora as vc
    from veil.errors import UnknownNameError
    from veil.outputs import check_output_dir, default_results_dir
    from veil.experiments.texthide_attacks import AttackCell, existing_cell, result_path, run_cell

    if defense != "texthide":
        raise typer.BadParameter(f"--defense must be texthide for {attack} (the only defense it applies to), "
                                 f"got {defense!r}")
    for name in (corpus, public) + ((index.split(":", 1)[1],) if index.startswith("public:") else ()):
        if name not in vc.names():
            raise UnknownNameError("corpus", name, vc.names())
    cell = AttackCell(corpus=corpus, attack=attack, m=parse_m(m), k=k, mode=_check_mode(mode), epochs=epochs,
                      index=index, queries=queries, seed=seed, public=public)
    root = check_output_dir(results if results is not None else default_results_dir("texthide-attacks"))
    path = result_path(cell, root)
    existing_cell(cell, root, force=force, keep=False)  # damaged, another configuration, or this one: refused
    record = run_cell(cell)
    record.write(path)
    if as_json:
        echo_json(record.to_dict())
        return
    out = console()
    for key, metric in record.metrics.items():
        if not key.startswith("random_"):
            floor = record.metrics.get(f"random_{key}")
            out.print(f"{cell.name}: {key} = {metric}" + (f"   (random: {floor})" if floor else ""), highlight=False)
    out.print(f"wrote {path}")


def _adaptive_command(attack: str, summary: str):
    def command(
        corpus: Annotated[str, typer.Option(help="Private corpus.")] = "rt-polarity",
        defense: Annotated[str, typer.Option(help="texthide (the defense these attacks target).")] = "texthide",
        m: Annotated[str, typer.Option("--m", help="Mask pool size: an integer >= 1, or inf (abs-rss: also 0).")] = "256",
        k: Annotated[int, typer.Option("--k", min=1, help="TextHide k.")] = 4,
        mode: Annotated[str, typer.Option(help="intra or inter.")] = "intra",
        epochs: Annotated[int, typer.Option(min=1, help="Encodings observed per training example (mask-recovery, "
                                                        "unmix).")] = 5 if attack != "abs-rss" else 1,
        index: Annotated[str, typer.Option(help="private (the index holds the private texts) or public:CORPUS.")]
        = "private",
        queries: Annotated[int, typer.Option(min=1, help="Queries (encodings attacked).")] = 1000,
        seed: Annotated[int, typer.Option(min=0, help="Selects queries and the attacker's choices; never the key or "
                                                      "the mixing (OS CSPRNG).")] = 0,
        public: Annotated[str, typer.Option(help="Public corpus: inter mode's public set and the attacker's "
                                                 "statistics.")] = "health-tweets",
        results: Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/texthide-attacks).")]
        = None,
        force: ForceOpt = False,
        as_json: JsonOpt = False,
    ) -> None:
        _adaptive(attack, corpus, defense, m, k, mode, epochs, index, queries, seed, public, results, force, as_json)

    command.__doc__ = summary
    return command


def texthide_attacks_sweep(
    which: Annotated[str, typer.Argument(help="headline ((256,4), (256,1), mix-only on 3 corpora) or grid (m x k x "
                                              "epochs x mode on one corpus).")],
    corpus: Annotated[str, typer.Option(help="Corpus of the grid.")] = "rt-polarity",
    queries: Annotated[int, typer.Option(min=1, help="Queries per cell.")] = 1000,
    attacks: Annotated[Optional[str], typer.Option(help="Only these attacks, comma-separated.")] = None,
    results: Annotated[Optional[Path], typer.Option(help="Result folder (default ./veil-results/texthide-attacks).")]
    = None,
    force: Annotated[bool, typer.Option("--force", help="Re-run cells whose result file exists.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run many adaptive-attack cells; finished cells are skipped (resumable), each written when done."""
    from veil.outputs import default_results_dir
    from veil.experiments.texthide_attacks import ATTACKS, grid_cells, headline_cells, run_cells

    if which == "headline":
        cells = headline_cells(queries=queries)
    elif which == "grid":
        cells = grid_cells(corpus=corpus, queries=queries)
    else:
        raise typer.BadParameter(f"unknown sweep {which!r}; use headline or grid")
    if attacks is not None:
        wanted = [a.strip() for a in attacks.split(",") if a.strip()]
        bad = [a for a in wanted if a not in ATTACKS]
        if bad or not wanted:
            raise typer.BadParameter(f"--attacks: {'unknown ' + str(bad) if bad else 'no attack named'}; use some "
                                     f"of {', '.join(ATTACKS)} (comma-separated), or leave --attacks out for all")
        cells = [c for c in cells if c.attack in wanted]
    msg = console(as_json)
    paths = run_cells(cells, results if results is not None else default_results_dir("texthide-attacks"),
                      force=force, log=lambda line: msg.print(line, highlight=False))
    if as_json:
        echo_json({"results": [str(p) for p in paths]})


def register(texthide_app: typer.Typer, attack_app: typer.Typer) -> None:
    texthide_app.command("eval")(texthide_eval)
    texthide_app.command("sweep")(texthide_sweep)
    attack_app.command("rss")(attack_rss)
    attack_app.command("reprecon")(attack_reprecon)
    attack_app.command("abs-rss")(_adaptive_command(
        "abs-rss", "Sign-invariant search: |e~| - mu against |e| - mu over the index (masks keep magnitudes)."))
    attack_app.command("mask-recovery")(_adaptive_command(
        "mask-recovery", "Recover TextHide's secret mask pool from the encodings an eavesdropper collects."))
    attack_app.command("unmix")(_adaptive_command(
        "unmix", "Unmask encodings with recovered masks and solve for their k sources over the index."))
    attack_app.command("texthide-sweep")(texthide_attacks_sweep)
