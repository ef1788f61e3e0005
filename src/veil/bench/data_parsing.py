"""The treebank as the bench sees it: dependency parsing on obfuscated text (Hu et al. 2020).

The bench corpus ``silver-sm`` is veil's silver treebank (spaCy en_core_web_sm parses of news-articles and brown,
:mod:`veil.parsing.treebank`). A quick bench uses the quick silver treebank (the first
:data:`~veil.parsing.treebank.QUICK_DOCS` documents of each source, built here in under a minute if missing); a
full bench uses the full one (built with ``veil parse treebank``; the bench refuses to start a 5-16 minute build
on its own and names the command).

Roles: the train split is public text (the obfuscator's same-tag vocabulary, and the attackers' own training
obfuscations: they know the mechanism, not its draws); the first :attr:`TreebankBenchData.n_test` test sentences are
the private sentences that are obfuscated, parsed and attacked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["TreebankBenchData", "treebank_data", "SIZES"]

#: (quick, full): private test sentences, public sentences the attackers train on, the neural attackers' minutes
SIZES = {"n_test": (500, 2000), "attack_train": (5000, 20000), "attack_minutes": (1.0, 8.0)}


@dataclass
class TreebankBenchData:
    """Everything the obfuscated-text cells of one treebank share (built once per process)."""

    name: str
    treebank: str  # the treebank source (silver-sm or silver-sm-quick)
    quick: bool
    train: list[Any]
    test: list[Any]
    vocab: Any  # TagVocabulary of the public train split: what the obfuscators draw from
    limit: int | None = None
    info: dict[str, Any] = field(default_factory=dict)
    task: str = "dependency-parsing"
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    def setup(self, seed: int) -> Any:
        """The parsing experiment's shared settings for this slice (:class:`ParsingSetup`)."""
        from veil.experiments.obfuscation.parsing import ParsingSetup

        i = 0 if self.quick else 1
        return ParsingSetup(treebank=self.treebank, n_test=len(self.test),
                            attack_train=min(SIZES["attack_train"][i], len(self.train)),
                            attack_minutes=SIZES["attack_minutes"][i], seed=seed)

    def describe(self) -> dict[str, Any]:
        counts = self.info.get("counts", {})
        return {"corpus": self.name, "task": self.task, "slice": "quick" if self.quick else "full",
                "n": len(self.test), "splits": {"train": len(self.train), "test": len(self.test)},
                "num_classes": None, "treebank": self.treebank,
                "provenance": [{"package": self.info.get("parser", "spaCy en_core_web_sm"),
                                "file": f"{self.treebank} (sources {', '.join(self.info.get('sources', []))}; "
                                        f"{counts.get('train', {}).get('sentences', '?')} train sentences)",
                                "sha256": str(self.info.get("sha256", {}).get("test", ""))}]}


def treebank_data(name: str, quick: bool, limit: int | None = None) -> TreebankBenchData:
    """The treebank ``name`` for the bench; ``limit`` caps the test sentences and the public sentences the attackers
    learn from (smoke runs, tests), not the vocabulary the obfuscators draw from."""
    from veil.defenses.obfuscation import TagVocabulary
    from veil.errors import InvalidParameterError, ResourceMissingError
    from veil.parsing.treebank import QUICK_SILVER, SILVER, SILVER_HOW, build_silver, load_treebank, silver_dir, \
        treebank_info

    if name != SILVER:
        raise InvalidParameterError(f"unknown bench treebank {name!r}; the bench parses {SILVER}")
    source = QUICK_SILVER if quick else SILVER
    if quick:
        build_silver(name=QUICK_SILVER, progress=True)
    elif not (silver_dir(SILVER) / "meta.json").is_file():
        raise ResourceMissingError("the silver treebank", "veil parse treebank",
                                   message=f"the full bench parses the silver treebank, which is not built yet; "
                                           f"{SILVER_HOW}")
    train = load_treebank("train", source)
    n_test = SIZES["n_test"][0 if quick else 1]
    test = load_treebank("test", source, limit=n_test if limit is None else min(n_test, limit))
    vocab = TagVocabulary.from_sentences((t.words, t.tags) for t in train)  # always the whole public split
    if limit is not None:  # caps what the attackers learn from, never the obfuscators' vocabulary
        train = train[:limit]
    return TreebankBenchData(name=name, treebank=source, quick=quick, train=train, test=test, vocab=vocab,
                             limit=limit, info=treebank_info(source))
