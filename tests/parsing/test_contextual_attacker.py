"""The MiniLM word-recovery attacker: its ranks' shape and range, what reaches the encoder, and that it learns."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from veil.attacks.word_recovery import AttackVocabulary, ObfuscatedText, score_attack
from veil.errors import DataWarning, InvalidParameterError

pytestmark = pytest.mark.slow  # loads the real MiniLM

ADJECTIVES = ("hot", "cold", "clever", "large", "small", "quiet")
#: one template per adjective: the original at the JJ slot (None) is fixed by its context
TEMPLATES = (
    [("the", "DT"), ("soup", "NN"), ("was", "VBD"), ("too", "RB"), (None, "JJ"), ("to", "TO"), ("eat", "VB")],
    [("the", "DT"), ("winter", "NN"), ("night", "NN"), ("was", "VBD"), (None, "JJ"), ("and", "CC"), ("dark", "JJ")],
    [("she", "PRP"), ("is", "VBZ"), ("a", "DT"), ("very", "RB"), (None, "JJ"), ("student", "NN")],
    [("the", "DT"), ("elephant", "NN"), ("is", "VBZ"), ("a", "DT"), (None, "JJ"), ("animal", "NN")],
    [("they", "PRP"), ("live", "VBP"), ("in", "IN"), ("a", "DT"), (None, "JJ"), ("flat", "NN")],
    [("please", "UH"), ("keep", "VB"), ("the", "DT"), ("library", "NN"), (None, "JJ")],
)


def _toy(n_per_template: int, seed: int) -> tuple[ObfuscatedText, list[list[str]]]:
    """Random substitution of the JJ slot by another adjective; every adjective is equally frequent."""
    rng = np.random.default_rng(seed)
    words, tags, positions, originals = [], [], [], []
    for _ in range(n_per_template):
        for template, original in zip(TEMPLATES, ADJECTIVES):
            slot = next(i for i, (w, _) in enumerate(template) if w is None)
            substitute = rng.choice([a for a in ADJECTIVES if a != original])
            words.append(tuple(str(substitute) if w is None else w for w, _ in template) + (".",))
            tags.append(tuple(t for _, t in template) + (".",))
            positions.append((slot,))
            originals.append([original])
    return ObfuscatedText(tuple(words), tuple(tags), tuple(positions)), originals


@pytest.fixture(scope="module")
def fitted():
    from veil.attacks.word_recovery import ContextualAttacker

    text, originals = _toy(8, seed=1)
    vocab = AttackVocabulary.build(text.words, min_count=1)
    tags = sorted({t for ts in text.tags for t in ts})
    atk = ContextualAttacker(vocab, tags, hidden=64, seed=0).fit(text, originals, epochs=60, max_minutes=0.3,
                                                                 batch_size=8)
    return atk, vocab


def test_it_ranks_the_original_first_where_context_decides_it(fitted):
    atk, vocab = fitted
    text, originals = _toy(5, seed=2)  # fresh substitutes
    res = score_attack(atk, text, originals, n_boot=20)
    # a context-free attacker cannot beat 1/6 top-1 (the six adjectives are equally frequent with tag JJ)
    assert res["top1"].mean >= 90.0
    assert res["coverage"].mean == 100.0
    assert atk.config()["selected_epoch"] is not None and atk.config()["features"]["fit"]["sentences"] == 48


def test_a_fit_cut_short_by_its_minute_cap_says_so():
    """The minute cap only marks a fit cut short (issue 50, item 1): the record's attacker config says "budget";
    with room to spare the fit ends on its epochs or its dev patience, never on the clock."""
    from veil.attacks.word_recovery import ContextualAttacker

    text, originals = _toy(8, seed=1)
    vocab = AttackVocabulary.build(text.words, min_count=1)
    tags = sorted({t for ts in text.tags for t in ts})
    cut = ContextualAttacker(vocab, tags, hidden=16, seed=0).fit(text, originals, epochs=5, max_minutes=1e-9,
                                                                 batch_size=8)
    assert cut.config()["stopped"] == "budget" and len(cut.history) == 1
    whole = ContextualAttacker(vocab, tags, hidden=16, seed=0).fit(text, originals, epochs=5, max_minutes=60.0,
                                                                   batch_size=8)
    assert whole.config()["stopped"] in ("epochs", "flattened") and len(whole.history) > 1


def test_one_rank_per_position_and_zero_outside_the_vocabulary(fitted):
    atk, vocab = fitted
    text, originals = _toy(2, seed=3)
    targets = [list(o) for o in originals]
    targets[0] = ["xylophonic"]  # not in the attacker's vocabulary
    ranks = atk.rank(text, targets)
    assert ranks.shape == (text.n_positions,) and ranks.dtype == np.int64
    assert (ranks >= 0).all() and (ranks <= len(vocab)).all()
    assert ranks[0] == 0 and (ranks[1:] > 0).all()


@pytest.mark.parametrize("reads", ["mask", "substitute"])
def test_the_encoder_reads_only_the_released_text(fitted, reads):
    from veil.attacks.word_recovery import ContextualAttacker

    _, vocab = fitted
    assert set(vars(_toy(1, 0)[0])) == {"words", "tags", "positions"}  # no originals in the observation
    assert list(inspect.signature(ContextualAttacker.rank).parameters) == ["self", "text", "targets"]
    atk = ContextualAttacker(vocab, ["JJ"], reads=reads, hidden=8)
    seen: list[list[str]] = []
    inner = atk.tokenizer

    class Spy:
        def __getattr__(self, name):
            return getattr(inner, name)

        def __call__(self, batch, **kw):
            seen.extend(batch)
            return inner(batch, **kw)

    atk.tokenizer = Spy()
    text, _ = _toy(1, seed=4)
    secret = [[f"secretword{i}"] for i in range(len(text))]  # originals that occur nowhere in the released text
    atk.rank(text, secret)
    read = {w for s in seen for w in s}
    assert not read & {w for s in secret for w in s}
    assert len(seen) == len(text)
    if reads == "mask":  # the obfuscated word itself is not read either
        assert sorted(tuple(w) for w in seen) == sorted(
            tuple(inner.mask_token if j in p else w for j, w in enumerate(ws)) for ws, p in zip(text.words,
                                                                                                text.positions))
    else:
        assert sorted(tuple(w) for w in seen) == sorted(text.words)


def test_positions_past_the_model_length_are_misses_with_a_warning(fitted):
    atk, vocab = fitted
    long_words = ("the",) * 600 + ("hot", ".")
    text = ObfuscatedText((long_words,), (("DT",) * 600 + ("JJ", "."),), ((3, 600),))
    with pytest.warns(DataWarning, match="count as misses"):
        ranks = atk.rank(text, [["hot", "hot"]])
    assert ranks[0] > 0 and ranks[1] == 0
    assert atk.config()["unreached_positions"]["rank"] == 1


def test_bad_parameters_are_refused(fitted):
    from veil.attacks.word_recovery import ContextualAttacker

    _, vocab = fitted
    with pytest.raises(InvalidParameterError, match="reads must be one of mask, substitute"):
        ContextualAttacker(vocab, ["JJ"], reads="bert")
    with pytest.raises(InvalidParameterError, match="layers must be <= 6"):
        ContextualAttacker(vocab, ["JJ"], layers=7)


def test_run_guesses_the_original_where_rank_puts_it_first(fitted):
    atk, _ = fitted
    text, originals = _toy(5, seed=2)
    targets = [[w.lower() for w in o] for o in originals]
    guesses = atk.run(text)
    ranks = atk.rank(text, targets)
    flat, truth = [g for gs in guesses for g in gs], [w for ws in targets for w in ws]
    assert len(flat) == len(truth) == len(ranks)
    assert all(g == t for g, t, r in zip(flat, truth, ranks) if r == 1)
    assert sum(g == t for g, t in zip(flat, truth)) >= 0.9 * len(truth)
