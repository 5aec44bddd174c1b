"""The review queue and verdicts: items listed, claimed and released; verdicts recorded (with an
idempotency key), listed and undone; feedback pairs listed."""

from __future__ import annotations

from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
)
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from annotations.api.base import (
    IDEMPOTENCY_HEADER,
    IDEMPOTENCY_KEY_MAX_LENGTH,
    QUEUE_OPEN,
    USERNAME_PATTERN,
    CursorQueueOrder,
    FeedbackOriginField,
    ReviewItemStatusField,
    VerdictField,
    verdict_error_response,
)
from annotations.api.reads import judgements_queryset, review_item_card, review_items
from annotations.api.serializers import (
    GroupRefSerializer,
    JudgementSerializer,
    QueueFilterSerializer,
    ReviewItemDetailSerializer,
    ReviewItemSerializer,
    review_item_detail,
)
from annotations.models import (
    FeedbackPair,
    Group,
    Judgement,
    ReviewItem,
)
from annotations.selectors.queue import review_queue
from annotations.services.review.leases import review_item_claim, review_item_release
from annotations.services.review.live_ranking import review_item_rerank
from annotations.services.review.undo import judgement_undo
from annotations.services.review.verdict_rules import VerdictError
from annotations.services.review.verdicts import judgement_create
from siamweb.ids import MAX_ID, IdSerializerField
from siamweb.web.api import (
    BAD_REQUEST,
    CONFLICT,
    FORBIDDEN,
    NOT_FOUND,
    CuratorApi,
    CursorNewestFirst,
    field_error,
    filters_of,
    object_or_404,
    paginated,
)
from siamweb.web.fields import IdField, TaxonomySlugField


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
        return Response(review_item_detail(review_item_card(item_id)))


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
        # What the live model and ranker answer now, as the card shows it.
        review_item_rerank(item, user=request.user)
        return Response(review_item_detail(review_item_card(item.id)))


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
        released = object_or_404(review_items(), item_id, "review item")
        return Response(self.OutputSerializer(released).data)


class JudgementListCreateApi(CuratorApi):
    pagination_class = CursorNewestFirst

    class FilterSerializer(serializers.Serializer):
        review_item = IdSerializerField(required=False, min_value=1, max_value=MAX_ID)
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
        review_item = IdField(queryset=ReviewItem.objects.all())
        verdict = VerdictField()
        group = IdField(
            queryset=Group.objects.all(),
            required=False,
            allow_null=True,
            help_text=(
                "confirm: the group (default: the predicted one); reassign: required; "
                "false_match: the rejected group (default: the predicted one)"
            ),
        )
        prediction = IdSerializerField(
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
        judgements = judgements_queryset()
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
        stored = object_or_404(judgements_queryset(), judgement.id, "judgement")
        return Response(self.OutputSerializer(stored).data, status=code)


class JudgementDetailApi(CuratorApi):
    class OutputSerializer(JudgementSerializer):
        pass

    @extend_schema(summary="One verdict", responses={200: OutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request, judgement_id: int) -> Response:
        judgement = object_or_404(judgements_queryset(), judgement_id, "judgement")
        return Response(self.OutputSerializer(judgement).data)


class JudgementUndoApi(CuratorApi):
    class OutputSerializer(JudgementSerializer):
        review_item_status = ReviewItemStatusField(
            source="review_item.status",
            help_text="The item is open again and leased back to whoever undid the verdict",
        )

    @extend_schema(
        summary=(
            "Take a verdict back (its author or an admin; the item's latest verdict only), with "
            "the same curator's false match it completed"
        ),
        request=None,
        responses={200: OutputSerializer, 403: FORBIDDEN, 404: NOT_FOUND, 409: CONFLICT},
    )
    def post(self, request: Request, judgement_id: int) -> Response:
        judgement = object_or_404(Judgement.objects.all(), judgement_id, "judgement")
        try:
            judgement_undo(judgement=judgement, user=request.user)
        except VerdictError as exc:
            return verdict_error_response(exc)
        undone = object_or_404(
            judgements_queryset().select_related("review_item"), judgement_id, "judgement"
        )
        return Response(self.OutputSerializer(undone).data)


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
