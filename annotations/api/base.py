"""What every view of the API shares: the base views and their permissions, pagination, errors
as JSON naming the field, and the choice fields of the schema."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination, PageNumberPagination
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.api_schema import ApiSchema
from annotations.models import (
    FeedbackPair,
    Input,
    Judgement,
    Member,
    ReviewItem,
    Taxonomy,
)
from annotations.permissions import CuratorReadsAdminWrites, IsAdmin, IsCurator
from annotations.selectors import (
    taxonomy_get,
)
from annotations.services.review.verdicts import VerdictError
from annotations.services.taxonomy_edit.checks import TaxonomyEditError
from models_app.siamese.artifacts import ArtifactError
from siamweb.ids import IdSerializerField
from siamweb.parsers import SafeJSONParser

IDEMPOTENCY_HEADER = "Idempotency-Key"


IDEMPOTENCY_KEY_MAX_LENGTH = 100  # Judgement.idempotency_key's column


# The characters Django's username validator allows; anything else cannot name a user.
USERNAME_PATTERN = r"^[\w.@+-]+$"


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


class CursorNewestFirst(CursorPagination):
    """Keyset pagination on the primary key, newest first."""

    page_size = 50
    ordering = "-id"


class CursorQueueOrder(CursorPagination):
    """Keyset pagination in queue order: the index the queue is read from."""

    page_size = 50
    ordering = ("-priority", "id")


def paginated(
    view: APIView, request: Request, queryset: QuerySet, serializer: type, **context: Any
) -> Response:
    paginator = view.pagination_class()
    page = paginator.paginate_queryset(queryset, request, view=view)
    data = serializer(page, many=True, context={"request": request, **context}).data
    return paginator.get_paginated_response(data)


def field_error(field: str, message: str, code: int = status.HTTP_400_BAD_REQUEST) -> Response:
    return Response({field: [message]}, status=code)


def serving_error_response(exc: Exception, slug: str) -> Response:
    """No live model yet (409 naming ``taxonomy``, as the bulk and training endpoints do), or its
    files cannot be loaded (503): the live model is untouched."""
    if isinstance(exc, ArtifactError):
        detail = f"the live model or index of {slug!r} cannot be loaded: {exc}"
        return Response({"detail": detail}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
    return field_error("taxonomy", str(exc), status.HTTP_409_CONFLICT)


def verdict_error_response(exc: VerdictError) -> Response:
    field = IDEMPOTENCY_HEADER if exc.field == "idempotency_key" else exc.field
    return field_error(field, str(exc), exc.status_code)


def edit_error_response(exc: TaxonomyEditError, *, fields: dict[str, str] | None = None):
    """A refused taxonomy edit, naming the request's field (``fields`` maps service names)."""
    code = status.HTTP_409_CONFLICT if exc.conflict else status.HTTP_400_BAD_REQUEST
    return field_error((fields or {}).get(exc.field, exc.field), str(exc), code)


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


BAD_REQUEST = OpenApiResponse(
    OpenApiTypes.OBJECT, description='Bad input: `{"<field>": ["what is wrong"]}`'
)


FORBIDDEN = OpenApiResponse(OpenApiTypes.OBJECT, description="Not allowed for this user's role")


NOT_FOUND = OpenApiResponse(OpenApiTypes.OBJECT, description="No such object")


CONFLICT = OpenApiResponse(
    OpenApiTypes.OBJECT, description='The state does not allow it: `{"<field>": ["why"]}`'
)


# The queue's "every open item" status: pending, or awaiting the right group.
QUEUE_OPEN = "open"


MemberSourceField = named_choice_field("MemberSource", Member.Source.choices)


InputSourceField = named_choice_field("InputSource", Input.Source.choices)


ReviewItemStatusField = named_choice_field("ReviewItemStatus", ReviewItem.Status.choices)


QueueStatusField = named_choice_field(
    "QueueStatus", [(QUEUE_OPEN, "Pending or awaiting the right group"), *ReviewItem.Status.choices]
)


VerdictField = named_choice_field("Verdict", Judgement.Verdict.choices)


FeedbackOriginField = named_choice_field("FeedbackOrigin", FeedbackPair.Origin.choices)


class IdField(serializers.PrimaryKeyRelatedField):
    """A related row by its id (``siamweb.ids``): ``7`` and ``"7"`` read as 7; ``7.0``,
    ``" 7 "``, ``"\uff11"`` (a full-width 1), ``true`` and ``"12abc"`` are refused."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("pk_field", IdSerializerField())
        super().__init__(**kwargs)
