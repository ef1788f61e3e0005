"""How the benchmark scripts record what they measured: one JSON line on stdout, an optional JSON file, and a
dated Markdown section appended atomically to benchmarks/RESULTS.md (never from a tree with uncommitted changes
to tracked files: a recorded number names the commit that made it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HEADER = "# Benchmark results\n\nAppended by the scripts in benchmarks/; newest last.\n\n"


@contextmanager
def busy_loops(n: int) -> Iterator[list[subprocess.Popen]]:
    """``n`` busy loops (``while True: pass`` processes) running for the ``with`` block: the synthetic load a
    benchmark's ``--busy N`` names in its record. They are killed on the way out, on an error or Ctrl-C too."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield burners
    finally:
        for p in burners:
            p.kill()
            p.wait()


def refuse_dirty(repo: Path, no_append: bool) -> None:
    """Exit before any work when the numbers would be appended from a tree with uncommitted changes."""
    from veil.results import git_commit

    if not no_append and git_commit(repo).endswith("-dirty"):
        sys.exit("the tree has uncommitted changes: commit first (recorded numbers name a commit), or pass "
                 "--no-append to print the section only")


def append_section(results_file: Path, section: str) -> None:
    """``section`` appended to ``results_file`` (created with its header if missing), written atomically."""
    from veil._io import atomic_write_text

    old = results_file.read_text(encoding="utf-8") if results_file.exists() else ""
    head = "" if old.strip() else HEADER
    atomic_write_text(results_file, old + head + ("\n" if old.strip() else "") + section)


def publish(result: dict[str, Any], section: str, *, out: Path | None, results_file: Path, no_append: bool) -> int:
    """Print ``result`` as one JSON line, write it to ``out``, and append ``section`` (or print it: ``no_append``)."""
    from veil._io import atomic_write_json

    print(json.dumps(result))
    if out:
        atomic_write_json(out, result)
    if no_append:
        print(section)
        return 0
    append_section(results_file, section)
    print(f"appended to {results_file}", file=sys.stderr)
    return 0


def measure_and_publish(args: Any, repo: Path, run: Callable[[Any], dict[str, Any]],
                        markdown: Callable[[dict[str, Any]], str]) -> int:
    """The end of a benchmark's ``main``: pin the BLAS/OpenMP threads to ``args.threads`` (before numpy is
    imported; threadpoolctl enforces it as well), refuse a dirty tree, ``run(args)`` and :func:`publish` it."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    refuse_dirty(repo, args.no_append)
    result = run(args)
    return publish(result, markdown(result), out=args.out, results_file=args.results_file, no_append=args.no_append)
