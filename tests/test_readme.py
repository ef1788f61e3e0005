"""Every Python and shell snippet in README.md runs as written, and leaves ``git status`` clean.

The snippets run in a scratch git repository holding the README and the
project's .gitignore (committed), with the real cache (``VEIL_HOME``) holding the
pulled corpora; afterwards ``git status --porcelain`` must be empty, so any
file a quickstart command writes outside ignored folders fails the test.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("builtin")]


def snippets(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall((ROOT / "README.md").read_text()) if lang == language]


def test_the_readme_has_snippets():
    assert len(snippets("python")) >= 3 and len(snippets("bash")) >= 2


@pytest.fixture
def scratch(tmp_path, real_home, builtin):
    for name in ("rt-polarity", "trec-questions", "hoc-speeches", "news-articles", "hutto-tweets"):
        builtin(name)
    repo = tmp_path / "clone"
    repo.mkdir()
    shutil.copy(ROOT / "README.md", repo)
    shutil.copy(ROOT / ".gitignore", repo)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "readme"], cwd=repo, check=True)
    env = {**os.environ, "VEIL_HOME": str(real_home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("VEIL_RESULTS", None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # the installed `veil`
    return repo, env


def _clean(repo: Path) -> str:
    return subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True,
                          check=True).stdout


def test_python_snippets_run_in_order(scratch):
    repo, env = scratch
    code = "\n\n".join(snippets("python"))  # later snippets use names the quickstart defined
    run = subprocess.run([sys.executable, "-c", code], cwd=repo, env=env, capture_output=True, text=True,
                         timeout=1200)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    assert _clean(repo) == ""


def test_shell_snippets_run_and_leave_git_status_clean(scratch):
    repo, env = scratch
    ran = 0
    for block in snippets("bash"):
        # the setup blocks (`make demo`/`make test`, and the venv + pip steps `make setup` performs) are what CI
        # itself runs on a fresh clone before this test can start; every other block runs here as written
        if "make test" in block or "pip install" in block:
            continue
        ran += 1
        script = "set -euo pipefail\n" + block
        run = subprocess.run(["bash", "-c", script], cwd=repo, env=env, capture_output=True, text=True,
                             timeout=1500)
        assert run.returncode == 0, f"{block}\n---\n{run.stderr[-3000:]}"
        assert "Traceback" not in run.stderr
    assert ran >= 1
    assert _clean(repo) == "", "a README command wrote outside ignored folders"
    assert (repo / "veil-results" / "report" / "index.md").is_file()
