"""Small shared networks."""

from veil.models.heads import MLPHead

__all__ = ["MLPHead"]
