from __future__ import annotations

from django.contrib import admin

from annotations.models import (
    FeedbackPair,
    Group,
    GroupRelation,
    Input,
    Judgement,
    Member,
    Prediction,
    ReviewItem,
    Taxonomy,
)
from models_app.siamese.text import normalize_text


@admin.register(Taxonomy)
class TaxonomyAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "source_format", "updated_at"]
    search_fields = ["slug", "name"]


@admin.register(Group)
class GroupAdmin(admin.ModelAdmin):
    list_display = ["code", "name", "taxonomy"]
    list_filter = ["taxonomy"]
    search_fields = ["code", "name"]


@admin.register(Member)
class MemberAdmin(admin.ModelAdmin):
    list_display = ["text", "group", "source", "added_by", "created_at"]
    list_filter = ["source", "taxonomy"]
    search_fields = ["text", "group__name", "group__code"]
    raw_id_fields = ["group", "added_by"]
    list_select_related = ["group", "added_by"]
    readonly_fields = ["normalized_text", "taxonomy"]

    def save_model(self, request, obj, form, change) -> None:
        # The matching key and the taxonomy always follow the text and the group.
        obj.normalized_text = normalize_text(obj.text)
        obj.taxonomy_id = obj.group.taxonomy_id
        super().save_model(request, obj, form, change)


@admin.register(Input)
class InputAdmin(admin.ModelAdmin):
    list_display = ["text", "taxonomy", "source", "occurrences", "created_at"]
    list_filter = ["taxonomy", "source"]
    search_fields = ["text"]


@admin.register(Prediction)
class PredictionAdmin(admin.ModelAdmin):
    list_display = ["input", "top_group", "top_score", "margin", "model_version", "created_at"]
    raw_id_fields = ["input", "top_group"]
    list_select_related = ["input", "top_group", "model_version__taxonomy"]


@admin.register(ReviewItem)
class ReviewItemAdmin(admin.ModelAdmin):
    list_display = ["input", "status", "priority", "updated_at"]
    list_filter = ["status"]
    raw_id_fields = ["input", "prediction"]
    list_select_related = ["input"]


@admin.register(Judgement)
class JudgementAdmin(admin.ModelAdmin):
    list_display = ["review_item", "verdict", "group", "rejected_group", "user", "created_at"]
    list_filter = ["verdict"]
    raw_id_fields = ["review_item", "group", "rejected_group"]
    list_select_related = ["review_item__input", "group", "rejected_group", "user"]


@admin.register(FeedbackPair)
class FeedbackPairAdmin(admin.ModelAdmin):
    list_display = ["text_a", "text_b", "label", "origin", "created_at"]
    list_filter = ["label", "origin", "taxonomy"]
    search_fields = ["text_a", "text_b"]
    raw_id_fields = ["judgement"]


@admin.register(GroupRelation)
class GroupRelationAdmin(admin.ModelAdmin):
    list_display = ["group", "related", "taxonomy"]
    list_filter = ["taxonomy"]
    raw_id_fields = ["group", "related"]
    list_select_related = ["group", "related"]
