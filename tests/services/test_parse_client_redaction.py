"""`veil parse client` redacts numbers and addresses by default (issue 48, item 4).

Their Penn tags (CD, ADD) are in no level of the obfuscation spectrum, so obfuscation alone sends phone numbers,
IBAN digits and e-mail addresses verbatim at every level. The end-to-end tests run the CLI client against the real
recording parse server of tests/services/test_parse_service.py (a real uvicorn server, real HTTP, a real biaffine
parser) and read every byte it received.
"""

from __future__ import annotations

import json
import warnings

import pytest

from veil.defenses.obfuscation import RandomSubstitution
from veil.errors import PrivacyLeakWarning
from veil.parsing.trees import Tree, read_conllu_trees, write_conllu
from veil.services.parse_client import ParseClient, redact_numbers, redaction_placeholder
from .test_parse_service import parser, served, vocab, world  # noqa: F401  (module fixtures)

#: a sentence per identifier kind; at P1 only NNP/NNPS are hidden, so every other word is kept by obfuscation
PRIVATE = [
    (["Write", "to", "alice.smith@example.org", "today", "."], ["VB", "TO", "ADD", "NN", "."]),
    (["Call", "+44", "20", "7946", "0958", "now", "."], ["VB", "CD", "CD", "CD", "CD", "RB", "."]),
    (["My", "iban", "is", "DE89370400440532013000", "."], ["PRP$", "NN", "VBZ", "NN", "."]),  # mis-tagged NN
    (["She", "paid", "forty-two", "dollars", "at", "www.shopnorvel.net", "."],
     ["PRP", "VBD", "CD", "NNS", "IN", "NN", "."]),
]
#: what must never be on the wire by default (lower-cased)
SECRETS = ["alice.smith", "7946", "0958", "de89370400440532013000", "forty-two", "shopnorvel"]


def test_placeholders_by_kind():
    assert redaction_placeholder("alice@example.org", "NN") == "name@example.com"
    assert redaction_placeholder("https://x.example", "NN") == "example.com"
    assert redaction_placeholder("www.shopnorvel.net", "NN") == "example.com"
    assert redaction_placeholder("anything", "ADD") == "example.com"
    assert redaction_placeholder("forty-two", "CD") == "0"  # a number word: its tag says so
    assert redaction_placeholder("DE89370400440532013000", "NNP") == "0"  # a digit, whatever the tag
    assert redaction_placeholder("+44", "NN") == "0"
    assert [redaction_placeholder(w, t) for w, t in (("tea", "NN"), ("likes", "VBZ"), (".", "."))] == [None] * 3


def test_redaction_joins_the_key_and_leaves_obfuscated_positions_alone(vocab):  # noqa: F811
    ob = RandomSubstitution(vocabulary=vocab, level="P1")
    words = ["Ann", "called", "555-0199", "and", "wrote", "ann@mail.org", "."]
    tags = ["NNP", "VBD", "CD", "CC", "VBD", "ADD", "."]
    obf = ob.obfuscate(words, tags)
    out, redacted = redact_numbers(obf)
    assert redacted == (2, 5)
    assert out.words[2] == "0" and out.words[5] == "name@example.com"
    assert out.words[0] == obf.words[0] != "Ann"  # obfuscated by the level: kept as obfuscated
    assert list(out.key.positions) == [0, 2, 5] and out.key.restore(out.words) == words
    assert out.tags == tuple(tags)


def _run(tmp_path, url, world, extra):  # noqa: F811
    from veil.cli import main

    public = tmp_path / "public"
    if not public.exists():
        write_conllu(public / "train.conllu", world[2][:1500])
    src = tmp_path / "mine.conllu"
    write_conllu(src, [Tree(w, t, (0,) * len(w), ("dep",) * len(w)) for w, t in PRIVATE])
    out, key = tmp_path / f"parsed{len(extra)}.conllu", tmp_path / f"key{len(extra)}.json"
    code = main(["parse", "client", str(src), "--server", url, "--level", "P1", "--treebank", str(public),
                 "--out", str(out), "--key", str(key), "--json", *extra])
    return code, out, key


def test_cli_sends_no_number_or_address_by_default(served, world, tmp_path, capsys):  # noqa: F811
    url, recorder = served
    recorder.clear()
    code, out, key = _run(tmp_path, url, world, [])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    summary = json.loads(captured.out)
    wire = b"\n".join(r["body"] + r["headers"] + r["query"] for r in recorder.requests).lower()
    assert [s for s in SECRETS if s.encode() in wire] == []
    sent = [s for body in recorder.parse_bodies() for s in json.loads(body)["sentences"]]
    assert [s["tokens"][2] for s in sent[:1]] == ["name@example.com"]
    assert sent[1]["tokens"][1:5] == ["0"] * 4 and sent[3]["tokens"][5] == "example.com"
    assert summary["redacted"] == 8 and summary["replaced"] == 0  # no NNP in these sentences
    assert [list(t.words) for t in read_conllu_trees(out)] == [w for w, _ in PRIVATE]  # your words come back
    secret = json.loads(key.read_text())
    assert secret[2] == {"positions": [3], "originals": ["DE89370400440532013000"]}
    assert not any(s in json.dumps(summary).lower() for s in SECRETS)


def test_cli_send_numbers_sends_them_in_clear_and_warns(served, world, tmp_path, capsys):  # noqa: F811
    url, recorder = served
    recorder.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("always", PrivacyLeakWarning)  # not an error here: the CLI shows it as a line
        code, out, _ = _run(tmp_path, url, world, ["--send-numbers"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "in clear" in captured.err
    wire = b"\n".join(r["body"] for r in recorder.requests).lower()
    assert [s for s in SECRETS if s.encode() in wire] == SECRETS  # the option really is what hides them
    assert json.loads(captured.out)["redacted"] == 0


def test_the_python_client_warns_when_told_to_send_numbers(vocab):  # noqa: F811
    ob = RandomSubstitution(vocabulary=vocab, level="P3")
    with pytest.warns(PrivacyLeakWarning, match="in clear"):
        ParseClient("http://127.0.0.1:9", obfuscator=ob, redact_numbers=False).close()
    with pytest.raises(TypeError, match="redact_numbers must be True or False"):
        ParseClient("http://127.0.0.1:9", obfuscator=ob, redact_numbers="no")
