"""Readers for the attribute corpora of Coavoux et al. (2018), for users who have the files (none ship offline).

* :func:`load_trustpilot` reads Trustpilot-style JSON lines (Hovy et al. 2015): one user per line,
  ``{"gender": "F"|"M", "birth_year": 1980, "reviews": [{"rating": 1-5, "title": str, "text": [str, ...],
  "date": "YYYY-MM-DD..."}]}``. As in the authors' reader: users without gender or birth year are skipped; the
  user's first review is the example; text = title + review parts; y = rating - 1 (5 classes); z = {female,
  under 35} where age = review year - birth year, and ages 35-45 are dropped (the paper bins "under 35" vs
  "over 45"). Splits: 80/10/10 from a seeded shuffle.
* :func:`load_blog_authorship` reads the blog authorship corpus (Schler et al. 2006): files named
  ``<id>.<gender>.<age>.<industry>.<sign>.xml`` holding ``<post>`` elements (not well-formed XML, so read with a
  regular expression). z = {female, age group}: ages 13-17 ("under 20") vs 33 and over ("over 30"), other ages
  dropped. Departure: the paper's y is an LDA topic (10 topics, posts with one topic > 0.8); veil uses the
  blogger's industry from the file name (``label="industry"``) so that no topic model is needed; posts whose
  industry is ``indUnk`` are dropped.

Both return :class:`~veil.corpora.attributes.AttributeCorpus` with binary private variables (``kind="attributes"``).
"""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

import numpy as np

from veil.corpora.attributes import AttributeCorpus, PrivateVariables
from veil.errors import DataFormatError, ResourceMissingError

__all__ = ["load_trustpilot", "load_blog_authorship"]


def _splits(n: int, seed: int) -> np.ndarray:
    order = np.random.default_rng(seed).permutation(n)
    splits = np.empty(n, dtype=object)
    n_test, n_dev = n // 10, n // 10
    splits[order[:n_test]] = "test"
    splits[order[n_test:n_test + n_dev]] = "dev"
    splits[order[n_test + n_dev:]] = "train"
    return splits


def _binary(columns: dict[str, list[int]], n: int) -> PrivateVariables:
    names = list(columns)
    Z = np.array([columns[k] for k in names], dtype=np.float32).T.reshape(n, len(names))
    for k, col in columns.items():
        if len(set(col)) < 2:
            raise DataFormatError(f"private variable {k!r} takes one value only in this file; an attacker has "
                                  "nothing to predict: give a file with both values")
    return PrivateVariables(Z, tuple(names), tuple((k, (j,)) for j, k in enumerate(names)), "attributes")


def _check_path(path: str | os.PathLike, what: str) -> Path:
    path = Path(path)
    if not path.exists():
        raise ResourceMissingError(f"{what} {path}", "", message=f"{what} {path} does not exist; give the path of "
                                   f"your copy (veil cannot download it)")
    return path


def load_trustpilot(path: str | os.PathLike, *, seed: int = 10, name: str | None = None) -> AttributeCorpus:
    """Trustpilot-style JSON lines -> (text, rating, {female, under 35}) (module docstring)."""
    path = _check_path(path, "Trustpilot file")
    texts, labels, female, young = [], [], [], []
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                user = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataFormatError(f"{path}:{line_no}: not JSON ({exc.msg}); one user object per line") from None
            gender, birth, reviews = user.get("gender"), user.get("birth_year"), user.get("reviews") or []
            if gender not in ("F", "M") or birth in (None, "") or not reviews:
                continue
            review = reviews[0]
            try:
                age = int(str(review["date"])[:4]) - int(birth)
                rating = int(review["rating"])
            except (KeyError, ValueError, TypeError):
                raise DataFormatError(f"{path}:{line_no}: a review needs 'rating' and 'date' (YYYY-...) and the user "
                                      "an integer 'birth_year'") from None
            if 35 <= age <= 45:
                continue
            if not 1 <= rating <= 5:
                raise DataFormatError(f"{path}:{line_no}: rating must be 1-5, got {rating}")
            parts = review.get("text") or []
            parts = [parts] if isinstance(parts, str) else parts
            texts.append(" ".join([review.get("title") or "", *parts]).strip())
            labels.append(rating - 1)
            female.append(int(gender == "F"))
            young.append(int(age < 35))
    if not texts:
        raise DataFormatError(f"{path}: no user with gender, birth year and a review outside ages 35-45")
    private = _binary({"gender=F": female, "age<35": young}, len(texts))
    return AttributeCorpus(name or path.stem, texts, np.asarray(labels), ("1", "2", "3", "4", "5"),
                           _splits(len(texts), seed), private, {"format": "trustpilot-jsonl"})


_BLOG_NAME = re.compile(r"^(\d+)\.(male|female)\.(\d+)\.([^.]+)\.([^.]+)\.xml$", re.IGNORECASE)
_POST = re.compile(r"<post>(.*?)</post>", re.DOTALL | re.IGNORECASE)


def load_blog_authorship(folder: str | os.PathLike, *, seed: int = 10, name: str | None = None,
                         max_posts_per_blog: int | None = None) -> AttributeCorpus:
    """Blog authorship XML files -> (post, industry, {female, under 20}) (module docstring)."""
    folder = _check_path(folder, "blog authorship folder")
    files = sorted(folder.glob("*.xml"))
    texts, industries, female, young = [], [], [], []
    for f in files:
        m = _BLOG_NAME.match(f.name)
        if not m:
            raise DataFormatError(f"{f.name}: expected <id>.<gender>.<age>.<industry>.<sign>.xml")
        gender, age, industry = m.group(2).lower(), int(m.group(3)), m.group(4)
        if industry == "indUnk" or not (age <= 17 or age >= 33):
            continue
        raw = f.read_bytes().decode("utf-8", errors="replace")
        posts = [html.unescape(p).strip() for p in _POST.findall(raw)]
        for post in [p for p in posts if p][:max_posts_per_blog]:
            texts.append(" ".join(post.split()))
            industries.append(industry)
            female.append(int(gender == "female"))
            young.append(int(age <= 17))
    if not texts:
        raise DataFormatError(f"{folder}: no posts by bloggers aged <= 17 or >= 33 with a known industry")
    names = tuple(sorted(set(industries)))
    labels = np.array([names.index(i) for i in industries])
    private = _binary({"gender=female": female, "age<20": young}, len(texts))
    return AttributeCorpus(name or folder.name, texts, labels, names, _splits(len(texts), seed), private,
                           {"format": "blog-authorship-xml", "label": "industry (the paper: LDA topic)"})
