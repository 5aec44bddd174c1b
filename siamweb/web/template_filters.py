"""Template filters the pages of both apps use, loaded as ``{% load siamweb %}`` (the library
is named in settings' ``TEMPLATES``)."""

from __future__ import annotations

from django import template

from siamweb.humanize import percent_text

register = template.Library()


@register.filter
def percent(fraction: float | None) -> str:
    """A fraction as a percentage with the digits it was set with: 0.998 -> "99.8%", where
    ``widthratio`` said "100%"."""
    return "" if fraction is None else percent_text(fraction)
