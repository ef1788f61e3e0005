"""Ctrl-C ends `veil federated run --engine flower` within seconds, with nothing partial left (issue 26, class 4).

A real run (Flower simulation on Ray, two clients, a small slice of rt-polarity) is started as a subprocess in
its own session, interrupted with SIGINT once its stderr shows a finished round, and must exit 130 within 10 s,
print no stack (no Ray ``ActorDiedError`` traceback: issue 48), leave no result file and no tap (nor its
``.partial`` / ``.truth`` folders), and leave no process behind in its session (Ray's workers included).
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


def _command(pid: int) -> str:
    """The command line of ``pid`` (for the failure message)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:160]
    except OSError:
        return "(gone)"


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
    err_text = err_path.read_text()
    assert "interrupted" in err_text
    assert "Traceback" not in err_text and "ActorDiedError" not in err_text, err_text[-3000:]  # one line, no stack
    left = sorted(p.name for p in tmp_path.iterdir() if p.name != "stderr.txt")
    assert left == [], f"left behind: {left}"  # no results/, tap, tap.partial, tap.truth(.partial)
    gone = time.monotonic() + 5.0  # Ray's processes get a few seconds to see their driver gone (busy machine)
    while _session_pids(proc.pid) and time.monotonic() < gone:
        time.sleep(0.2)
    left = {pid: _command(pid) for pid in _session_pids(proc.pid)}
    assert left == {}, "processes of the run are still alive 5 s after it ended"


def _alive(pid: int) -> bool:
    try:
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) != "Z"
    except OSError:
        return False


def _stopping_spawner(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    """A child that, when told to stop (SIGTERM), starts a grandchild and exits at once: a raylet starting a worker
    while Ray shuts down. The grandchild is orphaned the moment its parent exits; its pid is written to a file."""
    pid_file = tmp_path / "grandchild.pid"
    script = (f"import signal, subprocess, os, time\n"
              f"def stop(*_):\n"
              f"    p = subprocess.Popen(['sleep', '300'], start_new_session=False)\n"
              f"    open({str(pid_file)!r} + '.tmp', 'w').write(str(p.pid)); os.replace({str(pid_file)!r} + '.tmp', "
              f"{str(pid_file)!r})\n"
              f"    os._exit(0)\n"
              f"signal.signal(signal.SIGTERM, stop)\n"
              f"print('ready', flush=True)\n"
              f"while True: time.sleep(0.05)\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    return child, pid_file


@pytest.mark.parametrize("subreaper", [True, False], ids=["subreaper", "negative-control-without"])
def test_stopping_ends_a_process_orphaned_while_the_run_stops(tmp_path, monkeypatch, subreaper):
    """The processes a stopping run leaves are ended even when one is orphaned during the stop (re-parented to
    this process, a child subreaper while stopping); without the subreaper the orphan goes to init and lives on."""
    import threading

    from veil.federated import run as federated_run

    if not subreaper:
        monkeypatch.setattr(federated_run, "_child_subreaper", lambda on: False)
    child, pid_file = _stopping_spawner(tmp_path)
    finished = threading.Event()
    finished.set()  # the simulation has ended: only processes are left to end
    grandchild = None
    try:
        federated_run._stop_simulation(finished, grace=0.1, settle=3.0)
        child.wait(timeout=5)
        assert pid_file.exists(), "the child started its grandchild when told to stop"
        grandchild = int(pid_file.read_text())
        time.sleep(0.2)
        assert _alive(grandchild) is not subreaper
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
        if grandchild is not None and _alive(grandchild):
            os.kill(grandchild, signal.SIGKILL)
    if subreaper:
        stat = Path(f"/proc/{grandchild}/stat")
        assert not stat.exists(), "the ended orphan was reaped (no zombie left)"
