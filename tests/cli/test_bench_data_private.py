"""`veil bench --data` and `veil encode FILE` keep none of a user's file where the user did not ask, reuse a result
only while the file is the same, and warn about texts the encoder truncates, before any cell."""

from __future__ import annotations

import csv
import json
import warnings
from pathlib import Path

import pytest

from veil.errors import DataWarning


@pytest.fixture
def home(tmp_path, monkeypatch):
    """An empty VEIL_HOME (the torch backend: no ONNX export written into it) and an empty working folder."""
    home = tmp_path / "home"
    monkeypatch.setenv("VEIL_HOME", str(home))
    monkeypatch.setenv("VEIL_ENCODER_BACKEND", "torch")
    monkeypatch.delenv("VEIL_RESULTS", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return home


def _write(path, long_row: bool = True):
    rows = [["review", "stars"]] + [[f"review {i}: {'a warm, funny film' if i % 2 else 'dull and far too long'}",
                                     "pos" if i % 2 else "neg"] for i in range(60)]
    if long_row:
        rows.append([" ".join(["endless"] * 400), "neg"])
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    return str(path)


def _files(home) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file()) if home.exists() else []


@pytest.mark.slow
def test_an_edited_file_is_refused_and_its_encodings_stay_only_when_asked(home, capsys):
    from veil.cli import main

    data = _write("mine.csv")
    args = ["bench", "--quick", "--data", data, "--text-column", "review", "--label-column", "stars", "--defenses",
            "none", "--attacks", "rss", "--queries", "10", "--out", "out"]
    with warnings.catch_warnings():
        warnings.simplefilter("always", DataWarning)  # expected here: shown on the console as the CLI shows it
        assert main(args) == 0
    err = capsys.readouterr().err
    warning = err.index("veil: DataWarning: 1 of 61 texts of file-mine are longer than 256 tokens")
    assert warning < err.index("bench (sequential, 1 worker): started")  # before any cell, on the console
    assert not [f for f in _files(home) if "embeddings" in f or "file-mine" in f]  # nothing of the file kept
    record = json.loads(next((home.parent / "work" / "out" / "cells").glob("*--rss--*.json")).read_text())
    assert set(record["config"]["inputs"]) == {"mine.csv", "rows"}

    cells = {p.name: p.read_bytes() for p in (home.parent / "work" / "out" / "cells").iterdir()}
    Path(data).write_text(Path(data).read_text().replace("review 7: a warm", "review 7: a cold"))
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "was made from other input content (mine.csv: sha256" in err and "Pass --force" in err
    assert {p.name: p.read_bytes() for p in (home.parent / "work" / "out" / "cells").iterdir()} == cells

    with warnings.catch_warnings():
        warnings.simplefilter("always", DataWarning)
        assert main([*args, "--force", "--cache-embeddings"]) == 0
    out = capsys.readouterr()
    assert "2 done, 0 skipped" in out.out and "1 of 61 texts of file-mine are longer" in out.err
    kept = [f for f in _files(home) if f.startswith("embeddings/")]
    assert kept and all("/file-mine-bench-quick" in f for f in kept)  # asked for: cached like a corpus


@pytest.mark.slow
def test_encode_writes_a_files_encodings_to_out_only_unless_asked(home, capsys):
    import numpy as np

    from veil.cli import main

    data = _write("mine.csv", long_row=False)
    assert main(["encode", data, "--out", "x.npy", "--text", "review", "--label", "stars"]) == 0
    assert np.load("x.npy").shape == (60, 384)
    assert not [f for f in _files(home) if f.startswith("embeddings/")]
    assert main(["encode", data, "--out", "y.npy", "--text", "review", "--label", "stars",
                 "--cache-embeddings"]) == 0
    assert [f.split("/")[2] for f in _files(home) if f.endswith(".npy")] == ["mine"]
    np.testing.assert_array_equal(np.load("x.npy"), np.load("y.npy"))


def test_cache_embeddings_is_refused_where_it_means_nothing(cli, tmp_path):
    data = _write(tmp_path / "mine.csv", long_row=False)
    cli("encode", data, "--out", "x.npy", "--text", "review", "--label", "stars", "--cache-embeddings", "--no-cache",
        match=r"--cache-embeddings .* contradicts --no-cache")
    cli("encode", "rt-polarity", "--out", "x.npy", "--cache-embeddings", match=r"rt-polarity' is always cached")
    cli("bench", "--quick", "--cache-embeddings", "--list", match=r"--cache-embeddings applies to --data")
