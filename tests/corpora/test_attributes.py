"""Readers of the paper's corpus formats, on small fixture files written here."""

from __future__ import annotations

import json

import numpy as np
import pytest

from veil.corpora.attributes_files import load_blog_authorship, load_trustpilot
from veil.errors import DataFormatError, ResourceMissingError


def _user(gender, birth, rating, year, title, parts):
    return {"user_id": "u", "gender": gender, "birth_year": birth,
            "reviews": [{"rating": rating, "title": title, "text": parts, "date": f"{year}-05-01T10:00:00"},
                        {"rating": 1, "title": "second", "text": ["ignored"], "date": f"{year}-06-01"}]}


def test_trustpilot_jsonl(tmp_path):
    users = [_user("F", 1990, 5, 2014, "Great", ["Fast delivery.", "Nice."]),   # 24: under 35
             _user("M", 1950, 2, 2014, "Slow", ["Took weeks."]),                # 64: over 45
             _user("M", 1975, 4, 2014, "Mid", ["Dropped."]),                     # 39: dropped (35-45)
             {"gender": None, "birth_year": 1980, "reviews": [{"rating": 3}]},  # no gender: skipped
             _user("F", 1960, 1, 2015, "Bad", "one string"),                    # 55
             _user("M", 1995, 3, 2015, "", ["ok"])]                             # 20
    path = tmp_path / "tp.jsonl"
    path.write_text("\n".join(json.dumps(u) for u in users) + "\n\n", encoding="utf-8")
    c = load_trustpilot(path)
    assert c.texts == ["Great Fast delivery. Nice.", "Slow Took weeks.", "Bad one string", "ok"]
    assert c.labels.tolist() == [4, 1, 0, 2]
    assert c.private.names == ("gender=F", "age<35")
    assert c.private.Z.tolist() == [[1, 1], [0, 0], [1, 0], [0, 1]]
    assert set(c.splits.tolist()) <= {"dev", "test", "train"} and len(c) == 4
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    with pytest.raises(DataFormatError, match="bad.jsonl:1"):
        load_trustpilot(bad)
    with pytest.raises(ResourceMissingError):
        load_trustpilot(tmp_path / "missing.jsonl")
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps(_user("F", 1990, 5, 2014, "a", ["b"])) + "\n"
                   + json.dumps(_user("F", 1950, 5, 2014, "c", ["d"])) + "\n")
    with pytest.raises(DataFormatError, match="one value only"):
        load_trustpilot(one)


def test_blog_authorship_xml(tmp_path):
    def blog(name, posts):
        body = "".join(f"<date>01,May,2004</date>\n<post>\n{p}\n</post>\n" for p in posts)
        (tmp_path / name).write_text(f"<Blog>\n{body}</Blog>\n", encoding="utf-8")

    blog("1.female.15.Student.Leo.xml", ["I love school &amp; music", "  "])
    blog("2.male.35.Technology.Aries.xml", ["Servers & <b>code</b> all day", "Second post"])
    blog("3.male.24.Arts.Leo.xml", ["dropped: age 24"])
    blog("4.female.40.indUnk.Leo.xml", ["dropped: unknown industry"])
    blog("5.male.16.Student.Leo.xml", ["homework"])
    c = load_blog_authorship(tmp_path)
    assert c.texts == ["I love school & music", "Servers & <b>code</b> all day", "Second post", "homework"]
    assert c.label_names == ("Student", "Technology")
    assert c.labels.tolist() == [0, 1, 1, 0]
    assert c.private.Z.tolist() == [[1, 1], [0, 0], [0, 0], [0, 1]]
    assert np.isin(c.splits, ["train", "dev", "test"]).all()
    (tmp_path / "notes.xml").write_text("<Blog></Blog>")
    with pytest.raises(DataFormatError, match="expected <id>"):
        load_blog_authorship(tmp_path)
