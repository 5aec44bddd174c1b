"""Training runs: the list, asking for a run, one run, forcing a rejected candidate live,
retrying a failed run and cancelling an active one."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from models_app.models import TrainingRun
from models_app.serving.engines import NoLiveModel
from models_app.training.api.base import (
    TrainingRunKindField,
    TrainingRunRequestKindField,
    TrainingRunStatusField,
    TrainingRunTriggerField,
    active_run_conflict,
    run_action_response,
    training_runs,
)
from models_app.training.api.reports import FlipReportSerializer, GateReportSerializer
from models_app.training.promotion import RunStateError, live_version, training_run_promote
from models_app.training.retraining import (
    finetune_now_request,
    training_run_cancel,
    training_run_retry,
)
from models_app.training.services.runs import training_run_request
from siamweb.web.api import (
    BAD_REQUEST,
    CONFLICT,
    FORBIDDEN,
    NOT_FOUND,
    AdminApi,
    CuratorApi,
    CuratorReadsAdminWritesApi,
    PagePagination,
    filters_of,
    object_or_404,
    paginated,
)
from siamweb.web.fields import TaxonomySlugField


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


class TrainingRunDetailSerializer(TrainingRunSerializer):
    config = serializers.DictField()
    parent_version = serializers.IntegerField(
        source="parent_version_id",
        allow_null=True,
        help_text="The live version a fine-tune started from",
    )
    feedback_until = serializers.IntegerField(
        allow_null=True, help_text="The last feedback pair a fine-tune trained on"
    )
    retry_of = serializers.IntegerField(
        source="retry_of_id", allow_null=True, help_text="The failed run this one retries"
    )
    heartbeat_at = serializers.DateTimeField(allow_null=True)
    cancel_requested_at = serializers.DateTimeField(
        allow_null=True,
        help_text="When an admin asked the run to stop; a running run stops at its next "
        "progress report, before anything goes live",
    )
    gate_report = serializers.SerializerMethodField()
    flip_report = serializers.SerializerMethodField()

    @extend_schema_field(GateReportSerializer(allow_null=True))
    def get_gate_report(self, run: TrainingRun) -> dict | None:
        """The gate's decision on a fine-tune's candidate; null until it decided."""
        return run.gate_report or None

    @extend_schema_field(FlipReportSerializer(allow_null=True))
    def get_flip_report(self, run: TrainingRun) -> dict | None:
        """What a promotion changed; null until one happened."""
        return run.flip_report or None


class TrainingRunListRequestApi(CuratorReadsAdminWritesApi):
    pagination_class = PagePagination

    class FilterSerializer(serializers.Serializer):
        taxonomy = TaxonomySlugField(required=False)
        status = TrainingRunStatusField(required=False)

    class OutputSerializer(TrainingRunSerializer):
        pass

    class RequestInputSerializer(serializers.Serializer):
        taxonomy = TaxonomySlugField()
        kind = TrainingRunRequestKindField()

    @extend_schema(
        summary="Training runs, newest first",
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), 400: BAD_REQUEST},
    )
    def get(self, request: Request) -> Response:
        filters = filters_of(self.FilterSerializer, request)
        runs = training_runs()
        if "taxonomy" in filters:
            runs = runs.filter(taxonomy=filters["taxonomy"])
        if "status" in filters:
            runs = runs.filter(status=filters["status"])
        return paginated(self, request, runs, self.OutputSerializer)

    @extend_schema(
        summary="Queue a run (admins): reindex with the live model, build a new model, or "
        "fine-tune the live model on the feedback so far (gated before it goes live)",
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
        kind = serializer.validated_data["kind"]
        try:
            if kind == TrainingRun.Kind.FINETUNE:
                run = finetune_now_request(taxonomy=taxonomy, requested_by=request.user)
            elif kind == TrainingRun.Kind.REINDEX and live_version(taxonomy) is None:
                # A reindex indexes the live model: without one it could only fail.
                raise NoLiveModel(taxonomy)
            else:
                run = training_run_request(
                    taxonomy=taxonomy,
                    kind=kind,
                    trigger=TrainingRun.Trigger.MANUAL,
                    requested_by=request.user,
                )
        except (NoLiveModel, RunStateError) as exc:
            return Response({"taxonomy": [str(exc)]}, status=status.HTTP_409_CONFLICT)
        if run is None:
            return active_run_conflict(taxonomy)
        created = object_or_404(training_runs(), run.id, "training run")
        return Response(self.OutputSerializer(created).data, status=status.HTTP_201_CREATED)


class TrainingRunDetailApi(CuratorApi):
    class OutputSerializer(TrainingRunDetailSerializer):
        pass

    @extend_schema(
        summary="One training run, with its progress, gate report and flip report",
        responses={200: OutputSerializer, 404: NOT_FOUND},
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = object_or_404(training_runs(), run_id, "training run")
        return Response(self.OutputSerializer(run).data)


class TrainingRunPromoteApi(AdminApi):
    class OutputSerializer(TrainingRunDetailSerializer):
        pass

    @extend_schema(
        summary="Make a fine-tune's candidate live although the gate rejected it (admins)",
        description="The candidate and its index go live together, the flip report is "
        "computed, pending inputs are predicted again, and the gate report records who forced "
        "it. Only a rejected fine-tune can be promoted this way.",
        request=None,
        responses={
            200: OutputSerializer,
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: CONFLICT,
        },
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = object_or_404(training_runs(), run_id, "training run")
        return run_action_response(
            lambda: training_run_promote(run=run, actor=request.user),
            field="training_run",
            taxonomy=run.taxonomy,
            output_serializer=self.OutputSerializer,
            success_status=status.HTTP_200_OK,
        )


class TrainingRunRetryApi(AdminApi):
    class OutputSerializer(TrainingRunDetailSerializer):
        pass

    @extend_schema(
        summary="Queue a failed run again (admins)",
        description="A new run of the same kind and config, with `retry_of` set; it resumes "
        "from the failed run's checkpoints. Only a failed run can be retried, and once: a "
        "retry that failed is retried in its turn.",
        request=None,
        responses={
            202: OutputSerializer,
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: CONFLICT,
        },
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = object_or_404(training_runs(), run_id, "training run")
        return run_action_response(
            lambda: training_run_retry(run=run, actor=request.user),
            field="training_run",
            taxonomy=run.taxonomy,
            output_serializer=self.OutputSerializer,
            success_status=status.HTTP_202_ACCEPTED,
        )


class TrainingRunCancelApi(AdminApi):
    class OutputSerializer(TrainingRunDetailSerializer):
        pass

    @extend_schema(
        summary="Cancel a queued or running run (admins)",
        description="A queued run is cancelled at once (status `cancelled`); a running one has "
        "`cancel_requested_at` set and stops at its next progress report (a training's next "
        "steps, an index's next batch, a fine-tune's report before its switch), before "
        "anything goes live: the live model keeps serving. Asking again changes nothing; a "
        "run that has ended is a 409.",
        request=None,
        responses={
            202: OutputSerializer,
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: CONFLICT,
        },
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = object_or_404(training_runs(), run_id, "training run")
        return run_action_response(
            lambda: training_run_cancel(run=run, actor=request.user),
            field="training_run",
            taxonomy=run.taxonomy,
            output_serializer=self.OutputSerializer,
            success_status=status.HTTP_202_ACCEPTED,
        )
