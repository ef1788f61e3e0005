"""``veil.defenses.redaction.files``: the fields and columns copied verbatim are named before the work and in the
report; an output whose suffix names another format is refused before any work; outputs that clash with each
other or with the input are refused by the library too; a scope that only pseudonyms have is refused with another
operator."""

from __future__ import annotations

import json

import pytest

from veil.defenses.redaction import PresidioRedaction
from veil.defenses.redaction.files import check_output_format, redact_file, verbatim_fields
from veil.errors import InvalidParameterError


def test_other_columns_and_fields_are_named_as_copied_verbatim(tmp_path):
    src = tmp_path / "t.csv"
    src.write_text('id,text,author\n1,"Mail bo@example.com",Bo Jones\n')
    said: list[str] = []
    report = redact_file(src, tmp_path / "o.csv", PresidioRedaction(), log=said.append)
    assert report.verbatim == ["id", "author"] and report.to_dict()["verbatim"] == ["id", "author"]
    line = [m for m in said if m.startswith("not redacted")]
    assert len(line) == 1 and "columns id, author" in line[0] and "--text" in line[0]
    assert (tmp_path / "o.csv").read_text() == "id,text,author\n1,Mail <EMAIL_ADDRESS>,Bo Jones\n"  # as it said
    rows = tmp_path / "r.jsonl"
    rows.write_text(json.dumps({"id": 1, "body": "Hi"}) + "\n" + json.dumps({"body": "x", "sender": "a@b.org"}) + "\n")
    said.clear()
    report = redact_file(rows, tmp_path / "o.jsonl", PresidioRedaction(), text="body", log=said.append)
    assert report.verbatim == ["id", "sender"] and any("fields id, sender" in m for m in said)
    plain = tmp_path / "p.txt"
    plain.write_text("Hi Bo\n")
    said.clear()
    assert redact_file(plain, tmp_path / "o.txt", PresidioRedaction(), log=said.append).verbatim == []
    assert not [m for m in said if m.startswith("not redacted")]


def test_verbatim_fields_of_a_text_column_alone_is_empty():
    assert verbatim_fields("csv", (["text"], []), "text") == []
    assert verbatim_fields("jsonl", [{"text": "a"}, {"text": "b"}], "text") == []


def test_an_output_naming_another_format_is_refused_and_other_suffixes_pass(tmp_path):
    src = tmp_path / "notes.txt"
    src.write_text("Mail bo@example.com\n")
    with pytest.raises(InvalidParameterError, match=r"notes\.txt.*--format jsonl"):
        check_output_format(src, tmp_path / "notes.jsonl")
    with pytest.raises(InvalidParameterError, match=r"o\.csv"):
        check_output_format(tmp_path / "t.csv", tmp_path / "o.txt")
    assert check_output_format(src, tmp_path / "notes.redacted.log") == "txt"  # not a format's suffix: kept
    assert check_output_format(src, tmp_path / "o.jsonl", format="jsonl") == "jsonl"
    with pytest.raises(InvalidParameterError, match="names a .jsonl file"):  # the library refuses it too
        redact_file(src, tmp_path / "notes.jsonl", PresidioRedaction())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_the_library_refuses_outputs_that_clash(tmp_path):
    src = tmp_path / "notes.txt"
    src.write_text("Mail bo@example.com\n")
    with pytest.raises(InvalidParameterError, match="out and spans both name"):
        redact_file(src, tmp_path / "o.txt", PresidioRedaction(), spans=tmp_path / "o.txt")
    with pytest.raises(InvalidParameterError, match="is the input path"):
        redact_file(src, tmp_path / "o.txt", PresidioRedaction(), spans=src)
    assert src.read_text() == "Mail bo@example.com\n" and sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_release_scope_needs_the_pseudonym_operator():
    for operator in ("type", "mask", "hash"):
        with pytest.raises(InvalidParameterError, match="operator='pseudonym'"):
            PresidioRedaction(operator=operator, scope="release")
    assert PresidioRedaction(operator="pseudonym", scope="release").scope == "release"
    assert PresidioRedaction.bench_make({"operator": "type"}, None).scope == "document"
    assert PresidioRedaction.bench_make({"operator": "pseudonym"}, None).scope == "release"
