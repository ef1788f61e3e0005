"""Imports point down (ARCHITECTURE.md; docs/extending.md, "Where code goes"): no module of src/veil imports a higher layer, lazy imports included, and
no package-level import cycle. The graph is read from the source (every ``import``/``from`` statement, inside
functions too); imports under ``if TYPE_CHECKING:`` are annotations only and are not counted."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "veil"

#: the order of ARCHITECTURE.md, lowest first; a module may import its own layer and any lower one
LAYERS = [
    {"errors", "random", "_io", "progress", "_registry", "_threads", "_bf16", "validation", "kinds"},
    {"results", "outputs"},
    {"corpora", "encoders", "models", "metrics"},
    {"defenses", "controls"},
    {"attacks"},
    {"training"},
    {"parsing", "federated", "services"},
    {"bench", "experiments"},
    {"api"},  # the front door scores with the bench cells' own functions (veil.attack, veil.evaluate)
    {"report"},
    {"cli"},
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _top(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "veil" else None


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_lines(tree)
    out = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            if node.module == "veil":  # from veil import corpora
                out += [(node.lineno, f"veil.{a.name}") for a in node.names]
    return out


def _modules() -> list[tuple[Path, str]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        out.append((path, ".".join(rel.parts)))
    return out


def _edges() -> list[tuple[str, str, str, int]]:
    edges = []
    for path, module in _modules():
        own = _top(module)
        if own is None or own.endswith("__init__"):
            continue  # veil/__init__.py: the lazy front door, above every layer
        for line, target in _imports(path):
            other = _top(target)
            if other is not None and other != own:
                edges.append((own, other, f"{path.relative_to(SRC.parent)}:{line}", line))
    return edges


def test_every_top_level_module_has_a_layer():
    tops = {p.stem if p.is_file() else p.name for p in SRC.iterdir()
            if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())}
    assert tops - set(RANK) == set(), "add the new module to LAYERS here and to docs/extending.md's table"


def test_imports_point_down():
    upward = [f"{where}: {own} imports {other}" for own, other, where, _ in _edges()
              if other in RANK and own in RANK and RANK[other] > RANK[own]]
    assert upward == []


def test_no_package_level_cycle():
    graph: dict[str, set[str]] = {}
    for own, other, _, _ in _edges():
        graph.setdefault(own, set()).add(other)

    def reaches(a: str, b: str, seen: set[str]) -> bool:
        for nxt in graph.get(a, ()):
            if nxt == b or (nxt not in seen and (seen.add(nxt) or reaches(nxt, b, seen))):
                return True
        return False

    cycles = sorted({tuple(sorted((a, b))) for a in graph for b in graph[a] if reaches(b, a, set())})
    assert cycles == []


@pytest.mark.parametrize("source, expected", [
    ("def f():\n    from veil.report import x\n", ["veil.report"]),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from veil.cli import y\n", ["typing"]),
])
def test_the_reader_sees_lazy_imports_and_skips_annotations(tmp_path, source, expected):
    path = tmp_path / "m.py"
    path.write_text(source)
    assert [m for _, m in _imports(path)] == expected


def test_tests_mirror_the_packages():
    """Every folder of tests/ is a package of src/veil (at the same path), so a module's tests are found beside its
    path."""
    tests = Path(__file__).resolve().parent
    folders = [p.relative_to(tests) for p in tests.rglob("*") if p.is_dir() and "__pycache__" not in p.parts
               and not any(part.startswith((".", "_")) or part in ("fixtures", "data") for part in p.parts)]
    assert [str(f) for f in folders if not (SRC / f / "__init__.py").exists()] == []


def test_nothing_outside_the_cli_imports_it():
    """``cli/`` is the top: the library, the bench and the front door never import it (lazy imports included)."""
    outside = [f"{path.relative_to(SRC.parent)}:{line}" for path, module in _modules()
               if _top(module) != "cli" for line, target in _imports(path) if _top(target) == "cli"]
    assert outside == []


#: the most statements a command's body may hold after its option declarations (imports and the docstring not
#: counted). A command parses and calls the library: a few checks that only the CLI can make (option spellings),
#: one ``with usage_errors():`` around the library's checks, a config, one call, and its output (JSON or lines) fit
#: in 25, which is what `veil dpsgd train` (the longest command that only checks, calls and prints) needs; more means
#: the command holds work the Python API lacks, which goes to the library (ARCHITECTURE.md, "cli/").
MAX_COMMAND_STATEMENTS = 25


def _commands(tree: ast.AST) -> list[ast.FunctionDef]:
    """Typer commands: functions decorated with ``@app.command(...)``/``@app.callback(...)``, or registered with
    ``app.command(NAME)(function)``."""
    funcs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    names = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef) and any(
                isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr in ("command", "callback")
                for d in n.decorator_list):
            names.add(n.name)
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Call) and isinstance(n.func.func, ast.Attribute)
                and n.func.func.attr in ("command", "callback") and n.args and isinstance(n.args[0], ast.Name)):
            names.add(n.args[0].id)
    return [funcs[name] for name in sorted(names) if name in funcs]


def _statements(fn: ast.FunctionDef) -> int:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]  # the docstring
    return sum(1 for stmt in body for node in ast.walk(stmt)
               if isinstance(node, ast.stmt) and not isinstance(node, (ast.Import, ast.ImportFrom)))


def test_every_cli_command_only_parses_and_calls_the_library():
    """No command's body (after its option declarations) runs longer than MAX_COMMAND_STATEMENTS statements,
    nested ones counted; see MAX_COMMAND_STATEMENTS for why 25."""
    commands = [(path.name, fn.name, _statements(fn)) for path in sorted((SRC / "cli").glob("*.py"))
                for fn in _commands(ast.parse(path.read_text(), str(path)))]
    assert len(commands) > 40  # the reader finds the commands (55 when written)
    assert [c for c in commands if c[2] > MAX_COMMAND_STATEMENTS] == []


def test_the_statement_counter_counts_nested_statements_and_skips_imports_and_the_docstring():
    source = 'def f():\n    """doc"""\n    import x\n    if a:\n        b = 1\n    else:\n        return\n'
    fn = ast.parse(source).body[0]
    assert _statements(fn) == 3
