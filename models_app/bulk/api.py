"""REST API, version 1, for bulk normalization jobs: upload a file, follow it, download it.

A curator uploads a CSV (naming the column to normalize) or a text file, one text a line, as
``multipart/form-data``; a worker normalizes it in chunks (``models_app.bulk.jobs``). The job's
``progress`` and ``eta_seconds`` move as it goes; its results download once it has succeeded,
never before. Cancelling and retrying are for whoever asked for the job, or an admin.
"""

from __future__ import annotations

from datetime import datetime

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from models_app.bulk.download import CONTENT_TYPES, bulk_result_download
from models_app.bulk.files import RESULT_FILES, BulkFileError
from models_app.bulk.jobs import (
    BulkStateError,
    bulk_job_cancel,
    bulk_job_create,
    bulk_job_delete,
    bulk_job_retry,
)
from models_app.bulk.selectors import bulk_job_expires, bulk_jobs_of, no_result_why
from models_app.models import BulkJob
from models_app.serving.engines import NoLiveModel
from siamweb.web.api import (
    BAD_REQUEST,
    CONFLICT,
    NOT_FOUND,
    CuratorApi,
    PagePagination,
    object_or_404,
    paginated,
)
from siamweb.web.fields import TaxonomySlugField, named_choice_field

BulkJobStatusField = named_choice_field("BulkJobStatus", BulkJob.Status.choices)
BulkJobFormatField = named_choice_field("BulkJobFormat", BulkJob.Format.choices)


class BulkAutoCodingSerializer(serializers.Serializer):
    threshold = serializers.FloatField()
    policy_version = serializers.IntegerField()


class BulkJobSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    taxonomy = serializers.CharField(source="taxonomy.slug")
    status = BulkJobStatusField()
    filename = serializers.CharField()
    format = BulkJobFormatField(source="input_format")
    column = serializers.CharField(help_text="The CSV column normalized; empty for a text file")
    input_bytes = serializers.IntegerField()
    rows_done = serializers.IntegerField(help_text="Rows written to the results so far")
    rows_failed = serializers.IntegerField(help_text="Rows whose text could not be used")
    review_below = serializers.FloatField(allow_null=True)
    review_margin_below = serializers.FloatField(allow_null=True)
    rows_queued = serializers.IntegerField(help_text="Rows sent to the review queue")
    rows_not_queued = serializers.IntegerField(
        help_text="Rows that qualified for review but were not sent: past "
        "SIAMWEB_BULK_REVIEW_MAX_ROWS for the job, or past SIAMWEB_REVIEW_PENDING_PER_USER items "
        "waiting from its requester's sends"
    )
    rows_auto_coded = serializers.IntegerField(
        help_text="Rows whose answer reached the taxonomy's auto-coding threshold as the job "
        "started (the result's auto_coded column); they need no review"
    )
    auto_coding = serializers.SerializerMethodField(
        help_text="The auto-coding threshold and policy version the job started with and keeps "
        "whatever the policy becomes; null: auto-coding was off"
    )
    cancel_requested = serializers.BooleanField(
        help_text="A cancel was asked: a running job stops after the chunk it is on"
    )
    progress = serializers.FloatField(help_text="Share of the file read, 0 to 1")
    eta_seconds = serializers.FloatField(allow_null=True, help_text="Estimated seconds left")
    model_version = serializers.CharField(
        source="model_version.label",
        allow_null=True,
        help_text="The version every row is answered by, pinned when the job starts",
    )
    requested_by = serializers.CharField(source="requested_by.username", allow_null=True)
    error = serializers.CharField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)

    @extend_schema_field(BulkAutoCodingSerializer(allow_null=True))
    def get_auto_coding(self, job: BulkJob) -> dict | None:
        if job.auto_coding_threshold is None:
            return None
        return {"threshold": job.auto_coding_threshold, "policy_version": job.auto_coding_version}

    kept_until = serializers.SerializerMethodField(
        help_text="When the finished job is deleted with its file and results "
        "(SIAMWEB_BULK_KEEP_DAYS); null while it runs or when jobs are kept"
    )
    results = serializers.SerializerMethodField(
        help_text="Download links by format (csv, jsonl), once the job has succeeded"
    )

    def get_kept_until(self, job: BulkJob) -> datetime | None:
        return bulk_job_expires(job)

    def get_results(self, job: BulkJob) -> dict[str, str]:
        if job.status != BulkJob.Status.SUCCEEDED:
            return {}
        request = self.context["request"]
        return {
            kind: request.build_absolute_uri(reverse(f"api-bulk-job-{kind}", args=[job.id]))
            for kind in RESULT_FILES
        }


class BulkJobListCreateApi(CuratorApi):
    parser_classes = [MultiPartParser]
    pagination_class = PagePagination

    class InputSerializer(serializers.Serializer):
        taxonomy = TaxonomySlugField()
        file = serializers.FileField(
            help_text="A .csv with a header row (UTF-8) or a .txt file, one text a line"
        )
        column = serializers.CharField(
            required=False,
            allow_blank=True,
            max_length=200,
            help_text="The CSV column to normalize (default: text); ignored for a text file",
        )
        review_below = serializers.FloatField(
            required=False,
            min_value=0.0,
            max_value=1.0,
            help_text="Rows whose top group's chance of being right (its probability, as the "
            "review card shows it) is below this also go to the review queue",
        )
        review_margin_below = serializers.FloatField(
            required=False,
            min_value=0.0,
            max_value=1.0,
            help_text="Rows whose top group's probability leads the runner-up's by less than "
            "this (the result's margin) also go to the review queue",
        )

    class OutputSerializer(BulkJobSerializer):
        pass

    @extend_schema(
        summary="Bulk normalization jobs, newest first", responses=OutputSerializer(many=True)
    )
    def get(self, request: Request) -> Response:
        return paginated(self, request, bulk_jobs_of(request.user), self.OutputSerializer)

    @extend_schema(
        summary="Upload a file to normalize in the background",
        request={"multipart/form-data": InputSerializer},
        responses={
            202: OutputSerializer,
            400: BAD_REQUEST,
            409: OpenApiResponse(description="The taxonomy has no live model yet"),
        },
    )
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        upload = data["file"]
        try:
            job = bulk_job_create(
                taxonomy=data["taxonomy"],
                upload=upload,
                filename=upload.name,
                column=data.get("column", ""),
                review_below=data.get("review_below"),
                review_margin_below=data.get("review_margin_below"),
                user=request.user,
            )
        except NoLiveModel as exc:
            return Response({"taxonomy": [str(exc)]}, status=status.HTTP_409_CONFLICT)
        except BulkFileError as exc:
            return Response({"file": [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
        job = bulk_jobs_of(request.user).get(id=job.id)
        return Response(
            self.OutputSerializer(job, context={"request": request}).data,
            status=status.HTTP_202_ACCEPTED,
        )


class BulkJobDetailApi(CuratorApi):
    class OutputSerializer(BulkJobSerializer):
        pass

    @extend_schema(
        summary="A bulk job: its status, progress and time left",
        responses={200: OutputSerializer, 404: NOT_FOUND},
    )
    def get(self, request: Request, job_id: int) -> Response:
        job = object_or_404(bulk_jobs_of(request.user), job_id, "bulk job")
        return Response(self.OutputSerializer(job, context={"request": request}).data)

    @extend_schema(
        summary="Delete a finished job with its file and results",
        description="A queued or running job must be cancelled first (until it has stopped "
        "this is a 409). Finished jobs are deleted by themselves `SIAMWEB_BULK_KEEP_DAYS` "
        "after they ended (`kept_until`).",
        request=None,
        responses={204: None, 404: NOT_FOUND, 409: CONFLICT},
    )
    def delete(self, request: Request, job_id: int) -> Response:
        job = object_or_404(bulk_jobs_of(request.user), job_id, "bulk job")
        try:
            bulk_job_delete(job=job)
        except BulkStateError as exc:
            return Response({"status": [str(exc)]}, status=status.HTTP_409_CONFLICT)
        return Response(status=status.HTTP_204_NO_CONTENT)


class _BulkJobActionApi(CuratorApi):
    action = staticmethod(bulk_job_cancel)

    class OutputSerializer(BulkJobSerializer):
        pass

    def post(self, request: Request, job_id: int) -> Response:
        jobs = bulk_jobs_of(request.user)
        job = object_or_404(jobs, job_id, "bulk job")
        try:
            job = type(self).action(job=job)
        except BulkStateError as exc:
            return Response({"status": [str(exc)]}, status=status.HTTP_409_CONFLICT)
        except BulkJob.DoesNotExist:  # deleted between the lookup and the action
            return Response({"detail": f"no bulk job {job_id}"}, status=status.HTTP_404_NOT_FOUND)
        job = jobs.get(id=job.id)
        return Response(self.OutputSerializer(job, context={"request": request}).data)


class BulkJobCancelApi(_BulkJobActionApi):
    action = staticmethod(bulk_job_cancel)

    @extend_schema(
        summary="Cancel a job: a queued one at once, a running one after its chunk",
        request=None,
        responses={200: BulkJobSerializer, 404: NOT_FOUND, 409: CONFLICT},
    )
    def post(self, request: Request, job_id: int) -> Response:
        return super().post(request, job_id)


class BulkJobRetryApi(_BulkJobActionApi):
    action = staticmethod(bulk_job_retry)

    @extend_schema(
        summary="Queue a failed job (or one whose worker stopped) again, from its checkpoint",
        request=None,
        responses={200: BulkJobSerializer, 404: NOT_FOUND, 409: CONFLICT},
    )
    def post(self, request: Request, job_id: int) -> Response:
        return super().post(request, job_id)


class _BulkJobResultApi(CuratorApi):
    kind = "csv"

    def perform_content_negotiation(self, request: Request, force: bool = False):
        # The file is CSV or JSON Lines whatever Accept asks for (text/csv, say, which no
        # renderer offers); only an error is rendered, as JSON.
        return super().perform_content_negotiation(request, force=True)

    def get(self, request: Request, job_id: int):
        job = object_or_404(bulk_jobs_of(request.user), job_id, "bulk job")
        download = bulk_result_download(job, self.kind)
        if download is None:
            return Response({"status": [no_result_why(job)]}, status=status.HTTP_409_CONFLICT)
        return download


def result_responses(kind: str) -> dict:
    media_type = CONTENT_TYPES[kind].split(";")[0]
    return {
        (200, media_type): OpenApiResponse(OpenApiTypes.BINARY),
        (404, "application/json"): NOT_FOUND,
        (409, "application/json"): OpenApiResponse(
            description='The job has not succeeded: no result to download: `{"status": ["why"]}`'
        ),
    }


class BulkJobCsvApi(_BulkJobResultApi):
    kind = "csv"

    @extend_schema(
        summary="The results as CSV: every input column, then the answer's columns",
        responses=result_responses("csv"),
    )
    def get(self, request: Request, job_id: int):
        return super().get(request, job_id)


class BulkJobJsonlApi(_BulkJobResultApi):
    kind = "jsonl"

    @extend_schema(
        summary="The results as JSON Lines: one object a row, the input under `input`",
        responses=result_responses("jsonl"),
    )
    def get(self, request: Request, job_id: int):
        return super().get(request, job_id)
