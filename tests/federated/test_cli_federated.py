"""`veil federated run` (the in-process engine here; Flower itself is tested in test_federated_runs.py)."""

import json
from pathlib import Path

import pytest

from veil.cli import main

pytestmark = pytest.mark.slow
ARGS = ["federated", "run", "--clients", "2", "--rounds", "2", "--max-train", "160", "--max-test", "60",
        "--batch-size", "16", "--m", "16", "--k", "2", "--mode", "fedavg", "--engine", "reference"]


def test_run_writes_a_result_and_json_and_the_page_renders(tmp_path, capsys):
    res = tmp_path / "federated"
    assert main([*ARGS, "--results", str(res), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "federated" and len(out["extra"]["rounds"]) == 2
    assert (res / "rt-polarity-fedavg-m16-k2-intra-c2-iid-r2-b16-seed0-n160-t60.json").is_file()
    # an existing result is kept unless --force
    assert main([*ARGS, "--results", str(res)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["report", "--results", str(tmp_path), "--out", str(tmp_path / "pages")]) == 0
    page = (tmp_path / "pages" / "federated.md").read_text()
    acc = 100 * out["metrics"]["test_accuracy"]["mean"]
    assert f"| rt-polarity | frozen | 160 | fedavg | TextHide (16,2) intra | 2 | IID | 2 | 16 | reference | 1 | {acc:.1f} [" in page
    last = out["extra"]["rounds"][-1]
    assert sum(last["predicted"]) == sum(last["labels"]) == 60
    assert out["extra"]["collapsed"] == (sum(1 for p in last["predicted"] if p) == 1)
    assert f"| {out['extra']['collapsed'] and '1/1' or '0/1'} |" in page
    assert (tmp_path / "pages" / "federated_utility.png").stat().st_size > 1000


def test_bad_settings_are_one_line_user_errors(tmp_path, capsys):
    assert main([*ARGS, "--results", str(tmp_path), "--truth"]) == 2
    assert "--truth needs --record" in capsys.readouterr().err
    assert main(["federated", "run", "--k", "8", "--batch-size", "4", "--results", str(tmp_path)]) == 2
    assert "batch_size (4) must be >= k (8)" in capsys.readouterr().err
    # differential privacy: a known placement with both its parameters, on the Flower engine only
    for extra, message in ((["--dp", "central", "--clip", "1", "--noise", "1"], "--dp must be server, client or local"),
                           (["--dp", "server", "--clip", "1"], "needs --clip C and --noise Z"),
                           (["--clip", "1", "--noise", "1"], "pass --dp server, client or local"),
                           (["--dp", "local", "--clip", "0", "--noise", "1"], "--clip must be a finite number > 0"),
                           (["--dp", "server", "--clip", "1", "--noise", "1"], "use --engine flower")):
        assert main([*ARGS, "--results", str(tmp_path), *extra]) == 2
        assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_analytic_sweep_reads_every_encoding_off_a_batch_of_two(tmp_path, capsys):
    """End to end: record an alg2 run (TextHide (256,2), batch 2), invert its updates, score against the truth."""
    assert main(["federated", "analytic-sweep", "--batch-sizes", "2", "--engine", "reference",
                 "--taps", str(tmp_path / "taps"), "--results", str(tmp_path / "res"), "--json"]) == 0
    paths = json.loads(capsys.readouterr().out)["results"]
    assert len(paths) == 3  # batch 2, plus the dropout and fedavg runs at batch 8
    rec = json.loads(Path(paths[0]).read_text())
    assert rec["config"]["batch_size"] == 2 and rec["config"]["defense"]["k"] == 2
    assert rec["metrics"]["rows_recovered"]["mean"] == 1.0 and rec["metrics"]["rows_recovered"]["n"] == 12


def test_attack_chain_on_a_recorded_run(tmp_path, capsys):
    """`veil attack chain` on a tap recorded by `veil federated run --record --truth` (alg2, batch 4, k 2)."""
    tap = tmp_path / "tap"
    args = ["federated", "run", "--clients", "2", "--rounds", "1", "--max-train", "160", "--max-test", "60",
            "--batch-size", "4", "--m", "16", "--k", "2", "--mode", "alg2", "--engine", "reference"]
    assert main([*args, "--results", str(tmp_path / "fed"), "--record", str(tap), "--truth"]) == 0
    assert (tmp_path / "tap.truth" / "run.json").is_file()
    capsys.readouterr()
    assert main(["attack", "chain", "--record", str(tap), "--results", str(tmp_path / "res"), "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["experiment"] == "tap-chain" and rec["metrics"]["encodings_recovered"]["n"] == 8
    assert (tmp_path / "res" / "chain-tap-seed0.json").is_file()
    # without the truth's run configuration the chain cannot be scored: one line naming the fix
    (tmp_path / "tap.truth" / "run.json").unlink()
    assert main(["attack", "chain", "--record", str(tap), "--results", str(tmp_path / "res2")]) == 2
    err = capsys.readouterr().err
    assert "veil federated run --record DIR --truth" in err and not (tmp_path / "res2").exists()
