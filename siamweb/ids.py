"""Integer ids as clients send them: an integer, or a string of ASCII digits, and nothing else.

Python's ``int()`` (and with it Django's and DRF's integer fields) reads far more: ``" 9 "``,
``"9.0"``, ``9.0``, ``"+9"``, ``"9_000"`` and any script's digits (``"\uff11"``, a full-width
one, is 1). An id read that way names a row the client never wrote; every id the product reads
goes through ``parse_id`` instead.
"""

from __future__ import annotations

import re

from django import forms
from rest_framework import serializers

# The largest id a row can have (a 64-bit signed integer, on PostgreSQL and SQLite alike).
MAX_ID = 2**63 - 1
# [0-9], not \d: \d also matches the digits of every other script.
_ASCII_DIGITS = re.compile(r"[0-9]+")
ID_ERROR = "an id is ASCII digits (0-9) alone, or a JSON integer"
# A form or a query string carries text only: no JSON integer can come there.
TEXT_ID_ERROR = "an id is ASCII digits (0-9) alone"


class IdError(ValueError):
    """A value that is not an id; the message says what an id is."""


def parse_id(value: object, *, text_only: bool = False) -> int:
    """``value`` as an id: an ``int`` (not a bool, not a float), or a ``str`` of ASCII digits,
    at most ``MAX_ID``. ``text_only``: it came as text (a form), and the refusal says so."""
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and _ASCII_DIGITS.fullmatch(value):
        number = int(value)
    else:
        raise IdError(TEXT_ID_ERROR if text_only else ID_ERROR)
    if not 0 <= number <= MAX_ID:
        raise IdError(f"must be between 0 and {MAX_ID}")
    return number


class IdSerializerField(serializers.IntegerField):
    """An id in a request body or query (DRF): ``parse_id``'s rule, then min and max (by
    default 0 and ``MAX_ID``, which the schema states)."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("min_value", 0)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(**kwargs)

    def to_internal_value(self, data) -> int:
        try:
            return parse_id(data)
        except IdError as exc:
            # DRF's own words first: clients match on them.
            raise serializers.ValidationError(f"{self.error_messages['invalid']} {exc}") from None


class IdFormField(forms.IntegerField):
    """An id in a form or a query string (Django forms): ``parse_id``'s rule, then min and max."""

    def to_python(self, value) -> int | None:
        if value in self.empty_values:
            return None
        try:
            return parse_id(value, text_only=True)
        except IdError as exc:
            message = f"{self.error_messages['invalid']} {exc}"
            raise forms.ValidationError(message, code="invalid") from None
