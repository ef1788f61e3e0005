"""The obfuscated parsing service of Hu et al. 2020 (Sec. 3): a client hides its words from a parsing server.

>>> from veil.services import create_app, serve, serve_workers, WorkerSpec, bind, ParseClient, Limits
>>> serve(create_app("biaffine", limits=Limits(max_sentences=128)), port=8000)      # the server (or `veil parse serve`)
>>> serve_workers(WorkerSpec("biaffine", Limits()), bind(port=8000), 2)  # two processes (`--workers 2`)
>>> with ParseClient("http://127.0.0.1:8000", obfuscator=RandomSubstitution(vocabulary=vocab, level="P3")) as c:
...     trees = [p.tree for p in c.parse([(words, tags)])]                            # trees over YOUR words

The server sees obfuscated tokens and their Penn tags, never the original words or the key. See
docs/parse-service.md. Importing this package imports neither FastAPI, httpx, torch nor spaCy.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Limits": "veil.services.parse_server",
    "LoadedParser": "veil.services.parse_server",
    "create_app": "veil.services.parse_server",
    "serve": "veil.services.parse_server",
    "bind": "veil.services.parse_server",
    "background_server": "veil.services.parse_server",
    "ParseClient": "veil.services.parse_client",
    "ParsedSentence": "veil.services.parse_client",
    "ParseServiceError": "veil.errors",
    "parse_file": "veil.services.parse_client",
    "server_health": "veil.services.parse_client",
    "WorkerSpec": "veil.services.workers",
    "serve_workers": "veil.services.workers",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'veil.services' has no attribute {name!r}")


__all__ = sorted(_LAZY)
