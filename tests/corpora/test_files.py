"""Tests of :func:`veil.corpora.files.load_file`: every format, splits, and every error it reports."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import numpy as np
import pytest

from veil.corpora.base import Corpus, hash_split
from veil.corpora.files import FORMATS, SUFFIXES, load_file
from veil.errors import (DataFormatError, DataWarning, InvalidParameterError, InvalidTypeError,
                         ResourceMissingError, UnknownNameError)

REVIEWS = [
    ("The film was a delight from start to finish.", "pos"),
    ("I walked out after twenty minutes.", "neg"),
    ("A warm, funny and clever story.", "pos"),
    ("The plot made no sense at all.", "neg"),
    ("Every actor gave the best performance of their career.", "pos"),
    ("Two hours of my life I will never get back.", "neg"),
]


def write(tmp_path: Path, name: str, content: str | bytes, encoding: str = "utf-8") -> Path:
    path = tmp_path / name
    if isinstance(content, str):
        content = content.encode(encoding)
    path.write_bytes(content)
    return path


def csv_of(rows: list[tuple[str, str]]) -> str:
    return "text,label\n" + "".join(f'"{t}",{y}\n' for t, y in rows)


# ------------------------------------------------------------------------ CSV
def test_csv_loads_texts_labels_splits_and_provenance(tmp_path):
    path = write(tmp_path, "reviews.csv", csv_of(REVIEWS))
    corpus = load_file(path, label="label")
    assert corpus.name == "reviews"
    assert corpus.texts == [t for t, _ in REVIEWS]
    assert corpus.task == "classification"
    assert corpus.label_names == ("neg", "pos")
    assert corpus.labels.tolist() == [1, 0, 1, 0, 1, 0]
    assert corpus.splits.tolist() == [hash_split(t) for t, _ in REVIEWS]
    (prov,) = corpus.provenance
    assert (prov.package, prov.registry, prov.license, prov.version) == ("reviews.csv", "file", "user data", "")
    assert prov.file == str(path.resolve())
    from veil._io import sha256_file
    assert prov.sha256 == sha256_file(path)
    assert corpus.stats["raw_rows"] == 6 and corpus.stats["duplicates_removed"] == 0


def test_csv_quoted_multiline_fields_attributes_and_line_numbers(tmp_path):
    content = (
        "text,label,age\n"
        '"A warm, funny and clever story.",pos,34\n'
        '"The acting was superb.\nI cried twice, and so did my ""tough"" brother.",pos,51\n'
        "\n"
        '"",neg,28\n'
    )
    path = write(tmp_path, "multi.csv", content)
    with pytest.raises(DataFormatError, match=r"line 6\).*drop_empty=True"):
        load_file(path, label="label")
    with pytest.warns(DataWarning, match="dropped 1 row"):
        corpus = load_file(path, label="label", attributes=["age"], drop_empty=True)
    assert corpus.texts[1] == 'The acting was superb.\nI cried twice, and so did my "tough" brother.'
    assert corpus.attributes == {"age": ["34", "51"]}
    assert corpus.stats["dropped_empty_text"] == 1
    assert corpus.labels.tolist() == [0, 0] and corpus.label_names == ("pos",)


def test_csv_text_longer_than_the_csv_modules_default_limit(tmp_path):
    long_text = "It was the best of times, it was the worst of times. " * 3000  # ~160 KB > 128 KiB
    before = csv.field_size_limit()
    corpus = load_file(write(tmp_path, "novel.csv", f'text\n"{long_text}"\n'))
    assert corpus.texts == [long_text]
    assert csv.field_size_limit() == before  # the caller's setting is restored


def test_csv_custom_delimiter_and_unterminated_quote(tmp_path):
    path = write(tmp_path, "semi.csv", "text;label\nThe soup was cold;neg\nThe staff were kind;pos\n")
    assert load_file(path, label="label", delimiter=";").texts == ["The soup was cold", "The staff were kind"]
    broken = write(tmp_path, "broken.csv", 'text,label\n"The soup was cold,neg\nThe staff were kind,pos\n')
    with pytest.raises(DataFormatError, match="cannot parse"):
        load_file(broken, label="label")


def test_regression_and_classification_inference(tmp_path):
    scores = ["0.8", "4.25", "2.5", "3.75", "1.0", "0.2"]
    path = write(tmp_path, "sts.csv", csv_of([(t, s) for (t, _), s in zip(REVIEWS, scores)]))
    corpus = load_file(path, label="label")
    assert corpus.task == "regression" and corpus.label_names is None
    assert corpus.labels.dtype == np.float64 and corpus.labels.tolist() == [float(s) for s in scores]

    ids = write(tmp_path, "ids.csv", csv_of([(t, "1" if y == "pos" else "0") for t, y in REVIEWS]))
    corpus = load_file(ids, label="label")
    assert corpus.task == "classification" and corpus.label_names == ("0", "1")
    assert corpus.labels.tolist() == [1, 0, 1, 0, 1, 0]
    assert load_file(ids, label="label", task="regression").labels.dtype == np.float64
    ordered = load_file(ids, label="label", label_names=["1", "0"])
    assert ordered.labels.tolist() == [0, 1, 0, 1, 0, 1]


# ---------------------------------------------------------------------- JSONL
def test_jsonl_loads_with_blank_lines_json_labels_and_attributes(tmp_path):
    lines = [json.dumps({"text": t, "label": int(y == "pos"), "author": f"user{i}"} | ({"age": 30 + i} if i else {}))
             for i, (t, y) in enumerate(REVIEWS)]
    path = write(tmp_path, "reviews.jsonl", "\n".join(lines[:3]) + "\n\n  \n" + "\n".join(lines[3:]) + "\n")
    corpus = load_file(path, label="label", attributes=("author", "age"))
    assert corpus.texts == [t for t, _ in REVIEWS]
    assert corpus.task == "classification" and corpus.labels.tolist() == [1, 0, 1, 0, 1, 0]
    assert corpus.attributes["author"] == [f"user{i}" for i in range(6)]
    assert corpus.attributes["age"] == [None, 31, 32, 33, 34, 35]
    assert load_file(path.rename(tmp_path / "reviews.ndjson")).task is None


def test_jsonl_malformed_lines_name_the_line(tmp_path):
    good = json.dumps({"text": "The service was quick."})
    path = write(tmp_path, "bad.jsonl", f"{good}\n\n{{'text': 'single quotes'}}\n")
    with pytest.raises(DataFormatError, match="line 3 is not valid JSON"):
        load_file(path)
    path = write(tmp_path, "list.jsonl", f'{good}\n["The service was quick.", "pos"]\n')
    with pytest.raises(DataFormatError, match="line 2 holds a JSON list, not an object"):
        load_file(path)
    path = write(tmp_path, "number.jsonl", f'{good}\n{{"text": 42}}\n')
    with pytest.raises(DataFormatError, match="line 2: text 'text' is a int"):
        load_file(path)
    path = write(tmp_path, "nested.jsonl", '{"text": "The service was quick.", "label": ["pos"]}\n')
    with pytest.raises(DataFormatError, match="line 1: label"):
        load_file(path, label="label")


# ------------------------------------------------------------------------ TSV
SST2_TRAIN = ("sentence\tlabel\n"
              "hide new secretions from the parental units \t0\n"
              'the "best" film of the year , without a doubt \t1\n'
              "contains no wit , only labored gags \t0\n")


def test_tsv_glue_sst2_keeps_quotes_and_loads_unlabelled_test_files(tmp_path):
    corpus = load_file(write(tmp_path, "train.tsv", SST2_TRAIN), text="sentence", label="label")
    assert corpus.texts[1] == 'the "best" film of the year , without a doubt '
    assert corpus.labels.tolist() == [0, 1, 0] and corpus.label_names == ("0", "1")
    test = write(tmp_path, "test.tsv", "index\tsentence\n0\tuneasy mishmash of styles and genres .\n"
                                       "1\tthis film 's relationship to actual tension is a bit unfortunate .\n")
    corpus = load_file(test, text="sentence", split="test")
    assert corpus.labels is None and corpus.task is None
    assert corpus.splits.tolist() == ["test", "test"]


def test_tsv_sentence_pairs_become_two_sentence_documents(tmp_path):
    content = ("index\tquestion\tsentence\tlabel\n"
               "0\tWhen did the war end?\tThe war ended in 1945.\tentailment\n"
               "1\tWho wrote the novel?\tThe novel was adapted for the stage.\tnot_entailment\n")
    corpus = load_file(write(tmp_path, "dev.tsv", content), text=("question", "sentence"), label="label",
                       pair_separator=" [SEP] ")
    assert corpus.texts[0] == "When did the war end? [SEP] The war ended in 1945."
    assert corpus.documents == [["When did the war end?", "The war ended in 1945."],
                                ["Who wrote the novel?", "The novel was adapted for the stage."]]
    assert corpus.label_names == ("entailment", "not_entailment")


def test_tsv_cola_without_header_by_position(tmp_path):
    content = ("gj04\t1\t\tOur friends won't buy this analysis, let alone the next one we propose.\n"
               "gj04\t0\t*\tThey drank the pub.\n"
               "gj04\t1\t\tThe sailors rode the breeze clear of the rocks.\n")
    path = write(tmp_path, "train.tsv", content)
    corpus = load_file(path, header=False, text=3, label=1, attributes=[0])
    assert corpus.texts[1] == "They drank the pub."
    assert corpus.labels.tolist() == [1, 0, 1]
    assert corpus.attributes == {"column_0": ["gj04"] * 3}
    with pytest.raises(InvalidParameterError, match="header=False.*by position"):
        load_file(path, header=False, text="sentence")
    with pytest.raises(DataFormatError, match="column 7 is out of range.*positions 0 to 3"):
        load_file(path, header=False, text=7)


def test_tsv_row_with_a_stray_tab_names_the_line(tmp_path):
    path = write(tmp_path, "train.tsv", SST2_TRAIN + "a tab\tinside the text\t1\n")
    with pytest.raises(DataFormatError, match="line 5 has 3 fields but the header has 2"):
        load_file(path, text="sentence", label="label")


# -------------------------------------------------------------------- CoNLL-U
CONLLU = """\
# sent_id = 1
# text = I can't wait.
# sentiment = pos
2-3\tcan't\t_\t_\t_\t_\t_\t_\t_\t_
1\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_
2\tca\tcan\tAUX\tMD\t_\t3\taux\t_\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_
4\twait\twait\tVERB\tVB\t_\t0\troot\t_\tSpaceAfter=No
5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_

# sent_id = 2
# sentiment = neg
1\tShe\tshe\tPRON\tPRP\t_\t2\tnsubj\t_\t_
2\tleft\tleave\tVERB\tVBD\t_\t0\troot\t_\tSpaceAfter=No
2.1\tleft\tleave\tVERB\tVBD\t_\t_\t_\t0:root\t_
3\t,\t,\tPUNCT\t,\t_\t2\tpunct\t_\t_
4\tsadly\tsadly\tADV\tRB\t_\t2\tadvmod\t_\tSpaceAfter=No
5\t.\t.\tPUNCT\t.\t_\t2\tpunct\t_\t_
"""


def test_conllu_text_tree_attributes_spaceafter_and_multiword(tmp_path):
    corpus = load_file(write(tmp_path, "ewt.conllu", CONLLU), label="sentiment", attributes=["sent_id"])
    assert corpus.texts == ["I can't wait.", "She left, sadly."]  # second from forms: SpaceAfter=No, 2.1 skipped
    assert corpus.label_names == ("neg", "pos") and corpus.labels.tolist() == [1, 0]
    attrs = corpus.attributes
    assert set(attrs) == {"tokens", "upos", "xpos", "head", "deprel", "sent_id"}
    assert attrs["tokens"][0] == ["I", "ca", "n't", "wait", "."]
    assert attrs["upos"][1] == ["PRON", "VERB", "PUNCT", "ADV", "PUNCT"]
    assert attrs["xpos"][0][:2] == ["PRP", "MD"]
    assert attrs["head"] == [[3, 3, 4, 0, 4], [2, 0, 2, 2, 2]]
    assert attrs["deprel"][0] == ["nsubj", "aux", "advmod", "root", "punct"]
    assert attrs["sent_id"] == ["1", "2"]
    corpus.save(tmp_path / "saved")
    back = Corpus.load_folder(tmp_path / "saved")
    assert back.attributes == corpus.attributes and back.texts == corpus.texts


def test_conllu_surface_text_uses_the_multiword_form(tmp_path):
    content = ("1-2\tdel\t_\t_\t_\t_\t_\t_\t_\t_\n"
               "1\tde\tde\tADP\t_\t_\t3\tcase\t_\t_\n"
               "2\tel\tel\tDET\t_\t_\t3\tdet\t_\t_\n"
               "3\tmar\tmar\tNOUN\t_\t_\t0\troot\t_\t_\n")
    corpus = load_file(write(tmp_path, "es.conllu", content))
    assert corpus.texts == ["del mar"]
    assert corpus.attributes["tokens"] == [["de", "el", "mar"]]


@pytest.mark.parametrize(("line", "match"), [
    ("3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_", r"line 7 has 9 tab-separated fields.*need 10"),
    ("3 n't not PART RB _ 4 advmod _ _", r"line 7 has 1 tab-separated fields"),
    ("3\tn't\tnot\tPART\tRB\t_\tfour\tadvmod\t_\t_", r"line 7: HEAD 'four' is not an integer"),
    ("3\tn't\tnot\tPART\tRB\t_\t9\tadvmod\t_\t_", r"line 7: HEAD 9 points past"),
    ("7\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_", r"line 7: token ID '7' should be 3"),
])
def test_conllu_malformed_token_lines_name_the_line(tmp_path, line, match):
    content = CONLLU.replace("3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_", line)
    with pytest.raises(DataFormatError, match=match):
        load_file(write(tmp_path, "bad.conllu", content))


def test_conllu_missing_label_comment_and_options(tmp_path):
    content = CONLLU.replace("# sentiment = neg\n", "")
    path = write(tmp_path, "ewt.conllu", content)
    with pytest.raises(DataFormatError, match=r"no value in label column 'sentiment' \(line 11\)"):
        load_file(path, label="sentiment")
    with pytest.raises(DataFormatError, match="no column 'topic'.*sentence comment keys.*'sent_id'"):
        load_file(path, label="topic")
    with pytest.raises(InvalidParameterError, match="only apply to csv and tsv"):
        load_file(path, header=False)


# --------------------------------------------------------------------- splits
def test_splits_depend_only_on_the_text(tmp_path):
    rows = [(f"Review number {i}: the {w} was {a}.", "pos" if i % 2 else "neg")
            for i, (w, a) in enumerate((w, a) for w in ("plot", "music", "cast", "ending", "pacing")
                                       for a in ("great", "dull", "moving", "odd", "flat", "bright"))]
    first = load_file(write(tmp_path, "a.csv", csv_of(rows)), label="label")
    again = load_file(tmp_path / "a.csv", label="label")
    assert first.splits.tolist() == again.splits.tolist()
    shuffled = rows[:]
    random.Random(7).shuffle(shuffled)
    other = load_file(write(tmp_path, "b.csv", csv_of(shuffled)), label="label")
    split_of = dict(zip(other.texts, other.splits.tolist()))
    assert {t: s for t, s in zip(first.texts, first.splits.tolist())} == split_of
    assert len(set(split_of.values())) > 1  # 30 texts: not all in one split


def test_explicit_split_column_and_whole_file_split(tmp_path):
    content = "text,label,part\n" + "".join(
        f'"{t}",{y},{p}\n' for (t, y), p in zip(REVIEWS, ["train", "Validation", "TEST", "dev", "val", "train"]))
    path = write(tmp_path, "parts.csv", content)
    corpus = load_file(path, label="label", split="part")
    assert corpus.splits.tolist() == ["train", "dev", "test", "dev", "dev", "train"]
    assert set(load_file(path, label="label", split="dev").splits.tolist()) == {"dev"}
    bad = write(tmp_path, "bad.csv", content.replace("TEST", "holdout"))
    with pytest.raises(DataFormatError, match="line 4: split 'holdout' in column 'part' is not one of"):
        load_file(bad, label="label", split="part")


# ---------------------------------------------------------- warnings and labels
def test_duplicate_texts_are_removed_with_a_warning(tmp_path):
    rows = REVIEWS + [REVIEWS[0], (REVIEWS[1][0], "pos")]
    with pytest.warns(DataWarning, match=r"removed 2 exact duplicate text\(s\).*1 of them with a different label"):
        corpus = load_file(write(tmp_path, "dups.csv", csv_of(rows)), label="label")
    assert len(corpus) == 6 and corpus.stats["duplicates_removed"] == 2


def test_mixed_label_types_name_the_line(tmp_path):
    rows = [(t, "1" if y == "pos" else "0") for t, y in REVIEWS]
    rows[4] = (rows[4][0], "positive")
    path = write(tmp_path, "mixed.csv", csv_of(rows))
    with pytest.raises(DataFormatError, match=r"mixed label types in column 'label'.*text labels on line 6\b"):
        load_file(path, label="label")
    assert load_file(path, label="label", task="classification").label_names == ("0", "1", "positive")
    with pytest.raises(DataFormatError, match=r"task='regression' needs numeric labels.*'positive' \(line 6\)"):
        load_file(path, label="label", task="regression")


def test_missing_labels_error_or_drop(tmp_path):
    path = write(tmp_path, "gaps.csv", csv_of([(t, "" if i in (1, 3) else y) for i, (t, y) in enumerate(REVIEWS)]))
    with pytest.raises(DataFormatError, match=r"2 row\(s\) have no value in label column 'label' \(line 3, 5\)"):
        load_file(path, label="label")
    with pytest.raises(DataFormatError, match=r"no value in label column 'label' \(line 3, 5\)"):
        load_file(path, label="label", task="classification")  # assemble alone would make a class ''
    with pytest.warns(DataWarning, match="2 row.s. with a missing label"):
        corpus = load_file(path, label="label", drop_empty=True)
    assert corpus.texts == [REVIEWS[i][0] for i in (0, 2, 4, 5)]
    assert corpus.stats["dropped_missing_label"] == 2
    assert load_file(path).labels is None


# --------------------------------------------------------------------- errors
def test_missing_file_directory_empty_and_header_only(tmp_path):
    with pytest.raises(ResourceMissingError, match=r"no data file at .*nope\.csv; check the path"):
        load_file(tmp_path / "nope.csv")
    with pytest.raises(FileNotFoundError):
        load_file(tmp_path / "nope.csv")
    folder = tmp_path / "data.csv"
    folder.mkdir()
    with pytest.raises(DataFormatError, match="is a folder"):
        load_file(folder)
    with pytest.raises(DataFormatError, match=r"is empty \(0 bytes\)"):
        load_file(write(tmp_path, "empty.csv", ""))
    with pytest.raises(DataFormatError, match=r"no data rows \(only a header row\)"):
        load_file(write(tmp_path, "header.csv", "text,label\n"))
    with pytest.raises(DataFormatError, match="no data rows"):
        load_file(write(tmp_path, "blank.jsonl", "\n  \n"))


def test_non_utf8_bytes_are_reported_with_a_fix(tmp_path):
    content = "text,label\nThe café was lovely,pos\nThe crème brûlée was burnt,neg\n"
    path = write(tmp_path, "latin.csv", content, encoding="latin-1")
    with pytest.raises(DataFormatError, match=r'byte 0xe9 at byte offset 18 \(line 2\).*encoding="cp1252"'):
        load_file(path, label="label")
    assert load_file(path, label="label", encoding="latin-1").texts[0] == "The café was lovely"
    with pytest.raises(DataFormatError, match='encoding="utf-16"'):
        load_file(write(tmp_path, "wide.csv", content, encoding="utf-16"))
    with pytest.raises(InvalidParameterError, match="unknown encoding 'klingon'"):
        load_file(path, encoding="klingon")
    bom = load_file(write(tmp_path, "bom.csv", content, encoding="utf-8-sig"), label="label")
    assert bom.texts[0] == "The café was lovely"


def test_missing_column_lists_the_available_ones(tmp_path):
    path = write(tmp_path, "reviews.csv", csv_of(REVIEWS))
    with pytest.raises(DataFormatError, match=r"no column 'sentence' for text=; available columns: 'text', 'label'"):
        load_file(path, text="sentence")
    with pytest.raises(DataFormatError, match=r"no column 'lable'.*did you mean 'label'\?"):
        load_file(path, label="lable")
    with pytest.raises(DataFormatError, match="pass label=None to load without labels"):
        load_file(path, label="sentiment")
    with pytest.raises(DataFormatError, match=r"available keys: 'text'"):
        load_file(write(tmp_path, "r.jsonl", '{"text": "Lovely."}\n'), attributes=["age"])
    dup = write(tmp_path, "dup.csv", "text,label,label\n\"A quiet, kind film.\",pos,neg\n")
    with pytest.raises(DataFormatError, match="'label' appears more than once"):
        load_file(dup, label="label")
    with pytest.raises(DataFormatError, match="'label' appears more than once"):
        load_file(dup, label=2)
    assert load_file(path, text=0, label=1).label_names == ("neg", "pos")  # positions work with a header too
    with pytest.raises(DataFormatError, match="no column 'validation'.*split='train', 'dev' or 'test'"):
        load_file(path, split="validation")


def test_unknown_formats(tmp_path):
    path = write(tmp_path, "notes.txt", "The food was fine.\n")
    with pytest.raises(DataFormatError, match=r"suffix '\.txt'; pass format= one of: csv \(\.csv\), jsonl"):
        load_file(path)
    with pytest.raises(DataFormatError, match="format='jsonl'"):
        load_file(write(tmp_path, "data.json", "[]"))
    with pytest.raises(UnknownNameError, match="valid file format names: conllu, csv, jsonl, tsv"):
        load_file(path, format="xlsx")
    assert load_file(write(tmp_path, "notes.TXT", "text\nThe food was fine.\n"), format="csv").texts == [
        "The food was fine."]
    assert set(FORMATS) == {"csv", "jsonl", "tsv", "conllu"} and SUFFIXES[".ndjson"] == "jsonl"


def test_invalid_arguments(tmp_path):
    path = write(tmp_path, "reviews.csv", csv_of(REVIEWS))
    jsonl = write(tmp_path, "r.jsonl", '{"text": "Lovely."}\n')
    with pytest.raises(InvalidTypeError, match="path must be a file path"):
        load_file(42)
    with pytest.raises(InvalidTypeError, match="text must be a column"):
        load_file(path, text=1.5)
    with pytest.raises(InvalidTypeError, match="attributes must be a list"):
        load_file(path, attributes="label")
    with pytest.raises(InvalidParameterError, match="task must be"):
        load_file(path, label="label", task="ranking")
    with pytest.raises(InvalidParameterError, match="label_names only apply to classification"):
        load_file(write(tmp_path, "sts.csv", csv_of([(t, f"{i}.5") for i, (t, _) in enumerate(REVIEWS)])),
                  label="label", label_names=["low", "high"])
    with pytest.raises(InvalidParameterError, match="need a label column"):
        load_file(path, task="regression")
    with pytest.raises(InvalidParameterError, match="single character"):
        load_file(path, delimiter=";;")
    with pytest.raises(InvalidParameterError, match="column positions only work for csv and tsv"):
        load_file(jsonl, text=0)
    with pytest.raises(InvalidParameterError, match="only apply to csv and tsv"):
        load_file(jsonl, delimiter=",")
