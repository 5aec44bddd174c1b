"""REST API, version 1, for models: versions (and which one is live) and training runs.

Curators read; only admins make a version live or start a run. See annotations/api.py for the
conventions every view follows.
"""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from annotations.api import (
    BAD_REQUEST,
    CONFLICT,
    FORBIDDEN,
    NOT_FOUND,
    AdminApi,
    CuratorApi,
    CuratorReadsAdminWritesApi,
    PagePagination,
    filters_of,
    named_choice_field,
    object_or_404,
    paginated,
)
from annotations.models import Taxonomy
from models_app.models import Deployment, IndexBuild, ModelVersion, TrainingRun
from models_app.services import deployment_activate, training_run_request

TrainingRunKindField = named_choice_field("TrainingRunKind", TrainingRun.Kind.choices)
TrainingRunStatusField = named_choice_field("TrainingRunStatus", TrainingRun.Status.choices)
TrainingRunTriggerField = named_choice_field("TrainingRunTrigger", TrainingRun.Trigger.choices)

# --- reads ---------------------------------------------------------------------------------


def _model_versions() -> QuerySet[ModelVersion]:
    return ModelVersion.objects.select_related("taxonomy")


def _live_version_ids() -> set[int]:
    """One small query: a taxonomy has at most one deployment."""
    return set(Deployment.objects.values_list("index_build__model_version_id", flat=True))


def _newest_index_build(version: ModelVersion) -> IndexBuild | None:
    return IndexBuild.objects.filter(model_version=version).order_by("-created_at", "-id").first()


def _training_runs() -> QuerySet[TrainingRun]:
    return TrainingRun.objects.select_related(
        "taxonomy", "requested_by", "model_version__taxonomy"
    ).order_by("-created_at", "-id")


# --- model versions ------------------------------------------------------------------------


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
        taxonomy = serializers.SlugRelatedField(
            slug_field="slug", queryset=Taxonomy.objects.all(), required=False
        )

    class OutputSerializer(ModelVersionSerializer):
        pass

    @extend_schema(
        summary="Model versions, newest first within each taxonomy",
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), 400: BAD_REQUEST},
    )
    def get(self, request: Request) -> Response:
        filters = filters_of(self.FilterSerializer, request)
        versions = _model_versions().order_by("taxonomy__slug", "-number")
        if "taxonomy" in filters:
            versions = versions.filter(taxonomy=filters["taxonomy"])
        return paginated(
            self, request, versions, self.OutputSerializer, live_ids=_live_version_ids()
        )


class ModelVersionDetailApi(CuratorApi):
    class OutputSerializer(ModelVersionSerializer):
        config = serializers.DictField(help_text="Encoder, training and search settings")
        data_sha256 = serializers.CharField()

    @extend_schema(summary="One model version", responses={200: OutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request, version_id: int) -> Response:
        version = object_or_404(_model_versions(), version_id, "model version")
        context = {"live_ids": _live_version_ids()}
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
            409: OpenApiResponse(description="The version has no index build to go live with"),
        },
    )
    def post(self, request: Request, version_id: int) -> Response:
        version = object_or_404(_model_versions(), version_id, "model version")
        build = _newest_index_build(version)
        if build is None:
            return Response(
                {
                    "model_version": [
                        f"{version.label} has no index build; build one before making it live"
                    ]
                },
                status=status.HTTP_409_CONFLICT,
            )
        deployment_activate(index_build=build, actor=request.user)
        version.index_build = build.id
        context = {"live_ids": _live_version_ids()}
        return Response(self.OutputSerializer(version, context=context).data)


# --- training runs -------------------------------------------------------------------------


class TrainingRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    taxonomy = serializers.CharField(source="taxonomy.slug")
    kind = TrainingRunKindField()
    status = TrainingRunStatusField()
    trigger = TrainingRunTriggerField()
    stage = serializers.CharField()
    progress = serializers.FloatField()
    eta_seconds = serializers.FloatField(allow_null=True)
    activate = serializers.BooleanField()
    requested_by = serializers.CharField(source="requested_by.username", allow_null=True)
    model_version = serializers.CharField(source="model_version.label", allow_null=True)
    index_build = serializers.IntegerField(source="index_build_id", allow_null=True)
    error = serializers.CharField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class TrainingRunListRequestApi(CuratorReadsAdminWritesApi):
    pagination_class = PagePagination

    class FilterSerializer(serializers.Serializer):
        taxonomy = serializers.SlugRelatedField(
            slug_field="slug", queryset=Taxonomy.objects.all(), required=False
        )
        status = TrainingRunStatusField(required=False)

    class OutputSerializer(TrainingRunSerializer):
        pass

    class RequestInputSerializer(serializers.Serializer):
        taxonomy = serializers.SlugRelatedField(slug_field="slug", queryset=Taxonomy.objects.all())
        kind = TrainingRunKindField()

    @extend_schema(
        summary="Training runs, newest first",
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), 400: BAD_REQUEST},
    )
    def get(self, request: Request) -> Response:
        filters = filters_of(self.FilterSerializer, request)
        runs = _training_runs()
        if "taxonomy" in filters:
            runs = runs.filter(taxonomy=filters["taxonomy"])
        if "status" in filters:
            runs = runs.filter(status=filters["status"])
        return paginated(self, request, runs, self.OutputSerializer)

    @extend_schema(
        summary="Queue a run (admins): reindex with the live model, or build a new model",
        request=RequestInputSerializer,
        responses={
            201: OutputSerializer,
            400: BAD_REQUEST,
            403: FORBIDDEN,
            409: CONFLICT,
        },
    )
    def post(self, request: Request) -> Response:
        serializer = self.RequestInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        taxonomy = serializer.validated_data["taxonomy"]
        run = training_run_request(
            taxonomy=taxonomy,
            kind=serializer.validated_data["kind"],
            trigger=TrainingRun.Trigger.MANUAL,
            requested_by=request.user,
        )
        if run is None:
            return Response(
                {"taxonomy": [f"{taxonomy.slug} already has a queued or running training run"]},
                status=status.HTTP_409_CONFLICT,
            )
        created = object_or_404(_training_runs(), run.id, "training run")
        return Response(self.OutputSerializer(created).data, status=status.HTTP_201_CREATED)


class TrainingRunDetailApi(CuratorApi):
    class OutputSerializer(TrainingRunSerializer):
        config = serializers.DictField()
        parent_version = serializers.IntegerField(source="parent_version_id", allow_null=True)

    @extend_schema(summary="One training run", responses={200: OutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request, run_id: int) -> Response:
        run = object_or_404(_training_runs(), run_id, "training run")
        return Response(self.OutputSerializer(run).data)
