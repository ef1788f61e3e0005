"""No two outputs of one command are the same file, and no output is an input: every command with several path
options refuses such a call with one error line naming both options, before any work, writing nothing
(``veil.outputs.check_distinct_outputs``)."""

from __future__ import annotations

from pathlib import Path

import pytest


def _file(name: str, text: str = "Anna Berg wrote to anna@example.org.\n") -> Path:
    path = Path(name)
    path.write_text(text)
    return path


def _folder(name: str) -> Path:
    path = Path(name)
    path.mkdir()
    (path / "keep.json").write_text("{}")
    return path


class _NoTap:  # the tap's own validation is not what these cases test: any folder passes it
    def __init__(self, folder):
        self.folder = folder


# (id, files to make in the working folder, argv, the options the error must name, the work that must not start)
CASES = [
    ("redact --out X --spans X", lambda: _file("in.txt"), ["redact", "in.txt", "--out", "x.txt", "--spans", "x.txt"],
     ("--out", "--spans"), "veil.defenses.redaction.files:redact_file"),
    ("redact --spans IN --force", lambda: _file("in.txt"),
     ["redact", "in.txt", "--out", "o.txt", "--spans", "in.txt", "--force"], ("--spans", "FILE"),
     "veil.defenses.redaction.files:redact_file"),
    ("redact --out IN --force", lambda: _file("in.txt"), ["redact", "in.txt", "--out", "in.txt", "--force"],
     ("--out", "FILE"), "veil.defenses.redaction.files:redact_file"),
    ("redact --out ./sub/../IN", lambda: (_file("in.txt"), Path("sub").mkdir()),
     ["redact", "in.txt", "--out", "sub/../in.txt", "--force"], ("--out", "FILE"),
     "veil.defenses.redaction.files:redact_file"),
    ("obfuscate --key IN --force", lambda: _file("in.txt", "The cat sat .\n"),
     ["obfuscate", "in.txt", "--key", "in.txt", "--force"], ("--key", "FILE"),
     "veil.parsing.obfuscate_file:obfuscate_file"),
    ("parse client --out X --key X", lambda: _file("in.txt", "The cat sat .\n"),
     ["parse", "client", "in.txt", "--out", "x.conllu", "--key", "x.conllu"], ("--key", "--out"),
     "veil.services.parse_client:run_client"),
    ("parse client --out IN --force", lambda: _file("in.conllu", "1\tThe\t_\t_\tDT\t_\t0\troot\t_\t_\n\n"),
     ["parse", "client", "in.conllu", "--out", "in.conllu", "--force"], ("--out", "FILE"),
     "veil.services.parse_client:run_client"),
    ("parse client --key IN --force", lambda: _file("in.txt", "The cat sat .\n"),
     ["parse", "client", "in.txt", "--out", "x.conllu", "--key", "in.txt", "--force"], ("--key", "FILE"),
     "veil.services.parse_client:run_client"),
    ("federated run --record D --results D", lambda: None,
     ["federated", "run", "--engine", "reference", "--record", "d", "--results", "d"], ("--record", "--results"),
     "veil.federated.run:run_federated"),
    ("federated analytic-sweep --taps D --results D", lambda: None,
     ["federated", "analytic-sweep", "--taps", "d", "--results", "d"], ("--taps", "--results"),
     "veil.experiments.federated.taps:run_analytic_cells"),
    ("federated chain-sweep --taps D --results D", lambda: None,
     ["federated", "chain-sweep", "--taps", "d", "--results", "d"], ("--taps", "--results"),
     "veil.experiments.federated.chain:run_chain_cells"),
    ("federated dp-sweep --taps D --results D", lambda: None,
     ["federated", "dp-sweep", "--taps", "d", "--results", "d"], ("--taps", "--results"),
     "veil.experiments.federated.chain:run_chain_cells"),
    ("report --out D --docs D", lambda: (_folder("records"), _folder("docs")),
     ["report", "--results", "records", "--out", "docs", "--docs", "docs"], ("--out", "--docs"),
     "veil.report:render_all"),
    ("report --out RESULTS", lambda: _folder("records"), ["report", "--results", "records", "--out", "records"],
     ("--out", "--results"), "veil.report:render_all"),
    ("bench --data D --out D", lambda: _folder("treebank"), ["bench", "--data", "treebank", "--out", "treebank"],
     ("--out", "--data"), "veil.bench.runner:run_bench"),
    ("attack analytic --results RECORD", lambda: _folder("tap"),
     ["attack", "analytic", "--record", "tap", "--results", "tap"], ("--results", "--record"),
     "veil.experiments.federated.taps:run_tap_attack"),
    ("attack chain --results RECORD", lambda: (_folder("tap"), _folder("tap.truth"),
                                                Path("tap.truth/run.json").write_text("{}")),
     ["attack", "chain", "--record", "tap", "--results", "tap"], ("--results", "--record"),
     "veil.experiments.federated.chain:run_chain"),
]


@pytest.mark.parametrize("make, args, options, work", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_outputs_that_clash_are_refused_before_any_work(cli, monkeypatch, make, args, options, work):
    import importlib

    module, name = work.split(":")

    def started(*_args, **_kwargs):
        raise AssertionError(f"{work} started before the clash of {' and '.join(options)} was refused")

    monkeypatch.setattr(importlib.import_module(module), name, started)
    monkeypatch.setattr("veil.attacks.gradients.tap.Tap", _NoTap)
    make()
    before = {p: p.read_bytes() for p in Path(".").rglob("*") if p.is_file()}
    line = cli(*args, match=" and | is the input ")
    for option in options:
        assert option in line, (option, line)
    assert {p: p.read_bytes() for p in Path(".").rglob("*") if p.is_file()} == before  # inputs untouched


def test_distinct_outputs_of_a_command_still_run(tmp_path, capsys):
    """The negative control of the clash cases: the same redaction with distinct files runs and writes both."""
    from veil.cli import main

    src = tmp_path / "in.txt"
    src.write_text("Mail anna@example.org now.\n")
    out, spans = tmp_path / "o.txt", tmp_path / "spans.jsonl"
    assert main(["redact", str(src), "--out", str(out), "--spans", str(spans)]) == 0
    capsys.readouterr()
    assert out.read_text() == "Mail <EMAIL_ADDRESS> now.\n" and "anna@example.org" in spans.read_text()
    assert src.read_text() == "Mail anna@example.org now.\n"
