"""REST API, version 1, for models: versions (and which one is live) and training runs.

Curators read; only admins make a version live, start a run (build, reindex, fine-tune), roll
back to an earlier version, force a rejected candidate live or retry a failed run. See
annotations/api.py for the conventions every view follows. A refusal about the state of things
(a run already active, a run or version in the wrong state) is a 409 naming what is wrong.
"""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
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
    TaxonomySlugField,
    filters_of,
    named_choice_field,
    object_or_404,
    paginated,
)
from annotations.models import Taxonomy
from models_app.models import Deployment, IndexBuild, ModelVersion, TrainingRun
from models_app.promotion import RunStateError, model_version_rollback, training_run_promote
from models_app.retraining import finetune_run_request, training_run_retry
from models_app.services import NoLiveModel, deployment_activate, training_run_request

TrainingRunKindField = named_choice_field("TrainingRunKind", TrainingRun.Kind.choices)
# A rollback is asked for on the version to go back to (model-versions/<id>/rollback).
TrainingRunRequestKindField = named_choice_field(
    "TrainingRunRequestKind",
    [
        (kind, label)
        for kind, label in TrainingRun.Kind.choices
        if kind != TrainingRun.Kind.ROLLBACK
    ],
)
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


def _active_run_conflict(taxonomy: Taxonomy) -> Response:
    return Response(
        {"taxonomy": [f"{taxonomy.slug} already has a queued or running training run"]},
        status=status.HTTP_409_CONFLICT,
    )


def _state_conflict(field: str, exc: RunStateError) -> Response:
    return Response({field: [str(exc)]}, status=status.HTTP_409_CONFLICT)


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


class GateMetricSerializer(serializers.Serializer):
    name = serializers.CharField(
        help_text="typos, composition, extra_words, annotations, p_at_10, …"
    )
    suite = serializers.CharField(
        help_text="frozen, feedback, or drift: a frozen-suite metric against the reference "
        "version instead of the live one"
    )
    live = serializers.FloatField(
        required=False, help_text="The live model's score (not on drift rows)"
    )
    reference = serializers.FloatField(
        required=False, help_text="A drift row: the reference version's score"
    )
    against = serializers.CharField(
        required=False, help_text="A drift row: the reference version, e.g. onet/v1"
    )
    candidate = serializers.FloatField()
    delta = serializers.FloatField(help_text="candidate minus live (or minus reference)")
    passed = serializers.BooleanField()
    n = serializers.IntegerField(help_text="Cases both models answered")
    ci95 = serializers.ListField(
        child=serializers.FloatField(), help_text="95% interval of the paired difference"
    )
    lost = serializers.IntegerField(help_text="Cases the baseline got right, the candidate not")
    gained = serializers.IntegerField(help_text="Cases the candidate got right, the baseline not")
    p_worse = serializers.FloatField(
        help_text="McNemar's exact one-sided p that the candidate is worse"
    )
    alpha = serializers.FloatField(help_text="The level this row was tested at")
    significantly_worse = serializers.BooleanField()
    why = serializers.CharField(help_text="Why the row passed or blocked, in words")


class GateVerdictsSerializer(serializers.Serializer):
    count = serializers.IntegerField(help_text="Curator verdicts compared")
    live = serializers.FloatField(help_text="Share of them the live model agrees with")
    candidate = serializers.FloatField(help_text="Share of them the candidate agrees with")
    rose = serializers.BooleanField()


class GateReportSerializer(serializers.Serializer):
    test = serializers.CharField(help_text="The paired test every row is judged by")
    alpha = serializers.FloatField(help_text="The gate's significance level, over all rows")
    alpha_per_test = serializers.FloatField(help_text="alpha divided by the rows tested")
    reference_version = serializers.CharField(
        required=False,
        help_text="The version the chain of gate promotions behind the live one started from; "
        "absent when that is the live version",
    )
    decision = serializers.ChoiceField(choices=["promote", "reject"])
    reasons = serializers.ListField(child=serializers.CharField())
    metrics = GateMetricSerializer(many=True)
    frozen_summary = serializers.DictField(
        required=False, help_text="Per model, the frozen suite's MRR and P@10 (not tested)"
    )
    verdicts = GateVerdictsSerializer(required=False)
    new_verdicts = serializers.IntegerField(required=False)
    stage_seconds = serializers.DictField(
        child=serializers.FloatField(),
        required=False,
        help_text="Seconds per stage of the run: learn, held_out, catch_up, index, gate, …",
    )
    forced_by = serializers.CharField(
        required=False, help_text="The admin who promoted a candidate the gate rejected"
    )


class FlipGroupSerializer(serializers.Serializer):
    code = serializers.CharField()
    name = serializers.CharField()


class FlipRowSerializer(serializers.Serializer):
    input = serializers.CharField()
    before = FlipGroupSerializer(allow_null=True, help_text="The old model's top group")
    after = FlipGroupSerializer(allow_null=True, help_text="The new model's top group")
    curator = FlipGroupSerializer(allow_null=True, help_text="The group a curator gave")
    verdict = serializers.CharField(allow_null=True)
    confirmed = serializers.BooleanField(
        help_text="A curator confirmed the old answer (in broken: the new model gets it wrong)"
    )


class FlipCountsSerializer(serializers.Serializer):
    fixed = serializers.IntegerField()
    broken = serializers.IntegerField()
    changed = serializers.IntegerField()
    confirmed_now_wrong = serializers.IntegerField()


class FlipReportSerializer(serializers.Serializer):
    compared = serializers.IntegerField()
    counts = FlipCountsSerializer(help_text="Complete counts; each list holds at most 200 rows")
    fixed = FlipRowSerializer(many=True)
    broken = FlipRowSerializer(many=True)
    changed = FlipRowSerializer(many=True)


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
        runs = _training_runs()
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
                run = finetune_run_request(
                    taxonomy=taxonomy,
                    trigger=TrainingRun.Trigger.MANUAL,
                    requested_by=request.user,
                )
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
            return _active_run_conflict(taxonomy)
        created = object_or_404(_training_runs(), run.id, "training run")
        return Response(self.OutputSerializer(created).data, status=status.HTTP_201_CREATED)


class TrainingRunDetailApi(CuratorApi):
    class OutputSerializer(TrainingRunDetailSerializer):
        pass

    @extend_schema(
        summary="One training run, with its progress, gate report and flip report",
        responses={200: OutputSerializer, 404: NOT_FOUND},
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = object_or_404(_training_runs(), run_id, "training run")
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
        run = object_or_404(_training_runs(), run_id, "training run")
        try:
            run = training_run_promote(run=run, actor=request.user)
        except RunStateError as exc:
            return _state_conflict("training_run", exc)
        promoted = object_or_404(_training_runs(), run.id, "training run")
        return Response(self.OutputSerializer(promoted).data)


class TrainingRunRetryApi(AdminApi):
    class OutputSerializer(TrainingRunDetailSerializer):
        pass

    @extend_schema(
        summary="Queue a failed run again (admins)",
        description="A new run of the same kind and config, with `retry_of` set; it resumes "
        "from the failed run's checkpoints. Only a failed run can be retried.",
        request=None,
        responses={
            202: OutputSerializer,
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: CONFLICT,
        },
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = object_or_404(_training_runs(), run_id, "training run")
        try:
            retry = training_run_retry(run=run, actor=request.user)
        except RunStateError as exc:
            return _state_conflict("training_run", exc)
        if retry is None:
            return _active_run_conflict(run.taxonomy)
        queued = object_or_404(_training_runs(), retry.id, "training run")
        return Response(self.OutputSerializer(queued).data, status=status.HTTP_202_ACCEPTED)


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
        version = object_or_404(_model_versions(), version_id, "model version")
        try:
            run = model_version_rollback(model_version=version, actor=request.user)
        except RunStateError as exc:
            return _state_conflict("model_version", exc)
        if run is None:
            return _active_run_conflict(version.taxonomy)
        queued = object_or_404(_training_runs(), run.id, "training run")
        return Response(self.OutputSerializer(queued).data, status=status.HTTP_202_ACCEPTED)
