"""``veil parse serve --workers N`` (issue 33): several server processes behind one port.

A real ``veil parse serve --parser spacy-sm --workers 2`` process on 127.0.0.1 (a free port, spaCy sm ships with
veil). Each worker in turn, on connections it accepted (found in /proc: the worker holding the server end), must
parse exactly as spaCy sm does in this process and refuse every bad request of test_parse_service with the same
status and error code. Ctrl-C (SIGINT) ends the server with exit 130 and every process it started gone
within seconds; a worker that dies is replaced and SIGTERM ends the server with exit 0. Bad ``--workers`` values
are one line and exit 2 (the ``cli`` harness of tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from veil.services.parse_server import Limits, LoadedParser, read_request
from veil.services.workers import max_workers

from .test_parse_service import _bad_requests

SENTENCES = [
    {"tokens": ["The", "cat", "sat", "on", "the", "mat", "."], "tags": ["DT", "NN", "VBD", "IN", "DT", "NN", "."],
     "spaces": [True, True, True, True, True, False, False]},
    {"tokens": ["Ann", "likes", "green", "tea", "."], "tags": ["NNP", "VBZ", "JJ", "NN", "."]},
    {"tokens": ["Was", "it", "raining", "yesterday", "?"], "tags": ["VBD", "PRP", "VBG", "NN", "."]},
]
STOP_WITHIN_S = 10.0  # "within seconds" on a shared, busy 2-core machine; the supervisor allows 3 s + 2 s


# ---- bad --workers values: one line, exit 2, before anything is bound or loaded --------------------------------

@pytest.mark.parametrize("value, match", [
    ("0", r"--workers must be at least 1"),
    ("-2", r"--workers must be at least 1"),
    ("abc", r"'--workers'.*not a valid integer"),
    ("1.5", r"'--workers'.*not a valid integer"),
    (str(max_workers() + 1), r"--workers \d+ is more than \d+, twice this machine's \d+ CPU cores.*pass --workers"),
    ("1000000", r"--workers 1000000 is more than"),
])
def test_bad_workers_values_are_one_line(cli, value, match):
    cli("parse", "serve", "--parser", "spacy-sm", "--port", "0", "--workers", value, match=match)


def test_a_port_in_use_is_one_line_with_workers(cli):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cli("parse", "serve", "--parser", "spacy-sm", "--workers", "2", "--port", str(port),
            match=rf"cannot listen on 127\.0\.0\.1:{port}: the port is in use")


# ---- a real server with two workers ---------------------------------------------------------------------------

def _children(pid: int) -> set[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting for an init that does not reap it counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _start(tmp_path, *extra: str):
    """``veil parse serve --workers 2`` on a free port: (process, base URL, worker pids, output lines so far)."""
    env = {**os.environ, "VEIL_HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "veil.cli", "parse", "serve", "--parser", "spacy-sm", "--port",
                             "0", "--workers", "2", "--log-level", "warning", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines: list[str] = []
    deadline = time.monotonic() + 180
    while True:
        line = proc.stdout.readline()
        lines.append(line)
        found = re.search(r"serving spacy-sm on (http://127\.0\.0\.1:\d+) with 2 workers \(processes (\d+), (\d+)\)",
                          line)
        if found:
            return proc, found.group(1), [int(found.group(2)), int(found.group(3))], lines
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("the server did not start:\n" + "".join(lines))


def _end(proc, pids) -> None:
    """Whatever happened, leave no process behind."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)
    for pid in pids:
        if _running(pid):
            os.kill(pid, signal.SIGKILL)
    proc.stdout.close()


def _gone_within(pids, seconds: float) -> set[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(map(_running, pids)):
        time.sleep(0.05)
    return {pid for pid in pids if _running(pid)}


def _owner(server_port: int, client_port: int, pids) -> int | None:
    """Which of ``pids`` holds the server end of the TCP connection from ``client_port`` (from /proc)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if int(f[1].rsplit(":", 1)[1], 16) == server_port and int(f[2].rsplit(":", 1)[1], 16) == client_port:
                inodes.add(f"socket:[{f[9]}]")
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if os.readlink(fd) in inodes:
                    return pid
            except OSError:
                continue
    return None


def _client_of(worker: int, url: str, pids) -> tuple[httpx.Client, list]:
    """An httpx client whose (kept-alive) connection ``worker`` accepted, and the client ports of its answers."""
    port = int(url.rsplit(":", 1)[1])
    for _ in range(100):  # the kernel picks the worker of each new connection: try until it is this one
        seen: list[int] = []
        http = httpx.Client(base_url=url, timeout=60, event_hooks={"response": [
            lambda r: seen.append(r.extensions["network_stream"].get_extra_info("client_addr")[1])]})
        assert http.get("/health").status_code == 200
        if _owner(port, seen[0], pids) == worker:
            return http, seen
        http.close()
    raise AssertionError(f"no connection reached worker {worker} in 100 tries")


def test_two_workers_answer_alike_and_ctrl_c_ends_them_all(tmp_path):
    body = json.dumps({"sentences": SENTENCES}).encode()
    expected = [(list(h), list(lab)) for h, lab in LoadedParser.load("spacy-sm").parse(read_request(body, Limits()))]
    proc, url, pids, lines = _start(tmp_path)
    started = set()
    try:
        started = _children(proc.pid)
        assert set(pids) <= started and len(set(pids)) == 2, (pids, started)
        for worker in pids:  # every request below is answered by this worker, on a connection it accepted
            http, seen = _client_of(worker, url, pids)
            try:
                res = http.post("/parse", json={"sentences": SENTENCES})
                assert res.status_code == 200, (worker, res.text)
                assert [(t["heads"], t["labels"]) for t in res.json()["trees"]] == expected, worker
                assert http.get("/health").json()["limits"] == Limits().to_dict()
                assert set(seen) == {seen[0]}, "the requests left the worker's connection"
            finally:
                http.close()
            for name, kwargs, status, error in _bad_requests(Limits()):
                http, seen = _client_of(worker, url, pids)  # fresh: a refusal may close the connection
                try:
                    res = http.post("/parse", **kwargs)
                finally:
                    http.close()
                body = res.json()
                assert (res.status_code, body["error"]) == (status, error), (worker, name, body)
                assert set(body) == {"error", "detail"} and seen == [seen[0]] * 2, (worker, name, seen)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(STOP_WITHIN_S)
        took = time.monotonic() - t0
        left = _gone_within(started, 5.0)
        out = "".join(lines) + proc.stdout.read()
    finally:
        _end(proc, sorted(started | set(pids)))
    assert rc == 130, out
    assert "veil: interrupted" in out and "Traceback" not in out, out
    assert not left, f"processes left {took:.1f} s after Ctrl-C: {sorted(left)}"


def test_a_dead_worker_is_replaced_and_sigterm_ends_the_server(tmp_path):
    proc, url, pids, lines = _start(tmp_path)
    started = set()
    try:
        started = _children(proc.pid)
        os.kill(pids[0], signal.SIGKILL)
        while not re.search(rf"worker {pids[0]} exited with code -9; starting another", lines[-1]):
            assert proc.poll() is None, "".join(lines)  # the supervisor says so and starts another
            lines.append(proc.stdout.readline())
        deadline = time.monotonic() + 120
        while not (_children(proc.pid) - started):
            assert time.monotonic() < deadline, "no new worker"
            time.sleep(0.1)
        started |= _children(proc.pid)
        for _ in range(4):  # fresh connections: whichever worker takes them answers
            with httpx.Client(base_url=url, timeout=60) as http:
                assert http.post("/parse", json={"sentences": SENTENCES}).status_code == 200
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(STOP_WITHIN_S)
        left = _gone_within(started, 5.0)
        out = "".join(lines) + proc.stdout.read()
    finally:
        _end(proc, sorted(started | set(pids)))
    assert rc == 0, out
    assert "Traceback" not in out, out
    assert not left, f"processes left after SIGTERM: {sorted(left)}"
