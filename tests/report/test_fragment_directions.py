"""Generated directions of docs/*.md's comparison fragments: the direction comes from the records and turns round
with them (``parsing-attackers`` in veil.report.fragment_parsing, ``dpsgd-top-layers`` in
veil.report.fragment_texts), and a comparison whose two sides were trained differently is flagged as such."""

from __future__ import annotations

import shutil
from pathlib import Path

from veil.report.fragment_parsing import parsing_attackers
from veil.report.fragment_texts import dpsgd_top_layers
from veil.report.parsing import training_rule
from veil.results import Metric, ResultRecord

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "RESULTS.md"

EARLY = {"attack": "word-recovery-trained", "stopped": "flattened", "history": []}
FIXED = {"attack": "word-recovery-trained", "history": [{"epoch": 0}, {"epoch": 1}]}


def _attack(folder: Path, name: str, prv: float, attack: dict, minutes: float, **config) -> None:
    c = {"attacker": "trained", "level": "P2", "attack_train": 20000, "attack_minutes": minutes, "attack": attack,
         **config}
    ResultRecord(method="parsing", experiment=name, config=c, metrics={"prv": Metric(mean=prv)}, wall_time_s=0.0,
                 environment={}, git_commit="test").write(folder / f"{name}.json")


def _results(tmp_path: Path, random_prv: float, neural_prvs: list[float], random_rule: tuple[dict, float],
             neural_rule: tuple[dict, float]) -> Path:
    folder = tmp_path / "parsing"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    _attack(folder, "attack-trained-P2", random_prv, *random_rule)
    for seed, prv in enumerate(neural_prvs):
        _attack(folder, f"attack-trained-P2-neural-s{seed}", prv, *neural_rule, defense="neural", training_seed=seed)
    return tmp_path


def test_the_direction_follows_the_records(tmp_path):
    alike = ((FIXED, 4.0), (FIXED, 4.0))
    up = parsing_attackers(_results(tmp_path, 80.0, [82.0, 82.5, 83.0], *alike), BENCH)
    assert "P2 +2.5 [" in up and "(neural more private, 3 seeds)" in up
    down = parsing_attackers(_results(tmp_path, 80.0, [77.0, 77.5, 78.0], *alike), BENCH)
    assert "P2 -2.5 [" in down and "(neural less private, 3 seeds)" in down
    flat = parsing_attackers(_results(tmp_path, 80.0, [78.0, 80.0, 82.0], *alike), BENCH)
    assert "(no difference shown, 3 seeds)" in flat
    for text in (up, down, flat):
        assert "like-for-like (the same rule and budget on both sides)" in text and "not like-for-like" not in text


def test_two_sides_trained_differently_are_flagged(tmp_path):
    text = parsing_attackers(_results(tmp_path, 80.0, [82.0, 82.5, 83.0], (EARLY, 12.0), (FIXED, 4.0)), BENCH)
    assert "**not like-for-like**" in text
    assert "12-minute cap, early stopping on its own dev MRR" in text
    assert "4-minute cap, whole epochs, no dev selection" in text


def test_training_rule_reads_the_step_cap_and_the_selection():
    rec = ResultRecord(method="parsing", experiment="x", wall_time_s=0.0, environment={}, git_commit="test",
                       config={"attack_minutes": 16, "attack_steps": 800, "attack_train": 20000,
                               "attack": {"stopped": "steps"}}, metrics={})
    assert training_rule(rec) == ("20,000 training sentences, 16-minute cap, 800-step cap, early stopping on its own "
                                  "dev MRR")
    rec.config["attack"] = {"selected_epoch": 1}
    del rec.config["attack_steps"]
    assert training_rule(rec).endswith("16-minute cap, whole epochs, the best on its own dev MRR kept")


def test_top_layers_names_the_runs_above_the_majority_class(tmp_path):
    """The line is read from the records' intervals: a run at the majority class is never listed as above it."""
    folder = tmp_path / "dpsgd"
    folder.mkdir()
    for p in (ROOT / "results" / "dpsgd").glob("*-top-layers-*.json"):
        shutil.copy(p, folder / p.name)
    text = dpsgd_top_layers(tmp_path, BENCH)
    line = next(ln for ln in text.splitlines() if ln.startswith("Above the majority class"))
    above, _, below = line.partition(" Not above it: ")
    for p in folder.glob("*.json"):
        r = ResultRecord.read(p)
        if r.extra.get("one_class"):  # a one-class run scores exactly the majority rate
            eps = r.config.get("epsilon")
            where = "none" if eps is None else f"epsilon {float(eps):g}"
            recipe = f"{r.config.get('optimizer', 'adam')}, lr {float(r.config['lr']):g} at "
            assert any(part.startswith(recipe) and where in part for part in below.rstrip(".").split("; ")), (r, line)
    # negative control: a one-class run planted far above the majority class moves to the 'above' side
    path = next(p for p in sorted(folder.glob("*.json")) if ResultRecord.read(p).extra.get("one_class")
                and ResultRecord.read(p).config.get("epsilon") is not None)
    rec = ResultRecord.read(path)
    acc = rec.metrics["accuracy"]
    rec.metrics["accuracy"] = Metric(mean=0.95, n=acc.n, ci_low=0.93, ci_high=0.96, ci_level=0.95)
    rec.extra["one_class"] = False
    rec.write(path)
    planted = f"{rec.config.get('optimizer', 'adam')}, lr {float(rec.config['lr']):g} at "
    line = next(ln for ln in dpsgd_top_layers(tmp_path, BENCH).splitlines() if ln.startswith("Above the majority"))
    above = line.partition(" Not above it: ")[0]
    assert any(part.startswith(planted) and f"epsilon {float(rec.config['epsilon']):g}" in part
               for part in above.split(": ", 1)[1].rstrip(".").split("; ")), line
