"""veil bench: cells from declarations, resumable fault-isolated runs, sequential == Ray, the report."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest

from veil.bench.plan import UTILITY, BenchConfig, Cell, plan_cells

TASKS = {"rt-polarity": "sentence-classification", "drug-reviews": "document-classification"}


def test_cells_pair_defenses_with_attacks_by_declared_observations():
    from veil.attacks.base import get_attack
    from veil.defenses.base import get_defense
    from veil.kinds import observable

    cells = plan_cells(list(TASKS), config=BenchConfig(quick=True), corpus_tasks=TASKS)
    assert cells and len({c.id for c in cells}) == len(cells)
    for c in cells:
        d = get_defense(c.defense)
        assert TASKS[c.corpus] in d.tasks
        if c.attack == UTILITY:
            continue
        a = get_attack(c.attack)
        assert observable(d.releases, a.observes)
        if a.floor:
            assert c.defense == "none"
        if c.attack in ("mask-recovery", "unmix"):
            assert c.setting["m"] not in (0, "inf")
    kinds = {(c.corpus, c.defense, c.attack) for c in cells}
    assert ("rt-polarity", "texthide", "abs-rss") in kinds and ("rt-polarity", "texthide", "unmix") in kinds
    assert ("drug-reviews", "deepcandidate", "exact-audit") in kinds
    assert not any(c.defense == "texthide" for c in cells if c.corpus == "drug-reviews")
    assert not any(c.attack == "exact-audit" and c.defense != "deepcandidate" for c in cells)
    # every (defense, setting) of a corpus has one utility cell
    settings = {(c.corpus, c.defense, c.setting_json) for c in cells}
    assert settings == {(c.corpus, c.defense, c.setting_json) for c in cells if c.attack == UTILITY}


#: one corpus per task (names only: planning loads nothing)
EVERY_TASK = {"rt-polarity": "sentence-classification", "drug-reviews": "document-classification",
              "silver-sm": "dependency-parsing", "debates-2016-speaker": "private-attributes",
              "rt-polarity-planted": "language-modeling"}


#: defenses that run in the full bench only, each saying why in its bench_settings (minutes of training per setting)
FULL_ONLY = {"obfuscation-neural", "lm-scrub", "lm-dedup"}
#: release kinds with registered defenses and attacks but no bench section yet, each with why (add an entry only
#: with its reason: these tests hold every other kind to every check above)
NOT_IN_BENCH_YET: dict[str, str] = {}


@pytest.mark.parametrize("quick", [True, False])
def test_every_registered_defense_gets_a_utility_cell_and_an_attack_of_its_kind(quick):
    from veil.attacks.base import get_attack
    from veil.defenses.base import defense_names, get_defense
    from veil.kinds import observable

    cells = plan_cells(list(EVERY_TASK), config=BenchConfig(quick=quick), corpus_tasks=EVERY_TASK,
                       runnable_only=False)
    for name in defense_names():
        if get_defense(name).releases in NOT_IN_BENCH_YET:
            assert not [c for c in cells if c.defense == name]  # never planned half-way
            continue
        if quick and name in FULL_ONLY:
            assert get_defense(name).bench_settings(True) == [] and get_defense(name).bench_settings(False)
            continue
        mine = [c for c in cells if c.defense == name]
        assert any(c.attack == UTILITY for c in mine), f"{name}: no utility cell"
        attacks = [get_attack(c.attack) for c in mine if c.attack != UTILITY]
        assert attacks, f"{name}: no attack observes what it releases"
        assert all(observable(get_defense(name).releases, a.observes) for a in attacks)
    assert not {c.defense for c in cells} & {"deepcandidate-broken-doubled-epsilon",
                                             "deepcandidate-broken-doubled-sensitivity"}


def test_every_release_kind_a_defense_makes_has_bench_cells():
    """Every kind some registered defense releases runs in the bench: nothing is planned and left pending."""
    from veil.bench.plan import not_runnable
    from veil.defenses.base import defense_names, get_defense

    full = plan_cells(list(EVERY_TASK), corpus_tasks=EVERY_TASK, runnable_only=False)
    assert not_runnable(full) == {}
    assert {get_defense(c.defense).releases for c in full} == ({get_defense(d).releases for d in defense_names()}
                                                               - set(NOT_IN_BENCH_YET))


def test_unknown_names_are_refused_with_the_valid_ones():
    from veil.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="unknown attack 'nope'.*rss"):
        plan_cells(["rt-polarity"], attacks=["nope"], corpus_tasks=TASKS)


CFG = BenchConfig(quick=True, queries=60, limit=120, key_seed=7)


def _cells():
    cells = plan_cells(["rt-polarity"], defenses=["none", "texthide"], attacks=["rss", "abs-rss", "random-guess"],
                       config=CFG, utility=False, corpus_tasks=TASKS)
    cells.append(Cell.make("rt-polarity", "none", {}, UTILITY, CFG))
    return cells


def _metrics(folder):
    out = {}
    for p in sorted((folder / "cells").glob("*.json")):
        rec = json.loads(p.read_text())
        out[p.name] = {k: v["mean"] for k, v in rec["metrics"].items()}
    return out


@pytest.mark.slow
# Ray's local cluster leaves /dev/null handles and helper processes to its own reaper after ray.shutdown()
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_bench_runs_resumes_isolates_failures_and_ray_agrees(tmp_path, ray_leftovers):
    from veil.bench.runner import run_bench

    cells = _cells()
    broken = Cell.make("rt-polarity", "texthide", {"m": 256, "k": 100000, "mode": "intra"}, "rss", CFG)
    seq = tmp_path / "seq"
    run = run_bench([broken, *cells], seq, progress=False)
    assert [o.id for o in run.failed] == [broken.id]
    assert "100000" in run.failed[0].error and run.failed[0].error.startswith("InvalidParameterError")
    assert run.counts()["done"] == len(cells)
    m = _metrics(seq)
    none_rss = next(v for k, v in m.items() if "--none-default--rss--" in k)
    assert none_rss["identity"] == 1.0  # undefended vectors are found exactly
    inference = next(v for k, v in m.items() if "--texthide-k1-m256-intra--abs-rss--" in k)
    assert inference["identity_any"] >= 0.9  # sign masks keep magnitudes (issue 11)
    floor = next(v for k, v in m.items() if "--random-guess--" in k)
    assert floor["identity"] <= 0.1
    run_summary = json.loads((seq / "run.json").read_text())
    assert run_summary["counts"] == {"done": len(cells), "skipped": 0, "failed": 1}

    assert "left_out" not in run_summary
    left = {"trains a model for minutes": ["x--y--z--quick-q500-e5-seed0"]}
    again = run_bench(cells, seq, progress=False, left_out=left)  # resume: everything is there
    assert again.counts() == {"done": 0, "skipped": len(cells), "failed": 0}
    assert json.loads((seq / "run.json").read_text())["left_out"] == left  # --demo's note for the report
    assert _metrics(seq) == m

    par = tmp_path / "ray"
    ray_run = run_bench(cells, par, workers=2, progress=False)
    assert ray_run.engine == "ray" and not ray_run.failed
    assert _metrics(par) == m  # seeded keys: the same numbers on 2 workers


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.imgs, self.external, self.tables, self.rows = [], [], 0, 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a.get("src", ""))
        for key in ("src", "href"):
            if key in a and a[key] and not a[key].startswith(("data:", "#")):
                self.external.append(a[key])
        self.tables += tag == "table"
        self.rows += tag == "tr"


@pytest.mark.slow
def test_report_is_self_contained(tmp_path):
    from veil.bench.runner import run_bench
    from veil.report.bench import render_bench

    cells = [c for c in _cells() if c.defense == "none"]
    run_bench(cells, tmp_path / "b", progress=False)
    md, page = render_bench(tmp_path / "b", tmp_path / "out", name="report")
    parser = _Page()
    parser.feed(page.read_text())
    assert parser.imgs and all(src.startswith("data:image/png;base64,") for src in parser.imgs)
    assert parser.external == []  # nothing fetched from a network
    assert parser.tables >= 2 and parser.rows >= 3
    text = md.read_text()
    assert "## vectors: one vector per text" in text and "### rt-polarity" in text and "## Provenance" in text
    assert "report_rt-polarity_vectors.png" in text
    assert (tmp_path / "out" / "report_rt-polarity_vectors.png").stat().st_size > 1000


@pytest.mark.slow
def test_document_defenses_release_embeddings_and_pass_the_exact_audit(tmp_path):
    from veil.bench.runner import run_bench

    cfg = BenchConfig(quick=True, queries=20, limit=30)
    cells = plan_cells(["drug-reviews"], defenses=["none", "deepcandidate", "truncation"],
                       attacks=["rss", "exact-audit"], config=cfg, corpus_tasks=TASKS)
    assert {c.defense for c in cells if c.attack == "exact-audit"} == {"deepcandidate"}
    run = run_bench(cells, tmp_path, progress=False)
    assert not run.failed, [o.error for o in run.failed]
    m = _metrics(tmp_path)
    assert next(v for k, v in m.items() if "--none-default--rss--" in k)["identity"] == 1.0
    audits = [v for k, v in m.items() if "--exact-audit--" in k]
    assert len(audits) == 2 and all(a["violation"] == 0.0 and a["max_ratio_over_epsilon"] <= 1.0 for a in audits)
    utility = [v for k, v in m.items() if "--utility--" in k]
    assert len(utility) == 5 and all(0.0 <= u["accuracy"] <= 1.0 for u in utility)


@pytest.mark.slow
def test_ctrl_c_ends_a_ray_bench_within_seconds_and_leaves_nothing_partial(tmp_path, real_home):
    """Issue 26 class 4: SIGINT to `veil bench --workers 2` exits 130 within seconds; no run.json, no temporary file,
    and every cell file there is a finished record."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    veil = Path(sys.executable).parent / "veil"
    out = tmp_path / "bench"
    env = {**os.environ, "VEIL_HOME": str(real_home), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([str(veil), "bench", "--quick", "--corpora", "rt-polarity", "--defenses", "none,texthide",
                             "--attacks", "rss,abs-rss", "--workers", "2", "--key-seed", "1", "--out", str(out)],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        seen, deadline = "", time.monotonic() + 300
        while time.monotonic() < deadline and "started" not in seen:
            line = proc.stdout.readline()
            if not line:
                break
            seen += line
        assert "started" in seen, seen
        time.sleep(8)  # Ray is starting or running cells
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        rest, _ = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    # Ctrl-C during ray.init is held until the cluster is up (a half-started one leaves agents behind)
    assert proc.returncode == 130 and took < 15, (proc.returncode, took, rest)
    assert "interrupted" in rest and "Traceback" not in rest
    assert not (out / "run.json").exists()
    leftovers = [p.name for p in out.rglob("*") if p.is_file() and not p.name.endswith(".json")]
    assert leftovers == []
    for cell in (out / "cells").glob("*.json"):
        assert json.loads(cell.read_text())["method"] == "bench"  # finished cells only


def test_a_cell_is_reused_only_under_the_encoder_backend_it_was_made_with(tmp_path, monkeypatch, builtin):
    """A cell on MiniLM vectors made with torch (as every committed one: no backend key) is kept under torch and
    refused under VEIL_ENCODER_BACKEND=onnx before any cell runs; treebank cells encode nothing with MiniLM."""
    from veil.bench.data import encoder_backend
    from veil.bench.runner import run_bench
    from veil.encoders.backends import ENV
    from veil.errors import StaleResultError

    builtin("rt-polarity")
    cells = [Cell.make("rt-polarity", "none", {}, "random-guess", CFG)]
    monkeypatch.setenv(ENV, "torch")
    assert run_bench(cells, tmp_path, progress=False).counts()["done"] == 1
    (path,) = (tmp_path / "cells").glob("*.json")
    assert "encoder_backend" not in json.loads(path.read_text())["config"]
    before = path.read_bytes()
    monkeypatch.setenv(ENV, "onnx")
    assert encoder_backend("rt-polarity") == {"encoder_backend": "onnx"}
    assert encoder_backend("debates-2016-speaker") == {"encoder_backend": "onnx"}  # frozen MiniLM under r(x)
    assert encoder_backend("silver-sm") == {}
    with pytest.raises(StaleResultError, match=r'encoder_backend: stored \(absent\), requested "onnx"'):
        run_bench(cells, tmp_path, progress=False)
    monkeypatch.setenv(ENV, "torch")
    assert run_bench(cells, tmp_path, progress=False).counts() == {"done": 0, "skipped": 1, "failed": 0}
    assert path.read_bytes() == before


def test_a_full_bench_with_inversion_cells_names_the_missing_inverter_before_any_cell(tmp_path, monkeypatch):
    """The full inverter is never trained behind the user's back: the run stops before any cell (and before the
    output folder is made) with the command that trains it."""
    from veil.bench.runner import run_bench
    from veil.errors import ResourceMissingError

    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    cells = [Cell.make("rt-polarity", "none", {}, "invert", BenchConfig(quick=False))]
    with pytest.raises(ResourceMissingError, match="veil models import DIR.*veil models train inverter --device cuda"):
        run_bench(cells, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()
