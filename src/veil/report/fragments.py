"""Generated fragments of the hand-written pages (docs/*.md, README.md): every measured number they state.

A fragment is ``<!-- veil:fragment NAME -->TEXT<!-- /veil:fragment -->`` (on one line or spanning lines); TEXT is
what ``FRAGMENTS[NAME](results_dir, bench_file)`` renders from the result records (``results/**``) and
``benchmarks/RESULTS.md``, never typed by hand. ``fill`` rewrites every fragment of a folder's pages in place;
``stale`` lists the fragments whose text differs from a fresh rendering (tests/test_docs_numbers.py fails on any).

A fragment that compares things is registered with ``compares=True`` (listed in ``COMPARISONS``): its text states
each comparison's direction, worded from the data (``DIRECTION_WORDS`` or ``NO_DIRECTION_WORDS``), so the prose
around it never has to (tests/test_docs_numbers.py fails on a hand-written direction next to one).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable

from veil.errors import DataFormatError

__all__ = ["FRAGMENTS", "COMPARISONS", "DIRECTION_WORDS", "NO_DIRECTION_WORDS", "register_fragment", "render_fragment",
           "fill_text", "fill", "stale", "FRAGMENT_RE"]

Fragment = Callable[[Path, Path], str]
FRAGMENTS: dict[str, Fragment] = {}
#: the fragments that compare things (their text carries each comparison's direction, generated from the data)
COMPARISONS: set[str] = set()
#: words that state which way a comparison goes
DIRECTION_WORDS = re.compile(r"(?i)\b(better|worse|lower|higher|beats?|beaten|beating|more private|less private|"
                             r"above|below)\b(?!-)")
#: words that state that a comparison shows no direction
NO_DIRECTION_WORDS = re.compile(r"(?i)\b(no difference|inconclusive|includes 0|holds 50|one seed)\b")
FRAGMENT_RE = re.compile(r"<!-- veil:fragment (?P<name>[\w-]+) -->(?P<body>.*?)<!-- /veil:fragment -->", re.S)


def register_fragment(name: str, compares: bool = False) -> Callable[[Fragment], Fragment]:
    """Register fragment ``name``; ``compares``: its text compares things and states each direction itself."""
    def deco(fn: Fragment) -> Fragment:
        FRAGMENTS[name] = fn
        if compares:
            COMPARISONS.add(name)
        return fn
    return deco


def render_fragment(name: str, results_dir: str | os.PathLike = "results",
                    bench_file: str | os.PathLike = "benchmarks/RESULTS.md") -> str:
    """The text of fragment ``name`` rendered from ``results_dir`` and ``bench_file``."""
    from veil.report import fragment_texts  # noqa: F401  (registers the fragments)

    if name not in FRAGMENTS:
        raise DataFormatError(f"unknown fragment {name!r}; use one of {', '.join(sorted(FRAGMENTS))} or add it to "
                              f"veil.report.fragment_texts")
    return FRAGMENTS[name](Path(results_dir), Path(bench_file))


def _wrap(old_body: str, text: str) -> str:
    """Keep a block fragment a block (newline after the opening marker) and an inline one inline."""
    return f"\n{text}\n" if old_body.startswith("\n") else text


def fill_text(text: str, results_dir: str | os.PathLike = "results",
              bench_file: str | os.PathLike = "benchmarks/RESULTS.md") -> str:
    """``text`` with every fragment's body re-rendered."""
    cache: dict[str, str] = {}

    def sub(m: re.Match) -> str:
        name = m["name"]
        if name not in cache:
            cache[name] = render_fragment(name, results_dir, bench_file)
        return f"<!-- veil:fragment {name} -->{_wrap(m['body'], cache[name])}<!-- /veil:fragment -->"

    return FRAGMENT_RE.sub(sub, text)


def _pages(docs_dir: Path, readme: Path | None) -> list[Path]:
    pages = sorted(Path(docs_dir).glob("*.md"))
    return pages + ([readme] if readme is not None and readme.is_file() else [])


def fill(docs_dir: str | os.PathLike = "docs", results_dir: str | os.PathLike = "results",
         bench_file: str | os.PathLike = "benchmarks/RESULTS.md",
         readme: str | os.PathLike | None = "README.md") -> list[Path]:
    """Re-render the fragments of ``docs_dir/*.md`` (and ``readme``) in place; returns the pages it changed."""
    from veil._io import atomic_write_text

    changed = []
    for page in _pages(Path(docs_dir), Path(readme) if readme is not None else None):
        old = page.read_text(encoding="utf-8")
        new = fill_text(old, results_dir, bench_file)
        if new != old:
            atomic_write_text(page, new)
            changed.append(page)
    return changed


def stale(docs_dir: str | os.PathLike = "docs", results_dir: str | os.PathLike = "results",
          bench_file: str | os.PathLike = "benchmarks/RESULTS.md",
          readme: str | os.PathLike | None = "README.md") -> list[tuple[Path, str]]:
    """(page, fragment name) for every fragment whose text is not what the records render today."""
    out = []
    for page in _pages(Path(docs_dir), Path(readme) if readme is not None else None):
        for m in FRAGMENT_RE.finditer(page.read_text(encoding="utf-8")):
            if _wrap(m["body"], render_fragment(m["name"], results_dir, bench_file)) != m["body"]:
                out.append((page, m["name"]))
    return out
