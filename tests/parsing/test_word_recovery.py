"""Word-recovery attackers see only the released side, and are scored against a slow reference."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from veil.attacks.word_recovery import (AttackVocabulary, KeepWord, ObfuscatedText, TagFrequency, observe,
                                        score_attack)
from veil.defenses.obfuscation import RandomSubstitution, TagVocabulary
from veil.errors import DataFormatError, InvalidParameterError, PrivacyLeakWarning
from veil.parsing.treebank import load_treebank


@pytest.fixture(scope="module")
def setting(tiny_treebank):
    train = load_treebank("train", tiny_treebank)
    test = load_treebank("test", tiny_treebank)
    vocab = TagVocabulary.from_sentences((t.words, t.tags) for t in train)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        ob = RandomSubstitution(vocabulary=vocab, level="P2", rng=3)
    obf = [ob.obfuscate(t.words, t.tags) for t in test]
    return train, vocab, obf, AttackVocabulary.build((t.words for t in train), min_count=1)


def test_the_observation_holds_no_originals(setting):
    _, _, obf, _ = setting
    text = observe(obf)
    assert set(vars(text)) == {"words", "tags", "positions"}
    assert text.words[0] == obf[0].words and text.n_positions == sum(len(o.key.positions) for o in obf)


def test_floors_match_a_slow_reference(setting):
    train, _, obf, av = setting
    text, originals = observe(obf), [list(o.key.originals) for o in obf]
    keep = score_attack(KeepWord(av), text, originals, n_boot=20)
    inside = [w.lower() in av.words[3:] for o in originals for w in o]
    v = len(av.words) - 3
    assert keep["mrr"].mean == pytest.approx(np.mean([1 / v if i else 0 for i in inside]))
    assert keep["top1"].mean == 0.0  # substitution never keeps the original
    freq = TagFrequency(av, [(t.words, t.tags) for t in train])
    ranks = freq.rank(text, [[w.lower() for w in o] for o in originals])
    counts: dict = {}
    for t in train:
        for w, g in zip(t.words, t.tags):
            counts.setdefault(g, {}).setdefault(w.lower(), 0)
            counts[g][w.lower()] += 1
    slow = []
    for tags, pos, orig in zip(text.tags, text.positions, originals):
        for p, w in zip(pos, orig):
            c = counts.get(tags[p], {})
            mine = c.get(w.lower(), 0)
            if w.lower() not in av.words[3:]:
                slow.append(0)
            elif mine == 0:
                slow.append(v)
            else:
                slow.append(sum(1 for x in c.values() if x >= mine))
    assert ranks.tolist() == slow


@pytest.fixture(scope="module")
def trained(setting):
    """A trained attacker fitted on its own obfuscations of the public train split (one epoch)."""
    from veil.attacks.word_recovery import TrainedAttacker

    train, vocab, _, av = setting
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        own = RandomSubstitution(vocabulary=vocab, level="P2", rng=11)
    made = [own.obfuscate(t.words, t.tags) for t in train]
    atk = TrainedAttacker(av, vocab.words.keys(), dim=16, hidden=16, vectors="none").fit(
        observe(made), [list(o.key.originals) for o in made], epochs=1, max_minutes=0.5)
    return atk


def test_trained_attacker_runs_on_tiny_data(setting, trained):
    _, _, obf, _ = setting
    atk = trained
    res = score_attack(atk, observe(obf), [list(o.key.originals) for o in obf], n_boot=20)
    assert 0 <= res["prv"].ci_low <= res["prv"].mean <= res["prv"].ci_high <= 100
    assert res["coverage"].mean > 0


def test_a_step_cap_stops_the_trained_attacker_with_a_last_evaluation(setting):
    from veil.attacks.word_recovery import TrainedAttacker

    train, vocab, _, av = setting
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        own = RandomSubstitution(vocabulary=vocab, level="P2", rng=12)
    made = [own.obfuscate(t.words, t.tags) for t in train]
    atk = TrainedAttacker(av, vocab.words.keys(), dim=16, hidden=16, vectors="none").fit(
        observe(made), [list(o.key.originals) for o in made], epochs=50, max_minutes=5.0, max_steps=3,
        eval_every=2, patience=100)
    assert atk.stopped == "steps" and [r["step"] for r in atk.history] == [2, 3]
    with pytest.raises(InvalidParameterError, match="max_steps"):
        atk.fit(observe(made), [list(o.key.originals) for o in made], max_steps=0)


def test_mismatched_originals_are_refused(setting):
    _, _, obf, av = setting
    with pytest.raises(DataFormatError, match="originals"):
        score_attack(KeepWord(av), observe(obf), [[] for _ in obf])
    with pytest.raises(DataFormatError, match="outside the sentence"):
        ObfuscatedText((("a",),), (("DT",),), ((3,),))


def _agrees(guesses, ranks, text, targets):
    """run()'s top guess is the true word wherever rank() puts the true word first (rank 1: no tie above it)."""
    assert [len(g) for g in guesses] == [len(p) for p in text.positions]
    flat = [g for gs in guesses for g in gs]
    truth = [w for ws in targets for w in ws]
    assert all(g == t for g, t, r in zip(flat, truth, ranks) if r == 1)
    return sum(g == t for g, t in zip(flat, truth))


def test_run_gives_one_guess_per_position_consistent_with_rank(setting, trained):
    train, vocab, obf, av = setting
    text = observe(obf)
    targets = [[w.lower() for w in o.key.originals] for o in obf]
    keep = KeepWord(av)
    assert keep.run(text) == [[text.words[i][p].lower() for p in pos] for i, pos in enumerate(text.positions)]
    freq = TagFrequency(av, [(t.words, t.tags) for t in train])
    assert _agrees(freq.run(text), freq.rank(text, targets), text, targets) > 0
    _agrees(trained.run(text), trained.rank(text, targets), text, targets)


def test_a_learned_attacker_gives_the_same_result_on_a_busy_machine(setting):
    """Budgets are steps and early stopping, not minutes (the minute cap is far away): the same seed gives the same
    attacker, history and selected step whether the machine is idle or two busy loops share its cores."""
    import subprocess
    import sys

    import torch

    from veil.attacks.word_recovery import TrainedAttacker

    train, vocab, obf, av = setting
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        own = RandomSubstitution(vocabulary=vocab, level="P2", rng=13)
    made = [own.obfuscate(t.words, t.tags) for t in train]

    def fit() -> TrainedAttacker:
        return TrainedAttacker(av, vocab.words.keys(), dim=16, hidden=16, vectors="none", seed=4).fit(
            observe(made), [list(o.key.originals) for o in made], epochs=50, max_minutes=30.0, max_steps=12,
            eval_every=3, patience=2, min_delta=0.0)

    quiet = fit()
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        busy = fit()
    finally:
        for p in burners:
            p.kill()
            p.wait()
    strip = (lambda rows: [{k: v for k, v in r.items() if k != "minutes"} for r in rows])
    assert strip(quiet.history) == strip(busy.history) and quiet.stopped == busy.stopped
    assert quiet.selected["step"] == busy.selected["step"]
    a, b = quiet.net.state_dict(), busy.net.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    ranks = [x.rank(observe(obf), [list(o.key.originals) for o in obf]) for x in (quiet, busy)]
    assert np.array_equal(ranks[0], ranks[1])
