"""The obfuscated parsing service end to end: a real uvicorn server on 127.0.0.1 (a free port, in a thread), real
HTTP, the real biaffine parser.

The parser is the trained one in the real cache (``VEIL_HOME/parsing/models/biaffine.pt``, with sentences from the
silver test split) when it exists; otherwise a small biaffine parser is trained here for a few seconds on a tiny
treebank made by spaCy sm from the first brown documents (as tests/parsing/conftest.py does). ``PARSER_SOURCE``
names the one in use in every assertion message. The server is wrapped in an ASGI recorder that keeps every raw
request (method, path, query, headers, body) it received.
"""

from __future__ import annotations

import json
import stat
import threading

import httpx
import pytest

from veil.defenses.obfuscation import RandomSubstitution, TagVocabulary
from veil.parsing.trees import Tree, write_conllu
from veil.services.parse_client import ParseClient, ParseServiceError, redaction_placeholder, server_health
from veil.services.parse_server import Limits, LoadedParser, background_server, create_app, read_request

N_CLIENT = 48  # sentences the client parses
#: hidden-tag words that no vocabulary holds: if one ever reaches the server, the client leaked it
CANARIES = ["Zorvathix", "Quillanebb", "blorptastic", "frimbles", "Yendrickov", "snargled"]
CANARY_SENTENCES = [
    (["Zorvathix", "Quillanebb", "sold", "the", "blorptastic", "frimbles", "to", "Yendrickov", "."],
     ["NNP", "NNP", "VBD", "DT", "JJ", "NNS", "IN", "NNP", "."]),
    (["The", "blorptastic", "committee", "met", "in", "Zorvathix", "yesterday", "."],
     ["DT", "JJ", "NN", "VBD", "IN", "NNP", "NN", "."]),
    (["Yendrickov", "'s", "frimbles", "are", "snargled", "."], ["NNP", "POS", "NNS", "VBP", "JJ", "."]),
]


class Recorder:
    """ASGI middleware: passes every request to ``app`` and keeps what arrived on the wire."""

    def __init__(self, app):
        self.app, self.requests, self._lock = app, [], threading.Lock()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        chunks = []

        async def recv():
            message = await receive()
            if message["type"] == "http.request":
                chunks.append(message.get("body", b""))
            return message

        try:
            await self.app(scope, recv, send)
        finally:
            with self._lock:
                self.requests.append({"method": scope["method"], "path": scope["path"],
                                      "query": scope.get("query_string", b""),
                                      "headers": b"\n".join(k + b": " + v for k, v in scope["headers"]),
                                      "body": b"".join(chunks)})

    def parse_bodies(self):
        with self._lock:
            return [r["body"] for r in self.requests if r["path"] == "/parse" and r["method"] == "POST"]

    def clear(self):
        with self._lock:
            self.requests.clear()


def _tiny_world(tmp_path_factory, builtin, train_tiny_parser):
    """A small biaffine parser trained here on spaCy sm trees of the first brown documents."""
    from veil.models.spacy_pipelines import load_spacy, parsed_trees

    nlp, brown, trees = load_spacy("spacy-sm"), builtin("brown"), []
    for d in range(8):
        for doc in nlp.pipe(brown.documents[d][:40]):
            heads, labels = parsed_trees(doc)
            for span in doc.sents:
                toks = list(span)
                hs = [0 if heads[t.i] == 0 else heads[t.i] - span.start for t in toks]
                if len(toks) < 3 or any(t.is_space for t in toks) or any(not 0 <= h <= len(toks) for h in hs):
                    continue
                trees.append(Tree([t.text for t in toks], [t.tag_ for t in toks], hs, [labels[t.i] for t in toks],
                                  [bool(t.whitespace_) for t in toks[:-1]] + [False], [t.pos_ for t in toks]))
    train = trees[N_CLIENT:]
    net = train_tiny_parser(train, steps=20)[0]
    model = tmp_path_factory.mktemp("model") / "tiny-biaffine.pt"
    net.save(model)
    return model, trees[:N_CLIENT], train, "a tiny biaffine parser trained by this test (no trained model in the cache)"


@pytest.fixture(scope="module")
def world(real_home, tmp_path_factory, builtin, train_tiny_parser):
    """(model file, client sentences, public sentences for the substitution vocabulary, description)."""
    from veil.parsing.treebank import load_treebank

    model, silver = real_home / "parsing" / "models" / "biaffine.pt", real_home / "parsing" / "silver-sm"
    if model.is_file() and (silver / "test.conllu").is_file():
        test = load_treebank("test", silver)  # the folder form: read as is
        return model, test[:N_CLIENT], test[N_CLIENT:3000], f"the trained biaffine parser {model}"
    return _tiny_world(tmp_path_factory, builtin, train_tiny_parser)


@pytest.fixture(scope="module")
def parser(world):
    return LoadedParser.load("biaffine", model=world[0])


@pytest.fixture(scope="module")
def vocab(world):
    return TagVocabulary.from_sentences((t.words, t.tags) for t in world[2])


@pytest.fixture(scope="module")
def served(parser):
    """A recording server with default limits: (base URL, recorder)."""
    recorder = Recorder(create_app(parser, limits=Limits()))
    with background_server(recorder) as url:
        yield url, recorder


@pytest.fixture
def obfuscator(vocab):
    return RandomSubstitution(vocabulary=vocab, level="P3")  # OS entropy, as a release


def _sent_sentences(recorder):
    return [s for body in recorder.parse_bodies() for s in json.loads(body)["sentences"]]


def test_no_replaced_word_leaves_the_client(served, world, obfuscator):
    url, recorder = served
    recorder.clear()
    sentences = [(t.words, t.tags) for t in world[1]] + CANARY_SENTENCES
    with ParseClient(url, obfuscator=obfuscator, batch_sentences=16) as client:
        parsed = client.parse(sentences)
    assert len(recorder.parse_bodies()) == -(-len(sentences) // 16), world[3]
    wire = b"\n".join(r["body"] + r["headers"] + r["query"] + r["path"].encode() for r in recorder.requests).lower()
    assert not [c for c in CANARIES if c.lower().encode() in wire]
    sent = _sent_sentences(recorder)
    assert len(sent) == len(sentences)
    for (words, tags), p, s in zip(sentences, parsed, sent):
        assert set(s) == {"tokens", "tags"}  # biaffine reads no spaces; nothing else (no key) is ever sent
        assert s["tokens"] == list(p.obfuscated.words) and s["tags"] == list(tags)
        hidden = set(p.obfuscated.key.positions) - set(p.redacted)  # redacted: numbers and addresses (default)
        assert hidden == {i for i, t in enumerate(tags) if t in obfuscator.hidden}
        assert set(p.redacted) == {i for i, (w, t) in enumerate(zip(words, tags))
                                   if i not in hidden and redaction_placeholder(w, t) is not None}
        for i, (orig, tok) in enumerate(zip(words, s["tokens"])):
            if i in p.redacted:
                assert tok == redaction_placeholder(orig, tags[i])
            else:
                assert (tok.lower() != orig.lower()) if i in hidden else (tok == orig)
        assert list(p.tree.words) == list(words)  # the tree is put back on the original words


def test_trees_are_the_servers_parses_of_the_obfuscated_sentences(served, world, obfuscator):
    url, recorder = served
    recorder.clear()
    own = LoadedParser.load("biaffine", model=world[0])  # loaded apart from the server's
    with ParseClient(url, obfuscator=obfuscator, batch_sentences=20) as client:
        parsed = client.parse(world[1])
    expected = [tree for body in recorder.parse_bodies() for tree in own.parse(read_request(body, Limits()))]
    assert len(expected) == len(parsed) == len(world[1])
    assert [(list(p.tree.heads), list(p.tree.deprels)) for p in parsed] == expected, world[3]
    direct = own.parse([Tree(p.obfuscated.words, p.obfuscated.tags, (0,) * len(p.tree), ("",) * len(p.tree))
                        for p in parsed[:20]])  # the first request, parsed from the client's own record
    assert direct == expected[:20]


def _bad_requests(limits):
    tok = ["a"] * 100_000
    one = {"tokens": ["The", "cat", "sat", "."], "tags": ["DT", "NN", "VBD", "."]}
    js = {"Content-Type": "application/json"}
    good = json.dumps({"sentences": [one]}).encode()
    return [
        ("empty body", {"content": b"", "headers": js}, 400, "empty_body"),
        ("blank body", {"content": b"  \n", "headers": js}, 400, "empty_body"),
        ("malformed JSON", {"content": b'{"sentences": [}', "headers": js}, 400, "malformed_json"),
        ("nested too deeply", {"content": b"[" * 50_000, "headers": js}, 400, "malformed_json"),
        ("not UTF-8", {"content": b'{"sentences": [{"tokens": ["caf\xe9"]}]}', "headers": js}, 400, "not_utf8"),
        # a browser page can post these to a local server without a preflight: refused, whatever the body
        ("text/plain", {"content": good, "headers": {"Content-Type": "text/plain"}}, 415, "unsupported_media_type"),
        ("a form", {"content": good, "headers": {"Content-Type": "application/x-www-form-urlencoded"}}, 415,
         "unsupported_media_type"),
        ("no content type", {"content": good}, 415, "unsupported_media_type"),
        ("latin-1 JSON", {"content": good, "headers": {"Content-Type": "application/json; charset=latin-1"}}, 415,
         "unsupported_media_type"),
        ("lone surrogate", {"content": b'{"sentences": [{"tokens": ["The", "\\ud800", "sat", "."], "tags": ["DT", '
                                       b'"NN", "VBD", "."]}]}', "headers": js}, 422, "invalid_text"),
        ("lone surrogate tag", {"content": b'{"sentences": [{"tokens": ["The", "cat", "sat", "."], "tags": ["DT", '
                                           b'"\\udfff", "VBD", "."]}]}', "headers": js}, 422, "invalid_text"),
        ("100k tokens", {"json": {"sentences": [{"tokens": tok, "tags": ["DT"] * len(tok)}]}}, 413,
         "sentence_too_long" if 9 * len(tok) < limits.max_body_bytes else "body_too_large"),
        ("300k tokens", {"json": {"sentences": [{"tokens": tok * 3, "tags": ["DT"] * len(tok * 3)}]}}, 413,
         "body_too_large"),
        ("chunked, too large", {"content": iter([b" " * 65536] * 20), "headers": js}, 413, "body_too_large"),
        ("not an object", {"json": [one]}, 422, "invalid_request"),
        ("missing sentences", {"json": {"sentence": [one]}}, 422, "invalid_request"),
        ("no sentence", {"json": {"sentences": []}}, 422, "invalid_request"),
        ("sentences not a list", {"json": {"sentences": "The cat sat."}}, 422, "invalid_request"),
        ("missing tags", {"json": {"sentences": [{"tokens": one["tokens"]}]}}, 422, "invalid_request"),
        ("tokens not strings", {"json": {"sentences": [{**one, "tokens": [1, 2, 3, 4]}]}}, 422, "invalid_request"),
        ("tokens a string", {"json": {"sentences": [{**one, "tokens": "The cat sat ."}]}}, 422, "invalid_request"),
        ("spaces not booleans", {"json": {"sentences": [{**one, "spaces": [1, 1, 0, 0]}]}}, 422, "invalid_request"),
        ("unknown field", {"json": {"sentences": [{**one, "key": [1]}]}}, 422, "invalid_request"),
        ("empty token", {"json": {"sentences": [{**one, "tokens": ["The", "", "sat", "."]}]}}, 422, "invalid_request"),
        ("no tokens", {"json": {"sentences": [{"tokens": [], "tags": []}]}}, 422, "invalid_request"),
        ("length mismatch", {"json": {"sentences": [{**one, "tags": ["DT", "NN"]}]}}, 422, "length_mismatch"),
        ("spaces mismatch", {"json": {"sentences": [{**one, "spaces": [True]}]}}, 422, "length_mismatch"),
        ("too many sentences", {"json": {"sentences": [one] * (limits.max_sentences + 1)}}, 413, "too_many_sentences"),
    ]


def test_bad_input_gets_a_json_4xx_and_the_server_keeps_serving(served):
    url, _ = served
    good = {"sentences": [{"tokens": ["The", "cat", "sat", "."], "tags": ["DT", "NN", "VBD", "."]}]}
    with httpx.Client(base_url=url, timeout=60) as http:
        first = http.post("/parse", json=good)
        for name, kwargs, status, error in _bad_requests(Limits()):
            res = http.post("/parse", **kwargs)
            body = res.json()
            assert (res.status_code, body["error"]) == (status, error), (name, body)
            assert set(body) == {"error", "detail"} and len(body["detail"]) > 20, name
        for method, path, status in (("GET", "/parse", 405), ("GET", "/nowhere", 404), ("DELETE", "/health", 405)):
            res = http.request(method, path)
            assert res.status_code == status and set(res.json()) == {"error", "detail"}
        last = http.post("/parse", json=good)
    assert first.status_code == last.status_code == 200 and first.json() == last.json()
    assert first.json()["parser"] == "biaffine" and len(first.json()["trees"][0]["heads"]) == 4


def test_a_refusal_reaches_the_user_with_the_servers_detail(served, obfuscator):
    url, _ = served
    with ParseClient(url, obfuscator=obfuscator) as client:
        with pytest.raises(ParseServiceError, match=r"400 malformed_json\): .*send one valid JSON") as err:
            client._call("POST", "/parse", content=b"{", headers={"Content-Type": "application/json"})
    assert err.value.status == 400 and err.value.error == "malformed_json"


def test_an_unreachable_server_is_a_clear_error(obfuscator):
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ParseServiceError, match="cannot reach the parse server .*`veil parse serve`"):
        server_health(f"http://127.0.0.1:{port}")
    with ParseClient(f"http://127.0.0.1:{port}", obfuscator=obfuscator) as client:
        with pytest.raises(ParseServiceError, match="cannot reach"):
            client.parse(CANARY_SENTENCES)


def test_limits_are_configurable_and_the_client_keeps_to_them(parser, world, obfuscator):
    from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError

    limits = Limits(max_body_bytes=3000, max_sentences=3, max_tokens=40)
    recorder = Recorder(create_app(parser, limits=limits))
    sentences = [t for t in world[1] if len(t) <= 40][:10]
    with background_server(recorder) as url, httpx.Client(base_url=url, timeout=60) as http:
        assert http.get("/health").json()["limits"] == limits.to_dict()
        for _, kwargs, status, error in _bad_requests(limits):
            if error in ("too_many_sentences", "body_too_large"):
                assert (http.post("/parse", **kwargs).json()["error"]) == error
        long = {"tokens": ["word"] * 41, "tags": ["NN"] * 41}
        assert http.post("/parse", json={"sentences": [long]}).json()["error"] == "sentence_too_long"
        recorder.clear()
        with ParseClient(url, obfuscator=obfuscator, batch_sentences=64) as client:
            parsed = client.parse(sentences)
            bodies = recorder.parse_bodies()
            assert len(parsed) == len(sentences) and len(bodies) >= -(-len(sentences) // 3)
            assert all(len(b) <= 3000 and len(json.loads(b)["sentences"]) <= 3 for b in bodies)
            recorder.clear()
            with pytest.raises(DataFormatError, match="41 tokens; the server takes at most 40"):
                client.parse([(long["tokens"], long["tags"])])
            assert recorder.parse_bodies() == []  # refused before anything was sent
    with pytest.raises(InvalidParameterError, match="max_tokens must be >= 1"):
        Limits(max_tokens=0)
    with pytest.raises(InvalidTypeError, match="max_sentences must be an int"):
        Limits(max_sentences="5")


def test_concurrent_clients_get_their_own_answers(served, world, vocab, parser):
    url, recorder = served
    k, rounds = 6, 2
    results, errors = {}, []

    def work(c):
        try:
            with ParseClient(url, obfuscator=RandomSubstitution(vocabulary=vocab, level="P3")) as client:
                for r in range(rounds):
                    results[c, r] = client.parse(world[1][c::k])
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(c,)) for c in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors and len(results) == k * rounds
    for (c, r), parsed in results.items():
        mine = world[1][c::k]
        assert [list(p.tree.words) for p in parsed] == [list(t.words) for t in mine]
        own = parser.parse([Tree(p.obfuscated.words, p.obfuscated.tags, (0,) * len(p.tree), ("",) * len(p.tree))
                            for p in parsed])  # the same sentences in the same request
        assert [(list(p.tree.heads), list(p.tree.deprels)) for p in parsed] == own, (c, r)


def test_cli_client_writes_trees_and_a_private_key_and_sends_no_canary(served, world, tmp_path, capsys):
    from veil.cli import main

    url, recorder = served
    public = tmp_path / "public"
    write_conllu(public / "train.conllu", world[2][:1500])
    src = tmp_path / "mine.conllu"
    mine = [Tree(w, t, (0,) * len(w), ("dep",) * len(w)) for w, t in CANARY_SENTENCES] + list(world[1][:5])
    write_conllu(src, mine)
    out, key = tmp_path / "parsed.conllu", tmp_path / "key.json"
    recorder.clear()
    code = main(["parse", "client", str(src), "--server", url, "--level", "P3", "--treebank", str(public),
                 "--out", str(out), "--key", str(key), "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["sentences"] == len(mine) and summary["parser"] == "biaffine"
    wire = b"\n".join(r["body"] for r in recorder.requests).lower()
    assert not [c for c in CANARIES if c.lower().encode() in wire]
    from veil.parsing.trees import read_conllu_trees

    back = read_conllu_trees(out)
    assert [list(t.words) for t in back] == [list(t.words) for t in mine]
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    secret = json.loads(key.read_text())
    assert [s["originals"][:2] for s in secret[:1]] == [["Zorvathix", "Quillanebb"]]
    assert "Zorvathix" not in json.dumps(summary)


def test_cli_client_with_the_neural_obfuscator(served, world, tmp_path, capsys):
    """--method neural: a (briefly) trained neural obfuscator hides the same words; only its draws go out."""
    from veil.cli import main
    from veil.defenses.obfuscation import NeuralTraining, train_obfuscator
    from veil.defenses.obfuscation.neural import ObfuscatorConfig
    from veil.models.biaffine import BiaffineParser
    from veil.parsing.trees import read_conllu_trees

    url, recorder = served
    training = NeuralTraining(max_train=None, dev_sentences=10, batch_size=16, max_minutes=1.0, max_epochs=1,
                              eval_every=4, patience=100, seed=0)
    ob = train_obfuscator(BiaffineParser.load(world[0]), list(world[2][:64]), list(world[2][64:80]),
                          config=ObfuscatorConfig(level="P3", max_candidates=50, hidden=16), training=training,
                          log=lambda _: None)
    model = tmp_path / "neural-P3.pt"
    ob.save(model)
    src = tmp_path / "mine.conllu"
    mine = [Tree(w, t, (0,) * len(w), ("dep",) * len(w)) for w, t in CANARY_SENTENCES] + list(world[1][:5])
    write_conllu(src, mine)
    out = tmp_path / "parsed.conllu"
    recorder.clear()
    code = main(["parse", "client", str(src), "--server", url, "--method", "neural", "--neural-model", str(model),
                 "--out", str(out), "--json"])
    assert code == 0, capsys.readouterr().err
    wire = b"\n".join(r["body"] for r in recorder.requests).lower()
    assert not [c for c in CANARIES if c.lower().encode() in wire]
    assert [list(t.words) for t in read_conllu_trees(out)] == [list(t.words) for t in mine]
    capsys.readouterr()
    assert main(["parse", "client", str(src), "--server", url, "--method", "neural", "--neural-model", str(model),
                 "--level", "P2", "--out", str(tmp_path / "other.conllu")]) == 2  # the model's level is P3
    assert "obfuscates at P3, not P2" in capsys.readouterr().err
    assert main(["parse", "client", str(src), "--server", url, "--method", "neural",
                 "--out", str(tmp_path / "other.conllu")]) == 2
    assert "--method neural needs it" in capsys.readouterr().err


def test_cli_refuses_bad_values_before_any_work(tmp_path, capsys):
    from veil.cli import main

    src = tmp_path / "in.txt"
    src.write_text("The cat sat.\n")
    assert main(["parse", "serve", "--parser", "udpipe"]) == 2
    assert "--parser must be one of biaffine, spacy-sm, spacy-md" in capsys.readouterr().err
    assert main(["parse", "serve", "--parser", "spacy-sm", "--model", str(src)]) == 2
    assert main(["parse", "client", str(src), "--out", str(tmp_path / "o.txt")]) == 2
    assert ".conllu" in capsys.readouterr().err
    assert main(["parse", "client", str(src), "--out", str(tmp_path / "o.conllu"), "--server", "ftp://x"]) == 2
    assert "--server must be an http" in capsys.readouterr().err
    assert not (tmp_path / "o.conllu").exists()
