"""PII redaction with Presidio: every operator removes what is detected, pseudonyms are consistent, the hash is
keyed, overlapping detections are merged, bad input is a typed error, and the whole path runs with the network
cut off."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import warnings

import pytest

from veil.defenses.redaction import Detection, Detector, PresidioRedaction
from veil.defenses.redaction.engine import merge_detections
from veil.defenses.redaction.surrogates import Pseudonymizer, first_names, surnames
from veil.errors import InvalidParameterError, InvalidTypeError, PrivacyLeakWarning, UnknownNameError

CONTACTS = [
    "Write to anna.berg@example.org or call 212-555-0187 before Friday.",
    "My number is (415) 555-0134 and my mail is k.osei@mail.example.com.",
    "Reach the desk at +44 20 7946 0958 or desk-help@example.co.uk.",
]
EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
PHONE = re.compile(r"\d{3}[-) ]+\d{3,4}[- ]\d{4}")


@pytest.fixture(scope="module")
def found():
    return Detector().detect(CONTACTS)


@pytest.mark.parametrize("operator", ["type", "mask", "hash", "pseudonym"])
def test_every_operator_removes_the_mail_addresses_and_phone_numbers(operator, found):
    out = PresidioRedaction(operator=operator).redact(CONTACTS, detections=found)
    for original, red in zip(CONTACTS, out):
        for value in EMAIL.findall(original) + PHONE.findall(original):
            assert value not in red.text, (operator, value, red.text)
        for span in red.spans:  # the owner's view lines up with both texts
            assert original[span.start:span.end] == span.value
            assert red.text[span.new_start:span.new_end] not in ("", span.value)


def test_type_and_mask_say_what_they_release():
    red = PresidioRedaction(operator="type").redact(["Mail jo@example.com now."])[0]
    assert red.text == "Mail <EMAIL_ADDRESS> now."
    masked = PresidioRedaction(operator="mask").redact(["Mail jo@example.com now."])[0]
    assert masked.text == "Mail " + "*" * len("jo@example.com") + " now."  # mask releases the length


def test_pseudonyms_are_consistent_within_a_document_and_never_the_real_name():
    text = "John Smith met Mary Jones. Later Smith called JOHN SMITH's office and John Smith answered."
    defense = PresidioRedaction(operator="pseudonym")
    red = defense.redact([text])[0]
    surrogate = {s.value: red.text[s.new_start:s.new_end] for s in red.spans if s.entity == "PERSON"}
    assert "John Smith" in surrogate
    mentions = [red.text[s.new_start:s.new_end] for s in red.spans if s.value == "John Smith"]
    assert len(mentions) >= 2 and len(set(mentions)) == 1
    first, last = surrogate["John Smith"].split()
    if "Smith" in surrogate:  # a lone surname keeps the surname of the full name
        assert surrogate["Smith"] == last
    if "JOHN SMITH" in surrogate:
        assert surrogate["JOHN SMITH"] == f"{first} {last}".upper()
    # as whole words: a drawn surrogate may be "Johnny" or "Smithson"
    assert not re.search(r"\bJohn\b", red.text) and not re.search(r"\bSmith\b", red.text)


def test_release_scope_links_documents_and_document_scope_does_not_carry_the_mapping():
    p = Pseudonymizer(rng=3)
    a = p("PERSON", "Ada Lovelace")
    assert p("PERSON", "Ada Lovelace") == a and p("PERSON", "Lovelace") == a.split()[1]
    p.reset()
    assert len(p) == 0
    release = PresidioRedaction(operator="pseudonym", scope="release")
    texts = ["Ada Lovelace wrote the notes.", "The notes of Ada Lovelace were printed."]
    outs = release.redact(texts)
    names = [o.text[s.new_start:s.new_end] for o in outs for s in o.spans if s.entity == "PERSON"]
    assert len(names) == 2 and names[0] == names[1]


def test_surrogates_come_from_the_public_lists_and_avoid_the_real_token():
    p = Pseudonymizer(rng=0)
    firsts, lasts = set(first_names()), set(surnames())
    for _ in range(200):
        p.reset()
        out = p("PERSON", "James Smith")
        f, s = out.split()
        assert f in firsts and s in lasts and f != "James" and s != "Smith"
    assert p("PHONE_NUMBER", "212-555-0187") != "212-555-0187"
    assert re.fullmatch(r"\d{3}-\d{3}-\d{4}", p("PHONE_NUMBER", "212-555-0187"))
    assert p("EMAIL_ADDRESS", "a@b.org").endswith((".com", ".org", ".net")) and "@example." in p("EMAIL_ADDRESS",
                                                                                                   "a@b.org")


def test_a_surrogate_is_never_a_reserved_real_token_even_when_few_names_are_left():
    p = Pseudonymizer(rng=0)
    pool = first_names()
    p.reserve(f"{n} Doe" for n in pool[:-1])  # every public first name but one is a real name of the scope
    for _ in range(20):
        assert p("PERSON", "Zed Quill").split()[0] == pool[-1]
        p._tokens.clear()  # a new draw for the same real name, the reserved tokens kept
    p.reserve([pool[-1]])
    word = p("PERSON", "Yan Roe").split()[0]  # no public name is left: random letters, never a real one
    assert word.casefold() not in {n.casefold() for n in pool} and word.isalpha()
    p.reset()
    assert p("PERSON", "Zed Quill").split()[0] in pool  # a new scope reserves nothing


@pytest.mark.parametrize("scope", ["document", "release"])
def test_no_surrogate_is_a_real_name_of_its_scope(scope):
    """CI once drew "John" for Mary Jones beside a real John Smith: each surrogate must avoid every real name token
    of the scope, not only its own (detections given, so that the check does not depend on the NER model)."""
    firsts = first_names()[:600]
    people = [f"{f} {surnames()[i]}" for i, f in enumerate(firsts)]
    texts, detections = [], []
    for chunk in (people[:300], people[300:]):  # two documents: a release scope spans both
        text, dets = "", []
        for name in chunk:
            dets.append(Detection(len(text), len(text) + len(name), "PERSON", 0.9))
            text += name + " met us. "
        texts.append(text)
        detections.append(dets)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)  # a seed, so that a failure reproduces
        defense = PresidioRedaction(operator="pseudonym", scope=scope, rng=1)
    out = defense.redact(texts, detections)
    real = {t.casefold() for name in (people if scope == "release" else []) for t in name.split()}
    for red, chunk in zip(out, (people[:300], people[300:])):
        mine = real | {t.casefold() for name in chunk for t in name.split()}
        drawn = [t for s in red.spans for t in red.text[s.new_start:s.new_end].split()]
        assert len(drawn) == 2 * len(chunk) and not {t.casefold() for t in drawn} & mine


def test_the_hash_is_keyed_linkable_within_a_release_and_the_key_never_leaves():
    text = ["Mail jo@example.com and again jo@example.com."]
    one, two = PresidioRedaction(operator="hash"), PresidioRedaction(operator="hash")
    a, b = one.redact(text)[0], two.redact(text)[0]
    ha = [a.text[s.new_start:s.new_end] for s in a.spans]
    hb = [b.text[s.new_start:s.new_end] for s in b.spans]
    assert len(ha) == 2 and ha[0] == ha[1] and re.fullmatch(r"[0-9a-f]{64}", ha[0])
    assert ha[0] != hb[0]  # two OS-random keys
    assert one._key.hex() not in repr(one.config()) and "key" not in {k.lower() for k in one.config()}
    with pytest.warns(PrivacyLeakWarning):
        s1 = PresidioRedaction(operator="hash", rng=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        s2 = PresidioRedaction(operator="hash", rng=7)
    assert s1.transform(text) == s2.transform(text)


def test_overlapping_detections_are_merged_into_their_union():
    merged = merge_detections([Detection(40, 62, "EMAIL_ADDRESS", 1.0), Detection(40, 47, "URL", 0.5),
                               Detection(51, 62, "URL", 0.5), Detection(5, 15, "PERSON", 0.85),
                               Detection(64, 70, "DATE_TIME", 0.6), Detection(66, 75, "PHONE_NUMBER", 0.4)])
    assert merged == [Detection(5, 15, "PERSON", 0.85), Detection(40, 62, "EMAIL_ADDRESS", 1.0),
                      Detection(64, 75, "DATE_TIME", 0.6)]


def test_restricting_the_entities_keeps_the_others_verbatim():
    out = PresidioRedaction(entities=["EMAIL_ADDRESS"]).transform(["Anna Berg: anna@example.org"])[0]
    assert out == "Anna Berg: <EMAIL_ADDRESS>"


def test_bad_parameters_are_typed_errors():
    with pytest.raises(UnknownNameError, match="pseudonym"):
        PresidioRedaction(operator="erase")
    with pytest.raises(UnknownNameError, match="PERSON"):
        PresidioRedaction(entities=["NAME"])
    with pytest.raises(InvalidParameterError, match="list-entities"):
        PresidioRedaction(entities=[])
    with pytest.raises(UnknownNameError):
        PresidioRedaction(model="lg")
    with pytest.raises(InvalidTypeError):
        PresidioRedaction().transform("one string")
    with pytest.raises(InvalidParameterError):
        Detector(threshold=1.5)


_OFFLINE = textwrap.dedent("""
    import socket

    class Cut(RuntimeError):
        pass

    def refuse(*args, **kwargs):
        raise Cut(f"network access: {args[:2]}")

    socket.socket.connect = refuse
    socket.socket.connect_ex = refuse
    socket.getaddrinfo = refuse
    socket.create_connection = refuse
    try:  # the guard itself must catch a real attempt (negative control)
        socket.create_connection(("example.com", 80))
        raise SystemExit("the network guard let a connection through")
    except Cut:
        pass
    from veil.defenses.redaction import PresidioRedaction
    for op in ("type", "mask", "hash", "pseudonym"):
        out = PresidioRedaction(operator=op).transform(["Mail anna.berg@example.org, Anna Berg, 212-555-0187."])
        assert "anna.berg@example.org" not in out[0], out
    print("offline ok")
""")


def test_redaction_runs_with_the_network_cut_off(tmp_path):
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "VEIL_HOME": str(__import__("veil._io", fromlist=["veil_home"]).veil_home())}
    proc = subprocess.run([sys.executable, "-c", _OFFLINE], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "offline ok" in proc.stdout


def test_spans_separated_by_spaces_are_joined_as_presidio_joins_them_and_the_record_lines_up():
    """Presidio's anonymizer merges same-type detections separated only by spaces ("John" + "Smith"); veil joins
    them first, so every replaced span has exactly one record with its whole original value."""
    d = PresidioRedaction()
    two = [[Detection(0, 4, "PERSON", 0.8), Detection(5, 10, "PERSON", 0.8)]]
    red = d.redact(["John Smith and more"], detections=two)[0]
    assert red.text == "<PERSON> and more"
    assert [(s.value, s.new_start, s.new_end) for s in red.spans] == [("John Smith", 0, 8)]
    apart = [[Detection(0, 4, "PERSON", 0.8), Detection(4, 9, "LOCATION", 0.8)]]
    red = d.redact(["JohnSmith and more"], detections=apart)[0]
    assert [(s.value, red.text[s.new_start:s.new_end]) for s in red.spans] == [("John", "<PERSON>"),
                                                                                ("Smith", "<LOCATION>")]
