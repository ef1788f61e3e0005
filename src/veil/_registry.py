"""A name -> ``"module:attribute"`` registry whose modules are imported on first use only."""

from __future__ import annotations

import importlib
from typing import Any

from veil.errors import InvalidParameterError, InvalidTypeError, UnknownNameError

__all__ = ["LazyRegistry"]


class LazyRegistry:
    """Registered names of one kind (``"attack"``, ``"defense"``), resolved lazily so imports stay light."""

    def __init__(self, kind: str, entries: dict[str, str], *, controls: dict[str, str] | None = None) -> None:
        self.kind = kind
        self._entries = dict(entries)
        self._controls = set(controls or {})
        self._entries.update(controls or {})

    def register(self, name: str, target: str, *, control: bool = False) -> None:
        """Register ``name`` -> ``"package.module:ClassName"`` (imported lazily); ``control``: a negative control."""
        if not isinstance(name, str) or not name or not isinstance(target, str) or ":" not in target:
            raise InvalidTypeError(f"register_{self.kind}(name, target) takes a non-empty name and a "
                                   f"'module:attribute' string, got {name!r}, {target!r}")
        if name in self._entries and self._entries[name] != target:
            raise InvalidParameterError(f"{self.kind} {name!r} is already registered to {self._entries[name]}; "
                                        "pick another name")
        self._entries[name] = target
        if control:
            self._controls.add(name)

    def names(self, *, controls: bool = False) -> list[str]:
        """Registered names, sorted; negative controls (deliberately broken entries) only with ``controls=True``."""
        return sorted(n for n in self._entries if controls or n not in self._controls)

    def is_control(self, name: str) -> bool:
        return name in self._controls

    def get(self, name: str) -> Any:
        if name not in self._entries:
            raise UnknownNameError(self.kind, str(name), self._entries)
        module, _, attr = self._entries[name].partition(":")
        return getattr(importlib.import_module(module), attr)
