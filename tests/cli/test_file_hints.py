"""Every message a bad user file can reach names options the command that raises it has.

The loader (veil.corpora.files) is shared by every command that reads a user's labelled file; its messages name
the CLI's options ("--encoding cp1252", "--drop-empty"). This test feeds the same bad files to each such command
(``bench --data``, ``encode``, ``sentdp embed``) through the ``cli`` fixture, whose check (conftest.check_fix_exists)
fails when a message names an option the command does not have. A TSV whose quoted text holds a line break is
explained as such (it is read GLUE-style, one row per line), where the same rows as CSV are read.
"""

from __future__ import annotations

import csv
import json

import pytest

HEADER = ["review", "stars"]


def _rows(n: int = 60) -> list[list[str]]:
    return [[f"review number {i}: {'a fine film' if i % 2 else 'a dull film'}", "pos" if i % 2 else "neg"]
            for i in range(n)]


def _csv(path, rows, **kw):
    with open(path, "w", newline="", encoding=kw.pop("encoding", "utf-8")) as f:
        csv.writer(f, **kw).writerows([HEADER, *rows])
    return path


def _files(folder) -> dict[str, tuple[str, str]]:
    """name -> (path, what its message must say)."""
    out = {}
    rows = _rows()
    rows[3][0] = "café au lait, said the critic"
    out["cp1252"] = (str(_csv(folder / "windows.csv", rows, encoding="cp1252")), r"--encoding cp1252")
    out["utf16"] = (str(_csv(folder / "wide.csv", _rows(), encoding="utf-16")), r"--encoding utf-16")
    raw = (folder / "latin.csv")
    raw.write_bytes(b"review,stars\n" + b"".join(f"text {i},pos\n".encode() for i in range(5)) + b"bad \x81 byte,neg\n")
    out["latin1"] = (str(raw), r"--encoding latin-1")
    quoted = _rows()
    quoted[5][0] = "a review\nthat goes on"
    out["tsv-newline"] = (str(_csv(folder / "quoted.tsv", quoted, delimiter="\t")),
                          r"line 7 has 1 fields but the header has 2 \(a text in double quotes holds a line break "
                          r"or a tab: TSV is read GLUE-style.*save the file as CSV")
    gaps = _rows()
    gaps[4][1] = ""
    out["empty-label"] = (str(_csv(folder / "gaps.csv", gaps)), r"no value in label column 'stars' \(line 6\)"
                                                                 r".*--drop-empty")
    jsonl = folder / "broken.jsonl"
    jsonl.write_text("\n".join([json.dumps({"review": "fine", "stars": "pos"}), "{not json", ""]))
    out["jsonl"] = (str(jsonl), r"line 2")
    return out


CASES = ["cp1252", "utf16", "latin1", "tsv-newline", "empty-label", "jsonl"]


@pytest.mark.parametrize("case", CASES)
def test_bench_data(cli, tmp_path, case):
    path, match = _files(tmp_path)[case]
    cli("bench", "--quick", "--data", path, "--text-column", "review", "--label-column", "stars", match=match)


@pytest.mark.parametrize("case", CASES)
def test_encode(cli, tmp_path, case):
    path, match = _files(tmp_path)[case]
    cli("encode", path, "--out", "x.npy", "--text", "review", "--label", "stars", match=match)


@pytest.mark.parametrize("case", CASES)
def test_sentdp_embed(cli, tmp_path, case):
    path, match = _files(tmp_path)[case]
    cli("sentdp", "embed", path, "--out", "x.npz", "--public", "news-articles", "--text", "review", "--label",
        "stars", match=match)


def test_bench_reads_a_file_in_the_encoding_it_is_given(cli, tmp_path):
    """The hint names --encoding: bench has it, and with it the same file gets past the loader (to the next check,
    an unknown defense here, so that nothing runs)."""
    path, _ = _files(tmp_path)["cp1252"]
    cli("bench", "--quick", "--data", path, "--text-column", "review", "--label-column", "stars", "--encoding",
        "cp1252", "--defenses", "nonesuch", match=r"unknown defense 'nonesuch'")
    cli("bench", "--quick", "--data", path, "--text-column", "review", "--label-column", "stars", "--encoding",
        "klingon", match=r"--encoding 'klingon' is not a known encoding")
    cli("bench", "--quick", "--encoding", "cp1252", "--list", match=r"--encoding applies to --data")


def test_the_same_rows_as_csv_are_read(cli, tmp_path):
    quoted = _rows()
    quoted[5][0] = "a review\nthat goes on"
    path = _csv(tmp_path / "quoted.csv", quoted)
    cli("bench", "--quick", "--data", str(path), "--text-column", "review", "--label-column", "stars",
        "--defenses", "nonesuch", match=r"unknown defense 'nonesuch'")  # past the loader


@pytest.mark.parametrize("rows, match", [
    ([["only one class here " + str(i), "pos"] for i in range(40)], r"every row has the same label \('pos'\)"),
    ([["good", "pos"], ["bad", "neg"], ["fine", "pos"]], r"3 rows: .* the bench needs at least 10 train, 2 dev, "
                                                         r"2 test rows"),
])
def test_a_file_the_bench_cannot_measure_is_refused_before_any_cell(cli, tmp_path, rows, match):
    path = _csv(tmp_path / "small.csv", rows)
    cli("bench", "--quick", "--data", str(path), "--text-column", "review", "--label-column", "stars", match=match)
