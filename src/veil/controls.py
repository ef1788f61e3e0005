"""Negative controls: deliberately broken mechanisms, for checking that an audit or a test catches them.

A negative control breaks a real defense's guarantee on purpose, by a known amount (DP-SGD drawing half the noise
it accounts for, DP-SGD that does not clip, DeepCandidate at twice its sensitivity or its epsilon): an audit that
passes one is broken itself. They protect nothing, so the front door (:func:`veil.make_defense`) refuses them and
this module is the one place that builds them: :func:`make_control` builds one and warns
(:class:`~veil.errors.NegativeControlWarning`), and its repr says what is broken.

>>> import warnings, veil.controls
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore", veil.controls.NegativeControlWarning)
...     broken = veil.controls.make_control("dpsgd-broken-half-noise", epsilon=1.0)
>>> repr(broken).startswith("<BROKEN NEGATIVE CONTROL 'dpsgd-broken-half-noise'")
True
"""

from __future__ import annotations

import warnings
from typing import Any

from veil.errors import InvalidParameterError, NegativeControlWarning, UnknownNameError

__all__ = ["control_names", "make_control", "NegativeControlWarning"]


def control_names() -> list[str]:
    """The registered negative controls (``veil defenses list`` lists them apart from the defenses)."""
    from veil.defenses.base import defense_names, is_control

    return [n for n in defense_names(controls=True) if is_control(n)]


def make_control(name: str, **params: Any) -> Any:
    """The negative control registered as ``name``, built with ``params`` (validated as its defense validates
    them); warns with :class:`~veil.errors.NegativeControlWarning` once it is built: it protects nothing."""
    from veil.defenses.base import defense_names, get_defense, is_control

    if name not in defense_names(controls=True):
        raise UnknownNameError("negative control", str(name), control_names())
    if not is_control(name):
        raise InvalidParameterError(f"{name!r} is a real defense, not a negative control: build it with "
                                    f"veil.make_defense({name!r}, ...); negative controls: "
                                    f"{', '.join(control_names())}")
    cls = get_defense(name)
    control = cls(**params)
    warnings.warn(f"{name} is a negative control ({getattr(cls, 'broken', 'deliberately broken')}): it protects "
                  "nothing; use it only to check that an audit or a test catches it", NegativeControlWarning,
                  stacklevel=2)
    return control
