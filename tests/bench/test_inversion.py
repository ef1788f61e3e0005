"""``veil attack invert`` end to end on real data with a small inverter trained here on public sentences: one
record with every method's scores and intervals, the correction curve, the paired gains; kept on a rerun of the
same cell, refused under another; typed errors before any work; the page renders from the record."""

from __future__ import annotations

import json

import numpy as np
import pytest

from veil.errors import InvalidParameterError, ResourceMissingError, StaleResultError
from veil.bench.inversion import InversionCell, record_path, run_inversion

pytestmark = pytest.mark.slow


#: the bag-of-words baseline's budget in this module: every record here reads the predictor and none measures it, so a
#: short fit (early stopping on its held-out token F1, as the real budget stops) stands for the real one, which fits
#: for about 30 s; how the budget stops and is cached is tested below and in tests/attacks/inversion/test_baselines.py
SMALL_BAG_OF_WORDS = {"max_steps": 400, "eval_every": 25, "patience": 2, "max_minutes": 120.0}


@pytest.fixture(scope="module")
def home(tiny_inverter_home, select_public_once):
    """The small inverter's home, with the inverter's public sentences selected once for the module and handed to
    every run as :func:`veil.bench.inversion.public_sentences_of` gives them (selecting them tokenizes every
    news-articles sentence, some 10 s a run; the same inverter configuration selects the same sentences), and the
    bag-of-words baseline's budget :data:`SMALL_BAG_OF_WORDS`."""
    import veil.bench.inversion as inv

    with pytest.MonkeyPatch.context() as mp:
        select_public_once(mp)
        mp.setattr(inv, "BAG_OF_WORDS", dict(SMALL_BAG_OF_WORDS))
        yield tiny_inverter_home


@pytest.fixture(scope="module")
def plain(home, tmp_path_factory):
    """One undefended run read by several tests below: the MiniLM vectors of 4 rt-polarity texts, no correction
    step, its record alone under ``results/inversion``. It is made with the bench's encoded slice unavailable and
    every ``TextEncoder.encode`` call counted: ``(cell, record path, log lines, texts per encode call)``."""
    import veil.bench.data as bench_data_module
    from veil.encoders import TextEncoder

    def no_slice(*args, **kwargs):
        raise AssertionError("the bench's encoded slice was built for --defense none")

    calls: list[int] = []
    real = TextEncoder.encode

    def counted(self, texts, *args, **kwargs):
        calls.append(len(texts))
        return real(self, texts, *args, **kwargs)

    cell = InversionCell(corpus="rt-polarity", release="none", queries=4, inverter="inverter-quick", steps=0, beam=2)
    root = tmp_path_factory.mktemp("plain") / "results" / "inversion"
    root.mkdir(parents=True)
    lines: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bench_data_module, "bench_data", no_slice)
        mp.setattr(TextEncoder, "encode", counted)
        path = run_inversion(cell, root, log=lines.append)
    return cell, path, lines, calls


def test_a_cell_writes_one_record_with_every_method_and_is_kept_on_a_rerun(home, tmp_path):
    from veil.results import ResultRecord

    cell = InversionCell(corpus="rt-polarity", release="none", queries=6, inverter="inverter-quick", steps=1, beam=2)
    lines: list[str] = []
    path = run_inversion(cell, tmp_path, log=lines.append)
    assert path == record_path(tmp_path, cell) and path.is_file() and lines[-1] == f"wrote {path}"
    rec = ResultRecord.read(path)
    assert rec.method == "inversion" and rec.config["cell"]["queries"] == 6
    for m in ("inverter", "nearest_public", "bag_of_words"):
        for k in ("token_f1", "bleu", "rouge_l", "exact_match", "cosine"):
            met = rec.metrics[f"{m}_{k}"]
            assert met.n == 6 and met.ci_low <= met.mean <= met.ci_high
    gain = rec.metrics["gain_over_nearest_public_token_f1"]
    per = rec.extra["per_text_token_f1"]
    assert len(per["inverter"]) == 6
    assert gain.mean == pytest.approx(sum(per["inverter"]) / 6 - sum(per["nearest-public"]) / 6, abs=0.01)
    curve = rec.extra["curve"]
    assert [p["step"] for p in curve] == [0, 1] and curve[1]["target_cosine"] >= curve[0]["target_cosine"]
    assert curve[-1]["token_f1"] == pytest.approx(rec.metrics["inverter_token_f1"].mean, abs=0.001)
    ex = rec.extra["examples"][0]
    assert set(ex) == {"original", "inverter", "nearest-public", "bag-of-words"}
    assert "floor_token_f1" not in rec.metrics  # the floor belongs to document releases
    # rt-polarity is no training corpus of the inverter: every private item may be queried
    assert rec.config["queries"]["unseen"] is True and rec.config["queries"]["excluded_seen"] == 0
    # the same cell again: kept, nothing recomputed; another inverter setting under the same file: refused
    lines.clear()
    assert run_inversion(cell, tmp_path, log=lines.append) == path and lines == [f"{path}: kept (same configuration)"]
    data = json.loads(path.read_text())
    data["config"]["cell"]["beam"] = 3
    path.write_text(json.dumps(data))
    with pytest.raises(StaleResultError, match="beam"):
        run_inversion(cell, tmp_path, log=lines.append)
    # a record whose bag-of-words baseline had another budget is another result: refused, naming it
    data["config"]["cell"]["beam"] = cell.beam
    data["config"]["bag_of_words"]["max_steps"] = 5000
    path.write_text(json.dumps(data))
    with pytest.raises(StaleResultError, match="bag_of_words"):
        run_inversion(cell, tmp_path, log=lines.append)


def test_the_fast_setting_is_its_own_record_and_shortlists_the_floor_too(home, tmp_path):
    """--shortlist and --batch-size reach the correction of the queried texts and are recorded; a record made
    with them never stands for the default cell (its own file name), and the default cell's configuration holds
    neither key, as records made before these options existed."""
    from veil.results import ResultRecord

    default = InversionCell(corpus="rt-polarity", queries=5, inverter="inverter-quick", steps=1, beam=2)
    fast = InversionCell(corpus="rt-polarity", queries=5, inverter="inverter-quick", steps=1, beam=2, shortlist=3,
                         batch_size=2)
    assert "shortlist" not in default.to_dict() and "batch_size" not in default.to_dict()
    assert fast.to_dict()["shortlist"] == 3 and fast.to_dict()["batch_size"] == 2
    assert record_path(tmp_path, fast) != record_path(tmp_path, default)
    assert record_path(tmp_path, fast).name.endswith("-sl3-b2.json")
    lines: list[str] = []
    rec = ResultRecord.read(run_inversion(fast, tmp_path, log=lines.append))
    # what the inversion cost is said as it ends: the texts per second the setting bought
    said = [line for line in lines if line.startswith("inverted 5 vectors in ")]
    assert len(said) == 1 and " texts/s, " in said[0]
    assert f"{sum(p['candidates'] for p in rec.extra['curve']):,} candidate texts re-embedded" in said[0]
    assert rec.config["cell"]["shortlist"] == 3 and rec.config["cell"]["batch_size"] == 2
    assert rec.config["correction"]["shortlist"] == 3 and rec.config["correction"]["batch_size"] == 2
    # at most 3 edits per text re-embedded in step 1 (5 texts), against every edit without the shortlist
    assert rec.extra["curve"][1]["candidates"] <= 5 * 3


def test_texthide_inference_is_unmasked_then_inverted_on_the_same_texts_as_the_vectors(home, plain, tmp_path):
    """TextHide's inference release of every rt-polarity text: the attacker recovers the whole pool from public
    statistics, the unmasked vectors are close to the texts' own, and the queried texts are those of ``none``."""
    from veil.results import ResultRecord

    cell, path, _, _ = plain
    masked = InversionCell(corpus="rt-polarity", release="texthide-inference", m=4, queries=4,
                           inverter="inverter-quick", steps=0, beam=2)
    assert masked.label == "texthide-inference-m4" and "m" not in cell.to_dict()  # old records still match
    assert (cell.queries, cell.steps, cell.beam, cell.seed) == (masked.queries, masked.steps, masked.beam, masked.seed)
    a = ResultRecord.read(path)
    lines: list[str] = []
    b = ResultRecord.read(run_inversion(masked, tmp_path, log=lines.append))
    assert [e["original"] for e in a.extra["examples"]] == [e["original"] for e in b.extra["examples"]]
    from veil.bench.data import bench_data, bench_sentence_texts

    assert bench_sentence_texts("rt-polarity", True) == bench_data("rt-polarity", True).texts  # one slice, one order
    # the second record on the same public sentences reads the first one's bag-of-words predictor
    assert any(line.startswith("bag-of-words predictor: ") and "(cached" in line for line in lines)
    assert a.config["bag_of_words"] == b.config["bag_of_words"]
    unmask = b.config["release"]["unmask"]
    assert unmask["masks_found"] == 4 and unmask["encodings"] > 10_000
    # statistics from 80 news sentences (the small inverter's): a few bits stay flipped after the repair
    assert 0.95 < b.metrics["unmask_cosine"].mean <= 1.0
    assert b.config["release"]["mask_key"] == "os-csprng"


def test_the_undefended_vectors_cost_only_the_queried_texts(plain):
    """``--defense none`` on a sentence corpus encodes the queried texts, not the corpus (issue 50, item 3): the
    bench's encoded slice is never built (the run is made without it), the only private texts encoded are the
    queries, and they are the texts the bench's slice holds in the same order (so the draw is the one the other
    releases make)."""
    from veil.bench.data import bench_sentence_texts
    from veil.results import ResultRecord

    cell, path, lines, calls = plain
    rec = ResultRecord.read(path)
    assert "encoding the 4 queried texts of rt-polarity" in lines
    # the 4 queries first; then only the hypotheses (beam 2 per query) and each method's 4 outputs, to score them
    assert calls and calls[0] == 4 and sum(calls) < 100
    texts = bench_sentence_texts("rt-polarity", True)
    assert len(texts) > 10_000 and bench_sentence_texts("drug-reviews", True) is None  # documents: the slice
    ids = np.sort(np.random.default_rng(cell.seed).choice(np.arange(len(texts)), size=4, replace=False))
    assert [e["original"] for e in rec.extra["examples"]] == [texts[i] for i in ids][:len(rec.extra["examples"])]


def test_a_redaction_release_is_inverted_from_its_vector_beside_the_released_text(home, tmp_path):
    """Presidio's type redaction of drug-reviews test documents: the record inverts each released document's MiniLM
    vector, scores the released text itself and the floor on the same documents, and the page names the operator
    and the command that remakes it."""
    from veil.report import render_all
    from veil.results import ResultRecord

    cell = InversionCell(corpus="drug-reviews", release="redaction", operator="type", queries=3,
                         inverter="inverter-quick", steps=0, beam=2)
    assert cell.label == "redaction-type" and cell.to_dict()["operator"] == "type"
    root = tmp_path / "results" / "inversion"
    root.mkdir(parents=True)
    rec = ResultRecord.read(run_inversion(cell, root, log=lambda _: None))
    assert rec.config["release"]["operator"] == "type" and "MiniLM" in rec.config["release"]["read_as"]
    for key in ("inverter_token_f1", "released_text_token_f1", "floor_token_f1", "gain_over_released_text_token_f1",
                "bag_of_words_floor_token_f1", "bag_of_words_gain_over_floor_token_f1"):
        assert rec.metrics[key].n == 3, key
    per = rec.extra["per_text_token_f1"]
    assert set(per) == {"inverter", "nearest-public", "bag-of-words", "released-text", "floor", "bag-of-words-floor"}
    # the bag of words' own floor: its gain is the paired difference with its output on the same public candidates
    gain = rec.metrics["bag_of_words_gain_over_floor_token_f1"].mean
    assert gain == pytest.approx(np.mean(per["bag-of-words"]) - np.mean(per["bag-of-words-floor"]), abs=0.01)
    # the released text is the original with its detected spans replaced: it keeps most of its words
    assert rec.metrics["released_text_token_f1"].mean > 50 > rec.metrics["inverter_token_f1"].mean
    assert all(e["released-text"].strip() for e in rec.extra["examples"])
    render_all(tmp_path / "results", tmp_path / "out")
    page = (tmp_path / "out" / "inversion.md").read_text()
    assert "## drug-reviews, release: redaction (type)" in page
    assert "| the released text itself, read directly |" in page and "| released text |" in page
    assert "| floor of the bag of words: it on the same random candidates |" in page
    assert "- Bag of words minus its floor (the bag of words on the same random public candidates), token F1:" in page
    # a redaction release is rewritten text, not a clean public vector like the floor: no verdict from the floor
    assert page.count("The floor is a clean public vector, unlike this release, so a difference from it is no "
                      "verdict on the defense") == 2
    assert "veil attack invert --corpus drug-reviews --defense redaction --operator type --limit 3" in page


def test_the_page_renders_the_record(plain, tmp_path):
    from veil.report import render_all

    _, path, _, _ = plain
    root = path.parent
    assert [p.name for p in root.iterdir()] == [path.name]  # the page of this record alone
    render_all(root.parent, tmp_path / "out")
    page = (tmp_path / "out" / "inversion.md").read_text()
    assert "## rt-polarity, release: none" in page and "| inverter + correction |" in page
    assert ("veil attack invert --corpus rt-polarity --defense none --limit 4 --inverter inverter-quick --steps 0 "
            "--beam 2 --seed 0 --results results/inversion") in page
    assert (tmp_path / "out" / "inversion_correction.png").is_file()
    # the inverter's learning curve, from the manifest the record copied: one row per inverter, its last step
    assert "## The inverters' learning curves" in page and (tmp_path / "out" / "inversion_training.png").is_file()
    rec = json.loads(next(root.glob("*.json")).read_text())
    curve = rec["config"]["inverter"]["curve"]
    assert curve and curve[0]["step"] == 0 and f"| `inverter-quick` | cpu | {curve[-1]['step']} |" in page


def test_bad_requests_are_typed_errors_before_any_work(home, tmp_path, monkeypatch):
    with pytest.raises(InvalidParameterError, match="epsilon"):
        InversionCell(release="deepcandidate")
    with pytest.raises(InvalidParameterError, match="applies to deepcandidate, truncation, metric-dp only"):
        InversionCell(release="none", epsilon=3.0)
    with pytest.raises(InvalidParameterError, match="unknown release"):
        InversionCell(release="texthide")
    with pytest.raises(InvalidParameterError, match="--m: the number of secret masks"):
        InversionCell(release="texthide-inference")
    with pytest.raises(InvalidParameterError, match="--m applies to texthide-inference only"):
        InversionCell(release="none", m=16)
    with pytest.raises(InvalidParameterError, match="redaction needs --operator, one of type, mask, hash, pseudonym"):
        InversionCell(release="redaction")
    with pytest.raises(InvalidParameterError, match="--operator applies to redaction only"):
        InversionCell(release="metric-dp", epsilon=10.0, operator="type")
    with pytest.raises(InvalidParameterError, match="--shortlist: edits re-embedded per text"):
        InversionCell(shortlist=0)
    with pytest.raises(InvalidParameterError, match="batch_size"):
        InversionCell(batch_size=0)
    with pytest.raises(InvalidParameterError, match="--epsilon must be a finite number > 0 for metric-dp"):
        InversionCell(release="metric-dp")
    with pytest.raises(InvalidParameterError, match="rewritten documents .* sentence corpus; use a document corpus"):
        run_inversion(InversionCell(release="redaction", operator="mask", inverter="inverter-quick"), tmp_path)
    with pytest.raises(InvalidParameterError, match="document corpus; use a sentence corpus"):
        run_inversion(InversionCell(corpus="drug-reviews", release="texthide-inference", m=4,
                                    inverter="inverter-quick"), tmp_path)
    with pytest.raises(InvalidParameterError, match="sentence corpus; use a document corpus"):
        run_inversion(InversionCell(release="deepcandidate", epsilon=3.0, inverter="inverter-quick"), tmp_path)
    from veil.corpora.fetch import corpora_root

    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "corpora").symlink_to(corpora_root())  # the corpus is checked first (it is there)
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "empty"))
    with pytest.raises(ResourceMissingError, match="veil models train inverter"):
        run_inversion(InversionCell(inverter="inverter"), tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_queries_leave_out_the_inverters_training_sentences():
    """A private item whose text the inverter learned from is never queried (exact text match), and the count
    of those left out is returned; a corpus the inverter never learned from loses nothing."""
    from veil.bench.inversion import unseen_by_inverter

    texts = ["a seen sentence .", "an unseen one .", "another seen one .", "fresh text"]
    ids, seen = unseen_by_inverter([0, 1, 2, 3], texts, ["a seen sentence .", "another seen one .", "unrelated"])
    assert ids.tolist() == [1, 3] and seen == 2
    ids, seen = unseen_by_inverter(np.arange(4), texts, ["nothing in common"])
    assert ids.tolist() == [0, 1, 2, 3] and seen == 0


def test_the_bag_of_words_cache_is_keyed_by_the_vectors_too(tmp_path, monkeypatch):
    """A cached predictor is read back only for the same public texts *and* vectors: vectors from another encoder
    backend (here: the same texts, slightly moved) fit a new one rather than reuse a predictor fitted on others."""
    import veil.bench.inversion as inv

    monkeypatch.setenv("VEIL_HOME", str(tmp_path))
    monkeypatch.setattr(inv, "BAG_OF_WORDS", {"max_steps": 4, "eval_every": 2, "patience": 1, "max_minutes": 5.0})
    texts = [f"the film number {i} was {'good' if i % 2 else 'bad'} and {'long' if i % 3 else 'short'}"
             for i in range(60)]
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(60, 16)).astype(np.float32)
    public = {"texts_sha256": "t" * 64}

    def fit(v):
        lines: list[str] = []
        inv.bag_of_words(texts, v, public, {"name": "test"}, 0, lines.append)
        return lines

    assert fit(vectors)[0].startswith("fitting the bag-of-words predictor")
    assert "(cached" in fit(vectors)[0]
    moved = vectors + np.float32(1e-3)
    assert fit(moved)[0].startswith("fitting the bag-of-words predictor")
    assert len(list((tmp_path / "attackers" / "bag-of-words").glob("*.pt"))) == 2


def test_the_commands_default_batch_is_the_one_every_earlier_record_was_made_with():
    import inspect

    from veil.bench.inversion import CORRECTION_BATCH
    from veil.cli.attack import attack_invert

    assert inspect.signature(attack_invert).parameters["batch_size"].default == CORRECTION_BATCH
