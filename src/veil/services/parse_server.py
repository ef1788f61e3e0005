"""The parsing server of Hu et al. 2020's obfuscated parsing service (Sec. 3): trees for obfuscated sentences.

The server holds one parser (``biaffine``, ``spacy-sm`` or ``spacy-md``,
:data:`veil.parsing.evaluate.PARSER_NAMES`), loaded once when the app is made. It never needs the original words: a
client (:mod:`veil.services.parse_client`) sends each sentence's obfuscated tokens and Penn tags and puts the
returned tree (heads and labels by position) on its own words.

HTTP API (JSON, UTF-8):

* ``POST /parse`` with ``{"sentences": [{"tokens": [...], "tags": [...], "spaces": [...]}, ...]}``: ``tokens``
  and ``tags`` (one Penn tag per token) are required for every parser; ``spaces`` (whether a space follows each
  token, default one space between tokens) is optional. The biaffine parser reads tokens and tags; the spaCy
  parsers read tokens and spaces and tag for themselves (the tags are checked, then ignored). Answer:
  ``{"trees": [{"heads": [...], "labels": [...]}, ...], "parser": NAME}``, one tree per sentence in order;
  heads are 1-based, 0 marks the root.
* ``GET /health``: ``{"status": "ok", "parser": NAME, "reads": [...], "limits": {...}}``.

Every refusal is a 4xx JSON ``{"error": CODE, "detail": WHAT_TO_DO}`` and the server goes on serving: an empty or
non-UTF-8 body or malformed JSON (400), a body over ``max_body_bytes`` or more than ``max_sentences`` sentences or
``max_tokens`` tokens in a sentence (413), a missing or unknown field, a wrong type or a tags/tokens length
mismatch, or a token that is not text (a lone surrogate) (422), a body that is not ``Content-Type:
application/json`` (415: a browser page can post text/plain to a local server without asking). The body is read with
its size counted, so an oversized body is refused without being held in memory; JSON decoding, checks and parsing
run in a worker thread (the event loop keeps answering), and one parse runs at a time (the parser is not shared
between threads; torch runs on ``threads`` threads).

No TLS and no authentication: serve on loopback, or behind a TLS-terminating proxy. Request bodies are never
logged.
"""

# no `from __future__ import annotations`: FastAPI reads the endpoints' annotations (Request) at runtime
import contextlib
import json
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError, UnknownNameError

__all__ = ["Limits", "LoadedParser", "ApiError", "read_request", "create_app", "bind", "serve", "background_server"]

_log = logging.getLogger("veil.services")
_SHAPE = 'send {"sentences": [{"tokens": ["A", "word"], "tags": ["DT", "NN"]}]}'
_FIELDS = ("tokens", "tags", "spaces")


@dataclass(frozen=True)
class Limits:
    """What one request may hold: its body size in bytes, its sentences, the tokens of each sentence."""

    max_body_bytes: int = 1 << 20
    max_sentences: int = 256
    max_tokens: int = 256

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidTypeError(f"{name} must be an int, got {type(value).__name__}")
            if value < 1:
                raise InvalidParameterError(f"{name} must be >= 1, got {value}")

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


Trees = list[tuple[list[int], list[str]]]


@dataclass(frozen=True)
class LoadedParser:
    """A parser loaded once: ``parse(sentences)`` gives (heads, labels) per :class:`~veil.parsing.trees.Tree`.

    ``reads`` names the request fields the parser uses (the others are checked and ignored).
    """

    name: str
    reads: tuple[str, ...]
    parse: Callable[[Sequence[Any]], Trees]

    @classmethod
    def load(cls, name: str, *, model: Any = None, threads: int = 1, batch_size: int = 64) -> "LoadedParser":
        """Load ``name`` (``biaffine``: the model file ``model``, default the trained one; or a spaCy parser)."""
        from veil.parsing.evaluate import PARSER_NAMES

        if name not in _LOADERS or name not in PARSER_NAMES:
            raise UnknownNameError("parser", name, PARSER_NAMES)
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise InvalidParameterError(f"threads must be an int >= 1, got {threads!r}")
        if model is not None and name != "biaffine":
            raise InvalidParameterError(f"a model file is for the biaffine parser only, not {name}; leave it out")
        return _LOADERS[name](name, model, threads, batch_size)


def _load_biaffine(name: str, model: Any, threads: int, batch_size: int) -> LoadedParser:
    from veil._threads import torch_threads
    from veil.parsing.evaluate import predict_biaffine
    from veil.parsing.train import load_parser

    net = load_parser(model)

    def parse(sentences: Sequence[Any]) -> Trees:
        with torch_threads(threads):
            return predict_biaffine(net, sentences, batch_size=batch_size)

    return LoadedParser(name, ("tokens", "tags"), parse)


def _load_spacy(name: str, model: Any, threads: int, batch_size: int) -> LoadedParser:
    from veil.models.spacy_pipelines import load_spacy, parsed_trees

    nlp = load_spacy(name)  # loaded (and, for md, fetched) now

    def parse(sentences: Sequence[Any]) -> Trees:
        from spacy.tokens import Doc

        # one sentence per request item, so one root: spaCy would otherwise split it where it sees a boundary
        docs = (Doc(nlp.vocab, words=list(t.words), spaces=list(t.spaces),
                    sent_starts=[True] + [False] * (len(t) - 1)) for t in sentences)
        return [parsed_trees(doc) for doc in nlp.pipe(docs, batch_size=batch_size)]

    return LoadedParser(name, ("tokens", "spaces"), parse)


#: parser name -> loader (names as in veil.parsing.evaluate.PARSER_NAMES)
_LOADERS: dict[str, Callable[[str, Any, int, int], LoadedParser]] = {
    "biaffine": _load_biaffine, "spacy-sm": _load_spacy, "spacy-md": _load_spacy}


class ApiError(Exception):
    """A refused request: HTTP ``status``, a short ``error`` code and a ``detail`` that says what to do."""

    def __init__(self, status: int, error: str, detail: str) -> None:
        super().__init__(f"{status} {error}: {detail}")
        self.status, self.error, self.detail = status, error, detail


def _invalid(detail: str, error: str = "invalid_request") -> ApiError:
    return ApiError(422, error, detail)


def _strings(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _invalid(f"{what} must be a list of strings")
    for i, v in enumerate(value):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (\\ud800 in the JSON): not text, and not UTF-8 encodable
            raise _invalid(f"{what} {i + 1} holds a lone surrogate (\\ud800-\\udfff), which is not text; send "
                           "valid Unicode", "invalid_text") from None
    return value


def read_request(body: bytes, limits: Limits) -> list[Any]:
    """The sentences of a ``POST /parse`` body as :class:`~veil.parsing.trees.Tree` objects (placeholder heads),
    or an :class:`ApiError` naming the first problem."""
    from veil.parsing.trees import Tree

    if not body.strip():
        raise ApiError(400, "empty_body", f"the body is empty; {_SHAPE}")
    try:
        obj = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ApiError(400, "not_utf8", f"the body is not UTF-8 (byte {exc.start}); encode the JSON as UTF-8") from None
    except json.JSONDecodeError as exc:
        raise ApiError(400, "malformed_json", f"{exc.msg} at line {exc.lineno} column {exc.colno}; send one "
                                              f"valid JSON object: {_SHAPE}") from None
    except RecursionError:
        raise ApiError(400, "malformed_json", f"the JSON is nested too deeply; {_SHAPE}") from None
    if not isinstance(obj, dict):
        raise _invalid(f"the body must be a JSON object, not a {type(obj).__name__}; {_SHAPE}")
    extra = sorted(set(obj) - {"sentences"})
    if extra:
        raise _invalid(f"unknown field(s) {extra}; the body holds only \"sentences\"")
    if "sentences" not in obj:
        raise _invalid(f'the field "sentences" is missing; {_SHAPE}')
    sentences = obj["sentences"]
    if not isinstance(sentences, list) or not sentences:
        raise _invalid(f'"sentences" must be a non-empty list; {_SHAPE}')
    if len(sentences) > limits.max_sentences:
        raise ApiError(413, "too_many_sentences", f"{len(sentences)} sentences; this server takes at most "
                                                  f"{limits.max_sentences} per request: send them in smaller batches")
    out = []
    for i, s in enumerate(sentences):
        where = f"sentence {i}"
        if not isinstance(s, dict):
            raise _invalid(f'{where} must be an object with "tokens" and "tags"')
        unknown = sorted(set(s) - set(_FIELDS))
        if unknown:
            raise _invalid(f"{where}: unknown field(s) {unknown}; a sentence holds only {', '.join(_FIELDS)}")
        for name in ("tokens", "tags"):
            if name not in s:
                raise _invalid(f'{where}: the field "{name}" is missing; give one {name[:-1]} per word')
        tokens = _strings(s["tokens"], f"{where}: tokens")
        if len(tokens) > limits.max_tokens:
            raise ApiError(413, "sentence_too_long", f"{where} has {len(tokens)} tokens; this server takes at most "
                                                     f"{limits.max_tokens} per sentence: split the sentence")
        tags = _strings(s["tags"], f"{where}: tags")
        spaces = s.get("spaces", [])
        if not isinstance(spaces, list) or not all(isinstance(v, bool) for v in spaces):
            raise _invalid(f"{where}: spaces must be a list of true/false (a space after each token?)")
        if not tokens:
            raise _invalid(f"{where} has no tokens; drop empty sentences")
        for name, got in (("tags", tags), ("spaces", spaces)):
            if len(got) != len(tokens) and (name == "tags" or "spaces" in s):
                raise _invalid(f"{where}: {len(got)} {name} for {len(tokens)} tokens; give one per token",
                               "length_mismatch")
        try:
            out.append(Tree(tokens, tags, (0,) * len(tokens), ("",) * len(tokens), spaces))
        except (DataFormatError, InvalidTypeError) as exc:
            raise _invalid(f"{where}: {exc}") from None
    return out


def create_app(parser: str | LoadedParser = "biaffine", *, limits: Limits = Limits(), model: Any = None,
               threads: int = 1) -> Any:
    """The FastAPI app serving ``parser`` (a name, loaded now, or a :class:`LoadedParser`) under ``limits``."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException

    if not isinstance(limits, Limits):
        raise InvalidTypeError("limits must be a veil.services.Limits")
    loaded = parser if isinstance(parser, LoadedParser) else LoadedParser.load(parser, model=model, threads=threads)
    lock = threading.Lock()
    app = FastAPI(title="veil obfuscated parsing service", docs_url=None, redoc_url=None, openapi_url=None)

    def refuse(status: int, error: str, detail: str) -> JSONResponse:
        return JSONResponse({"error": error, "detail": detail}, status_code=status)

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return refuse(exc.status, exc.error, exc.detail)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        what = {404: ("not_found", "the service has POST /parse and GET /health"),
                405: ("method_not_allowed", "use POST /parse and GET /health")}
        error, detail = what.get(exc.status_code, ("http_error", str(exc.detail)))
        return refuse(exc.status_code, error, detail)

    def handle(body: bytes) -> dict[str, Any]:
        sentences = read_request(body, limits)
        with lock:
            try:
                trees = loaded.parse(sentences)
            except Exception as exc:  # a parser bug must not take the server down; the client is told
                _log.exception("parsing failed")
                raise ApiError(500, "parse_failed", f"the parser failed ({type(exc).__name__}); report it to the "
                                                    "server's operator") from None
        return {"trees": [{"heads": list(map(int, h)), "labels": list(lab)} for h, lab in trees],
                "parser": loaded.name}

    @app.post("/parse")
    async def parse(request: Request) -> Any:
        too_big = ApiError(413, "body_too_large", f"the body is over {limits.max_body_bytes} bytes; send fewer "
                                                  "sentences per request")
        media, _, params = request.headers.get("content-type", "").partition(";")
        charset = params.strip().lower().removeprefix("charset=").strip('"') if "charset" in params.lower() else ""
        if media.strip().lower() != "application/json" or charset not in ("", "utf-8"):
            # a browser page may post text/plain (or a form) to a local server without asking first: refused
            raise ApiError(415, "unsupported_media_type", "send the body as JSON with the header Content-Type: "
                                                          "application/json (UTF-8)")
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limits.max_body_bytes:
            raise too_big
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > limits.max_body_bytes:
                raise too_big
        return await run_in_threadpool(handle, bytes(body))

    @app.get("/health")
    async def health() -> Any:
        return {"status": "ok", "parser": loaded.name, "reads": list(loaded.reads), "limits": limits.to_dict()}

    return app


def _uvicorn_config(app: Any, host: str, port: int, log_level: str, **extra: Any) -> Any:
    import uvicorn

    # no websockets (unused), no startup/shutdown hooks, no Server header
    return uvicorn.Config(app, host=host, port=port, log_level=log_level, ws="none", lifespan="off",
                          server_header=False, **extra)


def bind(host: str = "127.0.0.1", port: int = 8000) -> Any:
    """A listening TCP socket on ``host``:``port`` (0: any free port), or one typed line saying why not (the
    port is in use, needs privileges, or the address is not this machine's), before any parser is loaded."""
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise InvalidParameterError(f"--host {host} is not an address of this machine ({exc.strerror}); use "
                                    "127.0.0.1 or another local address") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            why = "the port is in use (another server, or an earlier `veil parse serve`)"
        elif exc.errno == errno.EACCES:
            why = "ports below 1024 need administrator rights"
        else:
            why = exc.strerror or str(exc)
        raise InvalidParameterError(f"cannot listen on {host}:{port}: {why}; pass another --port (--port 0 picks a "
                                    "free one)") from None
    return sock


def serve(app: Any, *, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info",
          sock: Any = None) -> None:
    """Serve ``app`` with uvicorn until interrupted (Ctrl-C stops it cleanly), on ``sock`` (from :func:`bind`)
    or on a socket bound here."""
    import uvicorn

    sock = sock if sock is not None else bind(host, port)
    try:
        uvicorn.Server(_uvicorn_config(app, host, sock.getsockname()[1], log_level)).run(sockets=[sock])
    finally:
        sock.close()


@contextlib.contextmanager
def background_server(app: Any, *, host: str = "127.0.0.1", timeout: float = 30.0) -> Iterator[str]:
    """Run ``app`` on a real uvicorn server on a free port of ``host`` in a thread; yield its base URL.

    For tests and benchmarks: the socket is bound before the thread starts, and the block runs once the server
    accepts connections; the server stops when the block ends.
    """
    import socket
    import time

    import uvicorn

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(_uvicorn_config(app, host, port, "warning", log_config=None, access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"veil-parse-server-{port}",
                              daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the parse server on {host}:{port} did not start within {timeout:g} s")
            time.sleep(0.01)
        yield f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()
