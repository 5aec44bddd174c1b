"""Inputs submitted for review, and the list of them. Normalizing without storing anything is
serving's endpoint (``models_app/serving/api.py``)."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
)
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from annotations.api.base import InputSourceField, ReviewItemStatusField
from annotations.api.reads import review_item_cards
from annotations.api.serializers import (
    ReviewItemPredictionSerializer,
)
from annotations.models import (
    Input,
)
from annotations.services.review.inputs import ReviewQueueFull, inputs_submit
from models_app.serving.api import TextsSerializer, serving_error_response
from models_app.serving.engines import SERVING_UNAVAILABLE
from siamweb.web.api import (
    BAD_REQUEST,
    MODEL_UNAVAILABLE,
    NOT_FOUND,
    CuratorApi,
    CursorNewestFirst,
    field_error,
    filters_of,
    paginated,
    taxonomy_or_404,
)


class InputListSubmitApi(CuratorApi):
    pagination_class = CursorNewestFirst

    class FilterSerializer(serializers.Serializer):
        source = InputSourceField(required=False)

    class OutputSerializer(serializers.Serializer):
        class ReviewItemRefSerializer(serializers.Serializer):
            id = serializers.IntegerField()
            status = ReviewItemStatusField()
            auto_coded = serializers.BooleanField(help_text="Coded by the product without review")

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
            409: OpenApiResponse(
                description='The taxonomy has no live model yet: `{"taxonomy": ["why"]}`; or the '
                "caller would have more items waiting for review than one user may "
                '(SIAMWEB_REVIEW_PENDING_PER_USER): `{"texts": ["how many wait"]}`; nothing stored'
            ),
            503: MODEL_UNAVAILABLE,
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
                queued_by=request.user,
            )
        except SERVING_UNAVAILABLE as exc:
            return serving_error_response(exc, slug)
        except ReviewQueueFull as exc:
            return field_error("texts", str(exc), status.HTTP_409_CONFLICT)
        cards = review_item_cards([item.id for item in items])
        return Response(
            self.SubmitOutputSerializer({"results": cards}).data, status=status.HTTP_201_CREATED
        )
