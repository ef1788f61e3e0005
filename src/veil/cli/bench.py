"""``veil bench``: every defense against every attack that applies, and the privacy-utility report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from veil.cli.common import ForceOpt, JsonOpt, check_encoding, console, echo_json, parse_names

__all__ = ["register"]


def _names(value: Optional[str], option: str) -> list[str] | None:
    return None if value is None else parse_names(value, option)


def _file_name(stem: str) -> str:
    """The bench's name of a corpus given with --data: ``file-`` and the file's (or folder's) name, made safe."""
    import re

    return "file-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", stem)[:60]


def _use_file(path: Path, text: str, label: Optional[str], corpora: Optional[str], workers: int,
              ray: Optional[str], drop_empty: bool, private: Optional[str] = None,
              documents: Optional[str] = None, encoding: Optional[str] = None) -> list[str]:
    """Load ``--data`` with the file loader (its typed errors name the column or line and the fix) before any
    cell runs; the corpus is named after the file. A folder, or a CoNLL-U file (``.conllu``) given without
    --label-column, is a treebank: the dependency-parsing track runs on its trees
    (:func:`veil.bench.data_parsing.read_user_treebank`); with --label-column a CoNLL-U file is a labelled file
    (its label a ``# key = value`` comment), as before."""
    import re

    from veil.bench.data import use_corpus
    from veil.corpora.files import load_file

    if corpora is not None:
        raise typer.BadParameter("--data and --corpora exclude each other: the bench runs on your file or on the "
                                 "built-in corpora (`veil bench --data FILE ...` or `veil bench --corpora A,B`)")
    if path.is_dir() or (path.suffix.lower() == ".conllu" and label is None):
        if private is not None or documents is not None:
            raise typer.BadParameter("--private-column and --documents-column apply to labelled files; a treebank "
                                     "has neither (leave them out)")
        if encoding is not None:
            raise typer.BadParameter("--encoding applies to labelled files; a CoNLL-U treebank is read as UTF-8 "
                                     "(leave --encoding out, and convert the treebank to UTF-8 if it is not)")
        return [_use_treebank(path, text, label, workers, ray, drop_empty)]
    if label is None:
        raise typer.BadParameter("--data needs --label-column (the column holding each text's label): the bench "
                                 "measures utility as task accuracy")
    if workers > 1 or ray is not None:
        raise typer.BadParameter("--data runs in this process only: drop --workers/--ray (Ray's workers cannot "
                                 "see a file loaded here)")
    from veil.errors import DataFormatError, InvalidParameterError

    name = _file_name(path.stem)
    try:
        corpus = load_file(path, text=text, label=label, name=name, drop_empty=drop_empty,
                           attributes=[c for c in (private, documents) if c],
                           encoding=check_encoding(encoding) if encoding is not None else "utf-8")
        if documents:  # one row per sentence: the rows of one document become its sentences
            from veil.corpora.grouping import group_documents

            corpus = group_documents(corpus, documents)
        if private:
            from veil.bench.data_attributes import attribute_corpus_from_file

            attributes = attribute_corpus_from_file(corpus, private)
    except (DataFormatError, InvalidParameterError) as exc:  # the loader speaks Python; name this command's options
        msg = str(exc)
        for api, option in ((", or label=None (CLI: leave out --label) to load without labels", ""),
                            (" (pass label=None to load without labels)", ""), ("for label=;", "for --label-column;"),
                            ("for text=;", "for --text-column;"), ("drop_empty=True (CLI: --drop-empty)",
                                                                     "--drop-empty"),
                            ("for attributes=;", "for --private-column/--documents-column;")):
            msg = msg.replace(api, option)
        msg = re.sub(r'encoding="([^"]+)"', r"--encoding \1", re.sub(r" \(CLI: --encoding [^)]*\)", "", msg))
        raise type(exc)(msg) from None
    names = [use_corpus(corpus)]
    if private:  # the same rows, with the private column as the attribute the representations' attackers infer
        from dataclasses import replace

        from veil.bench.data import provenance_of, use_attributes

        names.append(use_attributes(replace(attributes, name=_file_name(f"{path.stem}-{private}")),
                                    provenance_of(corpus)))
    return names


def _use_treebank(path: Path, text: str, label: Optional[str], workers: int, ray: Optional[str],
                  drop_empty: bool) -> str:
    """``--data`` naming a CoNLL-U file or a folder of train/dev/test.conllu: read and check its trees (typed errors
    naming the file, the line where there is one, and the fix) before any cell runs; named after the file."""
    from veil.bench.data import use_treebank
    from veil.bench.data_parsing import read_user_treebank, user_treebank_provenance

    given = [opt for opt, on in (("--text-column", text != "text"), ("--label-column", label is not None),
                                 ("--drop-empty", drop_empty)) if on]
    if given:
        what = ("a folder is a CoNLL-U treebank" if path.is_dir() else
                "a .conllu file without --label-column is a treebank")
        raise typer.BadParameter(f"{'/'.join(given)} {'applies' if len(given) == 1 else 'apply'} to labelled files, "
                                 f"but {what}: its words, Penn tags (XPOS) and trees are the data; leave "
                                 f"{'/'.join(given)} out")
    if workers > 1 or ray is not None:
        raise typer.BadParameter("--data runs in this process only: drop --workers/--ray (Ray's workers cannot "
                                 "see a file loaded here)")
    trees = read_user_treebank(path)
    name = _file_name(path.expanduser().resolve().name if path.is_dir() else path.stem)
    return use_treebank(name, trees, folder=path.expanduser().resolve() if path.is_dir() else None,
                        provenance=user_treebank_provenance(path))


def bench(
    quick: Annotated[bool, typer.Option("--quick", help="A small fixed configuration on the built-in corpora "
                                                        "(its wall time on 2 cores is in "
                                                        "benchmarks/RESULTS.md; the first run also encodes "
                                                        "the corpora).")] = False,
    corpora: Annotated[Optional[str], typer.Option(help="Comma-separated corpora (default with --quick: "
                                                        "rt-polarity, drug-reviews, silver-sm, "
                                                        "debates-2016-speaker; without: eight corpora, "
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
    from veil.bench.plan import FULL_CORPORA, QUICK_CORPORA, UTILITY, BenchConfig, not_runnable, plan_cells, runnable
    from veil.bench.runner import run_bench
    from veil.outputs import check_distinct_outputs, check_output_dir, default_results_dir
    from veil.report.bench import render_bench

    out_dir = check_output_dir(out if out is not None else default_results_dir("bench"), option="--out")
    check_distinct_outputs({"--out": out_dir}, {"--data": data})
    if data is not None:
        corpus_list = _use_file(data, text_column, label_column, corpora, workers, ray, drop_empty, private_column,
                                documents_column, encoding)
    else:
        given = [opt for opt, on in (("--encoding", encoding is not None), ("--cache-embeddings", cache_embeddings))
                 if on]
        if given:
            raise typer.BadParameter(f"{'/'.join(given)} {'applies' if len(given) == 1 else 'apply'} to --data (your "
                                     "own file; built-in corpora are UTF-8 and always cached): leave "
                                     f"{'/'.join(given)} out, or add --data FILE")
        corpus_list = _names(corpora, "--corpora") or list(QUICK_CORPORA if quick else FULL_CORPORA)
        from veil.bench.data import TASK_CORPORA, bench_names

        unknown = [c for c in corpus_list if c not in bench_names()]
        if unknown:
            raise typer.BadParameter(f"unknown corpus {', '.join(unknown)}; see `veil corpora list` (the bench also "
                                     f"takes {', '.join(TASK_CORPORA)})")
    config = BenchConfig(quick=quick, seed=seed, queries=queries, key_seed=key_seed, limit=limit)
    defense_list, attack_list = _names(defenses, "--defenses"), _names(attacks, "--attacks")
    full = plan_cells(corpus_list, defenses=defense_list, attacks=attack_list, config=config, runnable_only=False)
    cells, pending = runnable(full), not_runnable(full)  # planned once: what runs, and what cannot yet
    pending_note = "; ".join(f"{', '.join(names)} (releases {kind})" for kind, names in pending.items())
    attack_cells = [c for c in cells if c.attack != UTILITY]
    if not cells or (attack_list is not None and not attack_cells):  # before any work, nothing written
        chosen = [f"{opt} {','.join(v)}" for opt, v in (("--defenses", defense_list), ("--attacks", attack_list))
                  if v is not None]
        what = "0 cells" if not cells else f"0 attack cells (only {len(cells)} utility cells)"
        raise typer.BadParameter(
            f"this selection plans {what} on {', '.join(corpus_list)}: "
            + (f"{' with '.join(chosen)} pairs no attack with a defense whose release it observes (or that "
               "serves the corpus' task)" if chosen else "no defense serves these corpora's tasks")
            + (f"; the bench cannot run {pending_note} yet: their release kinds have no bench cells (docs/bench.md)"
               if pending else "")
            + "; `veil bench --list` shows every cell of the full plan")
    con = console(as_json)
    if pending and not as_json:
        con.print(f"veil: not run: {pending_note}: their release kinds have no bench cells yet (docs/bench.md)",
                  style="yellow", markup=False, highlight=False)
    if list_only:
        if as_json:
            echo_json({"cells": [c.to_dict() for c in cells]})
        else:
            for c in cells:
                con.print(c.id, markup=False, highlight=False)
        return
    if key_seed is not None:
        con.print(f"veil: keys are SEEDED (--key-seed {key_seed}): reproducible, not private", style="yellow")
    con.print(f"veil bench: {len(cells)} cells on {', '.join(corpus_list)} -> {out_dir}", markup=False)
    run = run_bench(cells, out_dir, workers=workers, ray_address=ray, force=force, cache_embeddings=cache_embeddings,
                    log=lambda line: con.print(line, markup=False, highlight=False))
    md, page = render_bench(out_dir, out_dir, name="report")
    summary = {**run.to_dict(), "report_html": str(page), "report_md": str(md)}
    if as_json:
        echo_json(summary)
    else:
        counts = run.counts()
        con.print(f"veil bench: {counts['done']} done, {counts['skipped']} skipped, {counts['failed']} failed "
                  f"in {run.wall_time_s / 60:.1f} min", markup=False)
        con.print(f"report: {page}\n        {md}", markup=False)
        for o in run.failed:
            con.print(f"FAILED {o.id}: {o.error}", markup=False, style="red")
    if run.failed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)
