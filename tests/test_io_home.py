"""The cache location: VEIL_HOME that is a file, lies under a file, or cannot be written.

Each case must fail with a CacheLocationError that says what is wrong with
VEIL_HOME, never with "run `veil corpora pull`" (which could not help), and
must write nothing.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

import veil.corpora as vc
from veil._io import veil_home, writable_dir
from veil.cli import main
from veil.encoders import CacheKey, EmbeddingCache
from veil.errors import CacheLocationError

NAME = "trec-questions"
KEY = CacheKey(model_id="m", pooling="mean", max_length=8, normalize=True, corpus="c", split="train",
               texts_sha256="0" * 64, n=2, dim=3)


def _every_use_fails(match: str) -> None:
    with pytest.raises(CacheLocationError, match=match):
        vc.load(NAME)
    with pytest.raises(CacheLocationError, match=match):
        vc.load(NAME, pull_missing=True)
    with pytest.raises(CacheLocationError, match=match):
        vc.pull(NAME)
    with pytest.raises(CacheLocationError, match=match):
        EmbeddingCache().put(KEY, np.zeros((2, 3), dtype=np.float32))


def test_default_and_plain_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("VEIL_HOME", raising=False)
    assert veil_home() == Path.home() / ".cache" / "veil"
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "not-yet"))
    assert veil_home() == tmp_path / "not-yet" and not (tmp_path / "not-yet").exists()  # nothing created


def test_home_is_a_file(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.write_text("not a folder")
    monkeypatch.setenv("VEIL_HOME", str(home))
    message = rf"VEIL_HOME={home} is a file, not a folder; set VEIL_HOME to a writable folder"
    with pytest.raises(CacheLocationError, match=message):
        veil_home()
    _every_use_fails(message)
    assert home.read_text() == "not a folder" and [p.name for p in tmp_path.iterdir()] == ["home"]


def test_home_under_a_file(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "file" / "veil"))
    message = rf"VEIL_HOME={tmp_path}/file/veil lies under {tmp_path}/file, which is a file; set VEIL_HOME"
    _every_use_fails(message)
    assert [p.name for p in tmp_path.iterdir()] == ["file"]


def test_cli_reports_the_location_not_pull(tmp_path, monkeypatch, capsys):
    (tmp_path / "home").write_text("x")
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    assert main(["corpora", "show", NAME]) == 2
    err = capsys.readouterr().err
    assert "is a file, not a folder; set VEIL_HOME to a writable folder" in err and "corpora pull" not in err


def _cannot_write(folder: Path) -> bool:
    try:
        fd, tmp = tempfile.mkstemp(dir=folder)
    except OSError:
        return True
    os.close(fd)
    os.unlink(tmp)
    return False


@pytest.fixture()
def unwritable(tmp_path):
    """An existing folder this process cannot write in.

    As a normal user: a temporary folder with mode 0o555. As root, permission
    bits do not stop writes, so a kernel folder that refuses new files even to
    root (/sys) is used; where there is none the test is skipped, saying so.
    """
    if os.geteuid() != 0:
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    for candidate in (Path("/sys"), Path("/proc")):
        if candidate.is_dir() and _cannot_write(candidate):
            yield candidate
            return
    pytest.skip("running as root and no folder refuses writes to root here (chmod does not bind root)")


def test_unwritable_home_is_reported_before_any_work(unwritable, monkeypatch):
    monkeypatch.setenv("VEIL_HOME", str(unwritable))
    assert veil_home() == unwritable  # reading is allowed: a populated read-only cache must still load
    message = rf"VEIL_HOME={unwritable}: cannot write in {unwritable}/\S+ \(\w+Error: .*\); set VEIL_HOME to a writable"
    _every_use_fails(message)
    with pytest.raises(CacheLocationError, match=message):
        EmbeddingCache().check_writable(KEY)  # what encode_corpus checks before running the model
    assert not (unwritable / "corpora").exists() and not (unwritable / "embeddings").exists()


def test_explicit_unwritable_cache_root_names_the_folder(unwritable):
    with pytest.raises(CacheLocationError, match=rf"cannot write in {unwritable}/sub .*; choose a writable folder"):
        writable_dir(unwritable / "sub")


def test_read_only_populated_cache_still_loads(real_home, builtin, tmp_path, monkeypatch):
    if os.geteuid() == 0:
        pytest.skip("running as root: permission bits cannot make the copied cache read-only (root writes anyway)")
    builtin(NAME)
    shutil.copytree(real_home / "corpora" / NAME, tmp_path / "vh" / "corpora" / NAME)
    folders = [tmp_path / "vh", tmp_path / "vh" / "corpora", tmp_path / "vh" / "corpora" / NAME]
    for folder in folders:
        folder.chmod(0o555)
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "vh"))
    try:
        assert len(vc.load(NAME)) == 5381
    finally:
        for folder in folders:
            folder.chmod(0o755)
