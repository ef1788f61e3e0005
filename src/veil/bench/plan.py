"""The bench's cells, built only from what defenses and attacks declare.

A cell is (corpus, defense, setting, attack) or (corpus, defense, setting, ``"utility"``). For each corpus the
planner takes every selected defense that serves the corpus' task, every setting the defense declares
(:meth:`~veil.defenses.base.Defense.bench_settings`), and pairs it with every selected attack that can read the
defense's release kind (:func:`veil.kinds.observable` of :attr:`~veil.defenses.base.Defense.releases` and
:attr:`~veil.attacks.base.Attack.observes`, and whose :meth:`bench_applies` accepts the setting), plus one utility
cell. Negative controls (deliberately broken defenses) are never planned. Floor attacks (random guessing, the
tag-frequency guess) are paired with the undefended baseline where it releases what they observe, else (obfuscated
text, which no undefended setting releases) with every defense. A defense or attack registered later adds its cells
here with no change to this module.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from veil.errors import InvalidParameterError

__all__ = ["Cell", "BenchConfig", "plan_cells", "paired_attacks", "not_runnable", "runnable", "QUICK_CORPORA",
           "FULL_CORPORA", "UTILITY"]

#: one corpus per task (the attribute corpus, debates-2016, is the small one); the full bench adds corpora per task
QUICK_CORPORA = ("rt-polarity", "drug-reviews", "silver-sm", "debates-2016-speaker", "rt-polarity-planted")
FULL_CORPORA = ("rt-polarity", "trec-questions", "sms-spam", "drug-reviews", "news-articles", "silver-sm",
                "news-articles-people", "debates-2016-speaker", "rt-polarity-planted")
UTILITY = "utility"


@dataclass(frozen=True)
class BenchConfig:
    """What every cell of one bench run shares. ``seed`` selects queries and the attackers' own choices (and
    classifier initialisation); it never derives a defense's key. ``key_seed`` (None: OS CSPRNG, the default)
    makes keys reproducible, for checks that two runs agree, and is recorded."""

    quick: bool = True
    seed: int = 0
    queries: int | None = None  # default: 500 quick, 1000 full
    epochs: int | None = None  # encodings observed per training example: default 5
    key_seed: int | None = None
    limit: int | None = None  # at most this many examples per split (smoke runs and tests); None: the slice's own

    @property
    def n_queries(self) -> int:
        return self.queries or (500 if self.quick else 1000)

    @property
    def n_epochs(self) -> int:
        return self.epochs or 5

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "n_queries": self.n_queries, "n_epochs": self.n_epochs}


def _label(setting: dict[str, Any]) -> str:
    if not setting:
        return "default"
    parts = []
    for key, value in sorted(setting.items()):
        v = f"{value:g}" if isinstance(value, float) else str(value)
        prefix = {"m": "m", "k": "k", "epsilon": "eps", "epochs": "ep"}.get(key, "")
        parts.append(f"{prefix}{v}")
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", "-".join(parts))


@dataclass(frozen=True)
class Cell:
    corpus: str
    defense: str
    setting_json: str  # the setting as canonical JSON (hashable)
    attack: str  # an attack's registry name, or "utility"
    config: BenchConfig = field(default_factory=BenchConfig)

    @property
    def setting(self) -> dict[str, Any]:
        return json.loads(self.setting_json)

    @property
    def setting_label(self) -> str:
        return _label(self.setting)

    @property
    def id(self) -> str:
        c = self.config
        budget = f"{'quick' if c.quick else 'full'}-q{c.n_queries}-e{c.n_epochs}-seed{c.seed}"
        key = "" if c.key_seed is None else f"-key{c.key_seed}"
        key += "" if c.limit is None else f"-limit{c.limit}"
        return f"{self.corpus}--{self.defense}-{self.setting_label}--{self.attack}--{budget}{key}"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "corpus": self.corpus, "defense": self.defense, "setting": self.setting,
                "setting_label": self.setting_label, "attack": self.attack, "config": self.config.to_dict()}

    @classmethod
    def make(cls, corpus: str, defense: str, setting: dict[str, Any], attack: str,
             config: BenchConfig | None = None) -> "Cell":
        return cls(corpus, defense, json.dumps(setting, sort_keys=True), attack, config or BenchConfig())


def _names(given: Any, known: list[str], what: str) -> list[str]:
    if given is None:
        return known
    out = list(given)
    unknown = [n for n in out if n not in known]
    if unknown:
        raise InvalidParameterError(f"unknown {what} {', '.join(map(repr, unknown))}; choose from "
                                    f"{', '.join(known)}")
    return out


def not_runnable(cells: list[Cell]) -> dict[str, list[str]]:
    """Release kind -> the defenses among ``cells`` whose release the bench cannot make yet
    (:data:`veil.bench.cells.RUNNABLE_RELEASES`)."""
    from veil.bench.cells import RUNNABLE_RELEASES
    from veil.defenses.base import get_defense

    out: dict[str, list[str]] = {}
    for cell in cells:
        kind = get_defense(cell.defense).releases
        if kind not in RUNNABLE_RELEASES and cell.defense not in out.setdefault(kind, []):
            out[kind].append(cell.defense)
    return {k: v for k, v in out.items() if v}


def runnable(cells: list[Cell]) -> list[Cell]:
    """``cells`` without those of defenses whose release kind has no bench cells yet (:func:`not_runnable`)."""
    skip = {d for names in not_runnable(cells).values() for d in names}
    return [c for c in cells if c.defense not in skip]


def paired_attacks(defense: str, setting: dict[str, Any], attacks: Any = None) -> list[str]:
    """The attacks (registry names, of ``attacks`` or else every registered one) the planner pairs with one setting
    of ``defense``: those that observe its release kind and whose :meth:`bench_applies` accepts the setting; a floor
    attack only on the undefended baseline, where that releases what the floor observes. The report reads this to
    tell a setting that every applicable attack measured from one that some attack never saw."""
    from veil.attacks.base import attack_names, get_attack
    from veil.defenses.base import get_defense
    from veil.kinds import observable

    releases, none_kind = get_defense(defense).releases, get_defense("none").releases
    out = []
    for aname in attack_names() if attacks is None else attacks:
        acls = get_attack(aname)
        if not acls.observes or not observable(releases, acls.observes):
            continue
        if acls.floor and defense != "none" and observable(none_kind, acls.observes):
            continue  # a floor is the undefended baseline's reference where there is one
        if acls.bench_applies(defense, setting):
            out.append(aname)
    return out


def plan_cells(corpora: Any, *, defenses: Any = None, attacks: Any = None, config: BenchConfig | None = None,
               utility: bool = True, corpus_tasks: dict[str, str] | None = None,
               runnable_only: bool = True) -> list[Cell]:
    """Every cell of a bench over ``corpora`` (names), in a stable order.

    ``defenses`` / ``attacks``: registry names to keep (None: all registered, negative controls excluded).
    ``corpus_tasks`` maps each corpus to its task (default: loaded with :func:`veil.bench.data.corpus_task`).
    ``runnable_only``: drop the cells of defenses whose release kind has no bench cells yet
    (:func:`not_runnable` of the full plan says which).
    """
    from veil.attacks.base import attack_names
    from veil.defenses.base import defense_names, get_defense

    config = config or BenchConfig()
    defense_list = _names(defenses, defense_names(), "defense")
    attack_list = _names(attacks, attack_names(), "attack")
    if corpus_tasks is None:
        from veil.bench.data import bench_task

        corpus_tasks = {name: bench_task(name) for name in corpora}
    cells: list[Cell] = []
    for corpus in corpora:
        task = corpus_tasks.get(corpus)
        if task is None:
            raise InvalidParameterError(f"corpus {corpus!r} has no classification labels; the bench needs a "
                                        f"labelled sentence or document corpus (e.g. rt-polarity, news-articles)")
        for dname in defense_list:
            dcls = get_defense(dname)
            if task not in dcls.tasks:
                continue
            for setting in dcls.bench_settings(config.quick):
                for aname in paired_attacks(dname, setting, attack_list):
                    cells.append(Cell.make(corpus, dname, setting, aname, config))
                if utility:
                    cells.append(Cell.make(corpus, dname, setting, UTILITY, config))
    return runnable(cells) if runnable_only else cells
