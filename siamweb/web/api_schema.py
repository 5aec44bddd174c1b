"""How the API describes itself: the OpenAPI schema states what the server enforces.

Every view's schema class is ``ApiSchema``. Beside naming components after their views, it adds
the answers every operation can give whatever its own ``extend_schema`` lists (401 to a caller
without a token, 403 where a role is needed, 404 on a path with an id or a paginated list, 429 to
an address that sent too many invalid tokens, 503 when the database is briefly unavailable, …),
each with a JSON body, and states the limits the
settings set on texts, lists and ``k`` (read when the schema is generated, so an overridden
setting is described as it is enforced).
"""

from __future__ import annotations

import inspect
from typing import Any

from django.conf import settings
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated

from annotations.text_rule import DROPPED, REFUSED_RANGES
from siamweb.ids import MAX_ID


def _class_char(point: int) -> str:
    # Only characters of the Basic Multilingual Plane are named (see _stated_in_the_pattern).
    return f"\\u{point:04x}"


def _stated_in_the_pattern(first: int, last: int) -> bool:
    # The pattern names the refused characters of the Basic Multilingual Plane but the
    # surrogates. Those are refused too, but a class naming them breaks the tools that read the
    # schema: no UTF-8 text holds a lone surrogate, so Rust's regex engine (schemathesis validates
    # with it) cannot compile such a class; and schemathesis rewrites a character beyond the BMP
    # as \U0001xxxx, which no ECMA-262 engine reads. Either way the whole pattern was dropped and
    # nothing was generated from it. The description names them instead.
    return last <= 0xFFFF and not (first <= 0xDFFF and last >= 0xD800)


UNSTATED_RANGES = [
    (first, last) for first, last in REFUSED_RANGES if not _stated_in_the_pattern(first, last)
]
_UNSTATED = ", ".join(
    f"U+{first:04X}" if first == last else f"U+{first:04X}-{last:04X}"
    for first, last in UNSTATED_RANGES
)

# What the text rule (annotations.text_rule) refuses, and what clean_text strips (the
# characters str.isspace() is true of, and the dropped ones), as JSON Schema character classes.
REFUSED = "".join(
    _class_char(first) if first == last else f"{_class_char(first)}-{_class_char(last)}"
    for first, last in REFUSED_RANGES
    if _stated_in_the_pattern(first, last)
)
SPACE = (
    r"\t\n\r\u000b\u000c\u001c-\u001f \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f"
    r"\u205f\u3000\ufe00-\ufe0f\u180b-\u180d\u180f"
    + "".join(_class_char(ord(char)) for char in DROPPED)
)


def text_pattern(forbidden: str = "") -> str:
    """No refused character (nor any of ``forbidden``), and at least one that is not a space."""
    others = REFUSED + forbidden
    return f"^[^{others}]*[^{others}{SPACE}][^{others}]*$"


def any_text_pattern() -> str:
    """No refused character; empty or blank allowed."""
    return f"^[^{REFUSED}]*$"


def text_description(help_text: object) -> str:
    """The field's own words, then what its pattern cannot say."""
    own = f"{help_text} " if help_text else ""
    return f"{own}Also refused, though the pattern does not name them: {_UNSTATED}."


# Path parameters as the URL patterns match them: <slug:…> and <int:…>.
SLUG_PATTERN = "^[-a-zA-Z0-9_]+$"


class ErrorSerializer(serializers.Serializer):
    """An error about the request as a whole: who asks, what is asked for, or the server's state."""

    detail = serializers.CharField()


ERROR_DESCRIPTIONS = {
    "400": 'Bad input: `{"<field>": ["what is wrong"]}`',
    "401": "No valid token or session",
    "403": "Not allowed for this user's role",
    "404": "No such object (or page)",
    "406": "The Accept header asks for something other than JSON",
    "409": 'The state does not allow it: `{"<field>": ["why"]}`',
    "415": "The body is not JSON (nor a form)",
    "429": "Too many invalid tokens from this address (SIAMWEB_BAD_TOKEN_RATE): its invalid "
    "tokens are refused until Retry-After seconds have passed (a valid one is served)",
    "503": "The database is busy or unavailable; nothing was stored. Retry after Retry-After "
    "seconds",
}
# Bodies that name the fields at fault ({"<field>": [...]}) rather than one detail.
FIELD_ERROR_CODES = {"400", "409"}


class ApiSchema(AutoSchema):
    """Components named after the view that declares them: every view nests its own
    ``InputSerializer``/``OutputSerializer``, and the class name alone would collide."""

    def get_serializer_name(self, serializer, direction) -> str:
        return type(serializer).__qualname__.replace(".", "")

    def get_description(self) -> str:
        # The view's own docstring or its method's, never one inherited from a base class
        # (those say how the API works, not what this operation does).
        method_doc = getattr(self.view, self.method.lower(), None).__doc__
        view_doc = type(self.view).__dict__.get("__doc__")
        return inspect.cleandoc(method_doc or view_doc or "")

    def _get_request_for_media_type(self, serializer, direction="request"):
        # drf-spectacular describes a PATCH body as partial (no field required), as DRF's generic
        # views treat it; ours validate the whole body, so its required fields are required.
        if self.method != "PATCH":
            return super()._get_request_for_media_type(serializer, direction)
        self.method = "PUT"
        try:
            return super()._get_request_for_media_type(serializer, direction)
        finally:
            self.method = "PATCH"

    def get_operation(self, path, path_regex, path_prefix, method, registry):
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is not None:
            self._limit_path_parameters(operation)
            self._add_error_responses(operation)
        return operation

    def _limit_path_parameters(self, operation: dict) -> None:
        for parameter in operation.get("parameters", []):
            if parameter["in"] != "path":
                continue
            schema = parameter["schema"]
            if schema.get("type") == "integer":
                schema.update(minimum=0, maximum=MAX_ID)
            elif schema.get("type") == "string":
                schema.setdefault("pattern", SLUG_PATTERN)

    def _error_codes(self, operation: dict) -> set[str]:
        parameters = operation.get("parameters", [])
        paginated = any(p["in"] == "query" and p["name"] in {"page", "cursor"} for p in parameters)
        has_input = (
            "requestBody" in operation
            or any(p["in"] == "header" for p in parameters)
            or any(p["in"] == "query" and p["name"] not in {"page", "cursor"} for p in parameters)
            # an id past what the database's integers hold is refused as bad input
            or any(p["in"] == "path" and p["schema"].get("type") == "integer" for p in parameters)
        )
        codes = {"401", "406", "429", "503"}
        if has_input:
            codes.add("400")
        if any(p["in"] == "path" for p in parameters) or paginated:
            codes.add("404")
        if "requestBody" in operation:
            codes.add("415")
        if any(cls is not IsAuthenticated for cls in self.view.permission_classes):
            codes.add("403")
        return codes

    def _add_error_responses(self, operation: dict) -> None:
        error = self.resolve_serializer(ErrorSerializer, "response").ref
        fields = {"type": "object", "additionalProperties": {}}
        responses = operation["responses"]
        for code in self._error_codes(operation) | {c for c in responses if c >= "400"}:
            response = responses.setdefault(code, {"description": ERROR_DESCRIPTIONS[code]})
            if "content" not in response or code not in FIELD_ERROR_CODES:
                schema = fields if code in FIELD_ERROR_CODES else error
                response["content"] = {"application/json": {"schema": schema}}
        operation["responses"] = dict(sorted(responses.items()))


# --- fields whose limits come from the settings ------------------------------------------------


class CleanTextFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "siamweb.web.fields.CleanTextField"

    def map_serializer_field(self, auto_schema, direction) -> dict[str, Any]:
        field = self.target
        schema: dict[str, Any] = {
            "type": "string",
            "minLength": 1,
            "maxLength": field.limit(),
            "pattern": text_pattern(field.forbidden),
        }
        schema["description"] = text_description(field.help_text)
        return schema


class CleanMultilineTextFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "siamweb.web.fields.CleanMultilineTextField"

    def map_serializer_field(self, auto_schema, direction) -> dict[str, Any]:
        field = self.target
        schema: dict[str, Any] = {
            "type": "string",
            "maxLength": field.text_max_length,
            "pattern": any_text_pattern() if field.allow_blank else text_pattern(),
        }
        schema["description"] = text_description(field.help_text)
        return schema


class TextListFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "siamweb.web.fields.TextListField"

    def map_serializer_field(self, auto_schema, direction) -> dict[str, Any]:
        return {
            "type": "array",
            "items": auto_schema._map_serializer_field(self.target.child, direction),
            "minItems": 1,
            "maxItems": settings.SIAMWEB_MAX_TEXTS_PER_REQUEST,
        }


class KFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "siamweb.web.fields.KField"

    def map_serializer_field(self, auto_schema, direction) -> dict[str, Any]:
        return {
            "type": "integer",
            "minimum": 1,
            "maximum": settings.SIAMWEB_MAX_K,
            "description": f"Groups to rank (default {settings.SIAMWEB_DEFAULT_K})",
        }


class TaxonomySlugFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "siamweb.web.fields.TaxonomySlugField"

    def map_serializer_field(self, auto_schema, direction) -> dict[str, Any]:
        return {
            "type": "string",
            "pattern": SLUG_PATTERN,
            "maxLength": 64,
            "description": "A taxonomy's slug",
        }


class FileFieldSchema(OpenApiSerializerFieldExtension):
    """An uploaded file is the bytes of a multipart part; drf-spectacular describes the field as a
    URI (what a file field holds in an answer), which no client can send."""

    target_class = "rest_framework.fields.FileField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction) -> dict[str, Any]:
        schema = {"type": "string", "format": "binary" if direction == "request" else "uri"}
        if self.target.help_text:
            schema["description"] = str(self.target.help_text)
        return schema
