"""Markdown that admins write (guidelines), rendered for curators' pages without raw HTML.

markdown-it escapes any HTML in the source (``html`` off) and refuses ``javascript:``,
``vbscript:``, ``file:`` and non-image ``data:`` links, so what an admin writes cannot run in
a curator's browser.
"""

from __future__ import annotations

from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def markdown_html(text: str) -> SafeString:
    return mark_safe(_MARKDOWN.render(text or ""))
