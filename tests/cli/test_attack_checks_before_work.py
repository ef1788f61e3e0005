"""`veil attack membership | invert | gradmatch-table` refuse values that cannot work before any work (issue 48,
item 6): each expensive step the command would reach first (encoding the corpus, loading the inverter, the
experiment runner) is replaced by one that fails the test if it is reached, and the command must exit 2 with a
message that names real options.
"""

from __future__ import annotations

import pytest

from veil.cli import main

pytestmark = pytest.mark.usefixtures("builtin")


def _never(what):
    def reached(*args, **kwargs):
        raise AssertionError(f"{what} was reached before the bad value was refused")
    return reached


@pytest.fixture
def no_membership_work(monkeypatch):
    import veil.experiments.dpsgd.utility as utility

    monkeypatch.setattr(utility, "_load", _never("encoding the corpus"))


@pytest.mark.parametrize("members", ["50", "255"])
def test_membership_members_below_one_batch(no_membership_work, tmp_path, capsys, members):
    code = main(["attack", "membership", "--members", members, "--method", "loss", "--defense", "none",
                 "--results", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"members={members} is fewer than one training batch (batch_size=256)" in err
    assert "--members 256" in err and f"--batch-size {members}" in err


def test_membership_batch_size_option_is_real(no_membership_work, tmp_path, capsys):
    """The option the message names exists: with --batch-size 50, 50 members pass the check (and reach the work)."""
    with pytest.raises(AssertionError, match="encoding the corpus was reached"):
        main(["attack", "membership", "--members", "50", "--batch-size", "50", "--method", "loss", "--defense",
              "none", "--results", str(tmp_path)])


def test_membership_more_members_than_the_corpus_holds(no_membership_work, tmp_path, capsys, builtin):
    n_train = len(builtin("rt-polarity").indices("train"))
    members = n_train // 3 + 1
    code = main(["attack", "membership", "--members", str(members), "--method", "loss,rmia", "--defense", "none",
                 "--results", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"rt-polarity has {n_train}: use members <= {(n_train - 1) // 3} (--members {(n_train - 1) // 3})" in err


@pytest.fixture
def no_inverter(monkeypatch):
    import veil.models.inverter as inverter

    monkeypatch.setattr(inverter, "load_inverter", _never("loading the inverter"))


@pytest.mark.parametrize("args, message", [
    (["--corpus", "nosuch"], "unknown corpus 'nosuch'; valid corpus names: brown,"),
    (["--defense", "deepcandidate", "--epsilon", "1", "--corpus", "rt-polarity"],
     "deepcandidate releases one embedding per document, and rt-polarity is a sentence corpus; use a document "
     "corpus (e.g. --corpus drug-reviews)"),
    (["--defense", "truncation", "--epsilon", "1", "--corpus", "sms-spam"], "use a document corpus"),
    (["--corpus", "hutto-movies"], "hutto-movies has no classification labels"),
    (["--defense", "texthide-inference", "--m", "4", "--corpus", "drug-reviews"],
     "drug-reviews is a document corpus; use a sentence corpus (e.g. --corpus rt-polarity)"),
])
def test_invert_checks_the_corpus_before_loading_the_inverter(no_inverter, tmp_path, capsys, args, message):
    code = main(["attack", "invert", *args, "--results", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err
    assert list(tmp_path.iterdir()) == []


def test_invert_a_fitting_corpus_reaches_the_inverter(no_inverter, tmp_path):
    with pytest.raises(AssertionError, match="loading the inverter was reached"):
        main(["attack", "invert", "--defense", "deepcandidate", "--epsilon", "1", "--corpus", "drug-reviews",
              "--results", str(tmp_path)])


@pytest.mark.parametrize("k", ["12", "64", "1,2,64"])
def test_gradmatch_table_refuses_a_k_it_cannot_simulate(monkeypatch, tmp_path, capsys, k):
    import veil.experiments.federated.table2 as table2

    monkeypatch.setattr(table2, "_corpus", _never("encoding the corpus"))
    monkeypatch.setattr(table2, "run_table2", _never("the Table 2 runner"))
    code = main(["attack", "gradmatch-table", "--k", k, "--results", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "use k <= 11" in err and "k!/k^k" in err
    assert list(tmp_path.iterdir()) == []


def test_simulate_step_refuses_the_same_k():
    import numpy as np

    from veil.attacks.gradients.alg3 import MAX_MIXED, simulate_step
    from veil.attacks.gradients.tap import ModelSpec
    from veil.errors import InvalidParameterError

    k = MAX_MIXED + 1
    spec = ModelSpec(8, 2, (4,), 0.0)
    with pytest.raises(InvalidParameterError, match=f"k={k}: .*use k <= {MAX_MIXED}"):
        simulate_step(np.zeros((k, 8)), np.zeros((k, 2)), spec, {}, defense={"name": "texthide", "k": k})
