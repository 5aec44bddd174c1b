"""What the product can vouch for, and the auto-coding policy an admin sets on it: the
probability from which a taxonomy's answers meet a target precision, and what coding them
without review has done (admins only)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from annotations.models import Taxonomy
from annotations.services.review.auto_coding import AutoCodingError, auto_coding_set
from models_app.serving.api import serving_error_response
from models_app.serving.auto_coding_audits import auto_coding_state
from models_app.serving.engines import SERVING_UNAVAILABLE, NoLiveModel
from models_app.serving.vouching import (
    RECENT_DAYS,
    SUGGESTED_TARGETS,
    TARGET_RANGE,
    vouching_report,
)
from siamweb.web.api import (
    BAD_REQUEST,
    FORBIDDEN,
    MODEL_UNAVAILABLE,
    NO_LIVE_MODEL,
    NOT_FOUND,
    AdminApi,
    field_error,
    filters_of,
    taxonomy_or_404,
)
from siamweb.web.fields import NumberField


class VouchingEvidenceSerializer(serializers.Serializer):
    source = serializers.ChoiceField(
        ["starter", "verdicts", "none"],
        help_text="starter: the starter ranker's answers on real titles, while it ranks; "
        "verdicts: the taxonomy's own ranker's (each verdict's top answer by weights fitted "
        "without it), from 200 verdicts; none: its own ranker ranks on fewer",
    )
    description = serializers.CharField()
    answers = serializers.IntegerField(help_text="Answers in the evidence")
    at_or_above_threshold = serializers.IntegerField()
    right = serializers.IntegerField(help_text="Of those at or above the threshold")


class TaxonomyVouchingApi(AdminApi):
    # Admins only: a curator who knew the threshold could tell an audited card (its answer at
    # or above it) from the others.
    class FilterSerializer(serializers.Serializer):
        target = serializers.FloatField(
            required=False, default=SUGGESTED_TARGETS[0],
            min_value=TARGET_RANGE[0], max_value=TARGET_RANGE[1],
            help_text="The precision the answers must have (from 0.5 to 0.999)",
        )  # fmt: skip

    class OutputSerializer(serializers.Serializer):
        target = serializers.FloatField()
        threshold = serializers.FloatField(
            allow_null=True,
            help_text="The lowest probability whose answers show the target; null: the "
            "evidence does not show it at any probability",
        )
        lower_bound = serializers.FloatField(
            allow_null=True,
            help_text="One-sided 95% lower bound on the precision of the evidence's answers at "
            "or above the threshold",
        )
        evidence = VouchingEvidenceSerializer()
        recent_days = serializers.IntegerField()
        recent_inputs = serializers.IntegerField(
            help_text=f"Inputs of the last {RECENT_DAYS} days the model answered"
        )
        recent_vouched = serializers.IntegerField(
            help_text="Of them, answers at or above the threshold, as they were predicted"
        )
        recent_share = serializers.FloatField(allow_null=True)
        verdicts_needed = serializers.IntegerField(
            allow_null=True,
            help_text="Without a threshold: verdicts more that could show one (null: more "
            "answers like today's would not)",
        )

    @extend_schema(
        summary="What the product can vouch for (admins): the probability above which answers "
        "meet a target precision, and the share of recent inputs it would code by itself",
        parameters=[FilterSerializer],
        responses={
            200: OutputSerializer,
            400: BAD_REQUEST,
            403: FORBIDDEN,
            404: NOT_FOUND,
            409: NO_LIVE_MODEL,
            503: MODEL_UNAVAILABLE,
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        taxonomy = taxonomy_or_404(slug)
        target = filters_of(self.FilterSerializer, request)["target"]
        try:
            report = vouching_report(taxonomy, target=target)
            if report is None:
                raise NoLiveModel(taxonomy)
        except SERVING_UNAVAILABLE as exc:
            return serving_error_response(exc, slug)
        return Response(self.OutputSerializer(report.as_dict()).data)


class AutoCodingApi(AdminApi):
    # Admins only, reads too: the threshold and the audit's counts would let a curator tell
    # an audited card from the others.
    class OutputSerializer(serializers.Serializer):
        target_precision = serializers.FloatField(
            allow_null=True, help_text="null: off (the default); every answer waits for review"
        )
        audit_share = serializers.FloatField(
            help_text="The share of answers it vouches for that go to review blind, as any card"
        )
        version = serializers.IntegerField(help_text="Moves on every change; 0: never set")
        active = serializers.BooleanField(
            help_text="The admin's policy is on and not paused; whether it codes anything now "
            "is coding"
        )
        coding = serializers.BooleanField(
            help_text="Answers are coded by themselves now: the policy is active and the "
            "evidence shows a threshold for its target. An active policy codes nothing while "
            "the evidence shows none (not_coding_reason, verdicts_needed)"
        )
        not_coding_reason = serializers.CharField(
            help_text="Why nothing is coded by itself now, in words: off, paused, no live "
            "model, or no threshold shown for the target by the live ranker's evidence (what "
            "it is, and about how many verdicts more could show one); empty while it codes"
        )
        verdicts_needed = serializers.IntegerField(
            allow_null=True,
            help_text="While an active policy codes nothing for want of evidence: about how "
            "many verdicts more could show a threshold (the vouching endpoint's, at the "
            "target); null otherwise, or when more answers like today's would not",
        )
        paused_at = serializers.DateTimeField(allow_null=True)
        paused_reason = serializers.CharField(
            help_text="Why the audit paused it (empty when it is not paused)"
        )
        threshold = serializers.FloatField(
            allow_null=True,
            help_text="The probability from which answers are coded now (the vouching "
            "endpoint's, at the target); null when off or not shown by the evidence",
        )
        coded = serializers.IntegerField(help_text="Answers coded by itself, this version")
        audited = serializers.IntegerField(
            help_text="Audited answers with a curator's final verdict, this version"
        )
        audited_right = serializers.IntegerField()
        audited_precision = serializers.FloatField(allow_null=True)
        audited_interval = serializers.ListField(
            child=serializers.FloatField(), allow_null=True,
            help_text="One-sided 95% lower and upper bounds of the audited precision",
        )  # fmt: skip

    class InputSerializer(serializers.Serializer):
        target_precision = NumberField(
            allow_null=True, min_value=TARGET_RANGE[0], max_value=TARGET_RANGE[1],
            help_text="From 0.5 to 0.999 (0.95 suggested); null turns auto-coding off",
        )  # fmt: skip
        audit_share = NumberField(
            required=False, default=0.05, min_value=0.0, max_value=1.0,
            help_text="From 0 to 1; default 0.05",
        )  # fmt: skip

    @extend_schema(
        summary="The taxonomy's auto-coding policy and what it has done (admins)",
        responses={200: OutputSerializer, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        taxonomy = taxonomy_or_404(slug)
        return Response(self.OutputSerializer(auto_coding_output(taxonomy)).data)

    @extend_schema(
        summary="Set the auto-coding policy (admins): a new version, resumed if it was paused",
        request=InputSerializer,
        responses={200: OutputSerializer, 400: BAD_REQUEST, 403: FORBIDDEN, 404: NOT_FOUND},
    )
    def put(self, request: Request, slug: str) -> Response:
        taxonomy = taxonomy_or_404(slug)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            auto_coding_set(taxonomy=taxonomy, user=request.user, **serializer.validated_data)
        except AutoCodingError as exc:
            return field_error(exc.field, str(exc), status.HTTP_400_BAD_REQUEST)
        return Response(self.OutputSerializer(auto_coding_output(taxonomy)).data)


def auto_coding_output(taxonomy: Taxonomy) -> dict:
    state = auto_coding_state(taxonomy)
    policy = state.policy
    interval = state.audited_interval
    return {
        "target_precision": policy.target_precision if policy else None,
        "audit_share": policy.audit_share if policy else 0.05,
        "version": policy.version if policy else 0,
        "active": bool(policy and policy.active),
        "paused_at": policy.paused_at if policy else None,
        "paused_reason": policy.paused_reason if policy else "",
        "coding": state.coding,
        "not_coding_reason": state.not_coding_reason,
        "verdicts_needed": state.verdicts_needed,
        "threshold": state.threshold,
        "coded": state.coded,
        "audited": state.audited,
        "audited_right": state.audited_right,
        "audited_precision": state.audited_precision,
        "audited_interval": list(interval) if interval else None,
    }
