"""veil.attack and veil.evaluate: the bench cell's numbers, typed errors naming the valid choices, a registry walk."""

from __future__ import annotations

import numpy as np
import pytest

import veil
from veil.api import AttackOutcome, resources_of
from veil.api.score import FAMILY_KINDS, SCORED_CELLS, scored_attacks
from veil.attacks.base import attack_names, get_attack
from veil.errors import InvalidParameterError, InvalidTypeError, UnknownNameError
from veil.kinds import observable

TEXTS = ["a gripping , funny film .", "the plot is dull and lifeless .", "the cast shines in every scene .",
         "an overlong mess with no heart .", "warm , witty and wise .", "i wanted my two hours back ."]


@pytest.fixture(scope="module")
def slice_data():
    from veil.bench.data import bench_data

    return bench_data("rt-polarity", True, 100)  # cached: the bench's quick-limit100 slice


def test_attack_gives_exactly_the_bench_cells_numbers(slice_data):
    """The rss cell on undefended vectors, and veil.attack on the same release, queries and seed."""
    from veil.attacks.retrieval import sample_queries
    from veil.bench.cells import retrieval_cell
    from veil.bench.plan import BenchConfig, Cell

    data = slice_data
    cell = Cell.make("rt-polarity", "none", {}, "rss", BenchConfig(quick=True, seed=3, queries=20, limit=100))
    bench = retrieval_cell(cell, data).to_dict()
    q = sample_queries(len(data.index), 20, rng=3)
    rows = data.private_ids[q]
    got = veil.attack(veil.protect(data.X[rows], "none"), "rss", private=[data.texts[i] for i in rows],
                      index=data.index, query_ids=q, text_embeddings=data.X[data.private_ids], seed=3)
    assert isinstance(got, AttackOutcome)
    assert got.record["metrics"] == bench["metrics"]
    assert got.record["extra"]["bench"] == bench["extra"]["bench"]
    m = bench["extra"]["bench"]["success_metric"]
    assert (got.metric, got.value, got.interval) == ("identity", m["mean"], (m["ci_low"], m["ci_high"]))
    assert got.test == bench["extra"]["bench"]["test"] and got.floor == 1 / len(data.index)


def test_three_attacks_of_different_families_run_on_a_tiny_release():
    """Retrieval on TextHide's released vectors, its random-guess floor, and retrieval of rewritten text."""
    masked = veil.protect(TEXTS, "texthide-inference", m=256)
    strong = veil.attack(masked, "abs-rss", private=TEXTS)
    assert strong.metric == "identity" and 0.0 <= strong.value <= 1.0 and strong.floor == pytest.approx(1 / 6)
    guess = veil.attack(masked, "random-guess", private=TEXTS, seed=1)
    assert guess.record["extra"]["bench"]["floor"] is True
    rewritten = veil.protect(TEXTS, "redaction")  # text, read as vectors by encoding it
    assert veil.attack(rewritten, "rss", private=TEXTS).kind == "text"
    assert "p_value" in strong.test and str(strong).startswith("abs-rss on texthide-inference: identity = ")


@pytest.mark.parametrize("name", attack_names())
def test_every_attack_is_built_or_named_through_veil_attack(name):
    """The registry walk: an attack veil.attack scores takes its bench defaults (no argument beyond them) and is
    built from them (the learning word-recovery attackers train for a minute in their bench cell: built there, not
    here; unmixing is built from the masks mask recovery finds, in test_attack_runs); any other is refused with a
    typed error naming veil.evaluate, which plans its bench cell."""
    cls = get_attack(name)
    if name in scored_attacks():
        family = SCORED_CELLS[cls.bench_cell]
        assert set(resources_of(name)) >= {"seed", "quick"}
        assert any(observable(kind, cls.observes) for kind in FAMILY_KINDS[family])
        if family == "word-recovery":
            assert set(resources_of(name)) >= {"treebank", "limit"}
            if cls.floor:  # keep-word, tag-frequency: built from the public treebank alone
                from veil.experiments.obfuscation.parsing import build_attacker

                data = _treebank()
                built = build_attacker(name, data.train, data.vocab, data.setup(0), lambda seed: None)
                assert callable(built.rank)
            return
        if family == "membership":  # built from the public population the caller gives (shadow attacks)
            from veil.bench.cells.model import MembershipResources

            assert set(resources_of(name)) >= {"nonmembers", "population", "shadows"}
            pop = (np.zeros((4, 3), np.float32), np.zeros(4, np.int64))
            assert cls.for_bench(MembershipResources(population=pop, seed=0, shadows=2)).observes == "model"
            return
        if family == "texthide-run":  # mask recovery and unmixing: public statistics, the recovered masks
            assert set(resources_of(name)) >= {"public", "queries"}
            return
        if family == "attribute":  # the post-hoc attackers, trained on the release's own train rows
            assert set(resources_of(name)) >= {"epochs"}
            return
        assert "public" in resources_of(name)
        if cls.observes == "vectors" and not getattr(cls, "floor", False) and name != "reprecon":
            from veil.bench.cells.common import AttackResources
            from veil.bench.plan import BenchConfig, Cell

            cell = Cell.make("python", "none", {}, name, BenchConfig(queries=2))
            index = veil.attacks.retrieval.SimilaritySearch(["a", "b", "c"], np.eye(3, 4, dtype=np.float32))
            if "retrieval_cell" in cls.bench_cell:
                built = cls.for_bench(AttackResources(index=index, seed=0, data=None, cell=cell))
                assert built.observes == "vectors"
        return
    # an attack with a bench cell is run there (veil.evaluate); one without (the federated-update attacks, the
    # inversion baselines) is named as what neither scores, with its direct path
    fix = ("veil.run_attack.*veil.evaluate\\('rt-polarity-planted'" if cls.observes == "generative-model" else
           "veil.evaluate\\(corpus" if cls.bench_cell else "no bench cell.*veil.run_attack")
    with pytest.raises(InvalidParameterError, match=fix):
        resources_of(name)


_TREEBANK: list = []


def _treebank():
    """The quick silver treebank's bench data, capped at 20 sentences (built once for the walk)."""
    if not _TREEBANK:
        from veil.bench.data_parsing import treebank_data

        _TREEBANK.append(treebank_data("silver-sm", True, 20))
    return _TREEBANK[0]


def test_wrong_names_and_settings_are_typed_errors_naming_the_valid_ones():
    released = veil.protect(np.eye(4, 8, dtype=np.float32), "none")
    with pytest.raises(UnknownNameError, match="abs-rss"):
        veil.attack(released, "no-such-attack", private=TEXTS[:4])
    with pytest.raises(InvalidParameterError, match="index=None.*query_ids=None"):
        veil.attack(released, "rss", private=TEXTS[:4], epochs=3)
    with pytest.raises(InvalidParameterError, match="pass private="):
        veil.attack(released, "rss")
    with pytest.raises(InvalidTypeError, match="veil.protect"):
        veil.attack(np.eye(4), "rss", private=TEXTS[:4])
    with pytest.raises(InvalidTypeError, match="4 protected texts"):
        veil.attack(released, "rss", private=TEXTS)


def test_an_attack_that_does_not_observe_the_release_is_refused_naming_those_that_do():
    released = veil.protect(np.eye(4, 8, dtype=np.float32), "none")
    with pytest.raises(InvalidParameterError, match="observes 'obfuscated-text'.*observe it: .*abs-rss.*rss"):
        veil.attack(released, "keep-word", private=TEXTS[:4])


def test_evaluate_refuses_what_the_bench_does_not_take():
    with pytest.raises(InvalidParameterError, match="bench corpora: .*rt-polarity"):
        veil.evaluate("no-such-corpus", "none")
    with pytest.raises(UnknownNameError, match="texthide-inference"):
        veil.evaluate("rt-polarity", "no-such-defense")
    with pytest.raises(InvalidParameterError, match="'all' or a list"):
        veil.evaluate("rt-polarity", "none", attacks="rss")
    with pytest.raises(InvalidParameterError, match="unknown attack 'nope'; choose from"):
        veil.evaluate("rt-polarity", "none", attacks=["nope"])


def test_evaluate_is_one_bench_row(slice_data):
    """The plan of one corpus and one defense, each cell run by the bench's own cell function."""
    row = veil.evaluate("rt-polarity", "none", attacks=["rss", "random-guess"], limit=100, queries=20, seed=3)
    assert not row.failed, row.failed
    assert [a.attack for a in row.attacks] == ["rss", "random-guess"] and len(row.utility) == 1
    ids = list(row.records)
    assert ids[0] == "rt-polarity--none-default--rss--quick-q20-e5-seed3-limit100"
    assert "| default | rss | identity |" in row.table()


def test_an_attack_on_a_language_model_is_refused_naming_a_path_that_runs():
    """veil.attack scores no generative-model attack: the error names veil.run_attack on LMAccess, `veil lm attack`
    and the kind's bench cells (veil.evaluate on the planted corpus), and the first call it names runs."""
    from veil.attacks.generation import LMAccess

    texts = ["a warm and funny film", "a dull mess of a movie"] * 10
    released = veil.protect(texts, "lm-plain", steps=2, max_tokens=8)
    with pytest.raises(InvalidParameterError, match=r"veil\.run_attack\('lm-membership-loss', LMAccess\.of") as err:
        veil.attack(released, "lm-membership-loss", private=texts)
    assert "veil lm attack" in str(err.value) and "veil.evaluate('rt-polarity-planted', 'lm-plain'" in str(err.value)
    found = veil.run_attack("lm-membership-loss", LMAccess.of(released.release), candidates=texts[:2] + ["x y z"])
    assert found.scores.shape == (3,)
