"""``veil parse serve`` on first use (issue 26): with no biaffine parser it serves spaCy sm (it ships with veil)
and says how to get the biaffine, and how long that takes; its spaCy answers are single-rooted trees the client
accepts; a port in use is one line. A real ``veil parse serve`` process on 127.0.0.1, stopped with SIGINT.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import httpx

from veil.parsing.trees import check_heads, check_label
from veil.services.parse_client import answer_problem


def test_first_use_serves_spacy_sm_and_says_how_to_get_the_biaffine(tmp_path):
    env = {**os.environ, "VEIL_HOME": str(tmp_path / "fresh"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "veil.cli", "parse", "serve", "--port", "0", "--log-level",
                             "warning"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines, url = [], None
    try:
        deadline = time.monotonic() + 120
        while url is None or not any("veil parse train" in ln for ln in lines):
            assert time.monotonic() < deadline and proc.poll() is None, "".join(lines)
            lines.append(proc.stdout.readline())
            found = re.search(r"serving (\S+) on (http://127\.0\.0\.1:\d+)", lines[-1])
            if found:
                assert found.group(1) == "spacy-sm", lines[-1]
                url = found.group(2)
        hint = next(ln for ln in lines if "veil parse train" in ln)
        pattern = r"`veil parse treebank` \(about \d+ minutes[^)]*\) then `veil parse train` \(about 45 minutes\)"
        assert re.search(pattern, hint), hint
        with httpx.Client(base_url=url, timeout=60) as http:
            assert http.get("/health").json()["parser"] == "spacy-sm"
            # two sentences' worth of tokens in one item: spaCy would split them; the server answers one tree
            words = "The cat sat on the mat . Then the dog ran away .".split()
            tags = ["DT", "NN", "VBD", "IN", "DT", "NN", ".", "RB", "DT", "NN", "VBD", "RB", "."]
            res = http.post("/parse", json={"sentences": [{"tokens": words, "tags": tags}]})
            tree = res.json()["trees"][0]
            assert check_heads(tree["heads"]) is None and all(map(check_label, tree["labels"]))
            assert answer_problem(tree, len(words)) is None
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
            proc.stdout.close()
    assert proc.returncode in (0, 130), proc.returncode
