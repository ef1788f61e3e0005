"""Detection quality: the scoring on hand-made detections, one small real run on Presidio (spaCy sm), the records."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from veil.corpora.pii_injection import InjectedSpan, InjectionCorpus, build_injection
from veil.defenses.redaction.engine import Detection
from veil.errors import DataFormatError, InvalidParameterError, StaleResultError, UnknownNameError
from veil.experiments.redaction.detection import (evaluate_injection, rate, run_detection, run_news_recall,
                                                  score_mentions, span_outcome)
from veil.metrics.leakage import wilson_interval


def D(start, end, entity="PERSON", score=0.85):
    return Detection(start, end, entity, score)


# --------------------------------------------------------------------------- covered / touched / typed
def test_covered_touched_typed():
    text = "Call 555-123-4567 now."
    a, b = 5, 17
    assert text[a:b] == "555-123-4567"
    phone = ("PHONE_NUMBER",)
    full = span_outcome(text, a, b, [D(5, 17, "PHONE_NUMBER")], phone)
    assert (full.covered, full.touched, full.typed) == (True, True, True)
    part = span_outcome(text, a, b, [D(9, 17, "PHONE_NUMBER")], phone)  # "555" is released
    assert (part.covered, part.touched, part.typed) == (False, True, False)
    wrong = span_outcome(text, a, b, [D(0, 21, "DATE_TIME")], phone)  # redacted, under another type
    assert (wrong.covered, wrong.touched, wrong.typed) == (True, True, False) and wrong.types == ("DATE_TIME",)
    # two detections cover every digit (the dash between them is not counted); one of them is mistyped
    split = span_outcome(text, a, b, [D(5, 8, "PHONE_NUMBER"), D(9, 17, "DATE_TIME")], phone)
    assert (split.covered, split.typed) == (True, False)
    both = span_outcome(text, a, b, [D(5, 8, "PHONE_NUMBER"), D(9, 17, "PHONE_NUMBER")], phone)
    assert (both.covered, both.typed) == (True, True)
    dash_only = span_outcome(text, a, b, [D(8, 9, "PHONE_NUMBER")], phone)  # punctuation alone releases nothing
    assert (dash_only.covered, dash_only.touched) == (False, False)
    none = span_outcome(text, a, b, [D(0, 4, "PERSON")], phone)
    assert (none.covered, none.touched, none.typed) == (False, False, False)
    anytype = span_outcome(text, a, b, [D(5, 17, "LOCATION")], None)  # STREET_ADDRESS: any type counts
    assert anytype.typed


def _span(text, value, entity, variant="plain"):
    start = text.index(value)
    return InjectedSpan(start, start + len(value), entity, value, variant, 0, "hand-made")


def _corpus(rows):
    texts = tuple(r[0] for r in rows)
    spans = tuple((_span(r[0], r[1], r[2], r[3]),) for r in rows)
    return InjectionCorpus(texts, spans, tuple(r[4] for r in rows), tuple(range(len(rows))), "hand", 1, 0, 3)


def test_evaluate_counts_and_precision_excludes_the_base_sentences_own_detections():
    base0, base1, base2 = "Marker is good.", "A fine film.", "Bad film."
    corpus = _corpus([
        ("John Smith wrote: Marker is good.", "John Smith", "PERSON", "plain", base0),
        ("A fine film. Ask JANE DOE about it.", "JANE DOE", "PERSON", "allcaps", base1),
        ("Bad film. Write to a@b.com.", "a@b.com", "EMAIL_ADDRESS", "free", base2),
    ])
    t0, t1, t2 = corpus.texts
    dets = [
        [D(0, 10), D(18, 24)],                       # the name (found) and "Marker" (the base's own PERSON)
        [D(13, 16, "PERSON"), D(17, 21, "ORGANIZATION")],  # "Ask" (a false positive) and half of the name
        [D(19, 26, "EMAIL_ADDRESS", 1.0)],
    ]
    assert t0[18:24] == "Marker" and t1[13:16] == "Ask" and t1[17:21] == "JANE" and t2[19:26] == "a@b.com"
    base = [[D(0, 6)], [], []]
    metrics, extra = evaluate_injection(corpus, dets, base)
    assert metrics["recall_PERSON"].mean == 0.5 and metrics["recall_PERSON"].n == 2
    assert metrics["touched_PERSON"].mean == 1.0 and metrics["typed_PERSON"].mean == 0.5
    assert metrics["recall_PERSON_plain"].mean == 1.0 and metrics["recall_PERSON_allcaps"].mean == 0.0
    assert metrics["recall_EMAIL_ADDRESS"].mean == 1.0
    lo, hi = wilson_interval(1, 2)
    assert (metrics["recall_PERSON"].ci_low, metrics["recall_PERSON"].ci_high) == (lo, hi)
    # PERSON: "Marker" is the base sentence's own (left out); "John Smith" is on a value, "Ask" is not
    assert metrics["precision_PERSON"].mean == 0.5 and metrics["precision_PERSON"].n == 2
    assert extra["precision"]["PERSON"]["from_base"] == 1
    assert extra["precision"]["PERSON"]["off_value_examples"][0]["detected"] == "Ask"
    # ORGANIZATION on the name: it redacts a value (precision) but under the wrong type (precision_typed)
    assert metrics["precision_ORGANIZATION"].mean == 1.0 and metrics["precision_typed_ORGANIZATION"].mean == 0.0
    assert metrics["precision_typed_EMAIL_ADDRESS"].mean == 1.0
    assert extra["missed_examples"]["PERSON/allcaps"][0]["value"] == "JANE DOE"
    assert extra["base_detections"]["per_type"] == {"PERSON": 1} and extra["base_detections"]["texts_with_any"] == 1
    with pytest.raises(InvalidParameterError):
        evaluate_injection(corpus, dets[:2], base)


def test_rate_and_mentions():
    m = rate(3, 4)
    assert m.mean == 0.75 and m.n == 4 and (m.ci_low, m.ci_high) == wilson_interval(3, 4)
    text = "Angela Merkel met Trump."
    metrics, extra = score_mentions([text], [[(0, 13, True), (18, 23, True)]], [[D(0, 13), D(18, 23, "ORG")]])
    assert metrics["recall_PERSON"].mean == 1.0 and metrics["typed_PERSON"].mean == 0.5
    assert extra["texts_all_mentions_covered"] == 1


# --------------------------------------------------------------------------- Presidio, for real (spaCy sm)
@pytest.fixture(scope="module")
def emails_and_names(builtin):
    """20 e-mail addresses and 20 plain names, injected into real sentences."""
    corpus = build_injection(n_per_entity=20, seed=0, base=builtin("rt-polarity"))
    keep = [i for i, (s,) in enumerate(corpus.spans) if s.entity == "EMAIL_ADDRESS"
            or (s.entity, s.variant) == ("PERSON", "plain")]
    return replace(corpus, texts=tuple(corpus.texts[i] for i in keep), spans=tuple(corpus.spans[i] for i in keep),
                   base_texts=tuple(corpus.base_texts[i] for i in keep),
                   base_index=tuple(corpus.base_index[i] for i in keep))


@pytest.mark.slow
def test_real_detector_finds_every_email_and_the_controls_do_not(emails_and_names):
    from veil.defenses.redaction.engine import Detector

    corpus = emails_and_names
    assert len(corpus) == 40
    full = Detector(model="sm")
    metrics, extra = evaluate_injection(corpus, full.detect(list(corpus.texts)), full.detect(list(corpus.base_texts)))
    assert metrics["recall_EMAIL_ADDRESS"].mean == 1.0 and metrics["typed_EMAIL_ADDRESS"].mean == 1.0
    assert metrics["recall_EMAIL_ADDRESS"].n == 20
    assert extra["recall"]["EMAIL_ADDRESS"]["detected_as"] == {"EMAIL_ADDRESS": 20}
    # negative controls: a detector restricted to IBANs releases every e-mail address; one restricted to PERSON
    # finds none as an e-mail address (its NER does take "Email joe88@yahoo.com" for a name now and then)
    ibans = Detector(model="sm", entities=["IBAN_CODE"])
    metrics, _ = evaluate_injection(corpus, ibans.detect(list(corpus.texts)), ibans.detect(list(corpus.base_texts)))
    assert metrics["recall_EMAIL_ADDRESS"].mean == 0.0 and metrics["recall_PERSON"].mean == 0.0
    persons = Detector(model="sm", entities=["PERSON"])
    metrics, _ = evaluate_injection(corpus, persons.detect(list(corpus.texts)),
                                    persons.detect(list(corpus.base_texts)))
    assert metrics["typed_EMAIL_ADDRESS"].mean == 0.0 and metrics["recall_EMAIL_ADDRESS"].mean < 1.0
    assert "precision_EMAIL_ADDRESS" not in metrics


@pytest.mark.slow
def test_record_written_reused_and_stale_refused(tmp_path):
    lines = []
    path = run_detection(tmp_path, model="sm", n_per_entity=1, seed=0, log=lines.append)
    assert path == tmp_path / "detection-sm-n1-seed0.json" and lines[-1] == f"wrote {path}"
    record = json.loads(path.read_text())
    assert record["method"] == "redaction" and record["experiment"] == "detection-sm-n1-seed0"
    assert record["config"]["corpus"]["n_values"] == 13 and record["config"]["detector"]["model"] == "sm"
    assert {"recall_PERSON", "recall_PERSON_allcaps", "recall_EMAIL_ADDRESS", "typed_IP_ADDRESS"} <= set(
        record["metrics"])
    stamp = path.stat().st_mtime_ns
    assert run_detection(tmp_path, model="sm", n_per_entity=1, seed=0, log=lines.append) == path
    assert path.stat().st_mtime_ns == stamp and lines[-1].startswith("kept ")
    record["config"]["corpus"]["base"] = "another-corpus"  # made under another configuration
    path.write_text(json.dumps(record))
    with pytest.raises(StaleResultError, match="corpus"):
        run_detection(tmp_path, model="sm", n_per_entity=1, seed=0)
    path.write_text("{")
    with pytest.raises(DataFormatError):
        run_detection(tmp_path, model="sm", n_per_entity=1, seed=0)
    run_detection(tmp_path, model="sm", n_per_entity=1, seed=0, force=True)
    assert json.loads(path.read_text())["config"]["corpus"]["base"] == "rt-polarity"


def test_bad_arguments_fail_before_work(tmp_path):
    with pytest.raises(UnknownNameError):
        run_detection(tmp_path, model="lg")
    with pytest.raises(InvalidParameterError):
        run_detection(tmp_path, n_per_entity=0)
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidParameterError):
        run_detection(tmp_path / "file")
    with pytest.raises(InvalidParameterError):
        run_news_recall(tmp_path, max_passages=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


@pytest.mark.slow
def test_news_recall_on_sm_is_circular_and_complete(tmp_path):
    """sm's own silver PERSON spans through Presidio on sm: every one is covered (the wiring, not the NER)."""
    path = run_news_recall(tmp_path, model="sm", max_passages=30, seed=0)
    record = json.loads(path.read_text())
    assert record["config"]["circular"].startswith("yes") and record["config"]["passages"]["scored"] == 30
    m = record["metrics"]["recall_PERSON"]
    assert m["n"] > 0 and m["mean"] == 1.0
