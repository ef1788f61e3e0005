"""veil.models.transfer (`veil models export` / `veil models import`): a model travels as a checked folder and
comes back bit for bit up to the stated float16 rounding; a foreign, damaged, truncated or mismatched folder is a
typed error and installs nothing. Every test runs in a scratch VEIL_HOME with a model made here (a tiny parser, or
MiniLM-sized masked LM and inverter built from the installed encoder without training), never a shared model."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import torch

from veil.errors import DataFormatError, InvalidParameterError, UnknownNameError
from veil.models.transfer import TransferError, export_model, exportable, import_model, read_export


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home"
    monkeypatch.setenv("VEIL_HOME", str(h))
    return h


TREES = [  # two real-looking dependency trees (words, tags, heads, labels)
    (["The", "cat", "sat", "."], ["DT", "NN", "VBD", "."], [2, 3, 0, 3], ["det", "nsubj", "ROOT", "punct"]),
    (["Dogs", "bark", "loudly", "."], ["NNS", "VBP", "RB", "."], [2, 0, 2, 2], ["nsubj", "ROOT", "advmod", "punct"]),
]


@pytest.fixture
def parser_file(home, train_tiny_parser):
    from types import SimpleNamespace

    trees = [SimpleNamespace(words=w, tags=t, heads=h, deprels=d) for w, t, h, d in TREES]
    net, _ = train_tiny_parser(trees, steps=3)
    path = home / "parsing" / "models" / "biaffine.pt"
    path.parent.mkdir(parents=True)
    net.save(path)
    path.with_suffix(".json").write_text(json.dumps({"best_dev_uas": 12.5, "steps": 3}))
    return path


def _state(path):
    from veil.models.biaffine import BiaffineParser

    return BiaffineParser.load(path).state_dict()


@pytest.mark.parametrize("exact", [False, True])
def test_a_parser_round_trips_up_to_the_stated_rounding(home, parser_file, tmp_path, exact):
    before = _state(parser_file)
    manifest = export_model("biaffine", tmp_path / "out", exact=exact)
    assert manifest["kind"] == "parser" and manifest["dtype"] == ("float32" if exact else "float16")
    assert all(p["bytes"] <= 15_000_000 for p in manifest["parts"])
    with pytest.raises(InvalidParameterError, match="already cached.*--force"):
        import_model(tmp_path / "out")  # never replaces a cached model without force
    path, _ = import_model(tmp_path / "out", force=True)
    after = _state(path)
    for key, value in before.items():
        want = value if exact or not value.is_floating_point() else value.to(torch.float16).to(torch.float32)
        assert torch.equal(after[key], want), key
    summary = json.loads(path.with_suffix(".json").read_text())
    assert summary["best_dev_uas"] == 12.5 and summary["transfer"]["dtype"] == manifest["dtype"]
    assert summary["transfer"]["parts_sha256"] == [p["sha256"] for p in manifest["parts"]]


def test_export_refuses_an_unknown_name_and_a_folder_in_use(home, parser_file, tmp_path):
    assert exportable() == {"biaffine": "parser"}
    with pytest.raises(UnknownNameError, match="biaffine"):
        export_model("nosuch", tmp_path / "out")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(InvalidParameterError, match="not an empty folder"):
        export_model("biaffine", busy)
    assert (busy / "notes.txt").read_text() == "mine"
    export_model("biaffine", tmp_path / "out")
    with pytest.raises(InvalidParameterError, match="--force"):
        export_model("biaffine", tmp_path / "out")
    export_model("biaffine", tmp_path / "out", force=True)


def _damage(folder, how):
    manifest = json.loads((folder / "manifest.json").read_text())
    part = folder / manifest["parts"][0]["file"]
    if how == "missing part":
        part.unlink()
    elif how == "truncated part":
        part.write_bytes(part.read_bytes()[:64])
    elif how == "altered part":
        data = bytearray(part.read_bytes())
        data[-3] ^= 0x55
        part.write_bytes(bytes(data))
    elif how == "no manifest":
        (folder / "manifest.json").unlink()
    elif how == "foreign manifest":
        (folder / "manifest.json").write_text(json.dumps({"model_type": "bert"}))
    elif how == "unknown kind":
        manifest["kind"] = "tokenizer"
        (folder / "manifest.json").write_text(json.dumps(manifest))
    elif how == "wrong architecture":
        manifest["model"]["config"]["hidden"] = manifest["model"]["config"]["hidden"] * 2
        (folder / "manifest.json").write_text(json.dumps(manifest))
    elif how == "name of another kind":
        manifest["name"] = "neural-P3-s0-abc"
        (folder / "manifest.json").write_text(json.dumps(manifest))
    elif how == "not json":
        (folder / "manifest.json").write_text("{not json")
    return part


@pytest.mark.parametrize("how, match", [
    ("missing part", "weights-0.safetensors is missing"),
    ("truncated part", "weights-0.safetensors has 64 bytes"),
    ("altered part", "weights-0.safetensors has sha256"),
    ("no manifest", "holds no manifest.json"),
    ("foreign manifest", "not a manifest `veil models export` wrote"),
    ("unknown kind", "kind 'tokenizer'"),
    ("wrong architecture", "do not fit"),
    ("name of another kind", "not a name veil gives"),
    ("not json", "manifest"),
])
def test_a_bad_folder_is_one_typed_error_and_installs_nothing(home, parser_file, tmp_path, how, match):
    export_model("biaffine", tmp_path / "out")
    parser_file.unlink()
    parser_file.with_suffix(".json").unlink()
    _damage(tmp_path / "out", how)
    with pytest.raises(DataFormatError, match=match) as err:
        import_model(tmp_path / "out")
    assert "\n" not in str(err.value)
    assert not parser_file.exists() and not parser_file.with_suffix(".json").exists()
    assert not any((home / "parsing" / "models").glob("*neural*"))


def test_a_masked_lm_round_trips_with_its_tied_decoder_and_a_wrong_base_is_refused(home, tmp_path):
    from veil.models.mlm import base_mlm, load_mlm, mlm_dir, save_mlm

    net, tokenizer, base = base_mlm()
    torch.manual_seed(0)
    with torch.no_grad():
        net.cls.predictions.transform.dense.weight.normal_()
    save_mlm(net, tokenizer, mlm_dir("mlm-quick"), {"name": "mlm-quick", "base": base, "config": {"encoder": "minilm"},
                                                     "heldout": {"accuracy": 1.0}})
    manifest = export_model("mlm-quick", tmp_path / "out")
    assert set(manifest["tied"]) == {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}
    assert sum(p["bytes"] for p in manifest["parts"]) < 50_000_000  # the tied decoder travels once
    bad = tmp_path / "bad"
    shutil.copytree(tmp_path / "out", bad)
    m = json.loads((bad / "manifest.json").read_text())
    m["needs"]["base"] = "minilm-000000000000"
    (bad / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(TransferError, match="minilm-000000000000.*this machine's MiniLM"):
        import_model(bad, force=True)
    path, _ = import_model(tmp_path / "out", force=True, check=lambda kind, model: {"checked": kind})
    back = load_mlm("mlm-quick")
    assert back.manifest["transfer"]["checked"] == "masked-lm" and back.manifest["heldout"] == {"accuracy": 1.0}
    assert back.model.cls.predictions.decoder.weight.data_ptr() == \
        back.model.bert.embeddings.word_embeddings.weight.data_ptr()
    for key, value in net.state_dict().items():
        assert torch.equal(back.model.state_dict()[key], value.to(torch.float16).to(torch.float32)), key


def test_a_legacy_inverter_folder_imports_only_with_its_checksums(home, tmp_path):
    """The layout the older deploy/gpu/inverter.py wrote (a part count, no checksums): imported when SHA256SUMS
    beside it lists every file, refused without it or when the manifest does not match it."""
    from veil.models.inverter import build_inverter, inverter_dir, load_inverter, save_inverter
    from veil.models.portable import write_parts

    torch.manual_seed(0)
    net, tokenizer, base = build_inverter(vector_dim=384, prefix_tokens=2)
    legacy = tmp_path / "models" / "inverter"
    legacy.mkdir(parents=True)
    parts = write_parts(dict(net.state_dict()), legacy)
    manifest = {"name": "inverter-quick", "kind": "inverter", "base": base, "parts": len(parts),
                "architecture": {"vector_dim": 384, "prefix_tokens": 2, "max_tokens": 8},
                "config": {"encoder": "minilm", "bf16": True}, "encoder": {"model_id": "minilm"}, "sha256": "x"}
    (legacy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(TransferError, match="no SHA256SUMS"):
        import_model(legacy)
    lines = [f"{hashlib.sha256(p.read_bytes()).hexdigest()}  inverter/{p.name}" for p in sorted(legacy.iterdir())]
    (legacy.parent / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    assert read_export(legacy)["exported"]["by"] == "deploy/gpu/inverter.py train"
    path, _ = import_model(legacy)
    assert path == inverter_dir("inverter-quick")
    back = load_inverter("inverter-quick")
    assert back.manifest["transfer"]["dtype"] == "float16"
    sd = back.net.state_dict()
    assert all(torch.equal(sd[k], v.to(torch.float16).to(torch.float32)) for k, v in net.state_dict().items())
    manifest["name"] = "inverter"  # a manifest that no longer matches SHA256SUMS
    (legacy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(TransferError, match="does not match its line in SHA256SUMS"):
        import_model(legacy)
    assert not inverter_dir("inverter").exists()


def test_the_cli_exports_and_imports_and_refuses_before_any_work(home, parser_file, tmp_path, capsys):
    from veil.cli import main

    out = tmp_path / "out"
    assert main(["models", "export", "biaffine", str(out), "--exact"]) == 0
    assert f"wrote {out}" in capsys.readouterr().out.replace("\n", "")
    assert main(["models", "import", str(out)]) == 2  # cached already: --force named
    assert "--force" in capsys.readouterr().err
    assert main(["models", "import", str(out), "--force", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "parser"
    assert main(["models", "export", "nosuch", str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err
    assert "unknown cached model 'nosuch'" in err and "biaffine" in err and not (tmp_path / "o2").exists()
    assert main(["models", "import", str(tmp_path)]) == 2
    assert "holds no manifest.json" in capsys.readouterr().err
