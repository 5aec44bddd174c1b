"""The audit trail page (admins only): every recorded change, filtered and paged."""

from __future__ import annotations

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotations.models import AuditEvent, Taxonomy
from annotations.selectors.audit import audit_rows
from annotations.selectors.taxonomy import audit_events_page
from siamweb.ids import IdFormField
from siamweb.web.decorators import admin_required
from siamweb.web.forms import form_errors


class AuditFilterForm(forms.Form):
    taxonomy = forms.ModelChoiceField(
        queryset=Taxonomy.objects.all(), to_field_name="slug", required=False
    )
    actor = forms.CharField(max_length=150, required=False)
    action = forms.CharField(max_length=64, required=False)
    before = IdFormField(min_value=1, required=False)


@admin_required
@require_GET
def audit_log(request: HttpRequest) -> HttpResponse:
    form = AuditFilterForm(request.GET)
    if not form.is_valid():
        context = {
            "form": form,
            "events": [],
            "error": form_errors(form),
            "actions": AuditEvent.ACTIONS,
        }
        return render(request, "taxonomy/audit.html", context, status=400)
    filters = form.cleaned_data
    page = audit_events_page(
        taxonomy=filters["taxonomy"],
        actor=filters["actor"].strip(),
        action=filters["action"].strip(),
        before=filters["before"],
    )
    query = request.GET.copy()
    query.pop("before", None)
    context = {
        "form": form,
        # Values in words: field names, groups and items by name, objects linked.
        "events": audit_rows(page.events),
        "next_before": page.next_before,
        "filter_query": query.urlencode(),
        "actions": AuditEvent.ACTIONS,
    }
    return render(request, "taxonomy/audit.html", context)
