"""Typed errors and warnings used across veil.

Every user-facing failure raises a subclass of :class:`VeilError` whose message
says what to do instead. Errors about values are also ``ValueError`` subclasses
and errors about types are ``TypeError`` subclasses, so generic handlers still
work.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "VeilError",
    "UnknownNameError",
    "ResourceMissingError",
    "InvalidParameterError",
    "OptionError",
    "InvalidTypeError",
    "DataFormatError",
    "ChecksumError",
    "PullError",
    "CacheCorruptError",
    "CacheLocationError",
    "PrivacyLeakWarning",
    "NegativeControlWarning",
    "DataWarning",
    "CollapsedModelWarning",
    "FederatedError",
    "ParseServiceError",
    "NotOwnedError",
    "StaleResultError",
]


class VeilError(Exception):
    """Base class of all errors veil raises on purpose."""


class UnknownNameError(VeilError, KeyError):
    """A name (corpus, encoder, defense, attack) is not registered."""

    def __init__(self, kind: str, name: str, valid: Iterable[str]):
        self.kind = kind
        self.name = name
        self.valid = sorted(valid)
        super().__init__(
            f"unknown {kind} {name!r}; valid {kind} names: {', '.join(self.valid) or '(none)'}"
        )

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return self.args[0]


class ResourceMissingError(VeilError, FileNotFoundError):
    """A resource (corpus, model, cache entry) is not available locally."""

    def __init__(self, what: str, fix: str, *, message: str | None = None):
        self.what = what
        self.fix = fix
        super().__init__(message or f"{what} is not available; run `{fix}` to fetch it")

    def __str__(self) -> str:
        return self.args[0]


class InvalidParameterError(VeilError, ValueError):
    """A parameter has a value outside its valid range."""


class OptionError(InvalidParameterError):
    """Arguments that cannot go together (CLI: options), found before any work; the CLI shows it as a usage error
    of the command (``Invalid value: ...``), the library raises it as an InvalidParameterError."""


class InvalidTypeError(VeilError, TypeError):
    """A parameter has the wrong type."""


class NotOwnedError(VeilError, ValueError):
    """An existing path would be removed or replaced, but veil cannot tell it wrote it: refused, never deleted."""


class StaleResultError(VeilError, ValueError):
    """A result on disk was made under another configuration than the one requested: refused, never reused.

    ``keys`` names the configuration keys that differ.
    """

    def __init__(self, message: str, *, keys: Iterable[str] = ()):
        self.keys = list(keys)
        super().__init__(message)


class DataFormatError(VeilError, ValueError):
    """Input data cannot be read as the expected format (encoding, columns, labels)."""


class ChecksumError(VeilError):
    """A downloaded file does not match its pinned sha256."""


class PullError(VeilError):
    """Fetching a corpus from its registry package failed."""


class CacheCorruptError(VeilError):
    """A cached file (pulled corpus, fitted pipeline) fails its integrity check (row count or sha256).

    ``fix`` is the exact command (or call) that rebuilds it; nothing of the
    damaged file was used.
    """

    def __init__(self, what: str, problem: str, fix: str):
        self.what = what
        self.problem = problem
        self.fix = fix
        super().__init__(f"{what} is damaged: {problem}; it was not used. Run `{fix}` to rebuild it")

    def __str__(self) -> str:
        return self.args[0]


class CacheLocationError(VeilError, OSError):
    """The cache folder (``VEIL_HOME``) is a file, lies under a file, or cannot be created or written."""

    def __init__(self, message: str):
        super().__init__(message)

    def __str__(self) -> str:
        return self.args[0]


class FederatedError(VeilError, RuntimeError):
    """A federated run cannot go on: a client failed or replied with an error, or too few clients came.

    ``client`` names the client (its partition id, or its Flower node id when the partition is unknown) when one
    client is to blame; None otherwise.
    """

    def __init__(self, message: str, *, client: str | None = None):
        self.client = client
        super().__init__(message)

    def __str__(self) -> str:
        return self.args[0]


class ParseServiceError(VeilError, ConnectionError):
    """The parse server could not be reached, timed out, refused a request or answered something malformed.

    ``status`` is the HTTP status when the server answered (None otherwise); ``error`` its error code.
    """

    def __init__(self, message: str, *, status: int | None = None, error: str | None = None) -> None:
        super().__init__(message)
        self.status, self.error = status, error

    def __str__(self) -> str:
        return self.args[0]


class PrivacyLeakWarning(UserWarning):
    """A setting weakens a privacy guarantee (seeded secrets, tiny mask pools, ...)."""


class NegativeControlWarning(PrivacyLeakWarning):
    """A deliberately broken mechanism (a negative control, :mod:`veil.controls`) was built: it protects nothing."""


class DataWarning(UserWarning):
    """Input data was changed on the way in (rows dropped, texts truncated, ...)."""


class CollapsedModelWarning(DataWarning):
    """A trained classifier predicts a single class for every example (a collapsed, constant predictor)."""
