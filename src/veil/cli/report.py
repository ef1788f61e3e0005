"""``veil report``: Markdown result pages rendered from result records (veil.report)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from veil.cli.common import JsonOpt, echo_json

__all__ = ["register"]


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
    from veil.outputs import check_distinct_outputs, check_output_dir, results_root
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
    check_distinct_outputs({"--out": out, "--docs": docs}, {"--results": results})
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


def register(app: typer.Typer) -> None:
    app.command("report")(report)
