"""Malformed and hostile input, as a new user would type it (issue "Reliability").

Every CLI case asserts: the exit code (2 for user errors), one line on stderr
and no traceback, that the message names a fix that exists (every ``--option``
it mentions is an option of that command, every ``veil ...`` command it quotes
exists), and that nothing was written (the working folder and the results
folder are unchanged). The Python API cases assert the typed error or warning.
A last test sends SIGINT to a running ``veil encode``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from veil.cli import main

pytestmark = pytest.mark.usefixtures("builtin", "click_tree_once")



# --------------------------------------------------------------------------- ranges and types, before any work
@pytest.mark.parametrize("args,match", [
    (("texthide", "eval", "--k", "0"), r"--k"),
    (("texthide", "eval", "--encoder-lr", "nan"), r"--encoder-lr must be a finite number"),
    (("texthide", "eval", "--encoder-lr", "inf"), r"--encoder-lr must be a finite number"),
    (("texthide", "eval", "--encoder-lr", "-1"), r"--encoder-lr must be > 0"),
    (("texthide", "eval", "--seeds", "-1"), r"--seeds must be integers >= 0"),
    (("texthide", "eval", "--seeds", "0,0"), r"repeats a seed"),
    (("texthide", "eval", "--seeds", "a,b"), r"comma-separated integers"),
    (("texthide", "eval", "--seeds", ","), r"at least one seed"),
    (("texthide", "eval", "--m", "-3"), r"--m must be an integer >= 0 or 'inf'"),
    (("texthide", "eval", "--m", "lots"), r"--m must be an integer >= 0 or 'inf'"),
    (("texthide", "eval", "--batch-size", "0"), r"--batch-size"),
    (("texthide", "eval", "--epochs", "0"), r"--epochs"),
    (("texthide", "eval", "--patience", "-2"), r"--patience"),
    (("texthide", "eval", "--head-warmup", "-1"), r"--head-warmup"),
    (("texthide", "eval", "--max-train", "0"), r"--max-train"),
    (("texthide", "eval", "--mode", "both"), r"--mode must be intra or inter"),
    (("texthide", "eval", "--mode", "inter", "--k", "1"), r"inter mode needs k >= 2"),
    (("texthide", "eval", "--k", "16", "--batch-size", "8"), r"larger than the batch size 8.*--batch-size >= 16"),
    (("texthide", "eval", "--corpus", "imdb"), r"unknown corpus 'imdb'; valid corpus names: .*rt-polarity"),
    (("texthide", "eval", "--mode", "inter", "--public", "tweets"), r"unknown corpus 'tweets'"),
    (("texthide", "sweep", "table2"), r"unknown sweep 'table2'; use table1 or grid"),
    (("texthide", "sweep", "grid", "--finetune"), r"frozen encoder only; leave out --finetune"),
    (("attack", "rss", "--queries", "0"), r"--queries"),
    (("attack", "rss", "--seed", "-1"), r"--seed"),
    (("attack", "rss", "--defense", "sentdp"), r"--defense must be one of all, none, texthide"),
    (("attack", "reprecon", "--corpus", "imdb"), r"unknown corpus 'imdb'"),
    (("attack", "rss", "--k", "0"), r"--k"),
    (("corpora", "show", "rt-polarity", "--examples", "-1"), r"--examples"),
    (("corpora", "show", "imdb"), r"unknown corpus 'imdb'"),
    (("corpora", "pull", "imdb"), r"unknown corpus 'imdb'"),
    (("corpora", "pull",), r"name a corpus or pass --all"),
    (("encode", "rt-polarity", "--out", "x.txt"), r"--out must end in \.npy"),
    (("encode", "rt-polarity", "--out", "x.npy", "--split", "validation"), r"--split must be one of train, dev, test"),
    (("encode", "rt-polarity", "--out", "x.npy", "--batch-size", "0"), r"--batch-size"),
    (("encode", "rt-polarity", "--out", "x.npy", "--max-length", "0"), r"--max-length"),
    (("encode", "rt-polarity", "--out", "x.npy", "--pooling", "max"), r"--pooling must be mean or cls"),
    (("encode", "missing.csv", "--out", "x.npy"), r"neither a built-in corpus .* nor an existing file"),
    (("encode", "rt-polarity", "--out", "x.npy", "--label", "y"), r"--label apply to your own files only"),
    (("sentdp", "embed", "news-articles", "--out", "x.npz", "--epsilon", "0"), r"--epsilon must be > 0"),
    (("sentdp", "embed", "news-articles", "--out", "x.npz", "--epsilon", "nan"), r"--epsilon must be a finite"),
    (("sentdp", "embed", "news-articles", "--out", "x.npy"), r"--out must end in \.npz"),
    (("sentdp", "embed", "news-articles", "--out", "x.npz", "--depth", "exact"), r"--depth must be tukey-min or appendix"),
    (("sentdp", "embed", "news-articles", "--out", "x.npz", "--n-projections", "0"), r"--n-projections"),
    (("sentdp", "embed", "news-articles", "--out", "x.npz", "--public", "imdb"), r"unknown corpus 'imdb'"),
    (("sentdp", "eval", "news-articles", "--epsilons", "1,abc"), r"--epsilons must be comma-separated numbers"),
    (("sentdp", "eval", "news-articles", "--epsilons", "1,-3"), r"--epsilons must be > 0"),
    (("sentdp", "eval", "news-articles", "--trials", "0"), r"--trials"),
    (("sentdp", "eval", "news-articles", "--methods", "laplace"), r"unknown method\(s\) \['laplace'\]"),
    (("sentdp", "eval", "imdb"), r"unknown corpus 'imdb'"),
    (("audit", "sentdp", "news-articles", "--epsilons", "-1"), r"--epsilons must be > 0"),
    (("audit", "sentdp", "news-articles", "--neighbours", "0"), r"--neighbours"),
    (("audit", "sentdp", "news-articles", "--depth", "exact"), r"--depth must be tukey-min or appendix"),
    (("demo", "--limit", "1"), r"--limit"),
    (("demo", "--split", "validation"), r"--split must be one of"),
    (("frobnicate",), r"No such command 'frobnicate'"),
    (("texthide", "eval", "--epohcs", "3"), r"No such option"),
])
def test_bad_values_exit_2_before_any_work(cli, args, match):
    cli(*args, match=match)


# --------------------------------------------------------------------------- output locations, before any work
def test_output_that_is_a_folder(cli):
    (cli.work / "out.npy").mkdir()
    cli("encode", "rt-polarity", "--out", "out.npy", match=r"--out out\.npy is a folder")
    cli("texthide", "eval", "--out", "out.npy", match=r"--out must end in \.json")
    (cli.work / "r.json").mkdir()
    cli("texthide", "eval", "--out", "r.json", match=r"--out r\.json is a folder")


def test_output_under_a_file(cli):
    (cli.work / "afile").write_text("x")
    cli("encode", "rt-polarity", "--out", "afile/x.npy", match=r"afile is a file")
    cli("attack", "rss", "--results", "afile", match=r"--results afile is a file, not a folder")
    cli("attack", "rss", "--results", "afile/sub", match=r"afile is a file")
    cli("texthide", "sweep", "grid", "--results", "afile", match=r"--results afile is a file")
    cli("sentdp", "eval", "news-articles", "--results", "afile", match=r"--results afile is a file")
    cli("audit", "sentdp", "news-articles", "--results", "afile", match=r"--results afile is a file")
    cli("report", "--results", "afile", match=r"--results afile is not a folder of result records")


def test_existing_results_need_force(cli):
    (cli.work / "old.npy").write_bytes(b"keep me")
    cli("encode", "rt-polarity", "--out", "old.npy", match=r"old\.npy exists; pass --force")
    from veil.experiments.texthide.retrieval import planned_paths
    from veil.experiments.texthide.eval import TextHideEval, result_path

    target = result_path(TextHideEval(), cli.work / "veil-results" / "texthide")
    target.parent.mkdir(parents=True)
    target.write_text("{}")
    cli("texthide", "eval", match=r"exists; pass --force")
    path = planned_paths("rt-polarity", "rss", defense="all", m=256, k=4, queries=None, seed=0,
                         root=cli.work / "veil-results" / "retrieval")[0]
    path.parent.mkdir(parents=True)
    path.write_text("{}")
    cli("attack", "rss", match=r"exists; pass --force")
    assert (cli.work / "old.npy").read_bytes() == b"keep me"


def test_report_without_results(cli):
    cli("report", match=r"--results veil-results is not a folder of result records; run an experiment first")
    (cli.work / "r").mkdir()
    (cli.work / "out").write_text("x")
    cli("report", "--results", "r", "--out", "out", match=r"--out out is a file")


# --------------------------------------------------------------------------- user files
def _csv(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.write_bytes(text.encode(encoding))
    return path


def test_file_errors_name_cli_flags_that_exist(cli, tmp_path):
    latin = _csv(tmp_path / "latin.csv", "text,label\ncafé crème,1\nnaïve,0\n", "cp1252")
    cli("encode", str(latin), "--out", "x.npy", match=r"--encoding cp1252")
    empty = _csv(tmp_path / "empty.csv", 'text,label\n"",1\nfine,0\n')
    cli("encode", str(empty), "--out", "x.npy", match=r"--drop-empty")
    cols = _csv(tmp_path / "cols.csv", "review,label\ngood,1\n")
    cli("encode", str(cols), "--out", "x.npy", match=r"review")
    cli("encode", str(cols), "--out", "x.npy", "--text", "review", "--encoding", "klingon",
        match=r"--encoding 'klingon' is not a known encoding")
    blank = tmp_path / "blank.csv"
    blank.write_text("")
    cli("encode", str(blank), "--out", "x.npy", match=r"empty")


def test_nul_byte_in_a_text_is_refused(cli, tmp_path):
    nul = _csv(tmp_path / "nul.jsonl", json.dumps({"text": "a\u0000b"}) + "\n" + json.dumps({"text": "ok"}) + "\n")
    cli("encode", str(nul), "--out", "x.npy", match=r"NUL byte")


# --------------------------------------------------------------------------- the cache
def test_veil_home_that_is_a_file(cli, tmp_path, monkeypatch):
    home = tmp_path / "home-file"
    home.write_text("not a folder")
    monkeypatch.setenv("VEIL_HOME", str(home))
    cli("corpora", "show", "rt-polarity", match=r"VEIL_HOME=.* is a file, not a folder; set VEIL_HOME")


def test_truncated_corpus_cache_names_the_repull_command(cli, tmp_path, monkeypatch, real_home):
    import shutil

    home = tmp_path / "home"
    shutil.copytree(real_home / "corpora" / "sms-spam", home / "corpora" / "sms-spam")
    rows = (home / "corpora" / "sms-spam" / "corpus.jsonl").read_text().splitlines(keepends=True)
    (home / "corpora" / "sms-spam" / "corpus.jsonl").write_text("".join(rows[:100]))
    monkeypatch.setenv("VEIL_HOME", str(home))
    cli("corpora", "show", "sms-spam", match=r"100 rows, meta.json records 4512.*`veil corpora pull sms-spam --force`")


# --------------------------------------------------------------------------- exit codes of the installed command
def test_console_script_propagates_exit_codes(tmp_path):
    veil = Path(sys.executable).parent / "veil"
    env = {**os.environ, "VEIL_RESULTS": str(tmp_path / "r")}
    bad = subprocess.run([str(veil), "attack", "rss", "--queries", "0"], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=120)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and bad.stderr.count("\n") == 1
    ok = subprocess.run([str(veil), "--version"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert ok.returncode == 0


def test_exit_inside_a_command_is_propagated(capsys):
    import typer

    from veil.cli import app

    @app.command("_exit-probe", hidden=True)
    def _probe(code: int = 3) -> None:
        raise typer.Exit(code)

    try:
        assert main(["_exit-probe", "--code", "3"]) == 3
        assert main(["_exit-probe", "--code", "1"]) == 1
    finally:
        app.registered_commands[:] = [c for c in app.registered_commands if c.name != "_exit-probe"]


# --------------------------------------------------------------------------- Python API
def test_api_cases(tmp_path):
    from veil.defenses.texthide import MaskPool, TextHide
    from veil.encoders._inputs import check_texts
    from veil.errors import DataFormatError, InvalidParameterError, PrivacyLeakWarning, ResourceMissingError
    from veil.results import Metric, ResultRecord
    from veil.experiments.texthide.eval import TextHideEval

    with pytest.raises(ResourceMissingError, match="does not exist; check the path"):
        MaskPool.load(tmp_path / "missing.key")
    with pytest.warns(PrivacyLeakWarning, match="seeded rng"):
        TextHide(k=2, pool=MaskPool(4, 8), rng=3)
    with pytest.raises(DataFormatError, match="NUL byte"):
        check_texts(["fine", "bad\x00"])
    with pytest.raises(InvalidParameterError, match="NaN or infinite"):
        ResultRecord(method="m", experiment="e", config={"lr": float("nan")}, metrics={"a": Metric(mean=1.0)},
                     wall_time_s=1.0).write(tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()
    with pytest.raises(InvalidParameterError, match="finite and > 0"):
        TextHideEval(encoder_lr=float("nan"))
    with pytest.raises(InvalidParameterError, match="larger than the batch size"):
        TextHideEval(k=8, batch_size=4)


# --------------------------------------------------------------------------- Ctrl-C
def test_sigint_during_encode_exits_130_and_writes_nothing(tmp_path, real_home):
    veil = Path(sys.executable).parent / "veil"
    env = {**os.environ, "VEIL_HOME": str(real_home), "VEIL_PROGRESS_INTERVAL": "0.5"}
    proc = subprocess.Popen([str(veil), "encode", "rt-polarity", "--split", "train", "--no-cache", "--out",
                             str(tmp_path / "train.npy")], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        seen = ""
        while time.monotonic() < deadline:  # wait until encoding has started (its first progress line)
            line = proc.stderr.readline()
            seen += line
            if "encoding" in line or not line:
                break
        assert "encoding" in seen, f"encode never started: {seen!r}"
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted; no half-written file was kept" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # no output, no temporary file


def test_no_global_torch_seeding_from_a_cli_run(capsys, tmp_path, monkeypatch):
    """A CLI command that trains never leaves torch's global generator seeded (issue: privacy contract)."""
    import torch

    torch.manual_seed(1234)
    expected = torch.rand(4)
    torch.manual_seed(1234)
    from veil.training import TrainConfig, train_head
    from veil.training.hooks import PlainHook

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((40, 8)).astype(np.float32), np.arange(40) % 2
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a tiny head may collapse; that is not what this test checks
        train_head(X, y, X, y, task="classification", num_classes=2, hook_factory=lambda: PlainHook("classification", 2),
                   config=TrainConfig(epochs=2, seed=7))
    assert torch.equal(torch.rand(4), expected)
