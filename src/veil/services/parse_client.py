"""The client of Hu et al. 2020's obfuscated parsing service (Sec. 3): parse sentences without showing their words.

For each sentence the client draws an obfuscation with its own secret randomness (any object with
``obfuscate(words, tags) -> Obfuscated``: :class:`~veil.defenses.obfuscation.RandomSubstitution`, whose draws
come from the OS CSPRNG by default, or the neural obfuscator), sends ONLY the obfuscated tokens and their tags
(and the spaces, when the server's parser reads them) to a parse server (:mod:`veil.services.parse_server`), and
puts each returned tree on the ORIGINAL words: obfuscation keeps every position and its tag, so the tree of
the obfuscated sentence is, by position, the tree the client wanted. The key (replaced positions and original
words) never leaves the client; :func:`parse_file` writes it only where asked, readable by its owner only.

Numbers and addresses are outside every obfuscation level (their Penn tags, CD and ADD, are in no level of the
spectrum), so by default the client also replaces, before sending, every kept word that is a number or an
address (:func:`redaction_placeholder`: tag CD or ADD, any word holding a digit, an e-mail or web address) by a
placeholder (``0``, ``name@example.com``, ``example.com``): phone, IBAN and account digits never leave it. Those
positions join the key like the obfuscated ones. ``redact_numbers=False`` sends them in clear and warns
(:class:`~veil.errors.PrivacyLeakWarning`).

Sentences go in batches sized to the limits the server announces on ``GET /health`` (sentences per request,
tokens per sentence, body bytes), so a well-formed file is never refused for its size; a sentence longer than
the server takes is an error before anything is sent. An unreachable server, a timeout or a refusal (4xx/5xx,
with the server's own ``detail``) raise :class:`ParseServiceError`.
"""

from __future__ import annotations

import json
import os
import re
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veil.errors import (DataFormatError, InvalidParameterError, InvalidTypeError, ParseServiceError,
                         PrivacyLeakWarning, VeilError)

__all__ = ["ParseServiceError", "ParsedSentence", "ParseClient", "read_sentences", "parse_file", "ClientJob",
           "run_client", "server_health", "answer_problem", "REDACTED_TAGS", "redaction_placeholder",
           "redact_numbers"]

_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")

#: Penn tags whose words are never sent by default: CD (numbers: phone, account and IBAN digits) and ADD (e-mail
#: and web addresses); no obfuscation level hides them
REDACTED_TAGS = frozenset({"CD", "ADD"})
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+")
_WEB = re.compile(r"(?:[a-z][a-z0-9+.-]*://|www\.)\S+|\S+\.(?:com|org|net|edu|gov|io|info|biz)(?:/\S*)?",
                  re.IGNORECASE)
_DIGIT = re.compile(r"\d")


@dataclass(frozen=True)
class ParsedSentence:
    """One sentence's tree over its original words, and what the server was sent (``obfuscated.words``,
    ``obfuscated.tags``) with the client's secret ``obfuscated.key`` (its positions: the obfuscated ones and the
    ``redacted`` ones, numbers and addresses replaced by a placeholder)."""

    tree: Any  # veil.parsing.trees.Tree
    obfuscated: Any  # veil.defenses.obfuscation.Obfuscated (or the neural obfuscator's equivalent)
    redacted: tuple[int, ...] = ()


def redaction_placeholder(word: str, tag: str) -> str | None:
    """What the client sends instead of the kept ``word`` (tagged ``tag``), or None when the word may go out:
    ``name@example.com`` for an e-mail address, ``example.com`` for another address (tag ADD, or a web address),
    ``0`` for a number (tag CD, or any word holding a digit: phone numbers, IBANs, account numbers, dates)."""
    if _EMAIL.search(word):
        return "name@example.com"
    if tag == "ADD" or _WEB.fullmatch(word):
        return "example.com"
    if tag == "CD" or _DIGIT.search(word):
        return "0"
    return None


def redact_numbers(obf: Any) -> tuple[Any, tuple[int, ...]]:
    """``(obfuscated, positions)``: ``obf`` with every word it kept that :func:`redaction_placeholder` names
    replaced by its placeholder, those positions added to its key (with their original words), and the positions.
    Positions the obfuscator already replaced hold public substitutes and are left as they are."""
    from veil.defenses.obfuscation.random_substitution import ObfuscationKey, Obfuscated

    done = set(obf.key.positions)
    words = list(obf.words)
    redacted = []
    for i, (word, tag) in enumerate(zip(words, obf.tags)):
        placeholder = None if i in done else redaction_placeholder(word, tag)
        if placeholder is not None:
            redacted.append(i)
            words[i] = placeholder
    if not redacted:
        return obf, ()
    originals = dict(zip(obf.key.positions, obf.key.originals))
    originals.update((i, obf.words[i]) for i in redacted)
    order = sorted(originals)
    key = ObfuscationKey(tuple(order), tuple(originals[i] for i in order))
    return Obfuscated(tuple(words), tuple(obf.tags), key), tuple(redacted)


def _as_tree(item: Any, i: int) -> Any:
    """A :class:`~veil.parsing.trees.Tree` (placeholder heads) from a Tree or a ``(words, tags[, spaces])`` tuple."""
    from veil.parsing.trees import Tree

    if isinstance(item, Tree):
        return item
    if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
        raise InvalidTypeError(f"sentence {i}: give a Tree or a (words, tags) or (words, tags, spaces) tuple")
    words, tags = list(item[0]), list(item[1])
    spaces = list(item[2]) if len(item) == 3 else []
    try:
        return Tree(words, tags, (0,) * len(words), ("_",) * len(words), spaces)
    except DataFormatError as exc:
        raise DataFormatError(f"sentence {i}: {exc}") from None


def _request(http: Any, url: str, timeout: float, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
    """One HTTP call; every failure becomes a :class:`ParseServiceError` that says what to do."""
    import httpx

    where = f"the parse server at {url}"
    try:
        res = http.request(method, path, **kwargs)
    except httpx.TimeoutException:
        raise ParseServiceError(f"{where} did not answer within {timeout:g} s; raise the timeout or send fewer "
                                "sentences per request") from None
    except httpx.HTTPError as exc:
        raise ParseServiceError(f"cannot reach {where} ({type(exc).__name__}: {exc}); start one with `veil parse "
                                "serve` or check the URL") from None
    try:
        body = res.json()
    except ValueError:
        body = None
    if res.status_code >= 400:
        if isinstance(body, dict) and "error" in body:
            raise ParseServiceError(f"{where} refused the request ({res.status_code} {body['error']}): "
                                    f"{body.get('detail', '')}", status=res.status_code, error=str(body["error"]))
        raise ParseServiceError(f"{where} answered {res.status_code} ({res.text[:200]!r}); is it a veil parse "
                                "server?", status=res.status_code)
    if not isinstance(body, dict):
        raise ParseServiceError(f"{where} answered something that is not a JSON object; is it a veil parse server?",
                                status=res.status_code)
    return body


def _checked_health(body: dict[str, Any], url: str) -> dict[str, Any]:
    limits = body.get("limits")
    parser, reads = body.get("parser"), body.get("reads", ["tokens", "tags"])
    if body.get("status") != "ok" or not isinstance(limits, dict) or not all(
            isinstance(limits.get(k), int) and not isinstance(limits.get(k), bool) and limits[k] >= 1
            for k in ("max_body_bytes", "max_sentences", "max_tokens")) or not isinstance(parser, str) or \
            not parser.isprintable() or not 0 < len(parser) <= 40 or not isinstance(reads, list) or \
            not set(reads) <= {"tokens", "tags", "spaces"}:
        raise ParseServiceError(f"the parse server at {url} is not healthy or not a veil parse server "
                                f"(GET /health: {str(body)[:200]})")
    return body


def server_health(server_url: str, *, timeout: float = 10.0) -> dict[str, Any]:
    """``GET /health`` of the server at ``server_url`` (its parser, the fields it reads, its limits)."""
    import httpx

    with httpx.Client(base_url=server_url.rstrip("/"), timeout=timeout) as http:
        return _checked_health(_request(http, server_url, timeout, "GET", "/health"), server_url)


class ParseClient:
    """Parse sentences through the server at ``server_url`` without sending their hidden words, nor (by default)
    their numbers and addresses (module docstring).

    ``obfuscator``: any object with ``obfuscate(words, tags)`` returning ``.words``, ``.tags`` and ``.key``
    (``.key.restore(words)`` gives the original words back). ``redact_numbers``: replace every kept number and
    address by a placeholder before sending (:func:`redact_numbers`; False sends them in clear and warns).
    ``batch_sentences``: sentences per request (fewer when the server takes fewer). ``timeout``: seconds to wait
    for each answer. Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, server_url: str, *, obfuscator: Any, batch_sentences: int = 64, timeout: float = 120.0,
                 redact_numbers: bool = True) -> None:
        import httpx

        if not isinstance(server_url, str) or not server_url.startswith(("http://", "https://")):
            raise InvalidParameterError(f"server_url must be an http:// or https:// URL, got {server_url!r}")
        if not callable(getattr(obfuscator, "obfuscate", None)):
            raise InvalidTypeError("obfuscator must have an obfuscate(words, tags) method (e.g. RandomSubstitution)")
        if isinstance(batch_sentences, bool) or not isinstance(batch_sentences, int) or batch_sentences < 1:
            raise InvalidParameterError(f"batch_sentences must be an int >= 1, got {batch_sentences!r}")
        if not timeout > 0:
            raise InvalidParameterError(f"timeout must be > 0 seconds, got {timeout!r}")
        if not isinstance(redact_numbers, bool):
            raise InvalidTypeError(f"redact_numbers must be True or False, got {redact_numbers!r}")
        if not redact_numbers:
            warnings.warn("redact_numbers=False: numbers (phone, IBAN and account digits) and e-mail and web "
                          "addresses go to the parse server in clear (no obfuscation level hides their tags, CD and "
                          "ADD); keep the default to send placeholders instead", PrivacyLeakWarning, stacklevel=2)
        self.redact_numbers = redact_numbers
        self.server_url = server_url.rstrip("/")
        host = httpx.URL(self.server_url).host
        if self.server_url.startswith("http://") and host not in _LOOPBACK:
            warnings.warn(f"plain HTTP to {host}: anyone on the path reads the obfuscated sentences (the kept words "
                          "and the tags); use an https:// server", PrivacyLeakWarning, stacklevel=2)
        self.obfuscator, self.batch_sentences, self.timeout = obfuscator, batch_sentences, timeout
        self._http = httpx.Client(base_url=self.server_url, timeout=timeout)
        self._health: dict[str, Any] | None = None
        self.requests = 0

    def __enter__(self) -> "ParseClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        return _request(self._http, self.server_url, self.timeout, method, path, **kwargs)

    def health(self) -> dict[str, Any]:
        """The server's ``GET /health``: its parser, the fields it reads and its limits (asked once, then kept)."""
        if self._health is None:
            self._health = _checked_health(self._call("GET", "/health"), self.server_url)
        return self._health

    def _payload(self, tree: Any, obf: Any, reads: Sequence[str]) -> dict[str, Any]:
        out: dict[str, Any] = {"tokens": list(obf.words), "tags": list(obf.tags)}
        if "spaces" in reads:
            out["spaces"] = list(tree.spaces)
        return out

    def _obfuscate(self, tree: Any, i: int) -> tuple[Any, tuple[int, ...]]:
        obf = self.obfuscator.obfuscate(list(tree.words), list(tree.tags))
        if len(obf.words) != len(tree) or len(obf.tags) != len(tree) or \
                list(obf.key.restore(obf.words)) != list(tree.words):
            raise DataFormatError(f"sentence {i}: the obfuscator changed the sentence's length or its key does not "
                                  "restore the original words; the tree could not be put back on them")
        return redact_numbers(obf) if self.redact_numbers else (obf, ())

    def parse(self, sentences: Iterable[Any], *, progress: bool = False) -> list[ParsedSentence]:
        """The tree of each sentence (a :class:`~veil.parsing.trees.Tree`, or ``(words, tags[, spaces])``)."""
        from veil.progress import progress_bar

        trees = [_as_tree(s, i) for i, s in enumerate(sentences)]
        health = self.health()
        limits, reads = health["limits"], health.get("reads", ["tokens", "tags"])
        for i, t in enumerate(trees):
            if len(t) > limits["max_tokens"]:
                raise DataFormatError(f"sentence {i} has {len(t)} tokens; the server takes at most "
                                      f"{limits['max_tokens']} per sentence: split it")
        per_request = min(self.batch_sentences, limits["max_sentences"])
        empty = len(b'{"sentences": []}')
        out: list[ParsedSentence] = []
        batch: list[tuple[Any, Any, tuple[int, ...]]] = []
        size = empty
        with progress_bar(len(trees), f"parsing via {self.server_url}", progress) as advance:
            for i, tree in enumerate(trees):
                obf, redacted = self._obfuscate(tree, i)
                item = len(json.dumps(self._payload(tree, obf, reads), ensure_ascii=False).encode("utf-8")) + 2
                if empty + item > limits["max_body_bytes"]:
                    raise DataFormatError(f"sentence {i} alone is {item} bytes of JSON; the server takes at most "
                                          f"{limits['max_body_bytes']} per request: split it")
                if batch and (len(batch) == per_request or size + item > limits["max_body_bytes"]):
                    out += self._send(batch, len(out), reads)
                    advance(len(batch))
                    batch, size = [], empty
                batch.append((tree, obf, redacted))
                size += item
            if batch:
                out += self._send(batch, len(out), reads)
                advance(len(batch))
        return out

    def _send(self, batch: list[tuple[Any, Any, tuple[int, ...]]], start: int,
              reads: Sequence[str]) -> list[ParsedSentence]:
        from veil.parsing.trees import Tree

        body = self._call("POST", "/parse", json={"sentences": [self._payload(t, o, reads) for t, o, _ in batch]})
        self.requests += 1
        answers = body.get("trees")
        if not isinstance(answers, list) or len(answers) != len(batch):
            raise ParseServiceError(f"the parse server at {self.server_url} answered "
                                    f"{len(answers) if isinstance(answers, list) else 'no'} trees for {len(batch)} "
                                    "sentences")
        out = []
        for k, ((tree, obf, redacted), ans) in enumerate(zip(batch, answers)):
            problem = answer_problem(ans, len(tree))
            if problem is None:
                try:
                    parsed = Tree(tree.words, tree.tags, tuple(ans["heads"]), tuple(ans["labels"]), tree.spaces,
                                  tree.upos, dict(tree.meta))
                except (TypeError, KeyError, VeilError) as exc:
                    problem = str(exc)
            if problem is not None:
                raise ParseServiceError(f"the parse server at {self.server_url} answered a malformed tree for "
                                        f"sentence {start + k} ({problem}); nothing was written. Is it a veil parse "
                                        "server you trust? Start one with `veil parse serve`", error="bad_answer")
            out.append(ParsedSentence(parsed, obf, redacted))
        return out


def answer_problem(answer: Any, n: int) -> str | None:
    """None when a server's ``answer`` for a sentence of ``n`` words is a tree veil can write: ``heads`` and
    ``labels`` lists of ``n`` items, the heads one tree (ints in 0..n, one root, no cycle), every label a known
    dependency label (no whitespace or control characters, which would inject lines into the CoNLL-U);
    otherwise what is wrong. The server is not trusted."""
    from veil.parsing.trees import check_heads, check_label

    if not isinstance(answer, dict) or set(answer) != {"heads", "labels"}:
        keys = sorted(answer) if isinstance(answer, dict) else type(answer).__name__
        return f"an answer holds exactly \"heads\" and \"labels\", got {str(keys)[:80]}"
    heads, labels = answer["heads"], answer["labels"]
    if not isinstance(heads, list) or not isinstance(labels, list) or len(heads) != n or len(labels) != n:
        return (f"{len(heads) if isinstance(heads, list) else 'no'} heads and "
                f"{len(labels) if isinstance(labels, list) else 'no'} labels for {n} words")
    bad_tree = check_heads(heads)
    if bad_tree is not None:
        return f"not a tree: {bad_tree}"
    bad = [i + 1 for i, lab in enumerate(labels) if not check_label(lab)]
    if bad:
        return f"word {bad[0]}'s label {str(labels[bad[0] - 1])[:40]!r} is not a known dependency label"
    return None


def read_sentences(path: str | os.PathLike) -> list[Any]:
    """The sentences of ``path`` as :class:`~veil.parsing.trees.Tree` objects: a ``.conllu`` file keeps its
    tokens, Penn tags (XPOS), spaces, UPOS and comments; any other file is plain text, one sentence per line,
    tokenised and tagged by spaCy sm (:func:`veil.parsing.obfuscate_file.read_tagged`; one space between words)."""
    from veil.parsing.obfuscate_file import read_tagged
    from veil.parsing.trees import read_conllu_trees

    if Path(path).suffix == ".conllu":
        return read_conllu_trees(path)
    return [_as_tree(s, i) for i, s in enumerate(read_tagged(path))]


def parse_file(path: str | os.PathLike, out: str | os.PathLike, client: ParseClient, *,
               key_path: str | os.PathLike | None = None, progress: bool = True) -> dict[str, Any]:
    """Parse every sentence of ``path`` through ``client``; write the trees over the original words to ``out``
    (CoNLL-U, atomically) and the key to ``key_path`` (mode 0600) when given. Returns a summary (no words)."""
    from veil._io import atomic_write
    from veil.parsing.trees import write_conllu

    t0 = time.perf_counter()
    health = client.health()  # fails fast on a wrong URL, before the file is read
    sentences = read_sentences(path)
    parsed = client.parse(sentences, progress=progress)
    if key_path is not None:
        with atomic_write(key_path, "w", perms=0o600) as fh:
            json.dump([{"positions": list(p.obfuscated.key.positions),
                        "originals": list(p.obfuscated.key.originals)} for p in parsed], fh)
    write_conllu(out, [p.tree for p in parsed])
    return {"input": str(path), "out": str(out), "key": None if key_path is None else str(key_path),
            "server": client.server_url, "parser": health.get("parser"), "sentences": len(parsed),
            "words": sum(len(p.tree) for p in parsed),
            "replaced": sum(len(p.obfuscated.key.positions) - len(p.redacted) for p in parsed),
            "redacted": sum(len(p.redacted) for p in parsed), "requests": client.requests,
            "seconds": round(time.perf_counter() - t0, 3)}


@dataclass(frozen=True)
class ClientJob:
    """``veil parse client``: sentences of ``input`` obfuscated at ``level`` and parsed by the server at
    ``server``. ``method`` ``"random"``: random same-POS substitution (vocabulary: ``treebank``'s training
    split); ``"neural"``: the trained neural obfuscator saved at ``neural_model`` (its level must be ``level``).
    ``seed`` None draws from the OS CSPRNG (a seed is for experiments only and warns). ``redact_numbers``: send
    placeholders for numbers and addresses (the default; False sends them in clear and warns)."""

    input: Path
    out: Path
    server: str = "http://127.0.0.1:8000"
    level: str = "P3"
    treebank: str = "silver-sm"
    key: Path | None = None
    seed: int | None = None
    batch_sentences: int = 64
    timeout: float = 120.0
    method: str = "random"
    neural_model: Path | None = None
    redact_numbers: bool = True


def _obfuscator(job: ClientJob) -> Any:
    from veil.parsing.obfuscate_file import make_obfuscator

    return make_obfuscator(job.method, level=job.level, treebank=job.treebank, seed=job.seed,
                           neural_model=job.neural_model)


def run_client(job: ClientJob, *, progress: bool = True) -> dict[str, Any]:
    """Run ``job``: the server is asked first (a wrong URL fails in a second), then the vocabulary is built."""
    from veil.defenses.obfuscation import DEFAULT_SPECTRUM

    DEFAULT_SPECTRUM.hidden_tags(job.level)  # an unknown level fails before any work
    server_health(job.server, timeout=min(job.timeout, 10.0))
    obfuscator = _obfuscator(job)
    with ParseClient(job.server, obfuscator=obfuscator, batch_sentences=job.batch_sentences,
                     timeout=job.timeout, redact_numbers=job.redact_numbers) as client:
        return parse_file(job.input, job.out, client, key_path=job.key, progress=progress)
