"""``veil redact`` and ``veil redaction`` refuse, before any work and with the fix, what they used to do silently:
``--scope release`` without ``--operator pseudonym``, an ``--out`` suffix naming another format, and an infilling
run whose masked LM is not there; and they say which columns they copy verbatim."""

from __future__ import annotations

import json
from pathlib import Path

from veil.cli import main


def test_release_scope_without_pseudonyms_is_refused(cli):
    Path("in.txt").write_text("Anna Berg wrote.\n")
    cli("redact", "in.txt", "--out", "o.txt", "--scope", "release", match="--operator pseudonym")
    cli("redact", "in.txt", "--out", "o.txt", "--scope", "release", "--operator", "hash", match="--scope release")


def test_an_out_suffix_of_another_format_is_refused(cli):
    Path("in.txt").write_text("Anna Berg wrote.\n")
    Path("t.csv").write_text("text\nhi\n")
    cli("redact", "in.txt", "--out", "x.jsonl", match=r"x\.txt")
    cli("redact", "t.csv", "--out", "x.txt", match=r"x\.csv")


def test_the_columns_copied_verbatim_are_named(tmp_path, capsys):
    src = tmp_path / "t.csv"
    src.write_text('id,text,author\n1,"Mail bo@example.com",Bo Jones\n')
    assert main(["redact", str(src), "--out", str(tmp_path / "o.csv"), "--json"]) == 0
    out = capsys.readouterr()
    assert "columns id, author are copied verbatim" in " ".join(out.err.split())
    assert json.loads(out.out)["verbatim"] == ["id", "author"]


def test_infilling_without_the_masked_lm_names_how_to_get_it(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "scratch-home"))  # never the real cache's model
    line = cli("redaction", "infill", "--mlm", "mlm", "--results", "r", match="veil models train mlm")
    assert "--mlm mlm-quick" in line and "deploy/gpu/train.py" in line and "Errno" not in line
    assert not (tmp_path / "scratch-home").exists()


def test_the_formats_command_checks_its_options_first(cli):
    cli("redaction", "formats", "--model", "xl", match="--model")
    cli("redaction", "formats", "--n-per-variant", "0", match="--n-per-variant")
