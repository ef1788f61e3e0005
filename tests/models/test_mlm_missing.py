"""A masked LM that is not there is a typed error naming every way to get it (``veil models train mlm``, the GPU
route, the quick model), never a bare ``[Errno 2] ... manifest.json``; checked in a scratch VEIL_HOME."""

from __future__ import annotations

import pytest

from veil.errors import ResourceMissingError


def test_a_missing_manifest_names_the_ways_to_get_the_model(tmp_path, monkeypatch):
    from veil.models.mlm import load_mlm, mlm_dir, read_manifest

    monkeypatch.setenv("VEIL_HOME", str(tmp_path))
    with pytest.raises(ResourceMissingError) as err:
        read_manifest(mlm_dir("mlm"), "mlm")
    message = str(err.value)
    for fix in ("`veil models train mlm`", "deploy/gpu/train.py", "--mlm mlm-quick"):
        assert fix in message, (fix, message)
    assert isinstance(err.value, FileNotFoundError)  # callers catching FileNotFoundError still do
    with pytest.raises(ResourceMissingError, match="veil models train mlm --quick"):
        read_manifest(mlm_dir("mlm-quick"), "mlm-quick")
    with pytest.raises(ResourceMissingError, match="deploy/gpu/train.py"):
        load_mlm("mlm")
    assert list(tmp_path.iterdir()) == []  # nothing made on the way
