"""docs/results/generation.md is rendered from the records of a real (tiny) run: its tables, the exposure plot and
commands that rerun the run; and no planted secret reaches the page."""

from __future__ import annotations

import json

import pytest

from veil.experiments.generation import LMRun, attack_lm_run, run_folder, train_lm_run
from veil.report import render_method

TINY = LMRun(steps=2, batch_size=4, max_tokens=16, n_train=30, n_heldout=12, counts=(1, 4), canaries_per_count=2,
             pii_per_count=1, candidates=40, samples=6, top=3, seed=3)


@pytest.fixture(scope="module")
def page(tmp_path_factory, own_home, builtin):
    builtin("rt-polarity")
    with own_home(tmp_path_factory.mktemp("home")):
        results = tmp_path_factory.mktemp("results") / "generation"
        train_lm_run(TINY, results)
        attack_lm_run(TINY, results)
        out = tmp_path_factory.mktemp("pages")
        [path] = render_method(results, out)
        secrets = json.loads((run_folder(TINY) / "canaries.secret.json").read_text())
    return path.read_text(), out, secrets, results


def test_the_page_has_each_table_the_plot_and_says_no_command_reruns_a_run_of_other_sizes(page):
    text, out, _, _ = page
    for heading in ("## The runs and their utility", "## Canary exposure", "## Training-data extraction and PII",
                    "## PII inference and reconstruction", "## Membership inference"):
        assert heading in text
    assert "| 1 | 2 |" in text and "| 4 | 2 |" in text  # each insertion count with its two canaries
    assert (out / "generation_exposure.png").stat().st_size > 1000
    assert "one-sided Mann-Whitney U: canaries planted 4x are more exposed than canaries planted 1x" in text
    assert "Made through the Python API" in text and "lm-plain, 2 steps" in text and "veil lm train" not in text
    # the sentence that says nothing was extracted follows the record, whichever way it went
    found = "Examples of top samples found in the training text" in text
    assert ("No top sample was found in the training text" in text) is not found


def test_a_run_of_the_clis_sizes_gets_the_commands_that_rerun_it():
    import dataclasses

    from veil.experiments.generation import QUICK
    from veil.report.generation import _commands

    class Rec:
        config = {"run": dataclasses.replace(QUICK, steps=5, seed=2).identity()}

    commands, other = _commands([Rec()], "results/generation")
    run = "--corpus rt-polarity --defense lm-plain --steps 5 --seed 2 --quick --results results/generation"
    assert other == [] and commands == [f"veil lm train {run}", f"veil lm attack {run}"]


def test_no_canary_secret_reaches_the_page(page):
    text, _, secrets, _ = page
    from veil.corpora.canaries import Canary, CanaryFormat

    fmt = CanaryFormat(secrets["format"])
    assert not any(Canary(fmt, v, c).text() in text for v, c in secrets["canaries"])
    from veil.experiments.generation.run import _planted

    assert not any(p.value in text for p in _planted(TINY).pii)  # nor a planted PII value (seeded: these)
    # the PII table: each count with its five values (one per class), chance one in the run's 40 candidates
    assert "| 1 | 5 | " in text and "| 4 | 5 | " in text and "| 2% |" in text



def test_runs_of_the_same_size_are_set_side_by_side_one_row_per_defense(page, tmp_path):
    """The tiny run's records, copied as if a second defense had made them (the renderer reads only what the
    records say), give one table with a row per defense; a run alone gets no such table."""
    from veil.results import ResultRecord

    text, _, _, results = page
    assert "## Defenses side by side" not in text  # one run: nothing to set beside it
    both = tmp_path / "generation"
    both.mkdir()
    for path in results.glob("*.json"):
        rec = ResultRecord.read(path)
        rec.write(both / path.name)
        rec.config["run"]["defense"] = "lm-dedup"
        rec.write(both / path.name.replace("lm-plain", "lm-dedup"))
    [out] = render_method(both, tmp_path / "pages")
    text = out.read_text()
    table = text[text.index("## Defenses side by side"):text.index("## Canary exposure")]
    rows = [line for line in table.splitlines() if line.startswith("| lm-")]
    assert [r.split(" | ")[0] for r in rows] == ["| lm-plain, 2 steps", "| lm-dedup, 2 steps"]
    assert "exposure ×4 (bits)" in table and "PII inference ×1" in table and rows[0].split(" | ")[2:] == \
        rows[1].split(" | ")[2:]  # the same records, the same cells
    # the defense's PII inference against plain's, by the one-sided Fisher test: the same counts give p = 1
    [line] = [x for x in table.splitlines() if x.startswith("- lm-dedup")]
    assert "under plain fine-tuning; one-sided Fisher exact test" in line and line.endswith("p = 1.")


def test_the_budget_curve_sentence_follows_the_record(page, tmp_path):
    """Reconstruction's curve read three ways from its record: still rising, flat at zero, or offering true values
    that the ranking never puts first (the tiny run's record, its curve set each way)."""
    from veil.results import ResultRecord

    _, _, _, results = page
    [path] = results.glob("*.pii-reconstruction.json")
    cases = {
        ((0, 0), (0, 0)): "flat at zero",
        ((0, 1), (0, 3)): "has not flattened",
        ((0, 2), (0, 2)): "the ranking put it first 0 times",
    }
    for (half, full), said in cases.items():
        rec = ResultRecord.read(path)
        budget = rec.extra["budget"]
        for point, (right, among) in zip(budget[-2:], (half, full)):
            point.update(right=right, among_candidates=among)
        folder = tmp_path / said.replace(" ", "-") / "generation"
        folder.mkdir(parents=True)
        rec.write(folder / path.name)
        [out] = render_method(folder, folder.parent / "pages")
        assert said in out.read_text(), said


def test_a_dp_run_shows_its_accounted_guarantee_and_each_count_beside_its_exposure_bound(page, tmp_path):
    """The tiny run's records as a DP run would write them (its own learning rate and epsilon, a guarantee with
    numbers, each count's bound): it sits beside lm-plain, states (epsilon, delta) per text, and the exposure table
    says for each count whether the mean lies above the bound, following the record either way."""
    from veil.report.generation import _commands
    from veil.results import ResultRecord

    _, _, _, results = page
    both = tmp_path / "generation"
    both.mkdir()
    for path in results.glob("*.json"):
        rec = ResultRecord.read(path)
        rec.write(both / path.name)
        rec.config["run"].update(defense="lm-dpsgd", settings={"epsilon": 3.0}, lr=1e-3)
        if rec.experiment == "utility":
            rec.extra["guarantee"] = {"kind": "epsilon-delta-dp", "statement": "...", "epsilon": 2.99, "delta": 1e-4}
        if rec.experiment == "canary-exposure":
            for count, row in rec.extra["per_count"].items():
                row["dp_bound_bits"] = 4.5 * int(count)
                row["exceeds_dp_bound"] = count == "4"
        rec.write(both / path.name.replace("lm-plain", "lm-dpsgd-epsilon3"))
    [out] = render_method(both, tmp_path / "pages")
    text = out.read_text()
    table = text[text.index("## Defenses side by side"):text.index("## Canary exposure")]
    assert "| lm-dpsgd, epsilon=3.0, 2 steps | (2.99, 1.0e-04)-DP per text |" in table
    exposure = text[text.index("## Canary exposure"):text.index("## Training-data extraction")]
    dp = exposure[exposure.index("**lm-dpsgd"):]
    assert "DP bound (bits) | above the bound |" in dp and "lm-plain" not in dp.split("DP bound: the most")[0]
    rows = [line for line in dp.splitlines() if line.startswith("| 1 |") or line.startswith("| 4 |")]
    assert rows[0].endswith("| 4.5 | no |") and rows[1].endswith("| 18.0 | yes: the guarantee is broken |")

    class Rec:
        config = {"run": {**ResultRecord.read(next(both.glob("*lm-dpsgd*utility.json"))).config["run"]}}

    from veil.experiments.generation import QUICK

    Rec.config["run"].update({k: v for k, v in QUICK.identity().items() if k not in ("defense", "settings", "lr")})
    commands, other = _commands([Rec()], "results/generation")
    assert other == [] and "--defense lm-dpsgd --epsilon 3 --steps 60" in commands[0] and "--quick" in commands[0]
