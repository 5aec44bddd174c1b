"""Serializers shared by several views of curation's API: references to groups, predictions,
review items and verdicts, the queue's filters."""

from __future__ import annotations

from drf_spectacular.utils import (
    extend_schema_field,
)
from rest_framework import serializers

from annotations.api.base import QUEUE_OPEN, QueueStatusField, ReviewItemStatusField, VerdictField
from annotations.api.reads import item_judgements
from annotations.models import (
    Group,
    Judgement,
    ReviewItem,
)
from annotations.selectors.card import review_card_groups
from annotations.selectors.queue import QueueFilters
from models_app.serving.api import RankedGroupSerializer
from siamweb.ids import IdSerializerField
from siamweb.web.fields import (
    IdField,
    NumberField,
    TaxonomySlugField,
)


class GroupRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    code = serializers.CharField()
    name = serializers.CharField()


class ModelVersionRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    number = serializers.IntegerField()
    label = serializers.CharField()


class PredictionSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    model_version = ModelVersionRefSerializer()
    ranked_groups = RankedGroupSerializer(many=True)
    top_score = serializers.FloatField(allow_null=True)
    margin = serializers.FloatField(allow_null=True)
    created_at = serializers.DateTimeField()


class InputRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    text = serializers.CharField()
    source = serializers.CharField()
    occurrences = serializers.IntegerField()


class AutoCodingRefSerializer(serializers.Serializer):
    threshold = serializers.FloatField()
    policy_version = serializers.IntegerField()


class ReviewItemSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    taxonomy = serializers.CharField(source="taxonomy.slug")
    text = serializers.CharField(source="input.text")
    status = ReviewItemStatusField()
    priority = serializers.FloatField()
    top_group = GroupRefSerializer(allow_null=True)
    top_score = serializers.FloatField(allow_null=True)
    reviews_required = serializers.IntegerField()
    leased_by = serializers.CharField(source="leased_by.username", allow_null=True)
    lease_expires_at = serializers.DateTimeField(allow_null=True)
    conflict = serializers.BooleanField()
    auto_coded = serializers.BooleanField(
        help_text="Coded by the product without review: its answer's probability reached the "
        "threshold the taxonomy's auto-coding policy showed for its target precision"
    )
    auto_coding = serializers.SerializerMethodField(
        help_text="For an auto-coded answer: the threshold and policy version it was coded "
        "under; null otherwise"
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    @extend_schema_field(AutoCodingRefSerializer(allow_null=True))
    def get_auto_coding(self, item: ReviewItem) -> dict | None:
        # An audited answer is never told apart from any other card: only coded ones say so.
        if not item.auto_coded:
            return None
        return {"threshold": item.vouched_threshold, "policy_version": item.vouched_policy_version}


class ReviewItemPredictionSerializer(ReviewItemSerializer):
    input = InputRefSerializer()
    prediction = PredictionSerializer()


class JudgementSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    review_item = serializers.IntegerField(source="review_item_id")
    verdict = VerdictField()
    group = GroupRefSerializer(allow_null=True, help_text="Where the input belongs")
    rejected_group = GroupRefSerializer(allow_null=True, help_text="Where it was wrongly matched")
    user = serializers.CharField(source="user.username")
    prediction = serializers.IntegerField(source="prediction_id", allow_null=True)
    previous_status = serializers.CharField()
    created_at = serializers.DateTimeField()
    undone_at = serializers.DateTimeField(allow_null=True)
    settlement = serializers.ChoiceField(
        choices=["", *Judgement.Settlement.values],
        help_text="Where an admin settled a conflict: overruled (the settlement undid this "
        "verdict), settled (the admin's own verdict); empty otherwise",
    )


class ReviewItemDetailSerializer(ReviewItemPredictionSerializer):
    candidate_groups = serializers.SerializerMethodField(
        help_text="The ranked groups less those a curator rejected for this input"
    )
    judgements = JudgementSerializer(many=True, source="api_judgements")

    @extend_schema_field(RankedGroupSerializer(many=True))
    def get_candidate_groups(self, item: ReviewItem) -> list[dict]:
        return RankedGroupSerializer(review_card_groups(item), many=True).data


def review_item_detail(item: ReviewItem) -> dict:
    item.api_judgements = item_judgements(item)
    return ReviewItemDetailSerializer(item).data


class QueueFilterSerializer(serializers.Serializer):
    """What a curator narrows the queue to, for listing and for claiming."""

    taxonomy = TaxonomySlugField(required=False)
    group = IdField(
        queryset=Group.objects.select_related("taxonomy"),
        required=False,
        help_text="Items whose top predicted group is this one (id)",
    )
    score_min = NumberField(required=False)
    score_max = NumberField(required=False)
    status = QueueStatusField(required=False)
    job = IdSerializerField(
        required=False, min_value=1, help_text="Items this bulk job sent for review (its id)"
    )

    def validate(self, data: dict) -> dict:
        group, taxonomy = data.get("group"), data.get("taxonomy")
        if group is not None and taxonomy is not None and group.taxonomy_id != taxonomy.id:
            raise serializers.ValidationError(
                {"group": [f"group {group.id} is not in taxonomy {taxonomy.slug}"]}
            )
        low, high = data.get("score_min"), data.get("score_max")
        if low is not None and high is not None and low > high:
            raise serializers.ValidationError({"score_min": ["must not exceed score_max"]})
        return data

    @staticmethod
    def queue_filters(data: dict, *, default_status: str | None) -> QueueFilters:
        """``status`` "open" is every open item; None is the open ones, then the skipped."""
        wanted = data.get("status", default_status)
        return QueueFilters(
            taxonomy=data.get("taxonomy"),
            group=data.get("group"),
            score_min=data.get("score_min"),
            score_max=data.get("score_max"),
            status=None if wanted in (None, QUEUE_OPEN) else wanted,
            include_skipped=wanted is None,
            bulk_job_id=data.get("job"),
        )
