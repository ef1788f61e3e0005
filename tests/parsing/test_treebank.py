"""The silver treebank: a capped build in a scratch VEIL_HOME, checksums, resuming; spaCy re-parses with spaces."""

from __future__ import annotations

import pytest

from veil.errors import CacheCorruptError, ResourceMissingError


def test_capped_build_checks_and_resumes(tmp_path, monkeypatch, real_home):
    from veil.parsing.treebank import build_silver, load_treebank, silver_dir, treebank_info

    monkeypatch.setenv("VEIL_HOME", str(tmp_path))
    (tmp_path / "corpora").symlink_to(real_home / "corpora")  # the pulled corpora, read only
    with pytest.raises(ResourceMissingError, match="veil parse treebank"):
        load_treebank("train")
    root = build_silver(max_docs=1, progress=False)
    info = treebank_info()
    assert info["max_docs"] == 1 and sum(c["sentences"] for c in info["counts"].values()) > 0
    split = next(s for s, c in info["counts"].items() if c["sentences"])
    trees = load_treebank(split)
    assert len(trees) == info["counts"][split]["sentences"]
    assert all(t.meta["split"] == split for t in trees)
    shards = {p: p.stat().st_mtime_ns for p in (root / "shards").iterdir()}
    (root / "meta.json").unlink()
    build_silver(max_docs=1, progress=False)  # resumes: finished shards are reused, not re-parsed
    assert {p: p.stat().st_mtime_ns for p in (root / "shards").iterdir()} == shards
    path = silver_dir() / f"{split}.conllu"
    path.write_text(path.read_text()[:-50])
    with pytest.raises(CacheCorruptError, match="veil parse treebank --force"):
        load_treebank(split)


def test_spacy_reparse_with_spaces_agrees_with_its_silver_trees(tiny_treebank):
    from veil.parsing.evaluate import attachment_scores, parse_with
    from veil.parsing.treebank import load_treebank

    test = load_treebank("test", tiny_treebank)
    scores = attachment_scores(test, parse_with("spacy-sm", test), n_boot=20)
    assert scores["uas"].mean >= 99.0  # ~96.7 without spaces= (RESOURCES.md)
