"""What the taxonomy pages' tests share: the tiny taxonomy's groups and members by code and text,
a CSV upload, and the state a refused request must leave alone."""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile

from annotations.models import AuditEvent, FeedbackPair, Group, Member, Taxonomy

DEVS, NURSES, BARISTAS = "15-1252", "29-1141", "35-3023"

HTMX = {"HTTP_HX_REQUEST": "true"}


def group(code: str) -> Group:
    return Group.objects.get(taxonomy__slug="jobs", code=code)


def member(text: str) -> Member:
    return Member.objects.get(taxonomy__slug="jobs", text=text)


def snapshot() -> tuple:
    return (
        sorted(Taxonomy.objects.values_list("slug", "name")),
        sorted(Group.objects.values_list("id", "code", "name")),
        sorted(Member.objects.values_list("id", "group_id", "text")),
        FeedbackPair.objects.count(),
        AuditEvent.objects.count(),
    )


def csv_upload(content: str, name: str = "jobs.csv") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content.encode("utf-8"), content_type="text/csv")


GOOD_CSV = (
    "group_code,group_name,text\nA-1,Alpha,alpha one\nA-1,Alpha,alpha two\nB-2,Beta,beta one\n"
)
