"""``veil bench``: every defense against every attack that applies, and the privacy-utility report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from veil.cli.common import ForceOpt, JsonOpt, console, echo_json, parse_names, usage_errors

__all__ = ["register"]


def _names(value: Optional[str], option: str) -> list[str] | None:
    return None if value is None else parse_names(value, option)


def bench(
    quick: Annotated[bool, typer.Option("--quick", help="A small fixed configuration on the built-in corpora "
                                                        "(its wall time on 2 cores is in "
                                                        "benchmarks/RESULTS.md; the first run also encodes "
                                                        "the corpora).")] = False,
    demo: Annotated[bool, typer.Option("--demo", help="A first look (what `make demo` runs): the quick bench "
                                                      "without its cells that train a model for minutes (the "
                                                      "inverter, the masked LM, learned word-recovery attackers, "
                                                      "the generation objective, TextHide past the paper's "
                                                      "setting). The report names what was left out; --quick into "
                                                      "the same --out adds it later.")] = False,
    corpora: Annotated[Optional[str], typer.Option(help="Comma-separated corpora (default with --quick: "
                                                        "rt-polarity, drug-reviews, silver-sm, "
                                                        "debates-2016-speaker, rt-polarity-planted; without: nine "
                                                        "corpora, "
                                                        "veil.bench.plan.FULL_CORPORA).")]
    = None,
    defenses: Annotated[Optional[str], typer.Option(help="Comma-separated defenses (default: every registered "
                                                         "one).")] = None,
    attacks: Annotated[Optional[str], typer.Option(help="Comma-separated attacks (default: every registered "
                                                        "one).")] = None,
    workers: Annotated[int, typer.Option(min=1, help="Run cells in parallel on a local Ray cluster of this "
                                                     "many CPUs (1: sequential, in this process).")] = 1,
    ray: Annotated[Optional[str], typer.Option("--ray", help="Address of an existing Ray cluster to run the "
                                                            "cells on (e.g. ray://host:10001).")] = None,
    out: Annotated[Optional[Path], typer.Option(help="Output folder: cells/*.json, run.json and the report "
                                                     "(default ./veil-results/bench).")] = None,
    seed: Annotated[int, typer.Option(min=0, help="Selects queries and the attackers' own choices; never a "
                                                  "defense's key.")] = 0,
    queries: Annotated[Optional[int], typer.Option(min=1, help="Queries per attack cell (default 500 quick, "
                                                               "1000 full).")] = None,
    key_seed: Annotated[Optional[int], typer.Option(min=0, help="Seed every defense key (reproducible, NOT "
                                                                "private; for checks that runs agree). "
                                                                "Default: OS CSPRNG.")] = None,
    limit: Annotated[Optional[int], typer.Option(min=1, help="Cap every split at this many examples (a smoke "
                                                             "run; recorded in the cell ids).")] = None,
    data: Annotated[Optional[Path], typer.Option("--data", help="Your own labelled file (CSV, TSV, JSONL) instead "
                                                                "of the built-in corpora: every defense that "
                                                                "serves sentence classification runs on it. A "
                                                                "CoNLL-U treebank (a .conllu file without "
                                                                "--label-column, split 80/10/10 by sentence, or a "
                                                                "folder with train/dev/test.conllu; Penn tags in "
                                                                "XPOS) runs the dependency-parsing (obfuscated-text)"
                                                                " track.")]
    = None,
    text_column: Annotated[str, typer.Option(help="With --data: the column holding each text.")] = "text",
    label_column: Annotated[Optional[str], typer.Option(help="With --data: the column holding each label "
                                                              "(required; a .conllu file given without it is a "
                                                              "treebank).")] = None,
    drop_empty: Annotated[bool, typer.Option("--drop-empty", help="With --data: drop rows with an empty text or "
                                                                   "label (with a warning) instead of stopping.")]
    = False,
    private_column: Annotated[Optional[str], typer.Option(help="With --data: a column holding a private attribute "
                                                                "of each text (e.g. the author): the adversarial "
                                                                "representations also run on it, attacked for that "
                                                                "attribute (its 10 most frequent values + other).")]
    = None,
    encoding: Annotated[Optional[str], typer.Option(help="With --data: the file's encoding, e.g. latin-1 or cp1252 "
                                                          "(default utf-8).")] = None,
    cache_embeddings: Annotated[bool, typer.Option("--cache-embeddings", help="With --data: keep the MiniLM "
                                                                               "encodings of your file in "
                                                                               "VEIL_HOME/embeddings for later runs. "
                                                                               "Default: held in memory for this "
                                                                               "run only, never written.")] = False,
    documents_column: Annotated[Optional[str], typer.Option(help="With --data: a column naming the document each "
                                                                  "row (a sentence) belongs to: the rows of one "
                                                                  "document become its sentences, and the document "
                                                                  "defenses (SentDP, truncation, metric DP) run.")]
    = None,
    list_only: Annotated[bool, typer.Option("--list", help="Print the planned cells and exit.")] = False,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Run every defense against every attack that observes what it releases; render the report.

    --data runs the bench on your own labelled file (CSV, TSV, JSONL), or on your own CoNLL-U treebank (a .conllu
    file or a folder with train/dev/test.conllu) for dependency parsing on obfuscated text.

    Finished cells are skipped (resumable) unless --force; a cell made from another version of your file is
    refused (--force re-runs it); a failing cell is reported and the others go on; the exit code is 1 if any cell
    failed. Your file's encodings stay in memory unless --cache-embeddings.
    """
    from veil.bench.data_files import use_data_file
    from veil.bench.plan import BenchConfig
    from veil.bench.runner import run_bench
    from veil.bench.selection import builtin_corpora, demo_plan_line, select_cells
    from veil.outputs import check_distinct_outputs, check_output_dir, default_results_dir
    from veil.report.bench import render_bench

    out_dir = check_output_dir(out if out is not None else default_results_dir("bench"), option="--out")
    check_distinct_outputs({"--out": out_dir}, {"--data": data})
    with usage_errors():
        if demo:
            _check_demo(data, limit)
            quick = True
        if data is not None:
            corpus_list = use_data_file(data, text_column, label_column, corpora, workers, ray, drop_empty,
                                        private_column, documents_column, encoding)
        else:
            corpus_list = builtin_corpora(_names(corpora, "--corpora"), quick=quick, encoding=encoding,
                                          cache_embeddings=cache_embeddings)
        config = BenchConfig(quick=quick, seed=seed, queries=queries, key_seed=key_seed, limit=limit)
        selection = select_cells(corpus_list, _names(defenses, "--defenses"), _names(attacks, "--attacks"), config,
                                 demo=demo)
    con = console(as_json)
    if selection.pending_note and not as_json:
        con.print(f"veil: not run: {selection.pending_note}: their release kinds have no bench cells yet "
                  "(docs/bench.md)", style="yellow", markup=False, highlight=False)
    if list_only:
        return _print_cells(selection.cells, con, as_json)
    if key_seed is not None:
        con.print(f"veil: keys are SEEDED (--key-seed {key_seed}): reproducible, not private", style="yellow")
    con.print(f"veil bench: {len(selection.cells)} cells on {', '.join(corpus_list)} -> {out_dir}", markup=False)
    if demo:
        con.print(demo_plan_line(selection.left_out, out_dir), markup=False, highlight=False)
    run = run_bench(selection.cells, out_dir, workers=workers, ray_address=ray, force=force,
                    cache_embeddings=cache_embeddings, log=lambda line: con.print(line, markup=False, highlight=False),
                    left_out=selection.left_out)
    _print_run(run, render_bench(out_dir, out_dir, name="report"), con, as_json)
    if run.failed:
        raise typer.Exit(1)


def _check_demo(data: Optional[Path], limit: Optional[int]) -> None:
    from veil.errors import OptionError

    given = [opt for opt, on in (("--data", data is not None), ("--limit", limit is not None)) if on]
    if given:
        raise OptionError(f"--demo runs the quick bench's own cells on the built-in corpora: leave out "
                          f"{' and '.join(given)}, or use --quick instead of --demo")


def _print_cells(cells: list, con, as_json: bool) -> None:
    if as_json:
        echo_json({"cells": [c.to_dict() for c in cells]})
        return
    for c in cells:
        con.print(c.id, markup=False, highlight=False)


def _print_run(run, report: tuple, con, as_json: bool) -> None:
    md, page = report
    if as_json:
        echo_json({**run.to_dict(), "report_html": str(page), "report_md": str(md)})
        return
    counts = run.counts()
    con.print(f"veil bench: {counts['done']} done, {counts['skipped']} skipped, {counts['failed']} failed "
              f"in {run.wall_time_s / 60:.1f} min", markup=False)
    con.print(f"report: {page}\n        {md}", markup=False)
    for o in run.failed:
        con.print(f"FAILED {o.id}: {o.error}", markup=False, style="red")


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)
