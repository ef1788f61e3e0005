"""Every comma-separated list option refuses a repeated value before any work (veil.cli.common: split_names,
parse_names, parse_floats, parse_ints, parse_seeds), and no command splits a list on its own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import typer

import veil.cli
from veil.cli.common import parse_floats, parse_names, split_names

CLI = Path(veil.cli.__file__).parent


@pytest.mark.parametrize("args, match", [
    (("bench", "--corpora", "rt-polarity,rt-polarity", "--list"), r"--corpora names one twice \('rt-polarity'"),
    (("bench", "--defenses", "none, none", "--list"), r"--defenses names one twice \('none'"),
    (("bench", "--attacks", "rss,abs-rss,rss", "--list"), r"--attacks names one twice \('rss'"),
    (("audit", "empirical", "--corpus", "news-articles", "--epsilons", "1,1"), r"--epsilons repeats a value"),
    (("audit", "empirical", "--corpus", "news-articles", "--epsilons", "1,1.0"), r"--epsilons repeats a value"),
    (("audit", "empirical", "--corpus", "news-articles", "--mechanisms", "truncation,truncation"),
     r"--mechanisms names one twice"),
    (("sentdp", "eval", "news-articles", "--epsilons", "3,3"), r"--epsilons repeats a value"),
    (("sentdp", "eval", "news-articles", "--methods", "truncation,truncation"), r"--methods names one twice"),
    (("attack", "membership", "--method", "loss,loss"), r"--method names one twice"),
    (("attack", "membership", "--defense", "plain,plain"), r"--defense names one twice"),
    (("adversarial", "sweep", "--defenses", "leace,leace"), r"--defenses names one twice"),
    (("parse", "sweep", "--parsers", "biaffine,biaffine"), r"--parsers names one twice"),
])
def test_a_repeated_value_is_refused_before_any_work(cli, args, match):
    cli(*args, match=match)


def test_the_shared_parsers():
    assert split_names(" a, b ,,c", "--x") == ["a", "b", "c"]
    with pytest.raises(typer.BadParameter, match=r"--x names one twice \('a'"):
        split_names("a,b,a", "--x")
    with pytest.raises(typer.BadParameter, match=r"--x ' , ' names nothing"):
        parse_names(" , ", "--x")
    with pytest.raises(typer.BadParameter, match=r"--x: unknown corpus 'c'; valid: a, b"):
        parse_names("a,c", "--x", valid=["a", "b"], what="corpus")
    assert parse_floats("1,3", "--epsilons") == (1.0, 3.0)
    with pytest.raises(typer.BadParameter, match="repeats a value"):
        parse_floats("1,3,1.0", "--epsilons")


def _splits_a_list(node: ast.AST) -> bool:
    """``something.split(",")``: a command parsing a comma-separated list by hand."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "split"
            and len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and node.args[0].value == ",")


def test_no_command_splits_a_list_option_on_its_own():
    """A list parsed by hand skips the shared checks (a repeated name planned twice): every list goes through
    veil.cli.common."""
    found = [f"{path.name}:{node.lineno}" for path in sorted(CLI.glob("*.py")) if path.name != "common.py"
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if _splits_a_list(node)]
    assert not found, f"lists split outside veil.cli.common: {', '.join(found)}"
