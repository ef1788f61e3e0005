"""Attacks on released text (release kind ``text``): what still leaks from redacted or rewritten text.

- :mod:`~veil.attacks.text.observe`: :class:`ReleasedText`, what every attack of this kind observes.
- :mod:`~veil.attacks.text.infilling`: :class:`Infilling` (registered ``infill``): each redacted span ranked
  among public candidate values by veil's masked LM and public frequency.
- :mod:`~veil.attacks.text.reidentify`: :class:`Reidentification` (registered ``reidentify``): each released
  document linked to its author among the candidates, from the attacker's public texts of each.
"""

from veil.attacks.text.observe import ReleasedText, observe_text

__all__ = ["ReleasedText", "observe_text"]
