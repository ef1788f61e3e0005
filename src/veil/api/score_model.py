"""``veil.attack`` on a ``model`` release (plain training, DP-SGD, TextHide's model): membership inference, scored
by the bench cell's own function (:func:`veil.bench.cells.model.score_membership_attack`).

The release is the trained model :func:`veil.protect` returned; ``private`` is what it was trained on (the members,
``(vectors or texts, labels)``, or any subset of them) and the ``nonmembers`` resource is as many examples of the
same distribution that it was not trained on (a held-out split). The harness draws the same number of each (the
smaller count; the seed picks them), shuffles them into the candidates, and gives the attack black-box access to
the model's logits on them (:class:`~veil.attacks.membership.ModelAccess`, as the bench's); which candidates are
members reaches the scorer only. Shadow-model attacks (``membership-lira``, ``membership-rmia``) also learn from a
public ``population`` (labelled examples of the same task, disjoint from the candidates: the bench draws it from
the train split).

The test against 0.5 (a one-sided Mann-Whitney U test) is exact when membership is a random half of the candidates
(as in the bench's game). Here the caller chose the members and non-members: when the non-members are not a random
held-out split of the same data (another source, a later time), the test also measures that difference.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from veil.errors import DataFormatError, InvalidParameterError

__all__ = ["membership"]

_SHADOW_ATTACKS = ("membership-lira", "membership-rmia")


def _labelled(value: Any, what: str, dim: int | None) -> tuple[np.ndarray, np.ndarray]:
    from veil.api.kinds import _pair

    X, y = _pair(value, what)
    if dim is not None and X.shape[1] != dim:
        raise DataFormatError(f"{what}: vectors of dimension {X.shape[1]}, the model reads {dim}")
    return X, y


def membership(release: Any, attack: str, private: Any, s: dict[str, Any],
               make_cell: Callable[..., Any]) -> tuple[Any, dict[str, Any], Any, int]:
    """(record, bench block, the cell it stands for, candidates) of ``attack`` on ``release`` (module docstring)."""
    from veil.attacks.base import get_attack
    from veil.attacks.membership import ModelAccess
    from veil.attacks.membership.observe import MembershipTruth
    from veil.bench.cells.model import SHADOWS, MembershipResources, score_membership_attack, target_config

    model = release.release
    if private is None:
        raise InvalidParameterError("veil.attack scores membership against the truth: pass private= what the model "
                                    "was trained on, (vectors or texts, labels), and nonmembers= as many held-out "
                                    "examples it was not trained on")
    if s["nonmembers"] is None:
        raise InvalidParameterError("membership needs non-members to tell apart: pass nonmembers=(vectors or texts, "
                                    "labels), examples of the same data the model was not trained on")
    members = _labelled(private, "private (the model's training examples)", None)
    dim = members[0].shape[1]
    nonmembers = _labelled(s["nonmembers"], "nonmembers", dim)
    if len(members[0]) > int(model.n_train):
        raise DataFormatError(f"private holds {len(members[0])} examples, but the model was trained on "
                              f"{model.n_train}: give its training examples (or a subset)")
    if attack in _SHADOW_ATTACKS and s["population"] is None:
        raise InvalidParameterError(f"{attack} trains shadow models: pass population=(vectors or texts, labels), "
                                    "public examples of the same task that are neither in private nor in "
                                    "nonmembers (the bench draws them from its train split)")
    population = (np.zeros((0, dim), np.float32), np.zeros(0, np.int64)) if s["population"] is None else \
        _labelled(s["population"], "population", dim)
    n = min(len(members[0]), len(nonmembers[0]))
    if n < 1:
        raise InvalidParameterError("membership needs at least one member and one non-member")
    gen = np.random.default_rng([int(s["seed"]), 2])
    pick_in = np.sort(gen.choice(len(members[0]), size=n, replace=False))
    pick_out = np.sort(gen.choice(len(nonmembers[0]), size=n, replace=False))
    X = np.concatenate([members[0][pick_in], nonmembers[0][pick_out]])
    y = np.concatenate([members[1][pick_in], nonmembers[1][pick_out]])
    is_member = np.concatenate([np.ones(n, bool), np.zeros(n, bool)])
    order = gen.permutation(2 * n)
    access = ModelAccess.of(model, release.defense, X[order], y[order])
    cell = make_cell(release, attack, 2 * n, s)
    shadows = s["shadows"] if s["shadows"] is not None else SHADOWS[0 if cell.config.quick else 1]
    resources = MembershipResources(population=population, seed=cell.config.seed, shadows=int(shadows))
    attacker = get_attack(attack).for_bench(resources)
    config = target_config(release.defense, model, int(model.n_train), 2 * n, len(population[0]))
    rec, bench = score_membership_attack(attacker, access, MembershipTruth(is_member[order]),
                                         seed=cell.config.seed, config=config, setting=cell.id)
    rec.config["candidates_drawn"] = (f"{n} of the {len(members[0])} members given and {n} of the "
                                      f"{len(nonmembers[0])} non-members (numpy default_rng([{s['seed']}, 2]))")
    return rec, bench, cell, 2 * n
