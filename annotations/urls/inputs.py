"""Inputs in: CSV upload, the inputs list and the playground (mounted at the site root)."""

from __future__ import annotations

from django.urls import path

from annotations.views import inputs as views_inputs

urlpatterns = [
    path("inputs/", views_inputs.inputs_list, name="inputs-list"),
    path("inputs/upload/", views_inputs.inputs_upload_page, name="inputs-upload"),
    path("inputs/<int:input_id>/", views_inputs.input_detail, name="input-detail"),
    path("inputs/<int:input_id>/reopen", views_inputs.input_reopen, name="input-reopen"),
    path("inputs/<int:input_id>/correct", views_inputs.input_correct, name="input-correct"),
    path("playground/", views_inputs.playground, name="playground"),
    path("playground/results", views_inputs.playground_results, name="playground-results"),
    path("playground/send", views_inputs.playground_send, name="playground-send"),
]
