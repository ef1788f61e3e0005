"""``veil.attack`` on a ``representations`` release: attribute inference from r(x), by the bench's post-hoc
attackers and scored by the bench cell's own function (:func:`veil.bench.cells.representations.score_attribute`).

The release is what :func:`veil.protect` returned for ``leace``: the representations with the private variables
linearly erased. ``private`` is those variables, one value per row (or a dict attribute -> values, or
:class:`~veil.corpora.attributes.PrivateVariables`). The harness splits the rows as the bench's corpora are split
(60% train, 20% dev, 20% test, drawn with the seed): the attackers (``mlp``, the paper's; ``mlp-wide``; ``linear``)
learn from the train rows' r(x) and private values (the eavesdropper of Coavoux et al. 2018 holds labelled examples
of the same distribution), the strongest is chosen on dev, and it is scored on test against the best constant
predictor with a paired permutation test.

A training objective (``multidetask``, ``grl``, ``generation``, ``decluster``) releases nothing until a model is
trained with it on a corpus; :func:`veil.evaluate` trains one and attacks its r(x), as the bench does. Inverting
r(x) (``invert-representations``) needs query access to the released encoder, which a release of R alone does not
give; it too runs through :func:`veil.evaluate`.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from veil.errors import DataFormatError, InvalidParameterError

__all__ = ["attribute", "SPLIT"]

#: the share of rows for the attackers' train, dev and test splits
SPLIT = (0.6, 0.2, 0.2)


def attribute(release: Any, attack: str, private: Any, s: dict[str, Any],
              make_cell: Callable[..., Any]) -> tuple[Any, dict[str, Any], Any, int]:
    """(record, bench block, the cell it stands for, test rows) of ``attack`` on ``release`` (module docstring)."""
    from veil.api.kinds import private_variables
    from veil.bench.cells.common import bench_block
    from veil.bench.cells.representations import score_attribute
    from veil.experiments.adversarial.attributes import ATTACKERS, post_hoc_attackers
    from veil.results import ResultRecord

    name = release.defense.name
    if release.release is None:
        raise InvalidParameterError(
            f"{name!r} is a training objective and releases nothing by itself: veil.evaluate(corpus, {name!r}, "
            f"attacks=[{attack!r}]) trains a model with it on an attribute corpus (e.g. 'debates-2016-speaker') and "
            "attacks its r(x), as the bench does")
    if private is None:
        raise InvalidParameterError("veil.attack scores attribute inference against the truth: pass private= the "
                                    "private variables of the released rows (one value per row, in order)")
    R = np.asarray(release.release, dtype=np.float32)
    n = len(R)
    z = private_variables(private, n, "private")
    seed = int(s["seed"])
    order = np.random.default_rng([seed, 3]).permutation(n)
    a, b = int(round(SPLIT[0] * n)), int(round((SPLIT[0] + SPLIT[1]) * n))
    idx = {"train": np.sort(order[:a]), "dev": np.sort(order[a:b]), "test": np.sort(order[b:])}
    small = [k for k, v in idx.items() if len(v) < 2]
    if small:
        raise DataFormatError(f"{n} rows leave too few for the attackers' {', '.join(small)} split (60/20/20); "
                              "give at least 10 rows, and enough for each private value to appear in train")
    splits, truth, attacks, rows = post_hoc_attackers({k: R[v] for k, v in idx.items()},
                                                      {k: z.select(v) for k, v in idx.items()}, ids=idx, seed=seed,
                                                      epochs=int(s["epochs"]), defense=release.defense.config())
    cell = make_cell(release, attack, len(idx["test"]), s)
    metrics, significance, _, scored = score_attribute(attacks, rows, splits.kind,
                                                       attacks[ATTACKERS[0]].metrics["floor_score"],
                                                       len(idx["dev"]), cell.config.seed)
    config = {"attacked": f"the released representations, split {SPLIT[0]:g}/{SPLIT[1]:g}/{SPLIT[2]:g} into the "
                          f"attackers' train, dev and test rows (numpy default_rng([{seed}, 3]))",
              "n_train": len(idx["train"]), "n_dev": len(idx["dev"]), "n_test": len(idx["test"]),
              "private": {"names": list(z.names), "kind": z.kind}, "significance": significance,
              "attackers": {k: attacks[k].to_dict()["config"] for k in ATTACKERS}}
    rec = ResultRecord(method="bench", experiment=cell.id, config=config, metrics=metrics, wall_time_s=0.0)
    return rec, bench_block(**scored), cell, len(idx["test"])
