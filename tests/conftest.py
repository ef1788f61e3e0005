"""Shared fixtures.

Tests that need a built-in corpus use the corpora pulled by `make setup` into
the real cache (VEIL_HOME or ~/.cache/veil); if one is missing it is pulled
(never skipped). Tests that write to the cache point VEIL_HOME at a tmp dir.
"""

from __future__ import annotations

import contextlib
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _home():
    from veil._io import veil_home

    return veil_home()


REAL_HOME = _home()  # captured at import, before any test points VEIL_HOME elsewhere


@contextlib.contextmanager
def _real_home_env():
    old = os.environ.get("VEIL_HOME")
    os.environ["VEIL_HOME"] = str(REAL_HOME)
    try:
        yield
    finally:
        if old is None:
            del os.environ["VEIL_HOME"]
        else:
            os.environ["VEIL_HOME"] = old


@pytest.fixture(scope="session")
def real_home():
    """The cache folder holding the pulled corpora."""
    return REAL_HOME


@pytest.fixture(scope="session")
def builtin():
    """Load a built-in corpus from the real cache, pulling it first if needed."""
    import veil.corpora as vc

    cache = {}

    def get(name: str):
        if name not in cache:
            with _real_home_env():
                cache[name] = vc.load(name, pull_missing=True)
        return cache[name]

    return get
