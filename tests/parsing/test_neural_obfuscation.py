"""The neural obfuscator (Hu et al. 2020, Sec. 3-4) on the tiny treebank, through a small biaffine parser trained
here (the same recipe as test_biaffine.py): the hard constraint, tags and lengths kept, the frozen parser, the
secret sampling, training lowering the loss, saving and loading, and the sweep's neural cells."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch

from veil.defenses.obfuscation import DEFAULT_SPECTRUM, NeuralObfuscator, NeuralTraining, ObfuscatorConfig
from veil.defenses.obfuscation.neural import ObfuscatorNet, _batch, _draw, _plan
from veil.errors import (CacheCorruptError, InvalidParameterError, InvalidTypeError, PrivacyLeakWarning,
                         StaleResultError)
from veil.models.biaffine import Batch
from veil.parsing.treebank import load_treebank

NET = ObfuscatorConfig(level="P4", max_candidates=50, hidden=16)
FAST = NeuralTraining(max_train=None, dev_sentences=31, batch_size=16, max_minutes=5.0, max_epochs=6, eval_every=12,
                      patience=100, lr=1e-2, seed=0)


@pytest.fixture(scope="module")
def data(tiny_treebank):
    return load_treebank("train", tiny_treebank), load_treebank("dev", tiny_treebank), load_treebank(
        "test", tiny_treebank)


@pytest.fixture(scope="module")
def parser(data, train_tiny_parser):
    return train_tiny_parser(data[0], steps=25)[0]


@pytest.fixture(scope="module")
def trained(parser, data):
    from veil.defenses.obfuscation import train_obfuscator

    before = {k: v.clone() for k, v in parser.state_dict().items()}
    parser.train()  # the caller's mode, restored afterwards
    parser.zero_grad(set_to_none=True)  # its own training left gradients; the obfuscator's must add none
    lines: list[str] = []
    ob = train_obfuscator(parser, data[0], data[1], config=NET, training=FAST, log=lines.append)
    return ob, before, lines


def _seeded(network, seed):
    with pytest.warns(PrivacyLeakWarning, match="seeded rng"):
        return NeuralObfuscator(network=network, rng=seed)


def test_the_parser_is_frozen_and_gradients_reach_only_the_obfuscator(trained, parser):
    ob, before, lines = trained
    after = parser.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert all(p.grad is None for p in parser.parameters())
    assert all(p.requires_grad for p in parser.parameters()) and parser.training  # restored
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in ob.network.heads.values())
    assert ob.network.lstm.weight_hh_l0.grad is not None
    assert ob.network.word.weight.grad is None  # copied from the parser and frozen (tune_embeddings=False)
    assert ob.summary["steps"] >= 40 and lines[0].startswith("training a P4 obfuscator")


def test_the_original_is_never_emitted_even_where_the_network_prefers_it(trained, data):
    ob, _, _ = trained
    net = ob.network
    sents = [(list(t.words), list(t.tags)) for t in data[2]]
    # put at every hidden position the candidate the network ranks first there (unmasked): the hardest case
    with torch.no_grad():
        h = net.encode(_batch(net, sents))
        for tag, (rows, cols, _) in _plan(net, sents).items():
            top = net.logits(h[rows, cols], tag, torch.full_like(rows, -1)).argmax(-1)
            for r, c, k in zip(rows.tolist(), cols.tolist(), top.tolist()):
                sents[r][0][c - 1] = net.candidates[tag][k].upper()  # another case: compared case-insensitively
    hidden = DEFAULT_SPECTRUM.hidden_tags("P4")
    secure = NeuralObfuscator(network=net)
    for _ in range(40):
        for (words, tags), out in zip(sents, secure.transform(sents)):
            assert len(out.words) == len(words) and out.tags == tuple(tags)
            assert list(out.key.positions) == [i for i, t in enumerate(tags) if t in hidden]
            assert out.key.restore(out.words) == words
            for i, (w, o) in enumerate(zip(words, out.words)):
                if i in out.key.positions:
                    assert o.lower() != w.lower() and o in net.candidates[tags[i]]
                else:
                    assert o == w


def test_samples_follow_the_network_distribution(trained, data):
    """Chi-square goodness of fit of 6,000 draws at one position to p (alpha = 1e-6: a false alarm in 10^6 runs)."""
    from scipy import stats

    ob, _, _ = trained
    net = ob.network
    t = next(t for t in data[2] if "NN" in t.tags)
    pos = t.tags.index("NN")
    with torch.no_grad():
        p = net.logits(net.encode(_batch(net, [(t.words, t.tags)]))[[0], [pos + 1]], "NN",
                       torch.tensor([net.index["NN"].get(t.words[pos].lower(), -1)])).softmax(-1)[0].double().numpy()
    n = 6000
    out = _draw(net, [(t.words, t.tags)] * n, np.random.default_rng(7).random)
    seen = np.zeros(len(p))
    for o in out:
        seen[net.index["NN"][o.words[pos].lower()]] += 1
    big = p * n >= 5
    obs = np.append(seen[big], seen[~big].sum())
    exp = np.append(p[big] * n, p[~big].sum() * n)
    keep = exp > 0
    assert stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue > 1e-6
    orig = net.index["NN"].get(t.words[pos].lower())
    assert orig is None or seen[orig] == 0


def test_seeded_draws_are_reproducible_and_unseeded_ones_fresh(trained, data):
    ob, _, _ = trained
    sents = [(t.words, t.tags) for t in data[2]]
    a, b = _seeded(ob.network, 5).transform(sents), _seeded(ob.network, 5).transform(sents)
    assert [o.words for o in a] == [o.words for o in b]
    one_by_one = _seeded(ob.network, 5)
    assert [one_by_one.obfuscate(w, t).words for w, t in sents] == [o.words for o in a]  # batching changes nothing
    # two fresh runs coincide with probability prod_i sum_k p_ik^2; make sure that is negligible, then check
    with torch.no_grad():
        h = ob.network.encode(_batch(ob.network, sents))
        log_same = sum(float(torch.log((ob.network.logits(h[r, c], tag, o).softmax(-1) ** 2).sum(-1)).sum())
                       for tag, (r, c, o) in _plan(ob.network, sents).items())
    assert log_same < np.log(1e-9)
    fresh = NeuralObfuscator(network=ob.network)
    assert [o.words for o in fresh.transform(sents)] != [o.words for o in fresh.transform(sents)]


def test_training_lowers_the_parse_loss_of_obfuscated_sentences(trained, parser, data):
    """Expected parser loss (against its own parse of the originals) over 10 fixed sets of draws: the trained
    network against the start of training (zero heads: uniform over V_t minus the original)."""
    ob, _, _ = trained
    start = ObfuscatorNet(ob.network.vocab, ob.network.sizes, ob.network.candidates, ob.network.config)
    train = data[0]
    parser.eval()
    with torch.no_grad():
        batch = Batch.make(parser.vocab, [t.words for t in train], [t.tags for t in train], buckets=parser.config.sub_buckets)
        arc, ld, lh = parser(batch)
        heads = arc.argmax(-1)
        labels = parser.label_scores(ld, lh, heads).argmax(-1)

        def loss(net):
            rng, total = np.random.default_rng(3), 0.0
            for _ in range(10):
                obf = _draw(net, [(t.words, t.tags) for t in train], rng.random)
                b = Batch.make(parser.vocab, [o.words for o in obf], [t.tags for t in train], buckets=parser.config.sub_buckets)
                a, d, g = parser(b)
                m = b.mask
                total += float(torch.nn.functional.cross_entropy(a[m], heads[m]) + torch.nn.functional.cross_entropy(
                    parser.label_scores(d, g, heads)[m], labels[m]))
            return total / 10

        assert loss(ob.network) < loss(start) - 0.1
    assert ob.summary["best_dev_uas"] >= ob.summary["start_dev_uas"]


def test_straight_through_inputs_are_the_hard_words_rows(parser, data):
    """mix_inputs of a one-hot row equals the parser's own input row of that word (what the parser reads)."""
    parser.eval()
    words = ["dog", "Paris", "RAN", "x-ray"]
    ids = parser.word_ids(words)
    tag = torch.full((4,), parser.vocab.tag_id("NN"))
    mixed = parser.mix_inputs(torch.eye(4), ids, tag)
    rows = parser.embed(Batch.make(parser.vocab, [words], [["NN"] * 4], buckets=parser.config.sub_buckets))[0, 1:]
    assert torch.allclose(mixed, rows)


def test_save_load_round_trip_and_a_damaged_file(trained, data, tmp_path):
    ob, _, _ = trained
    path = ob.save(tmp_path / "neural.pt")
    back = NeuralObfuscator.load(path)
    assert back.fingerprint == ob.fingerprint == json.loads(path.with_suffix(".json").read_text())["fingerprint"]
    assert back.config()["training"]["best_dev_uas"] == ob.summary["best_dev_uas"]
    sents = [(t.words, t.tags) for t in data[2]]
    assert [o.words for o in _seeded(back.network, 1).transform(sents)] == [
        o.words for o in _seeded(ob.network, 1).transform(sents)]
    path.write_bytes(path.read_bytes()[:-8] + b"\0" * 8)
    with pytest.raises(CacheCorruptError, match="do not match"):
        NeuralObfuscator.load(path)


def test_bad_parameters_are_typed_errors(trained):
    ob, _, _ = trained
    with pytest.raises(InvalidParameterError, match="level"):
        ObfuscatorConfig(level="P9")
    with pytest.raises(InvalidParameterError, match="privacy_weight"):
        NeuralTraining(privacy_weight=-1.0)
    with pytest.raises(InvalidTypeError, match="max_candidates"):
        ObfuscatorConfig(max_candidates=2.5)
    with pytest.raises(InvalidTypeError, match="network"):
        NeuralObfuscator(network="model.pt")
    with pytest.raises(InvalidTypeError, match="not a string"):
        NeuralObfuscator(network=ob.network).obfuscate("a sentence", ["DT"])


def test_a_step_budget_stops_the_run_and_anneals_over_it(parser, data):
    """With max_steps, training stops there (recorded as "steps"), the temperature reaches tau_end at the last step
    whatever the minutes, and two runs with the same seed give the same network (the budget does not depend on how
    busy the machine is: the minute cap is far away)."""
    from veil.defenses.obfuscation import train_obfuscator

    tr = NeuralTraining(max_train=None, dev_sentences=10, batch_size=16, max_minutes=30.0, max_epochs=50,
                        eval_every=4, patience=100, lr=1e-2, seed=3, max_steps=9)
    runs = [train_obfuscator(parser, data[0], data[1], config=NET, training=tr, log=lambda _: None)
            for _ in range(2)]
    for ob in runs:
        assert ob.summary["steps"] == 9 and ob.summary["stopped"] == "steps"
        assert ob.summary["final_tau"] == pytest.approx(tr.tau_start * (tr.tau_end / tr.tau_start) ** (8 / 9),
                                                        abs=1e-3)
        assert ob.summary["training"]["max_steps"] == 9
    assert runs[0].fingerprint == runs[1].fingerprint
    assert "max_steps" not in NeuralTraining().to_dict()  # obfuscators made before step budgets keep their keys
    with pytest.raises(InvalidTypeError, match="max_steps"):
        NeuralTraining(max_steps=2.5)


def test_privacy_weight_raises_the_entropy(parser, data):
    """lambda > 0 adds an entropy bonus: the same training (seed, steps) ends with a flatter distribution."""
    from veil.defenses.obfuscation import train_obfuscator

    def entropy(lam):
        tr = NeuralTraining(max_train=None, dev_sentences=10, batch_size=16, max_minutes=5.0, max_epochs=2,
                            eval_every=1000, patience=100, lr=1e-2, seed=0, privacy_weight=lam)
        net = train_obfuscator(parser, data[0], data[1], config=NET, training=tr, log=lambda _: None).network
        sents = [(t.words, t.tags) for t in data[0]]
        with torch.no_grad():
            h = net.encode(_batch(net, sents))
            ent = [-(p * p.clamp_min(1e-30).log()).sum(-1) for tag, (r, c, o) in _plan(net, sents).items()
                   for p in [net.logits(h[r, c], tag, o).softmax(-1)]]
        return float(torch.cat(ent).mean())

    flat, paper = entropy(1.0), entropy(0.0)
    assert flat > paper + 0.01, (flat, paper)


def test_the_sweep_writes_neural_cells_and_resumes(parser, tiny_treebank, tmp_path, monkeypatch):
    from veil.experiments.obfuscation.parsing import ParsingSetup, run_parsing
    from veil.report.parsing import parsing_page
    from veil.results import ResultRecord

    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    parser.save(tmp_path / "parser.pt")
    setup = ParsingSetup(treebank=str(tiny_treebank), n_test=12, seed=0, model=str(tmp_path / "parser.pt"))
    tr = NeuralTraining(max_train=None, dev_sentences=10, batch_size=16, max_minutes=0.05, max_epochs=1)
    lines: list[str] = []
    kw = dict(parsers=["biaffine"], levels=["none", "P2"], attackers=["keep-word"], setup=setup,
              defenses=["random", "neural"], training_seeds=[0], obfuscator=NET, training=tr)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        paths = run_parsing(tmp_path / "res", log=lines.append, **kw)
    names = sorted(p.name.rsplit("-n12", 1)[0] for p in paths)
    assert names == ["attack-keep-word-P2", "attack-keep-word-P2-neural-s0", "eval-biaffine-P2",
                     "eval-biaffine-P2-neural-s0", "eval-biaffine-none", "table1"]
    rec = ResultRecord.read(next(p for p in paths if "eval-biaffine-P2-neural" in p.name))
    assert rec.config["defense"] == "neural" and rec.config["training_seed"] == 0
    assert rec.config["obfuscator"]["level"] == "P2" and rec.config["obfuscator"]["max_candidates"] == 50
    assert len(rec.config["obfuscator"]["fingerprint"]) == 64 and rec.config["obfuscator"]["training"]["steps"] >= 1
    assert 0 <= rec.metrics["uas"].mean <= 100
    models = list((tmp_path / "home" / "parsing" / "models").glob("neural-P2-s0-*.pt"))
    assert len(models) == 1 and rec.config["obfuscator_key"] in models[0].name
    again: list[str] = []
    run_parsing(tmp_path / "res", log=again.append, **kw)
    assert again == []  # every cell kept: nothing trained or evaluated
    with pytest.raises(StaleResultError, match=r"another configuration \(obfuscator_key: stored"):  # another budget
        run_parsing(tmp_path / "res", log=again.append, **{**kw, "training": NeuralTraining(max_minutes=0.06)})
    # a parser trained again at the same path is another parser: its eval records are refused, never reused
    parser_sha = rec.config["parser_sha256"]
    import copy

    retrained = copy.deepcopy(parser)  # the module's parser stays as the other tests expect it
    with torch.no_grad():
        next(p for p in retrained.parameters() if p.requires_grad).add_(0.01)
    retrained.save(tmp_path / "parser.pt")
    with pytest.raises(StaleResultError, match=r"parser_sha256: stored"):
        run_parsing(tmp_path / "res", log=again.append, **{**kw, "defenses": ["random"]})
    assert ResultRecord.read(next(p for p in paths if p.name.startswith("eval-biaffine-none"))).config[
        "parser_sha256"] == parser_sha
    page = parsing_page("parsing", [(p, ResultRecord.read(p)) for p in paths], tmp_path)
    assert "## Table 2: the neural obfuscator against random substitution" in page
    assert "| +Nouns (P2) | " in page.split("the neural obfuscator against")[1]


def test_the_train_command_writes_the_model_once(parser, tiny_treebank, tmp_path, monkeypatch):
    import typer
    from typer.testing import CliRunner

    from veil.cli import parse

    monkeypatch.setenv("VEIL_HOME", str(tmp_path / "home"))
    parser.save(tmp_path / "parser.pt")
    app = typer.Typer()
    parse.register(app)
    args = ["parse", "obfuscator", "train", "--level", "P2", "--seed", "1", "--treebank", str(tiny_treebank),
            "--model", str(tmp_path / "parser.pt"), "--minutes", "0.05", "--max-candidates", "30", "--json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["level"] == "P2" and out["max_candidates"] == 30 and out["privacy_weight"] == 0.0
    assert out["model"].endswith(".pt") and (tmp_path / "home" / "parsing" / "models").is_dir()
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and "(cached)" in again.stderr and json.loads(again.stdout)["fingerprint"] == \
        out["fingerprint"]
    bad = CliRunner().invoke(app, ["parse", "obfuscator", "train", "--level", "P9"])
    assert bad.exit_code == 2


def test_the_obfuscate_command_with_the_neural_method(trained, tiny_treebank, tmp_path, capsys):
    """`veil obfuscate --method neural --neural-model M`: lengths and tags kept, never the original word, the key
    (0600) names the replaced positions; the model's level and the option pairing are checked."""
    import stat

    from veil.cli import main
    from veil.parsing.trees import read_conllu_trees

    ob, _, _ = trained
    model = ob.save(tmp_path / "neural-P4.pt")
    src, key = tiny_treebank / "test.conllu", tmp_path / "key.json"
    code = main(["obfuscate", str(src), "--method", "neural", "--neural-model", str(model), "--level", "P4",
                 "--key", str(key), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out, secret, trees = json.loads(captured.out), json.loads(key.read_text()), read_conllu_trees(src)
    assert len(out) == len(trees) == len(secret) and stat.S_IMODE(key.stat().st_mode) == 0o600
    hidden = DEFAULT_SPECTRUM.hidden_tags("P4")
    for o, k, t in zip(out, secret, trees):
        assert o["tags"] == list(t.tags) and len(o["words"]) == len(t.words)
        assert o["positions"] == k["positions"]
        assert set(k["positions"]) <= {i for i, tg in enumerate(t.tags) if tg in hidden}
        assert all(o["words"][i] != t.words[i] and k["originals"][j] == t.words[i]
                   for j, i in enumerate(k["positions"]))
        assert all(o["words"][i] == t.words[i] for i in range(len(t.words)) if i not in k["positions"])
    assert sum(len(k["positions"]) for k in secret) > 0
    assert main(["obfuscate", str(src), "--method", "neural", "--neural-model", str(model), "--level", "P2"]) == 2
    assert "obfuscates at P4, not P2" in capsys.readouterr().err
    assert main(["obfuscate", str(src), "--method", "neural", "--level", "P4"]) == 2
    assert "--method neural needs it" in capsys.readouterr().err
