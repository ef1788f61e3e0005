"""A real Flower deployment on loopback: one SuperLink, two SuperNodes (each with its own owner-only key file),
`flwr run deploy/flower` for one round. The ServerApp writes the result JSON and the tap."""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.3)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


def test_superlink_and_two_supernodes_run_one_round(tmp_path):
    from veil.defenses.texthide import MaskPool

    if shutil.which("flower-superlink", path=str(BIN)) is None:
        pytest.fail(f"flower-superlink is not installed next to {sys.executable}; run `make setup`")
    home = tmp_path / "flwr-home"
    home.mkdir()
    link = _free_port()
    (home / "config.toml").write_text(f'[superlink]\ndefault = "loopback"\n[superlink.loopback]\n'
                                      f'address = "127.0.0.1:{link}"\ninsecure = true\n')
    env = {**os.environ, "FLWR_HOME": str(home), "FLWR_TELEMETRY_ENABLED": "0",
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    procs, logs = [], []

    def start(args, name):
        log = open(tmp_path / f"{name}.log", "w")
        logs.append(log)
        procs.append(subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path))

    try:
        start([BIN / "flower-superlink", "--insecure", "--disable-runtime-dependency-installation",
               "--host", "127.0.0.1", "--port", str(link)], "superlink")
        _wait_port(link, time.monotonic() + 60)
        for p in range(2):
            key = MaskPool(16, 384).save(tmp_path / f"client{p}.key")
            start([BIN / "flower-supernode", "--insecure", "--superlink", f"127.0.0.1:{link}",
                   "--port", str(_free_port()),
                   "--node-config", f'partition-id={p} num-partitions=2 key-path="{key}"'], f"supernode{p}")
        res, tap = tmp_path / "results", tmp_path / "tap"
        overrides = (f'rounds=1 clients=2 max-train=120 max-test=60 batch-size=16 m=16 k=4 timeout=120.0 '
                     f'results="{res}" record="{tap}"')
        run = subprocess.run([BIN / "flwr", "run", str(ROOT / "deploy" / "flower"), "loopback", "--stream",
                              "--run-config", overrides], env=env, cwd=tmp_path, capture_output=True, text=True,
                             timeout=400)
        out = run.stdout + run.stderr
        assert run.returncode == 0, out[-3000:]
        files = list(res.glob("*.json"))
        assert len(files) == 1, out[-3000:]
        rec = json.loads(files[0].read_text())
        assert rec["config"]["engine"] == "flower-deployment" and rec["config"]["clients"] == 2
        assert 0 <= rec["metrics"]["test_accuracy"]["mean"] <= 1
        assert sorted(p.name for p in (tap / "round-0001").iterdir()) == \
            ["client-0.json", "client-0.npz", "client-1.json", "client-1.npz", "global.npz"]
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for log in logs:
            log.close()
