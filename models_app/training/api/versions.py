"""Model versions: the list, one version, making one live, and rolling back to an earlier one."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from models_app.models import ModelVersion
from models_app.siamese.artifacts import ArtifactError
from models_app.training.api.base import (
    live_version_ids,
    model_versions,
    run_action_response,
)
from models_app.training.api.runs import TrainingRunDetailSerializer
from models_app.training.promotion import (
    RunStateError,
    model_version_activate,
    model_version_rollback,
)
from siamweb.web.api import (
    BAD_REQUEST,
    CONFLICT,
    FORBIDDEN,
    NOT_FOUND,
    AdminApi,
    CuratorApi,
    PagePagination,
    filters_of,
    object_or_404,
    paginated,
)
from siamweb.web.fields import TaxonomySlugField


class ModelVersionSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    taxonomy = serializers.CharField(source="taxonomy.slug")
    number = serializers.IntegerField()
    label = serializers.CharField()
    encoder_kind = serializers.CharField()
    metrics = serializers.DictField(help_text="What the evaluation measured")
    trained_on_members = serializers.IntegerField()
    parent = serializers.IntegerField(source="parent_id", allow_null=True)
    created_at = serializers.DateTimeField()
    is_live = serializers.SerializerMethodField()

    def get_is_live(self, version: ModelVersion) -> bool:
        return version.id in self.context["live_ids"]


class ModelVersionListApi(CuratorApi):
    pagination_class = PagePagination

    class FilterSerializer(serializers.Serializer):
        taxonomy = TaxonomySlugField(required=False)

    class OutputSerializer(ModelVersionSerializer):
        pass

    @extend_schema(
        summary="Model versions, newest first within each taxonomy",
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), 400: BAD_REQUEST},
    )
    def get(self, request: Request) -> Response:
        filters = filters_of(self.FilterSerializer, request)
        versions = model_versions().order_by("taxonomy__slug", "-number")
        if "taxonomy" in filters:
            versions = versions.filter(taxonomy=filters["taxonomy"])
        return paginated(
            self, request, versions, self.OutputSerializer, live_ids=live_version_ids()
        )


class ModelVersionDetailApi(CuratorApi):
    class OutputSerializer(ModelVersionSerializer):
        config = serializers.DictField(help_text="Encoder, training and search settings")
        data_sha256 = serializers.CharField()

    @extend_schema(summary="One model version", responses={200: OutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request, version_id: int) -> Response:
        version = object_or_404(model_versions(), version_id, "model version")
        context = {"live_ids": live_version_ids()}
        return Response(self.OutputSerializer(version, context=context).data)


class ModelVersionActivateApi(AdminApi):
    class OutputSerializer(ModelVersionSerializer):
        index_build = serializers.IntegerField(help_text="The index build now live with it")

    @extend_schema(
        summary="Make this version live with its newest index build (admins)",
        request=None,
        responses={
            200: OutputSerializer,
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: OpenApiResponse(
                description="The version has no index build to go live with, or the taxonomy "
                "has a training run active (it may compare its work with the live model or "
                "make its own live), or the version cannot serve with its index"
            ),
        },
    )
    def post(self, request: Request, version_id: int) -> Response:
        version = object_or_404(model_versions(), version_id, "model version")
        try:
            build = model_version_activate(model_version=version, actor=request.user)
        except (RunStateError, ArtifactError) as exc:  # ArtifactError: model and index differ
            return Response({"model_version": [str(exc)]}, status=status.HTTP_409_CONFLICT)
        version.index_build = build.id
        context = {"live_ids": live_version_ids()}
        return Response(self.OutputSerializer(version, context=context).data)


# --- rollback ------------------------------------------------------------------------------


class ModelVersionRollbackApi(AdminApi):
    class OutputSerializer(TrainingRunDetailSerializer):
        pass

    @extend_schema(
        summary="Queue a run that makes this earlier version live again (admins)",
        description="The rollback run rebuilds the version's index over today's strings and "
        "swaps model and index in together; follow it at `training-runs/{id}`.",
        request=None,
        responses={
            202: OutputSerializer,
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: CONFLICT,
        },
    )
    def post(self, request: Request, version_id: int) -> Response:
        version = object_or_404(model_versions(), version_id, "model version")
        return run_action_response(
            lambda: model_version_rollback(model_version=version, actor=request.user),
            field="model_version",
            taxonomy=version.taxonomy,
            output_serializer=self.OutputSerializer,
            success_status=status.HTTP_202_ACCEPTED,
        )
