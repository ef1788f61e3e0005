"""Render result pages (``docs/results/*.md``) from result records (``results/<method>/*.json``)."""

from veil.report.markdown import RENDERERS, register_renderer, render_all, render_method
from veil.report import attributes as _attributes  # noqa: E402,F401  (registers its renderer)
from veil.report import audit as _audit  # noqa: E402,F401  (registers the audit page beside sentdp's)
from veil.report import gradients as _gradients  # noqa: E402,F401  (registers its renderer)
from veil.report import inversion as _inversion  # noqa: E402,F401  (registers its renderer)
from veil.report import dpsgd as _dpsgd  # noqa: E402,F401  (registers the dpsgd and membership pages)
from veil.report import federated as _federated  # noqa: E402,F401  (registers its renderer)
from veil.report import generation as _generation  # noqa: E402,F401  (registers its renderer)
from veil.report import parsing as _parsing  # noqa: E402,F401  (registers its renderer)
from veil.report import redaction as _redaction  # noqa: E402,F401  (registers its renderer)
from veil.report import retrieval as _retrieval  # noqa: E402,F401  (registers its renderer)
from veil.report import sentdp as _sentdp  # noqa: E402,F401  (registers its renderer)
from veil.report import texthide as _texthide  # noqa: E402,F401  (registers its renderer)
from veil.report import texthide_attacks as _texthide_attacks  # noqa: E402,F401  (registers its renderer)

__all__ = ["RENDERERS", "register_renderer", "render_all", "render_method"]
