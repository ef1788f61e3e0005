"""Render result pages (``docs/results/*.md``) from result records (``results/<method>/*.json``)."""

from veil.report.markdown import RENDERERS, register_renderer, render_all, render_method

__all__ = ["RENDERERS", "register_renderer", "render_all", "render_method"]
