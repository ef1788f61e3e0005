"""The API reference site (mkdocs.yml, `make docs`) builds with no warning, and its examples run.

The build is `mkdocs build --strict`, as `make docs` runs it, into a temporary folder: a link or an anchor between
pages that leads nowhere, a page of docs/ missing from the nav, a `:::` line naming no object, or a link from
docs/ to a repository file that does not exist fails it. Links to other sites are not followed (no network in
tests). Of the docstring examples the API pages show, the complete ones run here as doctests; the others are
fragments that name objects built elsewhere.
"""

from __future__ import annotations

import doctest
import importlib
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# the docs extra is part of `make setup`: a missing install is a failure here, never a skip
try:
    import mkdocs  # noqa: F401
    import mkdocstrings  # noqa: F401
except ImportError as exc:  # pragma: no cover - only on a broken setup
    raise ImportError(f"{exc.name} is not installed: `make setup` installs the `docs` extra of pyproject.toml "
                      "(pip install -e '.[test,docs]')") from exc

sys.path.insert(0, str(ROOT / "tools"))
import griffe_docstrings  # noqa: E402
import mkdocs_hooks  # noqa: E402

API = ROOT / "docs" / "api"
DIRECTIVE = re.compile(r"^::: (\S+)", re.M)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    # NO_MKDOCS_2_WARNING: Material's end-of-life banner (docs/api/index.md), printed outside MkDocs' log
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                          str(ROOT / "mkdocs.yml"), "--site-dir", str(out)], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    return run, out


def test_the_site_builds_strict_with_no_warning(site):
    run, out = site
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-4000:]
    problems = [line for line in log.splitlines() if re.match(r"\s*(WARNING|ERROR)\b", line)]
    assert problems == [], "\n".join(problems)
    assert (out / "index.html").is_file() and (out / "api" / "index.html").is_file()


def _page_html(out: Path, page: Path) -> Path:
    rel = page.relative_to(ROOT / "docs").with_suffix("")
    return out / rel.parent / "index.html" if rel.name == "index" else out / rel / "index.html"


def test_every_api_page_renders_what_it_names(site):
    run, out = site
    assert run.returncode == 0
    pages = sorted(API.rglob("*.md"))
    assert len(pages) >= 20
    for page in pages:
        named = DIRECTIVE.findall(page.read_text())
        assert named, f"{page} names no object"
        html = _page_html(out, page).read_text()
        for name in named:  # the object's own heading, or the heading of one of its members
            assert f'id="{name}"' in html or f'id="{name}.' in html, f"{page}: {name} is not on the built page"


def test_the_reference_covers_the_public_library_and_not_the_cli():
    named = {name for page in API.rglob("*.md") for name in DIRECTIVE.findall(page.read_text())}
    for module in ("veil.make_defense", "veil.run_attack", "veil.errors", "veil.defenses", "veil.defenses.base",
                   "veil.attacks", "veil.attacks.base", "veil.kinds", "veil.encoders", "veil.corpora",
                   "veil.metrics", "veil.results", "veil.controls", "veil.bench", "veil.bench.runner.run_bench",
                   "veil.report"):
        assert module in named, f"no API page renders {module}"
    for family in ("texthide", "sentdp", "truncation", "metric_dp", "none", "adversarial", "obfuscation",
                   "redaction", "dpsgd", "lm"):
        assert f"veil.defenses.{family}" in named, f"no API page renders the {family} defenses"
    assert not any(name.startswith("veil.cli") for name in named)


def test_a_link_leaving_docs_is_checked_and_shown_as_a_repository_path(tmp_path, caplog):
    repo = tmp_path
    docs = repo / "docs"
    (docs / "sub").mkdir(parents=True)
    (repo / "bench").mkdir()
    (repo / "bench" / "R.md").write_text("x")
    text = ("See [bench/R.md](../bench/R.md), [the results](../bench/R.md#top), [a page](other.md), "
            "![a plot](../bench/p.png) and [gone](../bench/missing.md).\n"
            "```\n[in code](../bench/missing.md)\n```\n")
    with caplog.at_level(logging.WARNING, logger="mkdocs.hooks.veil"):
        got = mkdocs_hooks._outside_links(text, docs, docs, repo, "page.md")
    assert got.startswith("See `bench/R.md`, the results (`bench/R.md` in the repository), [a page](other.md), "
                          "![a plot](../bench/p.png) and [gone](../bench/missing.md).")
    assert "[in code](../bench/missing.md)" in got  # code blocks untouched
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "../bench/missing.md" in warned[0]


def test_docstring_roles_render_as_code_and_lists_stand_apart():
    text = ("Uses :class:`~veil.errors.VeilError` and :func:`.observe` (:mod:`veil.kinds`).\n"
            "Every defense\n* is built;\n  carefully\n* states its guarantee.\n\n"
            ">>> x = 1\n>>> print(x)\n1\n")
    assert griffe_docstrings.markdown(text) == (
        "Uses `VeilError` and `.observe` (`veil.kinds`).\n"
        "Every defense\n\n* is built;\n  carefully\n* states its guarantee.\n\n"
        ">>> x = 1\n>>> print(x)\n1\n")


# the modules of the API pages whose docstring examples are complete programs that run offline, in a moment
# (veil.make_defense and veil.controls are run by tests/test_controls.py)
RUNNABLE = ["veil.defenses.base", "veil.attacks.base", "veil.metrics.stats"]


@pytest.mark.parametrize("module", RUNNABLE)
def test_complete_docstring_examples_run(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS, report=False)
    assert result.attempted >= 1 and result.failed == 0, f"{module}: {result.failed} of {result.attempted} failed"
