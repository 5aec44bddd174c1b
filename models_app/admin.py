from __future__ import annotations

from django.contrib import admin

from models_app.models import Deployment, IndexBuild, ModelVersion, TrainingRun


@admin.register(ModelVersion)
class ModelVersionAdmin(admin.ModelAdmin):
    list_display = ["__str__", "encoder_kind", "trained_on_members", "created_at"]
    list_filter = ["taxonomy", "encoder_kind"]


@admin.register(IndexBuild)
class IndexBuildAdmin(admin.ModelAdmin):
    list_display = ["__str__", "size", "max_member_id", "created_at"]
    list_filter = ["taxonomy"]


@admin.register(Deployment)
class DeploymentAdmin(admin.ModelAdmin):
    list_display = ["taxonomy", "index_build", "updated_at"]


@admin.register(TrainingRun)
class TrainingRunAdmin(admin.ModelAdmin):
    list_display = ["__str__", "kind", "status", "trigger", "stage", "progress", "created_at"]
    list_filter = ["status", "kind", "taxonomy"]
    readonly_fields = ["error"]
