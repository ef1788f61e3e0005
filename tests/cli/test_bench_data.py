"""`veil bench --data FILE`: the bench on the user's own labelled file, and its bad files refused before any cell."""

from __future__ import annotations

import csv
import random

import pytest


def _write(path, rows):
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    return str(path)


@pytest.fixture
def reviews(tmp_path):
    """320 short labelled reviews (two classes), as a user would export them."""
    rng = random.Random(0)
    good = ["a warm, funny film", "sharp writing and a great cast", "I loved every minute", "moving and well shot"]
    bad = ["dull and far too long", "the plot makes no sense", "I left halfway through", "flat acting, tired jokes"]
    rows = [["review", "stars"]]
    for i in range(320):
        pos = i % 2 == 0
        rows.append([f"{rng.choice(good if pos else bad)}, said reviewer {i} about film {rng.randint(1, 500)}",
                     "pos" if pos else "neg"])
    return tmp_path, rows


@pytest.mark.slow
def test_the_bench_runs_on_a_users_csv_and_reports_it(reviews):
    from veil.cli import main

    folder, rows = reviews
    data = _write(folder / "my reviews.csv", rows)
    out = folder / "bench"
    assert main(["bench", "--quick", "--data", data, "--text-column", "review", "--label-column", "stars",
                 "--defenses", "none,texthide", "--attacks", "rss,random-guess", "--queries", "100",
                 "--out", str(out)]) == 0
    report = (out / "report.md").read_text()
    assert "## file-my_reviews" in report and "texthide k4-m256-intra" in report
    cells = sorted(p.name for p in (out / "cells").glob("*.json"))
    assert len(cells) == 11 and all(c.startswith("file-my_reviews--") for c in cells)


def test_a_missing_column_is_refused_naming_it(cli, reviews):
    folder, rows = reviews
    data = _write(folder / "mine.csv", rows)
    cli("bench", "--quick", "--data", data, "--text-column", "review", "--label-column", "rating",
        match=r"no column 'rating' for --label-column; available columns: 'review', 'stars'")
    cli("bench", "--quick", "--data", data, "--text-column", "body", "--label-column", "stars",
        match=r"no column 'body' for --text-column")


def test_an_empty_label_is_refused_naming_its_line(cli, reviews):
    folder, rows = reviews
    rows[6][1] = ""
    data = _write(folder / "gaps.csv", rows)
    cli("bench", "--quick", "--data", data, "--text-column", "review", "--label-column", "stars",
        match=r"1 row\(s\) have no value in label column 'stars' \(line 7\).*--drop-empty")


def test_data_needs_a_label_and_excludes_corpora_and_ray(cli, reviews):
    folder, rows = reviews
    data = _write(folder / "mine.csv", rows)
    cli("bench", "--data", data, match=r"--data needs --label-column")
    cli("bench", "--data", data, "--label-column", "stars", "--corpora", "rt-polarity",
        match=r"--data and --corpora exclude each other")
    cli("bench", "--data", data, "--label-column", "stars", "--workers", "2", match=r"drop --workers/--ray")


@pytest.fixture
def authored(reviews):
    """The reviews with a private column: who wrote each (four authors, each with a habit of their own)."""
    folder, rows = reviews
    habits = {"ann": "honestly", "bob": "frankly", "cy": "truly", "dee": "really"}
    names = list(habits)
    out = [rows[0] + ["author"]]
    for i, (text, stars) in enumerate(rows[1:]):
        who = names[i % 4]
        out.append([f"{habits[who]}, {text}", stars, who])
    return folder, out


@pytest.mark.slow
def test_a_private_column_adds_the_representations_family_attacked_for_it(authored):
    import json

    from veil.cli import main

    folder, rows = authored
    data = _write(folder / "authored.csv", rows)
    out = folder / "bench"
    assert main(["bench", "--quick", "--data", data, "--text-column", "review", "--label-column", "stars",
                 "--private-column", "author", "--defenses", "none,leace", "--attacks", "rss,attribute",
                 "--queries", "50", "--out", str(out)]) == 0
    cells = sorted(p.name for p in (out / "cells").glob("*.json"))
    assert {c.split("--")[0] for c in cells} == {"file-authored", "file-authored-author"}
    attack = json.loads((out / "cells" / next(c for c in cells if "--attribute--" in c)).read_text())
    b = attack["extra"]["bench"]
    assert b["success"] == "attribute accuracy" and 0 <= b["success_metric"]["mean"] <= 1
    assert attack["config"]["corpus"]["private"]["variables"] == ["author"]
    assert "## representations" in (out / "report.md").read_text()


def test_a_bad_private_column_is_refused_before_any_cell(cli, authored):
    folder, rows = authored
    data = _write(folder / "authored.csv", rows)
    cli("bench", "--quick", "--data", data, "--text-column", "review", "--label-column", "stars",
        "--private-column", "writer", match=r"no column 'writer' for --private-column")
    rows[9][2] = ""
    gaps = _write(folder / "gaps.csv", rows)
    cli("bench", "--quick", "--data", gaps, "--text-column", "review", "--label-column", "stars",
        "--private-column", "author", match=r"private column 'author' is empty in 1 row")
    same = [r[:2] + ["ann"] for r in rows[1:]]
    one = _write(folder / "one.csv", [rows[0]] + same)
    cli("bench", "--quick", "--data", one, "--text-column", "review", "--label-column", "stars",
        "--private-column", "author", match=r"takes one value only")


@pytest.fixture
def notes(tmp_path):
    """Clinical-style notes exported one sentence per row: 150 notes of 3 sentences, labelled per note."""
    rng = random.Random(1)
    rows = [["note_id", "sentence", "outcome"]]
    for d in range(150):
        outcome = "readmitted" if d % 3 == 0 else "home"
        for s in range(3):
            rows.append([f"n{d:03d}", f"patient {d} visit {s}: {rng.choice(['stable', 'pain', 'fever', 'ok'])} "
                                      f"on day {rng.randint(1, 30)}", outcome])
    return tmp_path, rows


@pytest.mark.slow
def test_a_documents_column_runs_the_document_defenses_on_the_users_notes(notes):
    from veil.cli import main

    folder, rows = notes
    data = _write(folder / "notes.csv", rows)
    out = folder / "bench"
    assert main(["bench", "--quick", "--data", data, "--text-column", "sentence", "--label-column", "outcome",
                 "--documents-column", "note_id", "--defenses", "none,truncation", "--attacks", "rss",
                 "--queries", "20", "--out", str(out)]) == 0
    cells = sorted(p.name for p in (out / "cells").glob("*.json"))
    assert any("--truncation-" in c for c in cells) and all(c.startswith("file-notes--") for c in cells)
    assert "## document-embeddings" in (out / "report.md").read_text()


def test_a_document_with_two_labels_is_refused_before_any_cell(cli, notes):
    folder, rows = notes
    rows[2][2] = "home" if rows[2][2] == "readmitted" else "readmitted"
    data = _write(folder / "mixed.csv", rows)
    cli("bench", "--quick", "--data", data, "--text-column", "sentence", "--label-column", "outcome",
        "--documents-column", "note_id", match=r"document 'n000' \(column 'note_id'\) has rows with labels")
