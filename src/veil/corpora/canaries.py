"""Secret Sharer canaries (Carlini et al. 2019): a format with random slots, filled from the OS CSPRNG, to plant in a
private corpus at controlled insertion counts before a language model is trained on it.

A format marks each random slot ``{d}`` (one decimal digit) or ``{a}`` (one lowercase letter): ``"my account number
is {d} {d} {d} {d} {d} {d}"`` has a randomness space of ``10**6`` values, each equally likely. :func:`make_canaries`
draws ``per_count`` secrets for each insertion count (each secret distinct, so no two canaries share a value) and
:meth:`Canary.text` writes one; :meth:`CanaryFormat.candidate` writes any value of the space (for exposure: the
model's score of every candidate, or of a uniform sample of them). A format without a slot has nothing secret in
it and is refused.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Any

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError

__all__ = ["CanaryFormat", "Canary", "make_canaries", "ALPHABETS", "SECRET_SHARER"]

#: slot -> its alphabet
ALPHABETS = {"d": "0123456789", "a": "abcdefghijklmnopqrstuvwxyz"}
#: the paper's example format (Sec. 3): nine random digits
SECRET_SHARER = "my social security number is {d}{d}{d}-{d}{d}-{d}{d}{d}{d}"
_SLOT = re.compile(r"\{([a-z])\}")


@dataclass(frozen=True)
class CanaryFormat:
    """A canary format: text with random slots (module docstring)."""

    template: str

    def __post_init__(self) -> None:
        if not isinstance(self.template, str):
            raise InvalidTypeError(f"template must be a str, got {type(self.template).__name__}")
        unknown = sorted({m for m in _SLOT.findall(self.template) if m not in ALPHABETS})
        if unknown:
            raise DataFormatError(f"unknown slot(s) {', '.join('{' + u + '}' for u in unknown)} in the canary format; "
                                  "use {d} (a digit) or {a} (a lowercase letter)")
        if not self.slots:
            raise DataFormatError(f"the canary format {self.template!r} has no random slot, so nothing in it is "
                                  "secret; mark each random character {d} (a digit) or {a} (a letter)")

    @property
    def slots(self) -> tuple[str, ...]:
        return tuple(_SLOT.findall(self.template))

    @property
    def space(self) -> int:
        """The number of values the slots can take (the randomness space |R|)."""
        size = 1
        for slot in self.slots:
            size *= len(ALPHABETS[slot])
        return size

    def candidate(self, value: int) -> str:
        """The text of value ``value`` (0 .. space - 1; mixed radix, the first slot most significant)."""
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < self.space:
            raise InvalidParameterError(f"value must be an int in 0..{self.space - 1}, got {value!r}")
        chars = []
        for slot in reversed(self.slots):
            alphabet = ALPHABETS[slot]
            value, digit = divmod(value, len(alphabet))
            chars.append(alphabet[digit])
        filled = iter(reversed(chars))
        return _SLOT.sub(lambda _: next(filled), self.template)


@dataclass(frozen=True, repr=False)
class Canary:
    """One planted canary: its format, its secret ``value`` and how many times it is inserted (``count``). Its repr
    hides the value."""

    format: CanaryFormat
    value: int
    count: int

    def text(self) -> str:
        return self.format.candidate(self.value)

    def __repr__(self) -> str:
        return f"Canary(count={self.count}, space={self.format.space}, value=hidden)"


def make_canaries(template: str, counts: Any = (1, 2, 4, 8, 16), per_count: int = 10) -> list[Canary]:
    """``per_count`` canaries for each insertion count in ``counts``, every secret drawn from the OS CSPRNG and
    distinct from the others."""
    fmt = CanaryFormat(template)
    counts = list(counts)
    if not counts or any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in counts):
        raise InvalidParameterError(f"counts must be insertion counts >= 1, got {counts!r}")
    if isinstance(per_count, bool) or not isinstance(per_count, int) or per_count < 1:
        raise InvalidParameterError(f"per_count must be an int >= 1, got {per_count!r}")
    total = len(counts) * per_count
    if total > fmt.space // 2:
        raise InvalidParameterError(f"{total} distinct canaries do not fit well in a space of {fmt.space}; add "
                                    "random slots to the format")
    values: set[int] = set()
    out = []
    for count in counts:
        for _ in range(per_count):
            value = secrets.randbelow(fmt.space)
            while value in values:
                value = secrets.randbelow(fmt.space)
            values.add(value)
            out.append(Canary(fmt, value, count))
    return out
