"""Malformed, hostile and first-use input to the parsing track (issue 26): ``veil parse train|eval|serve|client|
sweep``, ``veil obfuscate``, ``veil attack word-recovery``.

Every CLI case runs through the ``cli`` fixture (tests/conftest.py): exit code 2, one ``veil: error`` line, no
traceback, nothing written in the working folder or the corpus cache, and the fix each message names exists
(the fixture checks it against the click tree). The model files
are real: a small biaffine parser saved by veil, then emptied, truncated, or replaced by a foreign torch file or
a pickle that would run code if it were unpickled. The client cases talk to a real HTTP server of the test's
own (stdlib ``http.server`` on 127.0.0.1, a free port) that answers malformed trees.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from veil.cli import main

SENTENCES = [
    "The old man sold his small house to a young family last year.",
    "A quick brown fox jumped over the lazy dog in the green field.",
    "She reads long books about ancient history every quiet evening.",
    "Our new teacher explained the difficult lesson very clearly today.",
    "The tall building near the river was built by a famous architect.",
    "Many people visited the small museum during the cold winter.",
    "He quickly wrote a short letter to his oldest friend in Paris.",
    "The hungry children ate fresh bread and sweet cheese at noon.",
    "A strong wind broke several windows in the empty school.",
    "They planted red flowers and young trees in the public garden.",
    "The careful driver stopped the heavy truck at the busy corner.",
    "My sister bought a new car from a friendly dealer in Boston.",
]
#: more training text, so that every hidden tag of P3 has several words to substitute
pytestmark = pytest.mark.usefixtures("click_tree_once")

EXTRA = [
    "John and Maria met Peter in London, Berlin and Rome.",
    "The biggest and the oldest houses are the best ones in the smallest towns.",
    "Older and bigger towns have greater problems than younger and smaller villages.",
    "The Americans and the Canadians met the Germans and the Italians in Geneva.",
]



def _trees(texts):
    from veil.models.spacy_pipelines import load_spacy, parsed_trees
    from veil.parsing.trees import Tree

    out = []
    for doc in load_spacy("spacy-sm").pipe(texts):
        heads, labels = parsed_trees(doc)
        for span in doc.sents:
            toks = list(span)
            hs = [0 if heads[t.i] == 0 else heads[t.i] - span.start for t in toks]
            out.append(Tree([t.text for t in toks], [t.tag_ for t in toks], hs, [labels[t.i] for t in toks],
                            [bool(t.whitespace_) for t in toks[:-1]] + [False], [t.pos_ for t in toks]))
    return out


@pytest.fixture(scope="module")
def treebank(tmp_path_factory):
    """A tiny treebank folder (spaCy sm parses of the sentences above): train 8, dev 2, test 2."""
    from veil.parsing.trees import write_conllu

    folder = tmp_path_factory.mktemp("tb")
    trees = _trees(SENTENCES)
    for split, part in (("train", trees[:8] + _trees(EXTRA)), ("dev", trees[8:10]), ("test", trees[10:])):
        write_conllu(folder / f"{split}.conllu", part)
    return folder


@pytest.fixture(scope="module")
def models(tmp_path_factory, treebank, train_tiny_parser):
    """Model files: a good tiny biaffine parser, and empty, truncated, foreign and code-running ones."""
    import torch

    from veil.parsing.treebank import load_treebank

    folder = tmp_path_factory.mktemp("models")
    net, _ = train_tiny_parser(load_treebank("train", treebank), steps=2)
    net.save(folder / "good.pt")
    (folder / "empty.pt").write_bytes(b"")
    data = (folder / "good.pt").read_bytes()
    (folder / "truncated.pt").write_bytes(data[: len(data) // 2])
    torch.save({"weights": torch.zeros(3)}, folder / "foreign.pt")
    (folder / "text.pt").write_text("not a model at all\n")

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {folder / 'PWNED'}",))

    (folder / "evil.pt").write_bytes(pickle.dumps({"state": Evil()}))
    return folder


@pytest.fixture
def run(cli):
    """The ``cli`` fixture with its fix-hint check (every --option and quoted `veil ...` command exists)."""

    def go(*args: str, match: str, code: int = 2) -> str:
        return cli(*args, match=match, code=code)

    go.work = cli.work
    return go


# --------------------------------------------------------------------------- values, before any work
@pytest.mark.parametrize("args,match", [
    (("parse", "train", "--max-minutes", "nan"), r"--max-minutes must be a finite number"),
    (("parse", "train", "--max-minutes", "inf"), r"--max-minutes must be a finite number"),
    (("parse", "train", "--max-train", "2.5"), r"--max-train"),
    (("parse", "sweep", "--levels", ""), r"--levels needs at least one"),
    (("parse", "sweep", "--attackers", ","), r"--attackers needs at least one"),
    (("parse", "sweep", "--parsers", "biaffine,udpipe"), r"unknown 'udpipe'"),
    (("parse", "sweep", "--levels", "P1,P1"), r"names one twice"),
    (("parse", "sweep", "--minutes", "nan"), r"--minutes must be a finite number"),
    (("parse", "sweep", "--privacy-weight", "inf"), r"--privacy-weight must be a finite number"),
    (("parse", "sweep", "--defense", "neural", "--training-seeds", "1.5"), r"--training-seeds"),
    (("parse", "obfuscator", "train", "--minutes", "nan"), r"--minutes must be a finite number"),
    (("attack", "word-recovery", "--minutes", "inf"), r"--minutes must be a finite number"),
    (("attack", "word-recovery", "--train-sentences", "1e3"), r"--train-sentences"),
])
def test_bad_values_exit_2_before_any_work(run, args, match):
    run(*args, match=match)


def test_parse_train_output_paths(run, treebank, tmp_path):
    run("parse", "train", "--treebank", str(treebank), "--out", str(tmp_path), match=r"is a folder")
    blocker = tmp_path / "afile"
    blocker.write_text("mine\n")
    run("parse", "train", "--treebank", str(treebank), "--out", str(blocker / "m.pt"), match=r"afile")
    run("parse", "train", "--treebank", str(treebank), "--out", str(tmp_path / "m.model"), match=r"must end in \.pt")


def test_parse_train_never_replaces_a_json_beside_the_model(run, treebank):
    sidecar = run.work / "m.json"
    sidecar.write_text('{"mine": "a file of the user"}\n')
    run("parse", "train", "--treebank", str(treebank), "--out", "m.pt", "--vectors", "none",
        match=r"m\.json already exist\(s\) \(no resume state of a run is beside it\).*--force")
    assert sidecar.read_text() == '{"mine": "a file of the user"}\n'


@pytest.mark.parametrize("state,match", [
    ("empty.pt", r"resume state .*m\.state\.pt is empty"),
    ("truncated.pt", r"resume state .*m\.state\.pt is damaged or not a file veil wrote"),
    ("foreign.pt", r"resume state .*m\.state\.pt is a torch file but not one veil wrote"),
    ("text.pt", r"resume state .*m\.state\.pt is damaged or not a file veil wrote"),
    ("evil.pt", r"resume state .*m\.state\.pt is damaged or not a file veil wrote"),
])
def test_parse_train_refuses_a_damaged_or_foreign_resume_state(run, treebank, models, state, match):
    (run.work / "m.pt").write_bytes((models / "good.pt").read_bytes())
    (run.work / "m.state.pt").write_bytes((models / state).read_bytes())
    run("parse", "train", "--treebank", str(treebank), "--out", "m.pt", "--vectors", "none", match=match)
    assert not (models / "PWNED").exists(), "a foreign pickle ran code"


def test_parse_train_refuses_the_state_of_another_configuration(run, treebank, models):
    import torch

    from veil.parsing.train import TrainConfig

    (run.work / "m.pt").write_bytes((models / "good.pt").read_bytes())
    config = TrainConfig(treebank=str(treebank), vectors="none", hidden=16)
    torch.save({"config": config.to_dict(), "net": {}, "opt": {}, "step": 3, "best": 50.0, "bad": 0, "epoch": 0,
                "spent": 0.1, "history": []}, run.work / "m.state.pt")
    run("parse", "train", "--treebank", str(treebank), "--out", "m.pt", "--vectors", "none",
        match=r"m\.state\.pt was made under another configuration \(hidden: stored 16, requested 128\).*--force")


def test_parse_train_on_a_treebank_without_dev_sentences(run, treebank, tmp_path):
    folder = tmp_path / "nodev"
    folder.mkdir()
    for split in ("train", "test"):
        (folder / f"{split}.conllu").write_text((treebank / f"{split}.conllu").read_text())
    (folder / "dev.conllu").write_text("")
    run("parse", "train", "--treebank", str(folder), "--out", "m.pt", "--vectors", "none",
        match=r"nodev/dev\.conllu holds no sentence")


@pytest.mark.parametrize("model,match", [
    ("empty.pt", r"the biaffine parser .*empty\.pt is empty \(0 bytes\).*`veil parse train`"),
    ("truncated.pt", r"the biaffine parser .*truncated\.pt is damaged or not a file veil wrote"),
    ("foreign.pt", r"the biaffine parser .*foreign\.pt is a torch file but not one veil wrote \(no state, vocab"),
    ("evil.pt", r"the biaffine parser .*evil\.pt is damaged or not a file veil wrote"),
])
def test_parse_eval_refuses_damaged_or_foreign_models(run, treebank, models, model, match):
    run("parse", "eval", "--treebank", str(treebank), "--model", str(models / model), "--n-test", "2",
        "--results", str(run.work / "res"), match=match)
    assert not (models / "PWNED").exists(), "a foreign pickle ran code"


@pytest.mark.parametrize("model", ["empty.pt", "truncated.pt", "foreign.pt"])
def test_parse_serve_refuses_damaged_or_foreign_models(run, models, model):
    run("parse", "serve", "--model", str(models / model), "--port", "0",
        match=rf"the biaffine parser .*{re.escape(model)} is (empty|damaged|a torch file but not)")


def test_parse_serve_without_a_biaffine_says_what_to_run_and_how_long(run, monkeypatch, tmp_path):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "fresh"))
    line = run("parse", "serve", "--parser", "biaffine", "--port", "0",
               match=r"`veil parse train` \(about 45 minutes, after `veil parse treebank`: about \d+ minutes, up to "
                     r"\d+ on a busy machine\)")
    assert "fetch" not in line


def test_parse_serve_on_a_port_in_use_is_one_line(run):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        run("parse", "serve", "--parser", "spacy-sm", "--port", str(port),
            match=rf"cannot listen on 127\.0\.0\.1:{port}: the port is in use.*--port")


def test_neural_obfuscator_files_damaged(run, treebank, models):
    (run.work / "ob.pt").write_bytes(b"")
    (run.work / "ob.json").write_text("")
    (run.work / "in.txt").write_text("The cat sat on the mat.\n")
    run("obfuscate", "in.txt", "--method", "neural", "--neural-model", "ob.pt", "--treebank", str(treebank),
        match=r"ob\.json: the file is empty.*`veil parse obfuscator train`")


def test_obfuscate_refuses_a_nul_byte(run, treebank):
    (run.work / "in.txt").write_bytes(b"The cat sat.\x00\n")
    run("obfuscate", "in.txt", "--treebank", str(treebank), match=r"in\.txt holds a NUL byte")


def test_obfuscate_on_a_fresh_home_names_the_command_and_its_duration(run, monkeypatch, tmp_path):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "fresh"))
    (run.work / "in.txt").write_text("The cat sat on the mat.\n")
    run("obfuscate", "in.txt", match=r"build it once with `veil parse treebank` \(about \d+ minutes")


# --------------------------------------------------------------------------- records of another configuration
def _records(root: Path, treebank: Path, attack_train: int) -> Path:
    from veil.experiments.obfuscation.parsing import ParsingSetup, cell_path
    from veil.results import Metric, ResultRecord

    setup = ParsingSetup(treebank=str(treebank), n_test=2, attack_train=attack_train, seed=0)
    for exp in ("table1", "attack-keep-word-P3"):
        ResultRecord(method="parsing", experiment=exp, config={**setup.to_dict(), "level": "P3"},
                     metrics={"prv": Metric(mean=50.0, n=2), "top1": Metric(mean=10.0, n=2)},
                     wall_time_s=0.0).write(cell_path(root, exp, setup))
    return cell_path(root, "attack-keep-word-P3", setup)


def test_word_recovery_refuses_a_record_of_another_train_size(run, treebank):
    root = run.work / "res"
    _records(root, treebank, attack_train=20000)
    run("attack", "word-recovery", "--method", "keep-word", "--treebank", str(treebank), "--n-test", "2",
        "--train-sentences", "5", "--results", str(root),
        match=r"attack-keep-word-P3-n2-seed0\.json was made under another configuration \(attack_train: stored "
              r"20000, requested 5\).*--force")


@pytest.mark.parametrize("content", [b"", b"\xff\xfe{\x00", b'{"config": '])
def test_word_recovery_reports_a_damaged_record(run, treebank, content):
    root = run.work / "res"
    path = _records(root, treebank, attack_train=5)
    path.write_bytes(content)
    run("attack", "word-recovery", "--method", "keep-word", "--treebank", str(treebank), "--n-test", "2",
        "--train-sentences", "5", "--results", str(root),
        match=rf"damaged .*{re.escape(path.name)}: (the file is empty|not UTF-8|not valid JSON)")


# --------------------------------------------------------------------------- the client does not trust the server
GOOD_HEALTH = {"status": "ok", "parser": "biaffine", "reads": ["tokens", "tags"],
               "limits": {"max_body_bytes": 1 << 20, "max_sentences": 64, "max_tokens": 256}}


def _answer(kind: str, n: int) -> dict:
    heads = [0] + [1] * (n - 1)
    labels = ["ROOT"] + ["dep"] * (n - 1)
    if kind == "tab-label":
        labels[1] = "dep\t_\t_"
    elif kind == "newline-label":
        labels[1] = "dep\n1\tinjected\t_\t_\t_\t_\t0\troot\t_\t_"
    elif kind == "unknown-label":
        labels[1] = "<script>"
    elif kind == "cycle":
        heads = [0, 3, 2] + [1] * (n - 3)
    elif kind == "two-roots":
        heads[1] = 0
    elif kind == "out-of-range":
        heads[1] = n + 5
    elif kind == "self-loop":
        heads[1] = 2
    elif kind == "short":
        heads, labels = heads[:-1], labels[:-1]
    elif kind == "bool-head":
        heads[1] = True
    return {"heads": heads, "labels": labels}


@pytest.fixture
def bad_server():
    """A real HTTP server on 127.0.0.1 that answers each POST /parse with trees of the kind ``server.kind``."""
    state = {"kind": "cycle"}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, obj):
            body = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._send(GOOD_HEALTH)

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self._send({"trees": [_answer(state["kind"], len(s["tokens"])) for s in req["sentences"]],
                        "parser": "biaffine"})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # polled every 0.05 s, not the default 0.5 s: shutdown() waits for the next poll, once per case
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state["url"] = f"http://127.0.0.1:{server.server_address[1]}"
    yield state
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("kind,match", [
    ("tab-label", r"label 'dep\\t_\\t_' is not a known dependency label"),
    ("newline-label", r"is not a known dependency label"),
    ("unknown-label", r"label '<script>' is not a known dependency label"),
    ("cycle", r"not a tree: the heads form a cycle"),
    ("two-roots", r"not a tree: 2 roots"),
    ("out-of-range", r"not a tree: word 2's head \d+ is not an integer in 0\.\.\d+"),
    ("self-loop", r"not a tree: word 2 is its own head"),
    ("short", r"heads and \d+ labels for \d+ words"),
    ("bool-head", r"not a tree: word 2's head True"),
])
def test_client_refuses_malformed_trees_and_writes_nothing(run, bad_server, treebank, kind, match):
    bad_server["kind"] = kind
    (run.work / "in.conllu").write_text((treebank / "test.conllu").read_text())
    run("parse", "client", "in.conllu", "--out", "out.conllu", "--key", "key.json", "--server", bad_server["url"],
        "--treebank", str(treebank), match=r"answered a malformed tree for sentence 0 \(.*" + match)
    assert not (run.work / "out.conllu").exists() and not (run.work / "key.json").exists()


def test_client_timeout_and_key_checks(run, treebank):
    (run.work / "in.conllu").write_text((treebank / "test.conllu").read_text())
    run("parse", "client", "in.conllu", "--out", "o.conllu", "--timeout", "nan", "--treebank", str(treebank),
        match=r"--timeout must be a finite number")
    run("parse", "client", "in.conllu", "--out", "o.conllu", "--key", "o.conllu", "--treebank", str(treebank),
        match=r"--key and --out name the same file")


def test_neural_training_on_a_fresh_home_names_the_commands_and_durations(run, monkeypatch, tmp_path):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "fresh"))
    line = run("parse", "obfuscator", "train", "--treebank", str(tmp_path),
               match=r"trains through the biaffine parser .* `veil parse train` \(about 45 minutes")
    assert "fetch" not in line


# --------------------------------------------------------------------------- input files: a BOM is text, --seed warns
def test_obfuscate_strips_a_bom_and_warns_about_a_seed(treebank, tmp_path, monkeypatch, capsys):
    import warnings

    src = tmp_path / "in.txt"
    src.write_bytes("\ufeffThe old man sold his small house .\n".encode())
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert main(["obfuscate", str(src), "--treebank", str(treebank), "--seed", "3", "--level", "P2"]) == 0
    out = capsys.readouterr()
    assert re.search(r"veil: PrivacyLeakWarning: .*seed", out.err), out.err
    words = out.out.split()
    assert len(words) == 8 and words[0] == "The" and "\ufeff" not in out.out
