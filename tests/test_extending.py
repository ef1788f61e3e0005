"""docs/extending.md's example defense and attack, run exactly as the page shows them: they register from their
own files, the front door builds and runs them, and the bench plans their cells with no other edit."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "extending.md"


def _blocks() -> dict[str, str]:
    out = {}
    for i, block in enumerate(re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)):
        first = block.splitlines()[0]
        name = first[2:].strip() if first.startswith("# ") and first.endswith(".py") else f"usage{i}.py"
        out[name] = block
    return out


def test_the_page_holds_a_defense_an_attack_and_their_use():
    assert {"my_noise.py", "my_attack.py"} <= set(_blocks())


def test_the_example_registers_plans_and_runs_without_edits_elsewhere(tmp_path):
    blocks = _blocks()
    for name, code in blocks.items():
        (tmp_path / name).write_text(code)
    usage = [n for n in blocks if n.startswith("usage")]
    assert len(usage) == 1
    run = subprocess.run([sys.executable, usage[0]], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    assert run.returncode == 0, run.stderr[-2000:]
    share, plan = run.stdout.strip().splitlines()[-2:]
    assert float(share) >= 0.9  # small noise: the centred nearest neighbour finds the private texts
    assert plan == "['centered-nearest', 'rss', 'utility']"


def test_the_registries_list_the_example_once_imported(tmp_path, monkeypatch):
    from veil.attacks import base as attacks_base
    from veil.defenses import base as defenses_base

    for name, code in _blocks().items():
        if not name.startswith("usage"):
            (tmp_path / name).write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(defenses_base._REGISTRY, "_entries", dict(defenses_base._REGISTRY._entries))
    monkeypatch.setattr(attacks_base._REGISTRY, "_entries", dict(attacks_base._REGISTRY._entries))
    monkeypatch.delitem(sys.modules, "my_noise", raising=False)
    monkeypatch.delitem(sys.modules, "my_attack", raising=False)
    import my_attack  # noqa: F401
    import my_noise  # noqa: F401

    rows = {r["name"]: r for r in defenses_base.defense_table()}
    assert rows["gaussian-noise"]["releases"] == "vectors" and rows["gaussian-noise"]["verb"] == "protect"
    assert {r["name"]: r["observes"] for r in attacks_base.attack_table()}["centered-nearest"] == "vectors"
