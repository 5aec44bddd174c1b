"""What every view of the API shares, whichever app it serves: the base views and their
permissions, pagination, and errors as JSON naming the field."""

from __future__ import annotations

import math
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination, PageNumberPagination
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.models import Taxonomy
from siamweb.parsers import SafeJSONParser
from siamweb.taxonomy_reads import taxonomy_get
from siamweb.web.api_schema import ApiSchema
from siamweb.web.permissions import CuratorReadsAdminWrites, IsAdmin, IsCurator


class JsonApi(APIView):
    """JSON in and out for anyone signed in (a token or a session)."""

    parser_classes = [SafeJSONParser]
    permission_classes = [IsAuthenticated]
    schema = ApiSchema()

    def handle_exception(self, exc):
        # An id past what the database's integers hold (SQLite raises while binding it): no
        # such row can exist, so it is the request that is wrong, not the server.
        if isinstance(exc, OverflowError):
            exc = ValidationError({"detail": f"a number in the request is out of range: {exc}"})
        return super().handle_exception(exc)


@extend_schema(exclude=True)
class ApiNotFoundApi(JsonApi):
    """Every path under the API that no endpoint matches (``/groups/abc``, ``/groups/-1``): a JSON
    404 like any other of the API, where Django would answer its HTML page."""

    def _not_found(self, request: Request, *args, **kwargs) -> Response:
        raise NotFound(f"no endpoint {request.path}")

    get = post = put = patch = delete = options = _not_found


class CuratorApi(JsonApi):
    permission_classes = [IsAuthenticated, IsCurator]


class CuratorReadsAdminWritesApi(JsonApi):
    permission_classes = [IsAuthenticated, CuratorReadsAdminWrites]


class AdminApi(JsonApi):
    permission_classes = [IsAuthenticated, IsAdmin]


class PagePagination(PageNumberPagination):
    page_size = 50

    def get_page_number(self, request, paginator):
        # DRF reads an empty ?page= as the first page; the schema says a page is an integer, so
        # it is refused like ?page=abc is.
        if request.query_params.get(self.page_query_param) == "":
            raise NotFound("Invalid page: empty")
        return super().get_page_number(request, paginator)


class CheckedCursor(CursorPagination):
    """A cursor whose position is a value of the ordering's first field: DRF checks a cursor's
    form but hands its position to the query as it comes, so a hand-edited one ("p=abc", a
    number past a bigint, "nan") was a 500 from the database instead of DRF's 404."""

    position_is_integer = True

    def decode_cursor(self, request):
        cursor = super().decode_cursor(request)
        if cursor is None or cursor.position is None:
            return cursor
        try:
            value = (int if self.position_is_integer else float)(cursor.position)
        except ValueError:
            raise NotFound(self.invalid_cursor_message) from None
        if not math.isfinite(value) or abs(value) >= 2**63:
            raise NotFound(self.invalid_cursor_message)
        return cursor


class CursorNewestFirst(CheckedCursor):
    """Keyset pagination on the primary key, newest first."""

    page_size = 50
    ordering = "-id"


def paginated(
    view: APIView, request: Request, queryset: QuerySet, serializer: type, **context: Any
) -> Response:
    paginator = view.pagination_class()
    page = paginator.paginate_queryset(queryset, request, view=view)
    data = serializer(page, many=True, context={"request": request, **context}).data
    return paginator.get_paginated_response(data)


def field_error(field: str, message: str, code: int = status.HTTP_400_BAD_REQUEST) -> Response:
    return Response({field: [message]}, status=code)


def filters_of(serializer_class: type, request: Request) -> dict:
    """Validated query parameters (the last value of a repeated one); a 400 names the bad one."""
    serializer = serializer_class(data=request.query_params.dict())
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def taxonomy_or_404(slug: str) -> Taxonomy:
    taxonomy = taxonomy_get(slug)
    if taxonomy is None:
        raise NotFound(f"no taxonomy {slug!r}")
    return taxonomy


def object_or_404(queryset: QuerySet, pk: int, what: str):
    obj = queryset.filter(pk=pk).first()
    if obj is None:
        raise NotFound(f"no {what} {pk}")
    return obj


BAD_REQUEST = OpenApiResponse(
    OpenApiTypes.OBJECT, description='Bad input: `{"<field>": ["what is wrong"]}`'
)


FORBIDDEN = OpenApiResponse(OpenApiTypes.OBJECT, description="Not allowed for this user's role")


NOT_FOUND = OpenApiResponse(OpenApiTypes.OBJECT, description="No such object")


CONFLICT = OpenApiResponse(
    OpenApiTypes.OBJECT, description='The state does not allow it: `{"<field>": ["why"]}`'
)


# What an operation that answers with the live model may say besides its result.
NO_LIVE_MODEL = OpenApiResponse(
    description='The taxonomy has no live model yet: `{"taxonomy": ["why"]}`'
)
MODEL_UNAVAILABLE = OpenApiResponse(description="The live model or index cannot be loaded")
