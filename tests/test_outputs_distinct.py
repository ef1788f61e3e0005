"""``veil.outputs.check_distinct_outputs``: two outputs naming one file, or an output naming an input, are refused
whatever the spelling (relative, ``..``, a symbolic or a hard link); distinct paths and missing options pass."""

from __future__ import annotations

import os

import pytest

from veil.errors import InvalidParameterError
from veil.outputs import check_distinct_outputs


def test_the_same_file_under_any_spelling_is_one_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    src = tmp_path / "in.txt"
    src.write_text("x")
    os.symlink(src, tmp_path / "alias.txt")
    os.link(src, tmp_path / "hard.txt")
    for spelling in ("in.txt", "sub/../in.txt", str(src), "alias.txt", "hard.txt"):
        with pytest.raises(InvalidParameterError, match="--spans .* is the input FILE"):
            check_distinct_outputs({"--out": "o.txt", "--spans": spelling}, {"FILE": src})
    with pytest.raises(InvalidParameterError, match="--out and --spans both name"):
        check_distinct_outputs({"--out": "new.txt", "--spans": "sub/../new.txt"})  # neither exists yet


def test_the_message_names_both_options_and_a_free_path(tmp_path):
    with pytest.raises(InvalidParameterError) as err:
        check_distinct_outputs({"--record": tmp_path / "d", "--results": tmp_path / "d"})
    assert "--record and --results" in str(err.value) and f"--results {tmp_path / 'd-results'}" in str(err.value)


def test_distinct_paths_and_options_not_given_pass(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("x")
    check_distinct_outputs({"--out": tmp_path / "o.txt", "--spans": tmp_path / "s.jsonl", "--key": None},
                           {"FILE": src, "--neural-model": None})
    check_distinct_outputs({"--out": tmp_path / "a"}, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]  # a check writes nothing
