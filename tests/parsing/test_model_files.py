"""Every .pt file veil loads goes through veil.models.files.load_tensors (issue 26, class 6): a missing, empty,
truncated or foreign file, or a pickle that would run code, is one typed error naming the file and a fix that
exists; nothing is unpickled beyond tensors and plain values."""

from __future__ import annotations

import os
import pickle

import pytest
import torch

from veil.errors import CacheCorruptError, DataFormatError, ResourceMissingError


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bad")
    (folder / "empty.pt").write_bytes(b"")
    torch.save({"state": {"w": torch.zeros(2)}, "x": 1}, folder / "whole.pt")
    data = (folder / "whole.pt").read_bytes()
    (folder / "truncated.pt").write_bytes(data[: len(data) // 3])
    torch.save([torch.zeros(2)], folder / "foreign.pt")

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {folder / 'PWNED'}",))

    (folder / "evil.pt").write_bytes(pickle.dumps({"state": Evil(), "vocab": {}, "config": {}}))
    return folder


def _loaders():
    from veil.attacks.word_recovery import MaskedLMAttacker
    from veil.models.biaffine import BiaffineParser
    from veil.parsing.train import load_parser

    return {"biaffine": BiaffineParser.load, "load_parser": load_parser, "mlm": MaskedLMAttacker.load}


@pytest.mark.parametrize("loader", ["biaffine", "load_parser", "mlm"])
@pytest.mark.parametrize("name,match", [
    ("empty.pt", r"empty\.pt is empty \(0 bytes\)"),
    ("truncated.pt", r"truncated\.pt is damaged or not a file veil wrote"),
    ("foreign.pt", r"foreign\.pt is a torch file but not one veil wrote"),
    ("whole.pt", r"whole\.pt is a torch file but not one veil wrote"),
    ("evil.pt", r"evil\.pt is damaged or not a file veil wrote"),
])
def test_damaged_and_foreign_model_files_are_typed_errors(bad, loader, name, match):
    with pytest.raises(DataFormatError, match=match) as err:
        _loaders()[loader](bad / name)
    assert "`veil " in str(err.value)  # the fix names a command
    assert not (bad / "PWNED").exists(), "a foreign pickle ran code"


def test_a_missing_model_file_says_what_to_run(tmp_path):
    with pytest.raises(ResourceMissingError, match=r"`veil parse train` \(about 45 minutes"):
        _loaders()["load_parser"](tmp_path / "none.pt")


def test_the_neural_obfuscator_files(tmp_path, bad):
    from veil.defenses.obfuscation.neural import NeuralObfuscator

    with pytest.raises(ResourceMissingError, match=r"`veil parse obfuscator train`"):
        NeuralObfuscator.load(tmp_path / "none.pt")
    (tmp_path / "ob.pt").write_bytes((bad / "whole.pt").read_bytes())
    (tmp_path / "ob.json").write_bytes(b"\xff\xfe")
    with pytest.raises(DataFormatError, match=r"ob\.json: not UTF-8"):
        NeuralObfuscator.load(tmp_path / "ob.pt")
    (tmp_path / "ob.json").write_text('{"format": "something else"}')
    with pytest.raises(DataFormatError, match=r"not the description of a neural obfuscator"):
        NeuralObfuscator.load(tmp_path / "ob.pt")
    (tmp_path / "ob.json").write_text('{"format": "veil-neural-obfuscator/1", "fingerprint": "0"}')
    with pytest.raises(CacheCorruptError, match=r"`veil parse obfuscator train --force`"):
        NeuralObfuscator.load(tmp_path / "ob.pt")


def test_a_saved_masked_lm_attacker_reports_the_vectors_it_was_trained_from(tmp_path):
    """benchmarks/records_under_load.py found the masked-LM attacker's record saying ``vectors: none`` when it was
    loaded from its cache and ``md`` when trained in the run: the file keeps what it was trained from."""
    import torch

    from veil.attacks.word_recovery import AttackVocabulary, MaskedLMAttacker

    atk = MaskedLMAttacker(AttackVocabulary(("the", "film", "is")), ["DT", "NN", "VBZ"], vectors="none")
    atk.vectors_source = "md"  # as one built with md vectors (spaCy's md pipeline) would say
    atk.save(tmp_path / "a.pt")
    assert MaskedLMAttacker.load(tmp_path / "a.pt").config()["vectors"] == "md"
    blob = torch.load(tmp_path / "a.pt", weights_only=True)
    atk.vectors_source = "none"
    atk.save(tmp_path / "b.pt")
    assert MaskedLMAttacker.load(tmp_path / "b.pt").config()["vectors"] == "none"
    del blob["vectors"]  # saved by an earlier veil: the one way it trained one then was with md vectors
    torch.save(blob, tmp_path / "c.pt")
    assert MaskedLMAttacker.load(tmp_path / "c.pt").config()["vectors"] == "md"
