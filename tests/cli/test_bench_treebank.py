"""`veil bench --data FILE.conllu` (or a folder of train/dev/test.conllu): the dependency-parsing track on the user's
own treebank, and its bad treebanks refused before any cell.

The trees are real: the quick silver treebank's (spaCy sm parses, Penn tags in XPOS), written out as a user would."""

from __future__ import annotations

import json
import os
import stat

import pytest

from veil.corpora.base import hash_split
from veil.parsing.trees import conllu_text, write_conllu


@pytest.fixture(scope="module")
def silver(real_home):
    """The first 150 train trees of the quick silver treebank (built under the real cache if missing, ~20 s)."""
    from veil.parsing.treebank import QUICK_SILVER, build_silver, load_treebank

    old = os.environ.get("VEIL_HOME")
    os.environ["VEIL_HOME"] = str(real_home)
    try:
        build_silver(name=QUICK_SILVER, progress=False)
        return load_treebank("train", QUICK_SILVER, limit=150)
    finally:
        if old is None:
            os.environ.pop("VEIL_HOME", None)
        else:
            os.environ["VEIL_HOME"] = old


@pytest.fixture(scope="module")
def usable(silver):
    """Trees the bench takes: those 150 hold a single public adverb of two tags (RBS 'least', RBR 'farther'),
    which random substitution cannot replace by another word, so their sentences are left out."""
    return [t for t in silver if not {"RBS", "RBR"} & set(t.tags)]


@pytest.mark.slow
def test_the_bench_runs_on_a_users_conllu_file_and_reports_it(usable, tmp_path, monkeypatch):
    from veil.cli import main

    home = tmp_path / "home"
    monkeypatch.setenv("VEIL_HOME", str(home))  # the split is written under VEIL_HOME/parsing/user
    data = write_conllu(tmp_path / "my trees.conllu", usable)
    out = tmp_path / "bench"
    assert main(["bench", "--quick", "--data", str(data), "--limit", "30", "--defenses", "obfuscation-random",
                 "--attacks", "keep-word,tag-frequency", "--out", str(out)]) == 0
    cells = sorted((out / "cells").glob("*.json"))
    assert [c.name.split("--")[:3] for c in cells] == [["file-my_trees", f"obfuscation-random-{lv}", a]
                                                       for lv in ("P3", "P5")
                                                       for a in ("keep-word", "tag-frequency", "utility")]
    expected_test = sum(hash_split(t.text) == "test" for t in usable)  # 80/10/10 by each sentence's text
    for c in cells:
        rec = json.loads(c.read_text())
        corpus = rec["config"]["corpus"]
        assert corpus["task"] == "dependency-parsing" and corpus["n"] == min(30, expected_test)
        assert corpus["provenance"][0]["file"] == str(data.resolve())
        assert rec["metrics"]  # every cell measured something
    report = (out / "report.md").read_text()
    import hashlib

    sha = hashlib.sha256(data.read_bytes()).hexdigest()
    assert "### file-my_trees" in report and f"my trees.conllu {data.resolve()} sha256 {sha[:16]}" in report
    # the splits the experiments find by folder: owner-only, and no sentence both public and private
    folder = next((home / "parsing" / "user").iterdir())
    assert folder.name.startswith("file-my_trees-")
    split = {s: (folder / f"{s}.conllu").read_text() for s in ("train", "dev", "test")}
    assert all(stat.S_IMODE((folder / f"{s}.conllu").stat().st_mode) == 0o600 for s in split)
    assert split["test"] == conllu_text([t for t in usable if hash_split(t.text) == "test"])
    assert split["train"] == conllu_text([t for t in usable if hash_split(t.text) == "train"])


def test_a_folder_keeps_its_own_splits(usable, tmp_path, capsys):
    from veil.bench.data import bench_data
    from veil.cli import main

    folder = tmp_path / "ewt"
    folder.mkdir()
    parts = {"train": usable[:100], "dev": usable[100:110], "test": usable[110:]}
    for s, trees in parts.items():
        write_conllu(folder / f"{s}.conllu", trees)
    assert main(["bench", "--quick", "--data", str(folder), "--limit", "30", "--defenses", "obfuscation-random",
                 "--list", "--json"]) == 0
    listed = [c["corpus"] + "--" + c["defense"] for c in json.loads(capsys.readouterr().out)["cells"]]
    assert listed and set(listed) == {"file-ewt--obfuscation-random"}
    data = bench_data("file-ewt", True, 30)  # the folder itself is the treebank: nothing written
    assert data.treebank == str(folder.resolve()) and data.task == "dependency-parsing"
    assert data.test == parts["test"][:30] and data.train == parts["train"][:30]
    nouns = [{w.lower() for t in trees for w, g in zip(t.words, t.tags) if g == "NN"}
             for trees in (parts["train"][:30], parts["train"][30:])]
    later = nouns[1] - nouns[0]  # the obfuscators draw from the whole public split, never the capped one
    assert later and later <= {w.lower() for w in data.vocab.candidates("NN")}
    assert [p["package"] for p in data.describe()["provenance"]] == ["train.conllu", "dev.conllu", "test.conllu"]


def _no_xpos(trees) -> str:
    lines = []
    for line in conllu_text(trees).split("\n"):
        fields = line.split("\t")
        if len(fields) == 10:
            fields[4] = "_"
        lines.append("\t".join(fields))
    return "\n".join(lines)


def test_a_treebank_without_penn_tags_is_refused_naming_the_file_and_line(cli, usable):
    data = cli.work.parent / "untagged.conllu"
    data.write_text(_no_xpos(usable))
    cli("bench", "--quick", "--data", str(data),
        match=r"untagged\.conllu: the sentence starting on line 1: word 1 \('\w+'\) has no XPOS \(Penn tag\).*"
              r"tag the file first")
    upos = cli.work.parent / "upos.conllu"  # UPOS copied into XPOS: tagged, but not with Penn tags
    upos.write_text(conllu_text([t.__class__(t.words, t.upos, t.heads, t.deprels, t.spaces, t.upos)
                                 for t in usable]))
    cli("bench", "--quick", "--data", str(upos),
        match=r"upos\.conllu: no word's XPOS is a Penn Treebank tag that the obfuscation hides.*'ADJ'.*"
              r"put Penn tags in XPOS")


def test_a_treebank_without_test_or_enough_train_sentences_is_refused(cli, usable):
    train_only = [t for t in usable if hash_split(t.text) == "train"][:30]
    data = write_conllu(cli.work.parent / "all-public.conllu", train_only)
    cli("bench", "--quick", "--data", str(data),
        match=r"all-public\.conllu has no test sentences \(split 80/10/10 by a hash of each sentence's text: "
              r"30 train, 0 dev, 0 test\).*add sentences")
    small = write_conllu(cli.work.parent / "small.conllu", usable[:12])
    cli("bench", "--quick", "--data", str(small), match=r"small\.conllu has \d+ train sentences .*give at least 20")


def test_a_tag_with_one_public_word_is_refused_naming_it(cli, silver):
    data = write_conllu(cli.work.parent / "least.conllu", silver)
    cli("bench", "--quick", "--data", str(data),
        match=r"least\.conllu: its train \(public\) sentences have a single word for tag\(s\) RBS \('least'\)")


def test_a_folder_missing_a_split_and_options_that_do_not_apply(cli, usable):
    folder = cli.work.parent / "tb"
    folder.mkdir()
    write_conllu(folder / "train.conllu", usable[:100])
    write_conllu(folder / "test.conllu", usable[100:])
    cli("bench", "--quick", "--data", str(folder), match=r"tb has no dev\.conllu; a treebank folder holds")
    cli("bench", "--quick", "--data", str(folder), "--label-column", "stars",
        match=r"--label-column applies to labelled files, but a folder is a CoNLL-U treebank.*leave --label-column out")
    data = write_conllu(cli.work.parent / "trees.conllu", usable)
    cli("bench", "--quick", "--data", str(data), "--text-column", "body",
        match=r"--text-column applies to labelled files, but a \.conllu file without --label-column is a treebank")
    cli("bench", "--quick", "--data", str(data), "--workers", "2", match=r"drop --workers/--ray")
    # with --label-column a CoNLL-U file is still a labelled file (its label a `# key = value` comment), as before
    cli("bench", "--quick", "--data", str(data), "--label-column", "sentiment",
        match=r"no column 'sentiment' for --label-column")
