"""Shared fixtures.

Tests that need a built-in corpus use the corpora pulled by `make setup` into
the real cache (VEIL_HOME or ~/.cache/veil); if one is missing it is pulled
(never skipped). Tests that write to the cache point VEIL_HOME at a tmp dir.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs two pytest workers (pytest-xdist): each worker, and every process it starts, keeps to one
    # thread; two workers each spinning two OpenMP threads on two cores run many times slower than one each
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"


def _home():
    from veil._io import veil_home

    return veil_home()


REAL_HOME = _home()  # captured at import, before any test points VEIL_HOME elsewhere


@contextlib.contextmanager
def _veil_home_at(path: Path):
    """VEIL_HOME set to ``path`` for the ``with`` block; the old value (or its absence) comes back on the way out."""
    old = os.environ.get("VEIL_HOME")
    os.environ["VEIL_HOME"] = str(path)
    try:
        yield path
    finally:
        if old is None:
            del os.environ["VEIL_HOME"]
        else:
            os.environ["VEIL_HOME"] = old


def _real_home_env():
    return _veil_home_at(REAL_HOME)


def pytest_configure(config):
    """In the controller of a parallel run (``make test``: ``-n 2``), build what the workers would otherwise each
    build on first use in the real cache, before any worker starts: the quick masked LM (and its quick silver
    treebank), spaCy's md model, MiniLM's ONNX export and the news attribute corpus. Each is a no-op once cached."""
    workers = config.getoption("numprocesses", default=None)
    if not workers or hasattr(config, "workerinput"):
        return
    with _real_home_env():
        from veil.corpora.attributes import load_attributes
        from veil.encoders.text import TextEncoder
        from veil.models.spacy_pipelines import md_model_dir
        from veil.parsing.mlm import ensure_mlm

        ensure_mlm("mlm-quick")
        md_model_dir()
        TextEncoder("minilm").encode(["one sentence, so that the ONNX export exists"])
        load_attributes("news-articles")


@pytest.fixture(scope="session")
def real_home():
    """The cache folder holding the pulled corpora."""
    return REAL_HOME


@contextlib.contextmanager
def _own_home(root: Path):
    """VEIL_HOME at ``root`` for the ``with`` block: the real cache's corpora, encoders and downloads linked into it,
    nothing else (a model the block needs is trained there anew); the old VEIL_HOME comes back on the way out."""
    for sub in ("corpora", "encoders", "downloads"):
        if (REAL_HOME / sub).exists():
            (root / sub).symlink_to(REAL_HOME / sub)
    with _veil_home_at(root):
        yield root


@pytest.fixture(scope="session")
def own_home():
    """``with own_home(folder):`` runs the block with VEIL_HOME at an empty ``folder`` that links the real corpora,
    encoders and downloads (:func:`_own_home`)."""
    return _own_home


@pytest.fixture(scope="session")
def builtin():
    """Load a built-in corpus from the real cache, pulling it first if needed."""
    import veil.corpora as vc

    cache = {}

    def get(name: str):
        if name not in cache:
            with _real_home_env():
                cache[name] = vc.load(name, pull_missing=True)
        return cache[name]

    return get


@pytest.fixture(scope="session")
def train_tiny_parser():
    """``train(trees, steps) -> (parser, losses)``: a small biaffine parser fitted full-batch on real trees
    (seeded; a real parser, just small: word 16, tag 8, subword 8 x 500 buckets, one 24-unit BiLSTM layer)."""
    import torch

    from veil.models.biaffine import Batch, BiaffineParser, ParserConfig, ParserVocab

    config = ParserConfig(word_dim=16, tag_dim=8, sub_dim=8, sub_buckets=500, hidden=24, layers=1, arc_dim=32,
                          label_dim=16, dropout=0.1)

    def train(trees, steps: int = 25):
        vocab = ParserVocab.build([(t.words, t.tags, t.deprels) for t in trees], min_count=1)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            net = BiaffineParser(vocab, config)
            opt = torch.optim.Adam(net.parameters(), lr=5e-3)
            batch = Batch.make(vocab, [t.words for t in trees], [t.tags for t in trees], [t.heads for t in trees],
                               [t.deprels for t in trees], buckets=config.sub_buckets)
            losses = []
            for _ in range(steps):
                loss = net.loss(batch)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
        return net, losses

    return train


# --------------------------------------------------------------------------- the bad-input harness (tests/cli/test_bad_input*.py)
def _snapshot(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime for p in root.rglob("*")}


def _help(command: tuple[str, ...], capsys) -> str:
    from veil.cli import main

    code = main([*command, "--help"])
    text = capsys.readouterr().out
    assert code == 0, f"`veil {' '.join(command)}` does not exist"
    return text


def _command_path(args: list[str]) -> tuple[str, ...]:
    """The (sub)command words at the front of ``args`` (``texthide eval``, ``parse obfuscator train``, ``encode``)."""
    import click
    import typer

    from veil.cli import app

    node: click.Command = typer.main.get_command(app)
    path: list[str] = []
    for word in args:
        if not isinstance(node, click.Group) or word not in node.commands:
            break
        path.append(word)
        node = node.commands[word]
    return tuple(path)


def check_fix_exists(message: str, args: list[str], capsys) -> None:
    """Each ``--option`` the message names is an option of the command; each quoted `veil ...` command exists."""
    command = _command_path(args)
    # the options the user typed are echoed back (possibly misspelt); --help is checked with the quoted command
    bare = re.sub(r"`veil [^`]+`", "", message)  # options inside a quoted command belong to that command
    options = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", bare)) - set(args) - {"--help"}
    if options:
        helptext = _help(command, capsys)
        for opt in options:
            assert opt in helptext, f"the message names {opt}, which `veil {' '.join(command)}` does not have"
    for quoted in re.findall(r"`veil ([^`]+)`", message):
        words = quoted.split()
        sub = _command_path([w for w in words if not w.startswith("-")])
        helptext = _help(sub, capsys)
        for opt in (w.split("=")[0] for w in words if w.startswith("--") and w != "--help"):
            assert opt in helptext, f"the message quotes `veil {quoted}`, but {opt} is not an option of it"


@pytest.fixture
def cli(capsys, tmp_path, monkeypatch, real_home):
    """Run ``veil ARGS`` in an empty working folder; check exit code, one-line message, fix, nothing written."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("VEIL_HOME", str(real_home))
    monkeypatch.delenv("VEIL_RESULTS", raising=False)

    from veil.cli import main

    def run(*args: str, code: int = 2, match: str = "", check_fix: bool = True) -> str:
        before = _snapshot(work)
        home_before = _snapshot(real_home / "corpora") if (real_home / "corpora").exists() else {}
        got = main(list(args))
        out = capsys.readouterr()
        err = out.err.strip()
        assert got == code, f"exit {got} != {code}; stderr: {err}"
        assert "Traceback" not in out.err + out.out
        lines = [ln for ln in err.splitlines() if ln.startswith("veil: error")]
        assert len(lines) == 1, f"expected one error line, got: {err!r}"
        assert re.search(match, lines[0]), f"{match!r} not in {lines[0]!r}"
        assert _snapshot(work) == before, "something was written"
        if (real_home / "corpora").exists():
            assert _snapshot(real_home / "corpora") == home_before, "the corpus cache changed"
        if check_fix:
            check_fix_exists(lines[0], list(args), capsys)
        return lines[0]

    run.work = work
    return run




@pytest.fixture
def ray_leftovers():
    """For tests that start a local Ray cluster: Ray leaves /dev/null handles to its own reaper after
    ``ray.shutdown()``; collect them before this test ends, where its ``filterwarnings`` mark applies, rather than
    in whichever later test the garbage collector happens to run."""
    import gc

    yield
    gc.collect()


@pytest.fixture(scope="session")
def quick_mlm():
    """veil's quick masked LM (``veil models train mlm --quick``), from the real cache: trained there first if it
    is missing (about 6 minutes on 2 idle cores), then loaded."""
    from veil.models.mlm import load_mlm
    from veil.parsing.mlm import ensure_mlm

    with _real_home_env():
        ensure_mlm("mlm-quick")
        return load_mlm("mlm-quick")


@pytest.fixture(scope="session")
def _tiny_inverter_folder(tmp_path_factory, real_home):
    """A VEIL_HOME whose corpora and caches are the real ones and whose ``inverter-quick`` is a small inverter
    trained here (once per session) on 80 public news-articles sentences."""
    from veil.training.inverter import InverterConfig, inverter_training_data, train_inverter

    from filelock import FileLock

    # trained once per test session, not once per pytest-xdist worker: the first worker to get here trains it into
    # a folder every worker of the session shares (the parent of their own temporary roots), the others wait for it
    shared = tmp_path_factory.getbasetemp().parent / "tiny-inverter-home"
    home = tmp_path_factory.mktemp("home")
    for sub in ("corpora", "embeddings", "encoders", "models"):
        if sub == "models":
            (home / sub).mkdir()
            for name in ("mlm-quick",):  # the masked LM of the word edits, if the real cache has it
                if (real_home / sub / name).exists():
                    (home / sub / name).symlink_to(real_home / sub / name)
            (home / sub / "inverter-quick").symlink_to(shared / sub / "inverter-quick", target_is_directory=True)
        elif (real_home / sub).exists():
            (home / sub).symlink_to(real_home / sub)
    with FileLock(str(shared) + ".lock"):
        if not (shared / "done").is_file():
            (shared / "models").mkdir(parents=True, exist_ok=True)
            for sub in ("corpora", "embeddings", "encoders"):
                if (real_home / sub).exists() and not (shared / sub).exists():
                    (shared / sub).symlink_to(real_home / sub)
            old = os.environ.get("VEIL_HOME")
            os.environ["VEIL_HOME"] = str(shared)
            try:
                config = InverterConfig(name="inverter-quick", sources=(("news-articles", 80),), epochs=3,
                                        batch_size=16, warmup=2, eval_every=10, heldout=8, max_tokens=24, threads=1,
                                        seed=0)
                train, held, data = inverter_training_data(config, log=lambda _: None, progress=False)
                train_inverter(config, train, held, data=data, log=lambda _: None, progress=False)
            finally:
                if old is None:
                    del os.environ["VEIL_HOME"]
                else:
                    os.environ["VEIL_HOME"] = old
            (shared / "done").write_text("trained\n")
    return home


@pytest.fixture(scope="module")
def tiny_inverter_home(_tiny_inverter_folder):
    """VEIL_HOME set, for the module, to the home of :func:`_tiny_inverter_folder`."""
    with _veil_home_at(_tiny_inverter_folder):
        yield _tiny_inverter_folder


@pytest.fixture(scope="module")
def click_tree_once():
    """veil's click command tree, built once per module: typer builds it anew from the command functions' signatures
    on every `veil ...` call (0.1 s of CPU), and the ``cli`` fixture's fix check builds it twice more per case; in the
    bad-input modules those builds were most of the time. The tree is rebuilt whenever the registered commands change
    (a test that adds a command gets a tree with it)."""
    import typer.main

    build, built = typer.main.get_command, {}

    def parts(t):  # what the tree is built from: the app, its callback, commands and groups, recursively
        out = [t, t.registered_callback, *t.registered_commands]
        for group in t.registered_groups:
            out += [group, *parts(group.typer_instance)]
        return out

    def get_command(t):
        objects = parts(t)
        key = tuple(map(id, objects))
        if key not in built:
            built[key] = (build(t), objects)  # the objects are kept, so that no other object takes their ids
        return built[key][0]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(typer.main, "get_command", get_command)
        yield


#: the inverter's public sentences, per inverter configuration, as first selected in this process
_PUBLIC_SELECTED: dict[str, tuple] = {}


def public_sentences_selected_once(mp) -> None:
    """Make :func:`veil.bench.inversion.public_sentences_of` answer from the first selection for the same inverter
    configuration (``mp``: a ``MonkeyPatch``). Selecting them tokenizes every news-articles sentence, some 10 s a
    call, and a cell reads them twice; the same configuration selects the same sentences, and each call gets its own
    copies."""
    import copy
    import json

    import veil.bench.inversion as inv

    real = inv.public_sentences_of

    def once(inverter, log=print):
        key = json.dumps(inverter.manifest["config"], sort_keys=True)
        if key not in _PUBLIC_SELECTED:
            _PUBLIC_SELECTED[key] = real(inverter, log)
        texts, vectors, public = _PUBLIC_SELECTED[key]
        return list(texts), vectors.copy(), copy.deepcopy(public)

    mp.setattr(inv, "public_sentences_of", once)


@pytest.fixture(scope="session")
def select_public_once():
    """:func:`public_sentences_selected_once`, for tests to call with their ``MonkeyPatch``."""
    return public_sentences_selected_once
