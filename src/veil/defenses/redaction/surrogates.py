"""Consistent pseudonyms: the same real value gets the same surrogate within a scope (a document or a release).

Surrogates are drawn with the OS CSPRNG (``secrets``) unless the caller passes a seed (experiments only). What a
surrogate looks like, by entity type:

* ``PERSON``: each name token is mapped on its own (case-folded), so "John Smith", "Smith" and "JOHN SMITH" stay
  linked ("Smith" -> the surrogate surname of "John Smith"): the first token of a multi-token name draws from the
  public list of first names, every other token from the list of surnames, a lone token from the list it belongs
  to (first names, else surnames). The lists are Faker's en_US ones (pinned ``faker``: 690 first names and 1,000
  surnames, the U.S. Census' most frequent), drawn uniformly, never a real name token of the scope: neither the
  token itself nor any token :meth:`Pseudonymizer.reserve` was given (the redaction reserves every detected name
  of the scope before it draws, so "Mary Jones" never becomes "John ..." beside a real John). The surrogate keeps the
  token's case pattern (all caps, lower case, capitalised). Honorifics (Mr, Dr, ...) are kept; digits between
  or after the name tokens (a span the union of overlapping detections typed PERSON, e.g. a name with a house
  number) are replaced as in any other value, never kept.
* ``EMAIL_ADDRESS``: ``<first>.<last><nn>@example.<com|org|net>`` (the RFC 2606 reserved domains).
* anything else: the same shape (each digit replaced by a random digit, each letter by a random letter of the same
  case, everything else kept), so a phone number stays a phone number and a date keeps its layout.

A :class:`Pseudonymizer` holds the mapping (the secret of a pseudonymised release: whoever holds it re-identifies
every surrogate); ``reset()`` starts a new scope.
"""

from __future__ import annotations

import re
import secrets
import string
from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["Pseudonymizer", "first_names", "surnames"]

_HONORIFICS = frozenset({"mr", "mrs", "ms", "miss", "dr", "prof", "sir", "madam", "mx", "rev", "jr", "sr"})
_TOKEN = re.compile(r"[^\W\d_]+(?:['\u2019-][^\W\d_]+)*", re.UNICODE)


def first_names() -> list[str]:
    from faker.providers.person.en_US import Provider

    return list(Provider.first_names)


def surnames() -> list[str]:
    from faker.providers.person.en_US import Provider

    return list(Provider.last_names)


def _cased(surrogate: str, like: str) -> str:
    if like.isupper() and len(like) > 1:
        return surrogate.upper()
    if like.islower():
        return surrogate.lower()
    return surrogate


class Pseudonymizer:
    """Consistent surrogates for detected values; ``rng`` None: OS CSPRNG (the default), an int or Generator: a
    reproducible draw (experiments only)."""

    def __init__(self, rng: Any = None) -> None:
        self._rng = rng if rng is None or isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        self._first = first_names()
        self._last = surnames()
        self._first_set = frozenset(n.casefold() for n in self._first)
        self.reset()

    def reset(self) -> None:
        """Forget every mapping and reserved token (a new scope)."""
        self._tokens: dict[tuple[str, str], str] = {}
        self._values: dict[tuple[str, str], str] = {}
        self._real: set[str] = set()

    def reserve(self, values: Iterable[str]) -> None:
        """Name tokens of real values in this scope (detected names): no surrogate drawn after this is one of
        them, whatever the order the values are replaced in."""
        for value in values:
            self._real.update(m.group().casefold() for m in _TOKEN.finditer(value))

    def __len__(self) -> int:
        return len(self._tokens) + len(self._values)

    def _below(self, n: int) -> int:
        return secrets.randbelow(n) if self._rng is None else int(self._rng.integers(n))

    def _draw(self, pool: list[str], avoid: str) -> str:
        for _ in range(64):  # rejection sampling keeps the draw uniform over the allowed names
            pick = pool[self._below(len(pool))]
            key = pick.casefold()
            if key != avoid and key not in self._real:
                return pick
        allowed = [n for n in pool if n.casefold() != avoid and n.casefold() not in self._real]
        while not allowed:  # every public name is a real one of this scope: random letters, capitalised
            word = "".join(string.ascii_lowercase[self._below(26)] for _ in range(6)).title()
            if word.casefold() != avoid and word.casefold() not in self._real:
                return word
        return allowed[self._below(len(allowed))]

    def _name_token(self, token: str, first: bool) -> str:
        key = token.casefold()
        for pool_name in (("first", "last") if first else ("last", "first")):
            if (pool_name, key) in self._tokens:
                return _cased(self._tokens[(pool_name, key)], token)
        pool_name = "first" if first else "last"
        new = self._draw(self._first if first else self._last, key)
        self._tokens[(pool_name, key)] = new
        return _cased(new, token)

    def person(self, value: str) -> str:
        """A surrogate name for ``value``, token by token (see the module docstring)."""
        matches = [m for m in _TOKEN.finditer(value) if m.group().casefold().rstrip(".") not in _HONORIFICS]
        if not matches:
            return self.shape("PERSON", value)
        out, last = [], 0
        for i, m in enumerate(matches):
            token = m.group()
            if len(matches) > 1:
                first = i == 0
            else:
                key = token.casefold()
                first = ("first", key) in self._tokens or (("last", key) not in self._tokens and key in self._first_set)
            out.append(self._digits(value[last:m.start()]))
            out.append(self._name_token(token, first))
            last = m.end()
        out.append(self._digits(value[last:]))
        return "".join(out)

    def _digits(self, piece: str) -> str:
        """``piece`` with each run of digits replaced by a consistent random one (:meth:`shape`)."""
        return re.sub(r"\d+", lambda d: self.shape("PERSON", d.group()), piece)

    def email(self, value: str) -> str:
        key = ("EMAIL_ADDRESS", value.casefold())
        if key not in self._values:
            first, last = self._draw(self._first, ""), self._draw(self._last, "")
            tld = ("com", "org", "net")[self._below(3)]
            self._values[key] = f"{first.lower()}.{last.lower()}{self._below(100):02d}@example.{tld}"
        return self._values[key]

    def shape(self, entity: str, value: str) -> str:
        """A surrogate of the same shape: digits to random digits, letters to random letters of the same case."""
        key = (entity, value)
        if key not in self._values:
            chars = []
            for c in value:
                if c.isdigit():
                    chars.append(string.digits[self._below(10)])
                elif c.isalpha():
                    pool = string.ascii_uppercase if c.isupper() else string.ascii_lowercase
                    chars.append(pool[self._below(26)])
                else:
                    chars.append(c)
            self._values[key] = "".join(chars)
        return self._values[key]

    def __call__(self, entity: str, value: str) -> str:
        if entity == "PERSON":
            return self.person(value)
        if entity == "EMAIL_ADDRESS":
            return self.email(value)
        return self.shape(entity, value)
