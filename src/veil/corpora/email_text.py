"""Parse a raw RFC-822 email into subject, sender, recipients and plain body text."""

from __future__ import annotations

import email
import email.policy
from dataclasses import dataclass
from html.parser import HTMLParser

__all__ = ["ParsedEmail", "parse_email"]


@dataclass(frozen=True)
class ParsedEmail:
    subject: str
    sender: str
    to: str
    body: str


class _TextOnly(HTMLParser):
    """Collect the visible text of an HTML body (script/style dropped)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1
        elif tag in ("br", "p", "div", "tr", "li", "h1", "h2", "h3", "td"):
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


def _html_to_text(markup: str) -> str:
    parser = _TextOnly()
    try:
        parser.feed(markup)
        parser.close()
    except Exception:  # malformed markup in spam is common; keep what was parsed
        pass
    return "".join(parser.parts)


def _part_text(part: email.message.Message) -> str:
    payload = part.get_payload(decode=True)
    if payload is None:
        return ""
    charset = part.get_content_charset() or "latin-1"
    try:
        return payload.decode(charset, errors="replace")
    except LookupError:  # unknown charset name
        return payload.decode("latin-1")


def _header(msg: email.message.Message, name: str) -> str:
    try:
        value = msg.get(name, "")
        return " ".join(str(value).split())
    except Exception:  # undecodable header
        return ""


def parse_email(raw: str) -> ParsedEmail:
    """Subject, From, To and the body text (text/plain parts, else HTML reduced to text)."""
    msg = email.message_from_string(raw, policy=email.policy.compat32)
    plain, html_parts = [], []
    for part in msg.walk():
        if part.is_multipart():
            continue
        ctype = part.get_content_type()
        if ctype == "text/plain":
            plain.append(_part_text(part))
        elif ctype == "text/html":
            html_parts.append(_html_to_text(_part_text(part)))
    body = "\n".join(plain) if plain else "\n".join(html_parts)
    lines = [" ".join(ln.split()) for ln in body.splitlines()]
    body = "\n".join(ln for ln in lines if ln)
    from email.header import decode_header, make_header

    def decoded(name: str) -> str:
        value = _header(msg, name)
        try:
            return " ".join(str(make_header(decode_header(value))).split())
        except Exception:
            return value

    return ParsedEmail(subject=decoded("Subject"), sender=decoded("From"), to=decoded("To"), body=body)
