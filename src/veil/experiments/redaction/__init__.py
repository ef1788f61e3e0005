"""Experiments on PII redaction (docs/redaction.md): detection quality, and the attacks on redacted text."""
