"""Every dotted ``veil.…`` path that README.md and docs/*.md name in code spans resolves: a module, or an attribute
of one. Moving code without updating its documentation fails here."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPAN = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"\bveil(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def _paths() -> dict[str, str]:
    found: dict[str, str] = {}
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text()
        spans = SPAN.findall(text) + re.findall(r"```python\n(.*?)```", text, re.S)
        for span in spans:
            for path in PATH.findall(span):
                found.setdefault(path, page.name)
    return found


def _resolves(path: str) -> bool:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def test_the_pages_name_some_paths():
    assert len(_paths()) > 30


@pytest.mark.parametrize("path, page", sorted(_paths().items()))
def test_a_documented_path_resolves(path, page):
    assert _resolves(path), f"{page} names `{path}`, which does not exist"
