"""Ctrl-C ends `veil federated run --engine flower` within seconds, with nothing partial left (issue 26, class 4).

A real run (Flower simulation on Ray, two clients, a small slice of rt-polarity) is started as a subprocess in
its own session, interrupted with SIGINT once its stderr shows a finished round, and must exit 130 within 10 s,
leave no result file and no tap (nor its ``.partial`` / ``.truth`` folders), and leave no process behind in its
session (Ray's workers included).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("builtin")


def _session_pids(sid: int) -> list[int]:
    """Live (not zombie) processes of session ``sid`` (from /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, session = fields[0], int(fields[3])
        if session == sid and state != "Z":
            pids.append(int(entry.name))
    return pids


def test_sigint_during_rounds_exits_130_quickly_and_leaves_nothing(tmp_path, real_home):
    results, tap = tmp_path / "results", tmp_path / "tap"
    env = {**os.environ, "VEIL_HOME": str(real_home), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    args = [sys.executable, "-m", "veil.cli", "federated", "run", "--engine", "flower", "--clients", "2",
            "--rounds", "200", "--max-train", "200", "--max-test", "50", "--batch-size", "8",
            "--results", str(results), "--record", str(tap), "--truth"]
    err_path = tmp_path / "stderr.txt"
    with open(err_path, "w") as err:
        proc = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 150
        while "federated round 1/" not in err_path.read_text(errors="replace"):
            assert proc.poll() is None, f"the run ended before its first round: {err_path.read_text()[-2000:]}"
            assert time.monotonic() < deadline, "no round finished within 150 s"
            time.sleep(0.2)
        assert (tmp_path / "tap.partial").is_dir(), "the tap is being recorded (its partial folder exists)"
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=10)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert code == 130, err_path.read_text()[-2000:]
    assert took < 10
    print(f"exit {took:.1f} s after SIGINT")
    assert "interrupted" in err_path.read_text()
    left = sorted(p.name for p in tmp_path.iterdir() if p.name != "stderr.txt")
    assert left == [], f"left behind: {left}"  # no results/, tap, tap.partial, tap.truth(.partial)
    gone = time.monotonic() + 5.0  # Ray's processes get a few seconds to see their driver gone (busy machine)
    while _session_pids(proc.pid) and time.monotonic() < gone:
        time.sleep(0.2)
    assert _session_pids(proc.pid) == [], "processes of the run are still alive 5 s after it ended"
