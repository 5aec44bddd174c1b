"""REST API: thin views around selectors and services."""

from __future__ import annotations

from django.conf import settings
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.normalization import normalize_texts
from annotations.selectors import taxonomy_get
from models_app.services import NoLiveModel
from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.text import TextError, clean_text


class CleanTextField(serializers.CharField):
    """A short text, whitespace collapsed; control characters and over-long texts refused."""

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
        try:
            return clean_text(data, max_length=settings.SIAMWEB_MAX_TEXT_LENGTH)
        except TextError as exc:
            raise serializers.ValidationError(str(exc)) from None


class NormalizeApi(APIView):
    class InputSerializer(serializers.Serializer):
        texts = serializers.ListField(child=CleanTextField(), allow_empty=False)
        k = serializers.IntegerField(min_value=1, required=False)

        def validate_texts(self, texts: list[str]) -> list[str]:
            limit = settings.SIAMWEB_MAX_TEXTS_PER_REQUEST
            if len(texts) > limit:
                raise serializers.ValidationError(f"at most {limit} texts per request")
            return texts

        def validate_k(self, k: int) -> int:
            if k > settings.SIAMWEB_MAX_K:
                raise serializers.ValidationError(f"must be at most {settings.SIAMWEB_MAX_K}")
            return k

    def post(self, request: Request, slug: str) -> Response:
        taxonomy = taxonomy_get(slug)
        if taxonomy is None:
            raise NotFound(f"no taxonomy {slug!r}")
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
