"""``veil redact``: a file of hand-written sentences loses every e-mail address and phone number and keeps its line
count; the spans file is private; bad input fails before any work with one error line; ``veil redaction`` commands
write records and check their options first."""

from __future__ import annotations

import json
import re
import stat

import pytest

from veil.cli import main

LINES = [
    "Please write to maria.gonzalez@example.com by Monday.",
    "",
    "Call me on 212-555-0187 or at (415) 555-0134, whichever works.",
    "Our helpdesk: support@helpdesk.example.org, phone 646-555-0199.",
    "Nothing private in this line at all.",
    "Send the forms to t.nguyen@example.net (cell 917-555-0142).",
]
VALUES = ["maria.gonzalez@example.com", "212-555-0187", "415", "555-0134", "support@helpdesk.example.org",
          "646-555-0199", "t.nguyen@example.net", "917-555-0142"]


@pytest.mark.parametrize("operator", ["type", "pseudonym"])
def test_redact_removes_every_address_and_number_and_keeps_the_line_count(tmp_path, capsys, operator):
    src = tmp_path / "notes.txt"
    src.write_text("\n".join(LINES) + "\n")
    out, spans = tmp_path / "notes.redacted.txt", tmp_path / "spans.jsonl"
    assert main(["redact", str(src), "--out", str(out), "--operator", operator, "--spans", str(spans),
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    text = out.read_text()
    assert text.count("\n") == len(LINES) and text.endswith("\n")
    got = text.split("\n")[:-1]
    assert got[1] == "" and got[4] == LINES[4]
    for value in VALUES:
        # as a whole value: a random surrogate phone number may contain "415" inside other digits
        assert not re.search(rf"(?<![\w.-]){re.escape(value)}(?![\w-])", text), value
    assert report["texts"] == len(LINES) and report["per_entity"].get("EMAIL_ADDRESS") == 3
    assert stat.S_IMODE(spans.stat().st_mode) == 0o600
    rows = [json.loads(line) for line in spans.read_text().splitlines()]
    assert [r["index"] for r in rows] == list(range(len(LINES)))
    assert {s["value"] for r in rows for s in r["spans"]} >= {"maria.gonzalez@example.com", "646-555-0199"}


def test_redact_keeps_other_fields_of_jsonl_and_csv(tmp_path, capsys):
    src = tmp_path / "mails.jsonl"
    src.write_text(json.dumps({"id": 7, "body": "From ann@example.org"}) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["redact", str(src), "--out", str(out), "--text", "body"]) == 0
    assert json.loads(out.read_text()) == {"id": 7, "body": "From <EMAIL_ADDRESS>"}
    csv_in, csv_out = tmp_path / "t.csv", tmp_path / "o.csv"
    csv_in.write_text('id,text\n1,"Mail bo@example.com, thanks"\n')
    assert main(["redact", str(csv_in), "--out", str(csv_out)]) == 0
    assert csv_out.read_text() == 'id,text\n1,"Mail <EMAIL_ADDRESS>, thanks"\n'
    capsys.readouterr()


def test_redact_bad_input_fails_before_work(cli):
    work = cli.work
    (work / "../empty.txt").write_text("")
    (work / "../blob.txt").write_bytes(b"\x00\x01\x02binary")
    (work / "../ok.txt").write_text("hi\n")
    (work / "../rows.jsonl").write_text('{"body": "x"}\n')
    cli("redact", "../empty.txt", "--out", "o.txt", match="empty")
    cli("redact", "../blob.txt", "--out", "o.txt", match="binary")
    cli("redact", "../ok.txt", "--out", "o.txt", "--operator", "erase", match="--operator")
    cli("redact", "../ok.txt", "--out", "o.txt", "--entities", "NAME", match="NAME")
    cli("redact", "../ok.txt", "--out", "o.txt", "--model", "lg", match="--model")
    cli("redact", "../ok.txt", match="--out")
    cli("redact", "../rows.jsonl", "--out", "o.jsonl", match="text")
    cli("redact", "../missing.txt", "--out", "o.txt", match="not a file")


def test_list_entities_names_presidio_types(capsys):
    assert main(["redact", "--list-entities", "--json"]) == 0
    names = json.loads(capsys.readouterr().out)
    assert {"PERSON", "EMAIL_ADDRESS", "PHONE_NUMBER", "LOCATION"} <= set(names)


def test_redaction_commands_check_their_options_first(cli):
    cli("redaction", "infill", "--corpus", "brown", match="--corpus")
    cli("redaction", "infill", "--operators", "pseudonym", match="--operators")
    cli("redaction", "reidentify", "--corpus", "rt-polarity", match="--corpus")
    cli("redaction", "detect", "--model", "xl", match="--model")
    cli("redaction", "attributes", "--entities", "ORG", match="--entities")
    cli("redaction", "attributes", "--operators", "erase", match="--operators")


def test_redaction_detect_writes_a_record_and_reuses_it(tmp_path, capsys):
    args = ["redaction", "detect", "--n-per-entity", "3", "--results", str(tmp_path), "--json"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    path = first[0]["path"]
    assert re.search(r"detection-sm-n3-seed0\.json$", path)
    assert first[0]["metrics"]["recall_EMAIL_ADDRESS"]["mean"] == 1.0
    from pathlib import Path

    before = Path(path).read_text()
    assert main(args) == 0
    capsys.readouterr()
    assert Path(path).read_text() == before
