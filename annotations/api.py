"""REST API, version 1: thin views around selectors and services.

One view per URL; each method is one operation with its own nested serializers (``Filter…`` for
query parameters, ``…InputSerializer`` for the body, ``…OutputSerializer`` for the answer).
Bad input is a 400 whose body names the field: ``{"<field>": ["what is wrong"]}``. Writes go
through the services; a service's own refusal (``VerdictError``, ``TaxonomyEditError``) is
answered the same way, 409 when it is about the state of things rather than the request.

Lists are paginated: page numbers (``count``/``next``/``previous``/``results``) where the list is
bounded by a taxonomy's size, keyset cursors (``next``/``previous``/``results``) for the lists
that grow with every input and verdict (review items, inputs, judgements, feedback pairs), so a
deep page costs what the first one does.
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce, Length
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
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

from annotations.api_schema import MAX_ID, SLUG_PATTERN, ApiSchema
from annotations.importers import MAX_CODE_LENGTH, MAX_NAME_LENGTH
from annotations.models import (
    FeedbackPair,
    Group,
    Input,
    Judgement,
    Member,
    ReviewItem,
    Taxonomy,
)
from annotations.normalization import normalize_texts
from annotations.permissions import CuratorReadsAdminWrites, IsAdmin, IsCurator
from annotations.selectors import (
    QueueFilters,
    review_card_groups,
    review_counts,
    review_queue,
    taxonomy_get,
)
from annotations.services.review import (
    VerdictError,
    inputs_submit,
    judgement_create,
    judgement_undo,
    review_item_claim,
    review_item_release,
)
from annotations.services.taxonomy_edit import (
    TaxonomyEditError,
    group_create,
    group_merge,
    group_rename,
    member_add,
    member_move,
    member_remove,
)
from models_app.services import NoLiveModel
from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.text import TextError, clean_text
from siamweb.parsers import SafeJSONParser

IDEMPOTENCY_HEADER = "Idempotency-Key"
IDEMPOTENCY_KEY_MAX_LENGTH = 100  # Judgement.idempotency_key's column
# The characters Django's username validator allows; anything else cannot name a user.
USERNAME_PATTERN = r"^[\w.@+-]+$"

# --- plumbing shared by every view of the API ---------------------------------------------


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


def verdict_error_response(exc: VerdictError) -> Response:
    field = IDEMPOTENCY_HEADER if exc.field == "idempotency_key" else exc.field
    code = status.HTTP_409_CONFLICT if exc.conflict else status.HTTP_400_BAD_REQUEST
    return field_error(field, str(exc), code)


def edit_error_response(exc: TaxonomyEditError, *, fields: dict[str, str] | None = None):
    """A refused taxonomy edit, naming the request's field (``fields`` maps service names)."""
    return field_error((fields or {}).get(exc.field, exc.field), str(exc))


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


# --- reads the API needs beside annotations.selectors -------------------------------------


def _member_count() -> Coalesce:
    """Members of the row's group, counted per row returned (not for the whole table)."""
    members = (
        Member.objects.filter(group=OuterRef("pk"))
        .order_by()
        .values("group")
        .annotate(n=Count("id"))
        .values("n")
    )
    return Coalesce(Subquery(members, output_field=IntegerField()), Value(0))


def _groups(taxonomy: Taxonomy, query: str = "") -> QuerySet[Group]:
    """The taxonomy's groups by code; with ``query`` those whose name or code has every word
    (as ``group_search`` matches them), shortest names first."""
    groups = Group.objects.filter(taxonomy=taxonomy).select_related("taxonomy")
    words = query.split()
    if not words:
        return groups.annotate(member_count=_member_count()).order_by("code")
    for word in words[:6]:
        groups = groups.filter(Q(name__icontains=word) | Q(code__istartswith=word))
    return groups.annotate(member_count=_member_count()).order_by(Length("name"), "name", "id")


def _group(pk: int) -> Group:
    groups = Group.objects.select_related("taxonomy").annotate(member_count=_member_count())
    return object_or_404(groups, pk, "group")


def _taxonomy_counts(taxonomy: Taxonomy) -> dict[str, int]:
    review = review_counts(filters=QueueFilters(taxonomy=taxonomy))
    return {
        "groups": Group.objects.filter(taxonomy=taxonomy).count(),
        "members": Member.objects.filter(taxonomy=taxonomy).count(),
        "pending_items": review["open"],
        "skipped_items": review["skipped"],
        "done_items": review["done"],
        "conflicts": review["conflicts"],
    }


def _taxonomies() -> QuerySet[Taxonomy]:
    return Taxonomy.objects.select_related("deployment__index_build__model_version__taxonomy")


def _taxonomy_with_counts(slug: str) -> Taxonomy:
    taxonomy = _taxonomies().filter(slug=slug).first()
    if taxonomy is None:
        raise NotFound(f"no taxonomy {slug!r}")
    taxonomy.counts = _taxonomy_counts(taxonomy)
    return taxonomy


def _members() -> QuerySet[Member]:
    return Member.objects.select_related("taxonomy", "group", "added_by")


def _review_items() -> QuerySet[ReviewItem]:
    return ReviewItem.objects.select_related("taxonomy", "input", "top_group", "leased_by")


def _review_item_cards(ids: list[int]) -> list[ReviewItem]:
    """The items with their predictions, in the order of ``ids``."""
    items = _review_items().select_related("prediction__model_version__taxonomy").in_bulk(ids)
    return [items[item_id] for item_id in ids]


def _review_item_card(pk: int) -> ReviewItem:
    items = _review_items().select_related("prediction__model_version__taxonomy")
    return object_or_404(items, pk, "review item")


def _judgements() -> QuerySet[Judgement]:
    return Judgement.objects.select_related("user", "group", "rejected_group")


def _item_judgements(item: ReviewItem) -> list[Judgement]:
    return list(_judgements().filter(review_item=item).order_by("created_at", "id"))


# --- serializers shared by several views ---------------------------------------------------


class CleanTextField(serializers.CharField):
    """A short text, whitespace collapsed; control characters and over-long texts refused.

    ``max_length`` defaults to SIAMWEB_MAX_TEXT_LENGTH, read when a text is validated; it counts
    the text as sent, so the schema's ``maxLength`` is the rule (annotations/api_schema.py).
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


class TextListField(serializers.ListField):
    """Texts, at most SIAMWEB_MAX_TEXTS_PER_REQUEST of them (checked by the serializer)."""


class KField(serializers.IntegerField):
    """How many groups to rank, at most SIAMWEB_MAX_K (checked by the serializer)."""


class TaxonomySlugField(serializers.SlugRelatedField):
    """A taxonomy named by slug. Anything that cannot be a slug is refused before the lookup:
    a NUL character, say, is an error from PostgreSQL, not an unknown taxonomy."""

    def __init__(self, **kwargs) -> None:
        super().__init__(slug_field="slug", queryset=Taxonomy.objects.all(), **kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str) or not re.fullmatch(SLUG_PATTERN.strip("^$"), data):
            raise serializers.ValidationError("must be a slug: letters, digits, - and _")
        if len(data) > 64:
            raise serializers.ValidationError("is longer than a slug can be (64 characters)")
        return super().to_internal_value(data)


class TextsSerializer(serializers.Serializer):
    """Texts to predict, within the request limits the settings set."""

    texts = TextListField(child=CleanTextField(), allow_empty=False)
    k = KField(min_value=1, required=False)

    def validate_texts(self, texts: list[str]) -> list[str]:
        limit = settings.SIAMWEB_MAX_TEXTS_PER_REQUEST
        if len(texts) > limit:
            raise serializers.ValidationError(f"at most {limit} texts per request")
        return texts

    def validate_k(self, k: int) -> int:
        if k > settings.SIAMWEB_MAX_K:
            raise serializers.ValidationError(f"must be at most {settings.SIAMWEB_MAX_K}")
        return k


class GroupRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    code = serializers.CharField()
    name = serializers.CharField()


class RankedGroupSerializer(serializers.Serializer):
    group_id = serializers.IntegerField()
    code = serializers.CharField()
    name = serializers.CharField()
    score = serializers.FloatField()
    member_id = serializers.IntegerField(allow_null=True)
    member = serializers.CharField(allow_null=True, help_text="The member string that matched")
    source = serializers.CharField(help_text='"curator" when a verdict put the text here')


class ModelVersionRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    number = serializers.IntegerField()
    label = serializers.CharField()


class PredictionSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    model_version = ModelVersionRefSerializer()
    ranked_groups = RankedGroupSerializer(many=True)
    top_score = serializers.FloatField(allow_null=True)
    margin = serializers.FloatField(allow_null=True)
    created_at = serializers.DateTimeField()


class InputRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    text = serializers.CharField()
    source = serializers.CharField()
    occurrences = serializers.IntegerField()


class ReviewItemSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    taxonomy = serializers.CharField(source="taxonomy.slug")
    text = serializers.CharField(source="input.text")
    status = ReviewItemStatusField()
    priority = serializers.FloatField()
    top_group = GroupRefSerializer(allow_null=True)
    top_score = serializers.FloatField(allow_null=True)
    reviews_required = serializers.IntegerField()
    leased_by = serializers.CharField(source="leased_by.username", allow_null=True)
    lease_expires_at = serializers.DateTimeField(allow_null=True)
    conflict = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class ReviewItemPredictionSerializer(ReviewItemSerializer):
    input = InputRefSerializer()
    prediction = PredictionSerializer()


class JudgementSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    review_item = serializers.IntegerField(source="review_item_id")
    verdict = VerdictField()
    group = GroupRefSerializer(allow_null=True, help_text="Where the input belongs")
    rejected_group = GroupRefSerializer(allow_null=True, help_text="Where it was wrongly matched")
    user = serializers.CharField(source="user.username")
    prediction = serializers.IntegerField(source="prediction_id", allow_null=True)
    previous_status = serializers.CharField()
    created_at = serializers.DateTimeField()
    undone_at = serializers.DateTimeField(allow_null=True)


class ReviewItemDetailSerializer(ReviewItemPredictionSerializer):
    candidate_groups = serializers.SerializerMethodField(
        help_text="The ranked groups less those a curator rejected for this input"
    )
    judgements = JudgementSerializer(many=True, source="api_judgements")

    @extend_schema_field(RankedGroupSerializer(many=True))
    def get_candidate_groups(self, item: ReviewItem) -> list[dict]:
        return RankedGroupSerializer(review_card_groups(item), many=True).data


def review_item_detail(item: ReviewItem) -> dict:
    item.api_judgements = _item_judgements(item)
    return ReviewItemDetailSerializer(item).data


class QueueFilterSerializer(serializers.Serializer):
    """What a curator narrows the queue to, for listing and for claiming."""

    taxonomy = TaxonomySlugField(required=False)
    group = serializers.PrimaryKeyRelatedField(
        queryset=Group.objects.select_related("taxonomy"),
        required=False,
        help_text="Items whose top predicted group is this one (id)",
    )
    score_min = serializers.FloatField(required=False)
    score_max = serializers.FloatField(required=False)
    status = QueueStatusField(required=False)

    def validate(self, data: dict) -> dict:
        group, taxonomy = data.get("group"), data.get("taxonomy")
        if group is not None and taxonomy is not None and group.taxonomy_id != taxonomy.id:
            raise serializers.ValidationError(
                {"group": [f"group {group.id} is not in taxonomy {taxonomy.slug}"]}
            )
        low, high = data.get("score_min"), data.get("score_max")
        if low is not None and high is not None and low > high:
            raise serializers.ValidationError({"score_min": ["must not exceed score_max"]})
        return data

    @staticmethod
    def queue_filters(data: dict, *, default_status: str | None) -> QueueFilters:
        """``status`` "open" is every open item; None is the open ones, then the skipped."""
        wanted = data.get("status", default_status)
        return QueueFilters(
            taxonomy=data.get("taxonomy"),
            group=data.get("group"),
            score_min=data.get("score_min"),
            score_max=data.get("score_max"),
            status=None if wanted in (None, QUEUE_OPEN) else wanted,
            include_skipped=wanted is None,
        )


# --- normalize -----------------------------------------------------------------------------


class NormalizationSerializer(serializers.Serializer):
    text = serializers.CharField()
    source = serializers.CharField(help_text="Where the top group came from: model or curator")
    model_version = serializers.CharField()
    probability = serializers.FloatField(
        allow_null=True,
        help_text="The chance the top group is right, calibrated on this taxonomy's verdicts; "
        "null for a curator's answer or before there are verdicts (right and wrong) to fit on",
    )
    low_confidence = serializers.BooleanField(help_text="probability below 0.5")
    groups = RankedGroupSerializer(many=True)


class NormalizeApi(JsonApi):
    class InputSerializer(TextsSerializer):
        pass

    class OutputSerializer(serializers.Serializer):
        results = NormalizationSerializer(many=True)

    @extend_schema(
        summary="Rank the groups of each text (stores nothing)",
        request=InputSerializer,
        responses={
            200: OutputSerializer,
            400: BAD_REQUEST,
            404: NOT_FOUND,
            409: OpenApiResponse(description="The taxonomy has no live model yet"),
            503: OpenApiResponse(description="The live model or index cannot be loaded"),
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        taxonomy = taxonomy_or_404(slug)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        k = serializer.validated_data.get("k", settings.SIAMWEB_DEFAULT_K)
        try:
            results = normalize_texts(taxonomy, serializer.validated_data["texts"], k=k)
        except NoLiveModel as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        except ArtifactError as exc:
            detail = f"the live model or index of {slug!r} cannot be loaded: {exc}"
            return Response({"detail": detail}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        return Response({"results": [result.as_dict() for result in results]})


# --- taxonomies ----------------------------------------------------------------------------


class TaxonomySerializer(serializers.Serializer):
    slug = serializers.SlugField()
    name = serializers.CharField()
    description = serializers.CharField()
    source_format = serializers.CharField()
    live_model_version = ModelVersionRefSerializer(
        source="deployment.index_build.model_version", allow_null=True
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class TaxonomyListApi(CuratorApi):
    pagination_class = PagePagination

    class OutputSerializer(TaxonomySerializer):
        pass

    @extend_schema(summary="Taxonomies", responses=OutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        return paginated(self, request, _taxonomies().order_by("slug"), self.OutputSerializer)


class TaxonomyCountsSerializer(serializers.Serializer):
    groups = serializers.IntegerField()
    members = serializers.IntegerField()
    pending_items = serializers.IntegerField(help_text="Open: pending or awaiting a group")
    skipped_items = serializers.IntegerField()
    done_items = serializers.IntegerField()
    conflicts = serializers.IntegerField()


class TaxonomyDetailApi(CuratorApi):
    class OutputSerializer(TaxonomySerializer):
        counts = TaxonomyCountsSerializer()

    @extend_schema(
        summary="One taxonomy with its counts and live model version",
        responses={200: OutputSerializer, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        return Response(self.OutputSerializer(_taxonomy_with_counts(slug)).data)


# --- groups --------------------------------------------------------------------------------


class GroupSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    taxonomy = serializers.CharField(source="taxonomy.slug")
    code = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    member_count = serializers.IntegerField()


class GroupListCreateApi(CuratorReadsAdminWritesApi):
    pagination_class = PagePagination

    class FilterSerializer(serializers.Serializer):
        q = serializers.CharField(
            required=False, max_length=200, help_text="Words the name (or code start) has"
        )

    class OutputSerializer(GroupSerializer):
        pass

    class CreateInputSerializer(serializers.Serializer):
        code = CleanTextField(max_length=MAX_CODE_LENGTH, forbidden="/")
        name = CleanTextField(max_length=MAX_NAME_LENGTH)

    @extend_schema(
        summary="Groups of a taxonomy",
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), 400: BAD_REQUEST, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        taxonomy = taxonomy_or_404(slug)
        filters = filters_of(self.FilterSerializer, request)
        groups = _groups(taxonomy, filters.get("q", ""))
        return paginated(self, request, groups, self.OutputSerializer)

    @extend_schema(
        summary="Create an empty group (admins)",
        request=CreateInputSerializer,
        responses={201: OutputSerializer, 400: BAD_REQUEST, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def post(self, request: Request, slug: str) -> Response:
        taxonomy = taxonomy_or_404(slug)
        serializer = self.CreateInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            group = group_create(taxonomy=taxonomy, user=request.user, **serializer.validated_data)
        except TaxonomyEditError as exc:
            return edit_error_response(exc)
        return Response(
            self.OutputSerializer(_group(group.id)).data, status=status.HTTP_201_CREATED
        )


class GroupDetailApi(CuratorReadsAdminWritesApi):
    class OutputSerializer(GroupSerializer):
        pending_items = serializers.IntegerField(help_text="Pending items predicted as this group")

    class RenameInputSerializer(serializers.Serializer):
        name = CleanTextField(max_length=MAX_NAME_LENGTH)

    def _detail(self, pk: int) -> dict:
        group = _group(pk)
        group.pending_items = review_counts(filters=QueueFilters(group=group))["open"]
        return self.OutputSerializer(group).data

    @extend_schema(summary="One group", responses={200: OutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request, group_id: int) -> Response:
        return Response(self._detail(group_id))

    @extend_schema(
        summary="Rename a group (admins)",
        request=RenameInputSerializer,
        responses={200: OutputSerializer, 400: BAD_REQUEST, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def patch(self, request: Request, group_id: int) -> Response:
        group = _group(group_id)
        serializer = self.RenameInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            group_rename(group=group, name=serializer.validated_data["name"], user=request.user)
        except TaxonomyEditError as exc:
            return edit_error_response(exc)
        return Response(self._detail(group_id))


class GroupMergeApi(AdminApi):
    class InputSerializer(serializers.Serializer):
        into = serializers.PrimaryKeyRelatedField(
            queryset=Group.objects.all(), help_text="The group that takes this one's members"
        )

    class OutputSerializer(GroupSerializer):
        pass

    @extend_schema(
        summary="Merge this group into another (admins); answers the group merged into",
        request=InputSerializer,
        responses={200: OutputSerializer, 400: BAD_REQUEST, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def post(self, request: Request, group_id: int) -> Response:
        source = _group(group_id)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            target = group_merge(
                source=source, target=serializer.validated_data["into"], user=request.user
            )
        except TaxonomyEditError as exc:
            return edit_error_response(exc, fields={"target": "into", "source": "group"})
        return Response(self.OutputSerializer(_group(target.id)).data)


# --- members -------------------------------------------------------------------------------


class MemberSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    taxonomy = serializers.CharField(source="taxonomy.slug")
    group = GroupRefSerializer()
    text = serializers.CharField()
    source = MemberSourceField()
    added_by = serializers.CharField(source="added_by.username", allow_null=True)
    judgement = serializers.IntegerField(source="judgement_id", allow_null=True)
    created_at = serializers.DateTimeField()


class MemberListCreateApi(CuratorReadsAdminWritesApi):
    pagination_class = PagePagination

    class FilterSerializer(serializers.Serializer):
        group = serializers.PrimaryKeyRelatedField(queryset=Group.objects.all(), required=False)
        source = MemberSourceField(required=False)

    class OutputSerializer(MemberSerializer):
        pass

    class CreateInputSerializer(serializers.Serializer):
        group = serializers.PrimaryKeyRelatedField(queryset=Group.objects.all())
        text = CleanTextField()

    class CreateOutputSerializer(MemberSerializer):
        also_in = GroupRefSerializer(
            many=True, help_text="Other groups of the taxonomy that have the same text"
        )

    @extend_schema(
        summary="Member strings of a taxonomy",
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), 400: BAD_REQUEST, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        taxonomy = taxonomy_or_404(slug)
        filters = filters_of(self.FilterSerializer, request)
        group = filters.get("group")
        if group is not None and group.taxonomy_id != taxonomy.id:
            return field_error("group", f"group {group.id} is not in taxonomy {slug}")
        members = _members().filter(taxonomy=taxonomy)
        if group is not None:
            members = members.filter(group=group)
        if "source" in filters:
            members = members.filter(source=filters["source"])
        return paginated(self, request, members.order_by("id"), self.OutputSerializer)

    @extend_schema(
        summary="Add a member string to a group (admins)",
        request=CreateInputSerializer,
        responses={201: CreateOutputSerializer, 400: BAD_REQUEST, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def post(self, request: Request, slug: str) -> Response:
        taxonomy = taxonomy_or_404(slug)
        serializer = self.CreateInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        group = serializer.validated_data["group"]
        if group.taxonomy_id != taxonomy.id:
            return field_error("group", f"group {group.id} is not in taxonomy {slug}")
        try:
            member = member_add(
                group=group, text=serializer.validated_data["text"], user=request.user
            )
        except TaxonomyEditError as exc:
            return edit_error_response(exc)
        created = object_or_404(_members(), member.id, "member")
        created.also_in = member.also_in
        return Response(self.CreateOutputSerializer(created).data, status=status.HTTP_201_CREATED)


class MemberDetailApi(CuratorReadsAdminWritesApi):
    class OutputSerializer(MemberSerializer):
        pass

    class MoveInputSerializer(serializers.Serializer):
        group = serializers.PrimaryKeyRelatedField(
            queryset=Group.objects.all(), help_text="The group the member moves to"
        )

    @extend_schema(summary="One member string", responses={200: OutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request, member_id: int) -> Response:
        return Response(self.OutputSerializer(object_or_404(_members(), member_id, "member")).data)

    @extend_schema(
        summary="Move a member string to another group (admins)",
        request=MoveInputSerializer,
        responses={200: OutputSerializer, 400: BAD_REQUEST, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def patch(self, request: Request, member_id: int) -> Response:
        member = object_or_404(_members(), member_id, "member")
        serializer = self.MoveInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            member_move(member=member, group=serializer.validated_data["group"], user=request.user)
        except TaxonomyEditError as exc:
            return edit_error_response(exc)
        return Response(self.OutputSerializer(object_or_404(_members(), member_id, "member")).data)

    @extend_schema(
        summary="Remove a member string (admins)",
        responses={204: None, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def delete(self, request: Request, member_id: int) -> Response:
        member = object_or_404(_members(), member_id, "member")
        try:
            member_remove(member=member, user=request.user)
        except TaxonomyEditError as exc:
            return edit_error_response(exc)
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- inputs --------------------------------------------------------------------------------


class InputListSubmitApi(CuratorApi):
    pagination_class = CursorNewestFirst

    class FilterSerializer(serializers.Serializer):
        source = InputSourceField(required=False)

    class OutputSerializer(serializers.Serializer):
        class ReviewItemRefSerializer(serializers.Serializer):
            id = serializers.IntegerField()
            status = ReviewItemStatusField()

        id = serializers.IntegerField()
        text = serializers.CharField()
        source = InputSourceField()
        occurrences = serializers.IntegerField()
        created_at = serializers.DateTimeField()
        review_item = ReviewItemRefSerializer(allow_null=True)

    class SubmitInputSerializer(TextsSerializer):
        pass

    class SubmitOutputSerializer(serializers.Serializer):
        results = ReviewItemPredictionSerializer(
            many=True, help_text="The review item of each distinct text, with its new prediction"
        )

    @extend_schema(
        summary="Inputs of a taxonomy, newest first",
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), 400: BAD_REQUEST, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        taxonomy = taxonomy_or_404(slug)
        filters = filters_of(self.FilterSerializer, request)
        inputs = Input.objects.filter(taxonomy=taxonomy).select_related("review_item")
        if "source" in filters:
            inputs = inputs.filter(source=filters["source"])
        return paginated(self, request, inputs, self.OutputSerializer)

    @extend_schema(
        summary="Send texts for review: each is predicted and queued",
        request=SubmitInputSerializer,
        responses={
            201: SubmitOutputSerializer,
            400: BAD_REQUEST,
            404: NOT_FOUND,
            409: OpenApiResponse(description="The taxonomy has no live model yet"),
            503: OpenApiResponse(description="The live model or index cannot be loaded"),
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        taxonomy = taxonomy_or_404(slug)
        serializer = self.SubmitInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            items = inputs_submit(
                taxonomy=taxonomy,
                texts=serializer.validated_data["texts"],
                source=Input.Source.API,
                k=serializer.validated_data.get("k", settings.SIAMWEB_DEFAULT_K),
            )
        except NoLiveModel as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        except ArtifactError as exc:
            detail = f"the live model or index of {slug!r} cannot be loaded: {exc}"
            return Response({"detail": detail}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        cards = _review_item_cards([item.id for item in items])
        return Response(
            self.SubmitOutputSerializer({"results": cards}).data, status=status.HTTP_201_CREATED
        )


# --- the review queue ----------------------------------------------------------------------


class ReviewItemListApi(CuratorApi):
    pagination_class = CursorQueueOrder

    class FilterSerializer(QueueFilterSerializer):
        pass

    class OutputSerializer(ReviewItemSerializer):
        pass

    @extend_schema(
        summary="Review items in queue order (most worth a look first); open ones by default",
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), 400: BAD_REQUEST},
    )
    def get(self, request: Request) -> Response:
        data = filters_of(self.FilterSerializer, request)
        filters = QueueFilterSerializer.queue_filters(data, default_status=QUEUE_OPEN)
        items = review_queue(filters=filters).select_related(
            "taxonomy", "input", "top_group", "leased_by"
        )
        return paginated(self, request, items, self.OutputSerializer)


class ReviewItemDetailApi(CuratorApi):
    class OutputSerializer(ReviewItemDetailSerializer):
        pass

    @extend_schema(
        summary="One review item: its prediction's ranked groups and its verdicts",
        responses={200: OutputSerializer, 404: NOT_FOUND},
    )
    def get(self, request: Request, item_id: int) -> Response:
        return Response(review_item_detail(_review_item_card(item_id)))


class ReviewItemClaimApi(CuratorApi):
    class InputSerializer(QueueFilterSerializer):
        pass

    class OutputSerializer(ReviewItemDetailSerializer):
        pass

    @extend_schema(
        summary="Lease the next item worth a look to me (the one I hold, if any)",
        description=(
            "Without `status` the open items come first, then the skipped ones. The lease "
            "keeps other curators off the item for a few minutes; a verdict or a release ends it."
        ),
        request=InputSerializer,
        responses={
            200: OutputSerializer,
            204: OpenApiResponse(description="Nothing is left to review for these filters"),
            400: BAD_REQUEST,
        },
    )
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        filters = QueueFilterSerializer.queue_filters(
            serializer.validated_data, default_status=None
        )
        item = review_item_claim(user=request.user, filters=filters)
        if item is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(review_item_detail(_review_item_card(item.id)))


class ReviewItemReleaseApi(CuratorApi):
    class OutputSerializer(ReviewItemSerializer):
        pass

    @extend_schema(
        summary="Give an item I hold back to the queue (an item I do not hold is left alone)",
        request=None,
        responses={200: OutputSerializer, 404: NOT_FOUND},
    )
    def post(self, request: Request, item_id: int) -> Response:
        item = object_or_404(ReviewItem.objects.all(), item_id, "review item")
        review_item_release(item=item, user=request.user)
        released = object_or_404(_review_items(), item_id, "review item")
        return Response(self.OutputSerializer(released).data)


# --- verdicts ------------------------------------------------------------------------------


class JudgementListCreateApi(CuratorApi):
    pagination_class = CursorNewestFirst

    class FilterSerializer(serializers.Serializer):
        review_item = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID)
        user = serializers.RegexField(
            USERNAME_PATTERN, required=False, max_length=150, help_text="A username"
        )
        verdict = VerdictField(required=False)
        include_undone = serializers.BooleanField(
            required=False, default=False, help_text="Also the verdicts that were undone"
        )

    class OutputSerializer(JudgementSerializer):
        pass

    class CreateInputSerializer(serializers.Serializer):
        review_item = serializers.PrimaryKeyRelatedField(queryset=ReviewItem.objects.all())
        verdict = VerdictField()
        group = serializers.PrimaryKeyRelatedField(
            queryset=Group.objects.all(),
            required=False,
            allow_null=True,
            help_text=(
                "confirm: the group (default: the predicted one); reassign: required; "
                "false_match: the rejected group (default: the predicted one)"
            ),
        )
        prediction = serializers.IntegerField(
            required=False,
            allow_null=True,
            min_value=1,
            help_text="The prediction the curator saw; a newer one answers 409",
        )

    @extend_schema(
        summary="Verdicts, newest first (live ones unless include_undone)",
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), 400: BAD_REQUEST},
    )
    def get(self, request: Request) -> Response:
        filters = filters_of(self.FilterSerializer, request)
        judgements = _judgements()
        if not filters["include_undone"]:
            judgements = judgements.filter(undone_at__isnull=True)
        if "review_item" in filters:
            judgements = judgements.filter(review_item_id=filters["review_item"])
        if "user" in filters:
            judgements = judgements.filter(user__username=filters["user"])
        if "verdict" in filters:
            judgements = judgements.filter(verdict=filters["verdict"])
        return paginated(self, request, judgements, self.OutputSerializer)

    @extend_schema(
        summary="Record a verdict",
        description=(
            f"With an `{IDEMPOTENCY_HEADER}` header a retried request answers 200 with the "
            "verdict the first one recorded, and records nothing new; the same key with "
            "another body answers 409."
        ),
        parameters=[
            OpenApiParameter(
                IDEMPOTENCY_HEADER,
                {"type": "string", "maxLength": IDEMPOTENCY_KEY_MAX_LENGTH},
                OpenApiParameter.HEADER,
                description=f"At most {IDEMPOTENCY_KEY_MAX_LENGTH} characters, unique per user",
            )
        ],
        request=CreateInputSerializer,
        responses={
            201: OutputSerializer,
            200: OpenApiResponse(OutputSerializer, description="A retry: the earlier verdict"),
            400: BAD_REQUEST,
            409: CONFLICT,
        },
    )
    def post(self, request: Request) -> Response:
        key = request.headers.get(IDEMPOTENCY_HEADER, "").strip()
        if len(key) > IDEMPOTENCY_KEY_MAX_LENGTH:
            return field_error(
                IDEMPOTENCY_HEADER,
                f"at most {IDEMPOTENCY_KEY_MAX_LENGTH} characters (got {len(key)})",
            )
        serializer = self.CreateInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            judgement = judgement_create(
                review_item=data["review_item"],
                user=request.user,
                verdict=data["verdict"],
                group=data.get("group"),
                prediction_id=data.get("prediction"),
                idempotency_key=key,
            )
        except VerdictError as exc:
            return verdict_error_response(exc)
        code = status.HTTP_200_OK if judgement.replayed else status.HTTP_201_CREATED
        stored = object_or_404(_judgements(), judgement.id, "judgement")
        return Response(self.OutputSerializer(stored).data, status=code)


class JudgementDetailApi(CuratorApi):
    class OutputSerializer(JudgementSerializer):
        pass

    @extend_schema(summary="One verdict", responses={200: OutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request, judgement_id: int) -> Response:
        judgement = object_or_404(_judgements(), judgement_id, "judgement")
        return Response(self.OutputSerializer(judgement).data)


class JudgementUndoApi(CuratorApi):
    class OutputSerializer(JudgementSerializer):
        review_item_status = ReviewItemStatusField(
            source="review_item.status",
            help_text="The item is open again and leased back to whoever undid the verdict",
        )

    @extend_schema(
        summary="Take a verdict back (its author or an admin; the item's latest verdict only)",
        request=None,
        responses={200: OutputSerializer, 404: NOT_FOUND, 409: CONFLICT},
    )
    def post(self, request: Request, judgement_id: int) -> Response:
        judgement = object_or_404(Judgement.objects.all(), judgement_id, "judgement")
        try:
            judgement_undo(judgement=judgement, user=request.user)
        except VerdictError as exc:
            return verdict_error_response(exc)
        undone = object_or_404(
            _judgements().select_related("review_item"), judgement_id, "judgement"
        )
        return Response(self.OutputSerializer(undone).data)


# --- feedback pairs ------------------------------------------------------------------------


class FeedbackPairListApi(CuratorApi):
    pagination_class = CursorNewestFirst

    class FilterSerializer(serializers.Serializer):
        taxonomy = TaxonomySlugField(required=False)
        origin = FeedbackOriginField(required=False)
        label = serializers.BooleanField(
            required=False, help_text="true: both texts belong to one group"
        )

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        taxonomy = serializers.CharField(source="taxonomy.slug")
        text_a = serializers.CharField()
        text_b = serializers.CharField()
        group = GroupRefSerializer(allow_null=True, help_text="The group text_b stands for")
        label = serializers.BooleanField()
        origin = FeedbackOriginField()
        judgement = serializers.IntegerField(source="judgement_id", allow_null=True)
        created_at = serializers.DateTimeField()

    @extend_schema(
        summary="Training pairs from verdicts, newest first",
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), 400: BAD_REQUEST},
    )
    def get(self, request: Request) -> Response:
        filters = filters_of(self.FilterSerializer, request)
        pairs = FeedbackPair.objects.select_related("taxonomy", "group")
        if "taxonomy" in filters:
            pairs = pairs.filter(taxonomy=filters["taxonomy"])
        if "origin" in filters:
            pairs = pairs.filter(origin=filters["origin"])
        if "label" in filters:
            pairs = pairs.filter(label=filters["label"])
        return paginated(self, request, pairs, self.OutputSerializer)
