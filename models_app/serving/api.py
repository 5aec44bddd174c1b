"""The normalize endpoint, serving's front door over HTTP (answers only, nothing stored), and
what every API that serves answers shares: the texts a request sends, a ranked group, and the
answer when a taxonomy has no live model or its files cannot be loaded."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from models_app.serving.engines import SERVING_UNAVAILABLE
from models_app.serving.normalize import rank_taxonomy_groups
from models_app.siamese.artifacts import ArtifactError
from siamweb.web.api import (
    BAD_REQUEST,
    MODEL_UNAVAILABLE,
    NO_LIVE_MODEL,
    NOT_FOUND,
    JsonApi,
    field_error,
    taxonomy_or_404,
)
from siamweb.web.fields import CleanTextField, KField, TextListField


def serving_error_response(exc: Exception, slug: str) -> Response:
    """No live model yet (409 naming ``taxonomy``, as the bulk and training endpoints do), or its
    files cannot be loaded (503): the live model is untouched."""
    if isinstance(exc, ArtifactError):
        detail = f"the live model or index of {slug!r} cannot be loaded: {exc}"
        return Response({"detail": detail}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
    return field_error("taxonomy", str(exc), status.HTTP_409_CONFLICT)


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


class RankedGroupSerializer(serializers.Serializer):
    group_id = serializers.IntegerField()
    code = serializers.CharField()
    name = serializers.CharField()
    score = serializers.FloatField(
        help_text="Similarity of the group's best member string to the text (0 for a group "
        "proposed by its description alone): evidence, not a probability"
    )
    probability = serializers.FloatField(
        allow_null=True,
        required=False,
        help_text="The chance this group is right (the ranker's, calibrated on verdicts); null "
        "for a curator's answer, before the ranker is fitted, in predictions made before, and "
        "for groups past the ranker's candidates (more than about 15 asked for)",
    )
    member_id = serializers.IntegerField(allow_null=True)
    member = serializers.CharField(allow_null=True, help_text="The member string that matched")
    source = serializers.CharField(help_text='"curator" when a verdict put the text here')
    tied = serializers.BooleanField(
        required=False,
        help_text="Its probability, to two places as pages show it, equals the next group's "
        "(or the one before's): the order between them is not to be trusted",
    )


class NormalizationSerializer(serializers.Serializer):
    text = serializers.CharField()
    source = serializers.CharField(help_text="Where the top group came from: model or curator")
    model_version = serializers.CharField()
    probability = serializers.FloatField(
        allow_null=True,
        help_text="The chance the top group is right, from the taxonomy's ranker calibrated on its "
        "verdicts; null for a curator's answer or before the ranker has been fitted on verdicts",
    )
    low_confidence = serializers.BooleanField(help_text="probability below 0.5")
    tied = serializers.BooleanField(
        help_text="The top two groups are tied on every piece of evidence: a person should choose"
    )
    none_of_these = serializers.BooleanField(
        help_text="Curators said no group of the taxonomy fits this very text: no group is "
        'offered and source is "curator"'
    )
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
            409: NO_LIVE_MODEL,
            503: MODEL_UNAVAILABLE,
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        taxonomy = taxonomy_or_404(slug)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        k = serializer.validated_data.get("k", settings.SIAMWEB_DEFAULT_K)
        try:
            results = rank_taxonomy_groups(taxonomy, serializer.validated_data["texts"], k=k)
        except SERVING_UNAVAILABLE as exc:
            return serving_error_response(exc, slug)
        return Response({"results": [result.as_dict() for result in results]})
