"""PII redaction (release kind ``text``): Presidio's analyzer and anonymizer, offline on veil's spaCy pipelines.

- :mod:`~veil.defenses.redaction.engine`: :class:`Detector` (what is found), offline by construction.
- :mod:`~veil.defenses.redaction.surrogates`: consistent pseudonyms drawn with the OS CSPRNG.
- :mod:`~veil.defenses.redaction.presidio`: :class:`PresidioRedaction`, the defense (registered ``redaction``).
"""

from veil.defenses.redaction.engine import MODELS, Detection, Detector, supported_entities
from veil.defenses.redaction.presidio import OPERATORS, SCOPES, PresidioRedaction, Redacted, RedactedSpan

__all__ = ["Detector", "Detection", "MODELS", "supported_entities", "PresidioRedaction", "Redacted", "RedactedSpan",
           "OPERATORS", "SCOPES"]
