"""Serializer fields every app's API shares: a named enum of the schema, a row by its id, a
number that is not a boolean, clean text with the server's limits stated in the schema
(``api_schema``), a taxonomy by its slug."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from annotations.models import Taxonomy
from annotations.text_rule import TextError, clean_multiline_text, clean_text
from siamweb.ids import IdSerializerField
from siamweb.web.api_schema import SLUG_PATTERN


def named_choice_field(name: str, choices: list[tuple[str, str]]) -> type:
    """A ChoiceField class whose choices are one named enum component of the schema.

    Several models have a ``status`` (or ``source``) with different choices; named components
    keep them apart in the schema instead of leaving the generator to guess names.
    """

    @extend_schema_field(serializers.ChoiceField(choices=choices), component_name=name)
    class NamedChoiceField(serializers.ChoiceField):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(choices=choices, **kwargs)

    NamedChoiceField.__name__ = NamedChoiceField.__qualname__ = f"{name}Field"
    return NamedChoiceField


class IdField(serializers.PrimaryKeyRelatedField):
    """A related row by its id (``siamweb.ids``): ``7`` and ``"7"`` read as 7; ``7.0``,
    ``" 7 "``, ``"\uff11"`` (a full-width 1), ``true`` and ``"12abc"`` are refused."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("pk_field", IdSerializerField())
        super().__init__(**kwargs)


class NumberField(serializers.FloatField):
    """A number: a JSON number or a numeric string. ``true`` and ``false`` are refused, which
    DRF's FloatField reads as 1.0 and 0.0 (a bool is an int to Python)."""

    def to_internal_value(self, data) -> float:
        if isinstance(data, bool):
            self.fail("invalid")
        return super().to_internal_value(data)


class CleanTextField(serializers.CharField):
    """A short text, whitespace collapsed; control characters and over-long texts refused.

    ``max_length`` defaults to SIAMWEB_MAX_TEXT_LENGTH, read when a text is validated; it counts
    the text as sent, so the schema's ``maxLength`` is the rule (``siamweb.web.api_schema``).
    ``forbidden`` are further characters refused.
    """

    def __init__(self, *, max_length: int | None = None, forbidden: str = "", **kwargs) -> None:
        super().__init__(**kwargs)
        self.text_max_length = max_length
        self.forbidden = forbidden

    def limit(self) -> int:
        return self.text_max_length or settings.SIAMWEB_MAX_TEXT_LENGTH

    def run_validation(self, data=serializers.empty):
        # CharField answers "" before to_internal_value sees it; every text goes through
        # clean_text so that an empty one gets the same error as a blank one.
        if data is serializers.empty or data is None:
            return super().run_validation(data)
        value = self.to_internal_value(data)
        self.run_validators(value)
        return value

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError("must be a string")
        limit = self.limit()
        if len(data) > limit:
            raise serializers.ValidationError(f"is longer than {limit} characters ({len(data)})")
        for char in self.forbidden:
            if char in data:
                raise serializers.ValidationError(f"may not contain {char!r}")
        try:
            return clean_text(data, max_length=limit)
        except TextError as exc:
            raise serializers.ValidationError(str(exc)) from None


class CleanMultilineTextField(serializers.CharField):
    """A text of several lines (a comment), held to the same text rule as every other
    (``clean_multiline_text``): the refused characters named, line breaks and tabs kept."""

    def __init__(self, *, max_length: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.text_max_length = max_length

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError("must be a string")
        try:
            return clean_multiline_text(data, max_length=self.text_max_length)
        except TextError as exc:
            raise serializers.ValidationError(str(exc)) from None


class TextListField(serializers.ListField):
    """Texts, at most SIAMWEB_MAX_TEXTS_PER_REQUEST of them (checked by the serializer)."""


class KField(serializers.IntegerField):
    """How many groups to rank, at most SIAMWEB_MAX_K (checked by the serializer)."""


class TaxonomySlugField(serializers.SlugRelatedField):
    """A taxonomy named by slug. Anything that cannot be a slug is refused before the lookup:
    a NUL character, say, is an error from PostgreSQL, not an unknown taxonomy."""

    default_error_messages = {
        **serializers.SlugRelatedField.default_error_messages,
        "does_not_exist": "taxonomy {value!r} does not exist.",
    }

    def __init__(self, **kwargs) -> None:
        super().__init__(slug_field="slug", queryset=Taxonomy.objects.all(), **kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str) or not re.fullmatch(SLUG_PATTERN.strip("^$"), data):
            raise serializers.ValidationError("must be a slug: letters, digits, - and _")
        if len(data) > 64:
            raise serializers.ValidationError("is longer than a slug can be (64 characters)")
        return super().to_internal_value(data)
