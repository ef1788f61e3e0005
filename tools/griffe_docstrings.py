"""A Griffe extension for veil's site (mkdocs.yml, mkdocstrings' ``extensions:``): veil's docstrings as Markdown.

veil's docstrings are prose that names objects with Sphinx roles (``:class:`~veil.errors.VeilError```,
``:func:`.observe```) and lists with ``*``/``-`` right under a line of text. Rendered as Markdown, a role shows as
its raw text and such a list runs into the paragraph above it. This extension rewrites, in the text that the site
renders only (the source is untouched), each role into a code span of the name as the role would show it (the last
part after ``~``) and puts a blank line before a list that follows a line of text.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:mod|class|func|meth|attr|data|obj|exc|const|ref|term):`(?P<target>[^`]+)`")
ITEM = re.compile(r"^\s*(?:[*-]|\d+\.) \S")


def _role(match: re.Match[str]) -> str:
    target = match["target"]
    if target.startswith("~"):
        target = target[1:].rsplit(".", 1)[-1]
    return f"`{target}`"


def markdown(text: str) -> str:
    """``text`` with its Sphinx roles as code spans and a blank line before each list that follows text."""
    lines = ROLE.sub(_role, text).split("\n")
    out: list[str] = []
    in_code = False
    for line in lines:
        if line.lstrip().startswith(">>>") or line.lstrip().startswith("```"):
            in_code = True
        elif not line.strip():
            in_code = False
        if (not in_code and ITEM.match(line) and out and out[-1].strip() and not ITEM.match(out[-1])
                and not out[-1].startswith((" ", "\t"))):
            out.append("")
        out.append(line)
    return "\n".join(out)


class RstRolesAsCode(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:  # noqa: ARG002 (Griffe's hook signature)
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
