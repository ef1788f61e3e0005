"""MkDocs hooks for veil's site (mkdocs.yml, ``hooks:``).

The pages under docs/ are read on the repository too, where a link such as ``../benchmarks/RESULTS.md`` leads to
a file beside docs/. The site holds docs/ only, so MkDocs cannot follow such a link. Here each link that leaves
docs/ is checked to name a file that exists in the repository (a missing one is a warning, which fails
``mkdocs build --strict``) and is rendered as its text and the file's repository path, without a dead link.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

# a logger under "mkdocs" so that --strict counts its warnings
log = logging.getLogger("mkdocs.hooks.veil")

# an inline Markdown link (not an image): [text](target) or [text](target#anchor)
LINK = re.compile(r"(?<!!)\[(?P<text>[^\]\n]*)\]\((?P<target>[^)\s#]+)(?P<anchor>#[^)\s]*)?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def _outside_links(markdown: str, page_dir: Path, docs: Path, repo: Path, page: str) -> str:
    def swap(match: re.Match[str]) -> str:
        target = match["target"]
        if "://" in target or target.startswith(("mailto:", "/")):
            return match[0]
        path = (page_dir / target).resolve()
        if path.is_relative_to(docs):
            return match[0]  # MkDocs validates links inside docs/ itself
        if not path.is_relative_to(repo) or not path.exists():
            log.warning("Doc file '%s' links to '%s', which is not a file of the repository", page, target)
            return match[0]
        where = path.relative_to(repo).as_posix()
        if match["text"].strip("`") in (where, target):
            return f"`{where}`"
        return f"{match['text']} (`{where}` in the repository)"

    # code blocks are left as they are; links are rewritten in the prose between them
    out, last = [], 0
    for fence in FENCE.finditer(markdown):
        out.append(LINK.sub(swap, markdown[last:fence.start()]))
        out.append(fence[0])
        last = fence.end()
    out.append(LINK.sub(swap, markdown[last:]))
    return "".join(out)


def on_page_markdown(markdown, page, config, files):  # noqa: ARG001 (MkDocs' hook signature)
    docs = Path(config["docs_dir"]).resolve()
    page_dir = (docs / page.file.src_uri).parent
    return _outside_links(markdown, page_dir, docs, docs.parent, page.file.src_uri)
