from __future__ import annotations

from django.contrib import admin
from rest_framework.authtoken.models import TokenProxy

from annotations.models import (
    AuditEvent,
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

# DRF registers its tokens with an admin that lists every user's key and makes one for anyone:
# an admin could act as any curator, unaudited. Each user handles their own token on
# /accounts/token/ (audited, the key shown once).
admin.site.unregister(TokenProxy)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Browse only: every change goes through the services, which keep the audit trail, the
    feedback pairs and the index in step. Taxonomy edits live on the taxonomy pages."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Taxonomy)
class TaxonomyAdmin(ReadOnlyAdmin):
    list_display = ["slug", "name", "source_format", "updated_at"]
    search_fields = ["slug", "name"]


@admin.register(Group)
class GroupAdmin(ReadOnlyAdmin):
    list_display = ["code", "name", "taxonomy"]
    list_filter = ["taxonomy"]
    search_fields = ["code", "name"]


@admin.register(Member)
class MemberAdmin(ReadOnlyAdmin):
    list_display = ["text", "group", "source", "added_by", "created_at"]
    list_filter = ["source", "taxonomy"]
    search_fields = ["text", "group__name", "group__code"]
    raw_id_fields = ["group", "added_by"]
    list_select_related = ["group", "added_by"]


@admin.register(Input)
class InputAdmin(ReadOnlyAdmin):
    list_display = ["text", "taxonomy", "source", "occurrences", "created_at"]
    list_filter = ["taxonomy", "source"]
    search_fields = ["text"]


@admin.register(Prediction)
class PredictionAdmin(ReadOnlyAdmin):
    list_display = ["input", "top_group", "top_score", "margin", "model_version", "created_at"]
    raw_id_fields = ["input", "top_group"]
    list_select_related = ["input", "top_group", "model_version__taxonomy"]


@admin.register(ReviewItem)
class ReviewItemAdmin(ReadOnlyAdmin):
    list_display = ["input", "status", "priority", "updated_at"]
    list_filter = ["status"]
    raw_id_fields = ["input", "prediction"]
    list_select_related = ["input"]


@admin.register(Judgement)
class JudgementAdmin(ReadOnlyAdmin):
    list_display = ["review_item", "verdict", "group", "rejected_group", "user", "created_at"]
    list_filter = ["verdict"]
    raw_id_fields = ["review_item", "group", "rejected_group"]
    list_select_related = ["review_item__input", "group", "rejected_group", "user"]


@admin.register(FeedbackPair)
class FeedbackPairAdmin(ReadOnlyAdmin):
    list_display = ["text_a", "text_b", "label", "origin", "created_at"]
    list_filter = ["label", "origin", "taxonomy"]
    search_fields = ["text_a", "text_b"]
    raw_id_fields = ["judgement"]


@admin.register(GroupRelation)
class GroupRelationAdmin(ReadOnlyAdmin):
    list_display = ["group", "related", "taxonomy"]
    list_filter = ["taxonomy"]
    raw_id_fields = ["group", "related"]
    list_select_related = ["group", "related"]


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "actor", "action", "object_type", "object_id", "taxonomy"]
    list_filter = ["action", "taxonomy"]
    search_fields = ["object_id", "actor__username"]
    list_select_related = ["actor", "taxonomy"]
