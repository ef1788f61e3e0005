"""Every fix hint in the package names a command and options that exist.

veil's error messages end in a fix ("run `veil corpora pull NAME`"). A hint that names a command or an
option the CLI does not have sends the user from one error to another, so this test reads every string
literal in ``src/veil`` (f-strings included, their fields read as placeholders), finds each backquoted
`veil ...` command in it and checks it against the real command tree: each command word must be a
subcommand, each ``--option`` an option of that command. Placeholders (NAME, DIR, ``...``, ``{field}``) and
alternatives (``a|b``, ``a/b``) are understood.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import click
import pytest
import typer

import veil
from veil.cli import app

SRC = Path(veil.__file__).parent
QUOTED = re.compile(r"`veil( [^`]*)?`")


def _strings(tree: ast.AST):
    """(line, text) of every string literal; an f-string's fields become ``{}``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value
        elif isinstance(node, ast.JoinedStr):
            parts = [v.value if isinstance(v, ast.Constant) else "{}" for v in node.values]
            yield node.lineno, "".join(parts)


def _hints() -> list[tuple[str, str]]:
    out: dict[tuple[str, str], None] = {}  # an f-string's constant parts are walked too: keep each hint once
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, text in _strings(tree):
            for m in QUOTED.finditer(text):
                out[(f"{path.relative_to(SRC.parent)}:{line}", m.group(0).strip("`"))] = None
    return list(out)


def _placeholder(word: str) -> bool:
    w = word.strip("[]")
    return (w in {"...", "", "X", "{}"} or "{" in w or w.isupper() or w.startswith("<")
            or bool(re.fullmatch(r"[A-Z][A-Z0-9_]*(,[A-Z0-9_]+)*", w)))


def _check(hint: str, root: click.Group) -> list[str]:
    """Problems with one quoted command (empty when it exists as written)."""
    words = hint.split()[1:]  # drop "veil"
    problems: list[str] = []
    node: click.Command = root
    rest = list(words)
    while rest and isinstance(node, click.Group):
        word = rest[0]
        if word.startswith("-") or _placeholder(word):
            break
        alternatives = [w for w in re.split(r"[|/]", word) if w]
        if not alternatives:  # a lone "|" between alternatives
            rest.pop(0)
            continue
        missing = [w for w in alternatives if w not in node.commands]
        if missing:
            problems.append(f"no command `{' '.join(['veil', *words[:len(words) - len(rest)], *missing[:1]])}`")
            return problems
        rest.pop(0)
        # alternatives after a group's subcommand: check each, go on with the first
        node = node.commands[alternatives[0]]
        while rest and rest[0] == "|":
            rest.pop(0)
            if rest and rest[0] in getattr(node, "commands", {}):
                rest.pop(0)
    options = {o for p in node.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
    for word in rest:
        for opt in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", word):
            if opt not in options and opt != "--debug":
                problems.append(f"`{node.name}` has no option {opt}")
    return problems


def test_the_package_has_hints_to_check():
    assert len(_hints()) > 50


@pytest.mark.parametrize("hint", ["veil parse fetch-md --wheel FILE", "veil corpora pull NAME --frce",
                                  "veil attack rss --corpus NAME --nope"])
def test_the_checker_catches_a_wrong_hint(hint):
    assert _check(hint, typer.main.get_command(app))


@pytest.mark.parametrize("hint", ["veil corpora pull NAME --force", "veil parse treebank|train|eval|sweep",
                                  "veil attack gradmatch-table | analytic | gradmatch | chain",
                                  "veil texthide sweep table1 [--finetune]", "veil report --results {}"])
def test_the_checker_accepts_a_right_hint(hint):
    assert _check(hint, typer.main.get_command(app)) == []


def test_every_fix_hint_names_an_existing_command_and_options():
    root = typer.main.get_command(app)
    bad = [f"{where}: `{hint}`: {'; '.join(problems)}"
           for where, hint in _hints() if (problems := _check(hint, root))]
    assert not bad, "hints naming commands or options that do not exist:\n" + "\n".join(bad)
