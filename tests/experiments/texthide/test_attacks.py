"""The adaptive-attack runner (issue 11): cells, resumable sweeps, CLI; real MiniLM vectors of trec-questions."""

from __future__ import annotations

import json

import pytest

from veil.cli import main
from veil.errors import InvalidParameterError
from veil.experiments.texthide.attacks import AttackCell, headline_cells, grid_cells, result_path, run_cell, run_cells

pytestmark = pytest.mark.usefixtures("builtin")


@pytest.fixture(autouse=True)
def _trec(builtin):
    builtin("trec-questions")


def test_abs_rss_breaks_inference_masking_and_rss_does_not():
    abs_rec = run_cell(AttackCell(corpus="trec-questions", attack="abs-rss", m=256, k=1, queries=200), progress=False)
    rss_rec = run_cell(AttackCell(corpus="trec-questions", attack="rss", m=256, k=1, queries=200), progress=False)
    assert abs_rec.metrics["identity"].mean >= 0.95 and abs_rec.config["identity_beats_random"]
    assert rss_rec.metrics["identity"].mean < 0.2
    assert abs_rec.metrics["random_identity"].mean < 0.05  # the floor sits in the same record
    assert "OS CSPRNG" in abs_rec.config["secret_randomness"]
    assert abs_rec.config["defense"]["mixing_rng"] == "os-csprng"  # the key's mixing is never the experiment seed


def test_any_source_scoring_and_a_public_index():
    rec = run_cell(AttackCell(corpus="trec-questions", attack="abs-rss", m=256, k=4, queries=200), progress=False)
    assert rec.metrics["identity_any"].mean >= rec.metrics["identity"].mean
    pub = run_cell(AttackCell(corpus="trec-questions", attack="abs-rss", m=256, k=4, queries=200,
                              index="public:rt-polarity", public_size=2000), progress=False)
    assert {"sbert_cosine", "random_sbert_cosine"} <= set(pub.metrics)
    assert set(pub.config["significance"]) == {"jaccard", "tfidf_cosine", "sbert_cosine"}


def test_sweep_resumes_and_cli_writes_json(tmp_path, capsys):
    cells = [AttackCell(corpus="trec-questions", attack="abs-rss", m=16, k=2, queries=50)]
    first = run_cells(cells, tmp_path, log=lambda line: None)
    stamp = first[0].stat().st_mtime_ns
    lines = []
    run_cells(cells, tmp_path, log=lines.append)
    assert first[0].stat().st_mtime_ns == stamp and "skip" in lines[0]
    code = main(["attack", "abs-rss", "--corpus", "trec-questions", "--m", "16", "--k", "2", "--queries", "50",
                 "--results", str(tmp_path), "--json"])
    assert code == 2  # exists: needs --force
    capsys.readouterr()
    code = main(["attack", "abs-rss", "--corpus", "trec-questions", "--m", "16", "--k", "2", "--queries", "50",
                 "--results", str(tmp_path), "--json", "--force"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["metrics"]["identity"]["n"] == 50
    assert result_path(cells[0], tmp_path).is_file()


def test_cells_validate_and_grids_cover_the_issue():
    with pytest.raises(InvalidParameterError, match="finite pool"):
        AttackCell(attack="mask-recovery", m=None)
    with pytest.raises(InvalidParameterError, match="private index only"):
        AttackCell(attack="unmix", index="public:health-tweets")
    with pytest.raises(InvalidParameterError, match="unknown attack"):
        AttackCell(attack="gradient")
    grid = grid_cells()
    assert {(c.m, c.k) for c in grid if c.attack == "abs-rss"} >= {(m, k) for m in (1, 16, 256, 1024, None)
                                                                     for k in (2, 4, 8)}
    assert {c.epochs for c in grid if c.attack == "mask-recovery"} == {1, 5, 20}
    assert {c.corpus for c in headline_cells()} == {"rt-polarity", "trec-questions", "sms-spam"}
    assert len({c.name for c in grid}) == len(grid)  # one file per cell


def test_mask_recovery_and_unmix_cells_break_a_training_run():
    mr = run_cell(AttackCell(corpus="trec-questions", attack="mask-recovery", m=16, k=4, epochs=2), progress=False)
    assert mr.metrics["mask_bits"].mean >= 0.95 and len(mr.extra["per_mask_bits"]) == 16
    un = run_cell(AttackCell(corpus="trec-questions", attack="unmix", m=16, k=4, epochs=2, queries=100),
                  progress=False)
    assert un.metrics["all_sources"].n == 100 and un.metrics["all_sources"].mean >= 0.9
    assert un.metrics["mask_mask_bits"].mean >= 0.95  # the masks it used were recovered, not given


def test_page_renders_tables_plot_and_summary(tmp_path):
    from veil.report import render_all

    folder = tmp_path / "results" / "texthide-attacks"
    run_cells([AttackCell(corpus="trec-questions", attack="rss", m=256, k=4, queries=60),
               AttackCell(corpus="trec-questions", attack="abs-rss", m=256, k=4, queries=60),
               AttackCell(corpus="trec-questions", attack="mask-recovery", m=16, k=4, epochs=1)],
              folder, log=lambda line: None)
    render_all(tmp_path / "results", tmp_path / "docs")
    page = (tmp_path / "docs" / "texthide-attacks.md").read_text()
    assert "| trec-questions | (256,4) intra |" in page and "**beats random**" in page
    assert "trec-questions, training encodings (256,4) intra: abs-RSS finds" in page
    assert "| trec-questions | mask-recovery | (16,4) intra | 1 |" in page
    assert (tmp_path / "docs" / "texthide_mask_recovery.png").stat().st_size > 5000


def test_a_cell_is_reused_only_under_the_encoder_backend_it_was_made_with(tmp_path, monkeypatch):
    """A record made with torch (as every committed one: no backend key in its cell) is kept by a torch sweep and
    refused under VEIL_ENCODER_BACKEND=onnx before any cell runs."""
    from veil.encoders.backends import ENV
    from veil.errors import StaleResultError
    from veil.experiments.texthide.attacks import identity

    monkeypatch.setenv(ENV, "torch")
    cells = [AttackCell(corpus="trec-questions", attack="abs-rss", m=16, k=2, queries=30)]
    (path,) = run_cells(cells, tmp_path, log=lambda line: None)
    assert json.loads(path.read_text())["config"]["cell"] == cells[0].to_dict()
    stamp = path.stat().st_mtime_ns
    monkeypatch.setenv(ENV, "onnx")
    assert identity(cells[0]) == {**cells[0].to_dict(), "encoder_backend": "onnx"}
    with pytest.raises(StaleResultError, match=r'encoder_backend: stored \(absent\), requested "onnx"'):
        run_cells(cells, tmp_path, log=lambda line: None)
    monkeypatch.setenv(ENV, "torch")
    lines: list[str] = []
    assert run_cells(cells, tmp_path, log=lines.append) == [path] and path.stat().st_mtime_ns == stamp
    assert "skip" in lines[0]
