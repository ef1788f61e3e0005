"""Attacks on released text (release kind ``text``): what still leaks from redacted or rewritten text.

- :mod:`~veil.attacks.text.observe`: :class:`ReleasedText`, what every attack of this kind observes.
"""

from veil.attacks.text.observe import ReleasedText, observe_text

__all__ = ["ReleasedText", "observe_text"]
