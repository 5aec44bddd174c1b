"""Reads for the audit page: each event's object and its before/after values in words.

Events store ids ("group": 12); the page shows names with links ("group: 15-1252 Software
Developers"). The ids of a whole page are looked up together, one query per kind of row.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.urls import reverse

from annotations.models import AuditEvent, Group, Member, ReviewItem, Taxonomy

# Keys whose values are row ids, and the kind of row. Audit events come from every layer: the
# model rows are read by name, so curation does not import training for its audit page.
_ID_KINDS = {
    "group": "group",
    "group_id": "group",
    "rejected_group": "group",
    "target": "group",
    "review_item": "review_item",
    "model_version": "model_version",
    "live": "model_version",
    "run": "run",
}
_OBJECT_KINDS = {
    "group": "group",
    "member": "member",
    "review_item": "review_item",
    "model_version": "model_version",
    "training_run": "run",
    "taxonomy": "taxonomy",
}
_LABELS = {
    "review_item": "item",
    "rejected_group": "rejected group",
    "group_id": "group",
    "model_version": "version",
    "index_build": "index",
    "live": "live version",
    "undone_judgements": "verdicts undone",
    "feedback_pairs_removed": "feedback pairs removed",
}


@dataclass(frozen=True)
class Shown:
    """A value as the page shows it: words, and a link where the row has a page."""

    text: str
    url: str = ""


@dataclass(frozen=True)
class Field:
    name: str
    value: Shown


@dataclass(frozen=True)
class AuditRow:
    event: AuditEvent
    subject: Shown
    before: list[Field] | None
    after: list[Field] | None


def audit_rows(events: list[AuditEvent]) -> list[AuditRow]:
    """The page's events with their object and values named, in the order given."""
    wanted: dict[str, set[int]] = defaultdict(set)
    for event in events:
        kind = _OBJECT_KINDS.get(event.object_type)
        if kind and str(event.object_id).isdigit():
            wanted[kind].add(int(event.object_id))
        for values in (event.before, event.after):
            for key, value in _fields(values):
                if key in _ID_KINDS and isinstance(value, int) and not isinstance(value, bool):
                    wanted[_ID_KINDS[key]].add(value)
    names = _names(wanted)
    return [
        AuditRow(
            event=event,
            subject=_subject(event, names),
            before=_shown_fields(event.before, names),
            after=_shown_fields(event.after, names),
        )
        for event in events
    ]


def _fields(values) -> list[tuple[str, Any]]:
    if not isinstance(values, dict):
        return []
    values = dict(values)
    # A member's summary holds its group's code and id: one field, the group, named and linked.
    if isinstance(values.get("group"), str) and isinstance(values.get("group_id"), int):
        values["group"] = values.pop("group_id")
    return sorted(values.items())


def _shown_fields(values, names: dict[str, dict[int, Shown]]) -> list[Field] | None:
    if values is None:
        return None
    if not isinstance(values, dict):
        return [Field("value", Shown(_plain(values)))]
    return [
        Field(_LABELS.get(key, key.replace("_", " ")), _shown(key, value, names))
        for key, value in _fields(values)
    ]


def _shown(key: str, value, names: dict[str, dict[int, Shown]]) -> Shown:
    kind = _ID_KINDS.get(key)
    if kind and isinstance(value, int) and not isinstance(value, bool):
        return names.get(kind, {}).get(value) or Shown(f"#{value} (deleted)")
    return Shown(_plain(value))


def _plain(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ", ".join(str(v) for v in value) or "none"
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _subject(event: AuditEvent, names: dict[str, dict[int, Shown]]) -> Shown:
    kind = _OBJECT_KINDS.get(event.object_type)
    if kind and str(event.object_id).isdigit():
        found = names.get(kind, {}).get(int(event.object_id))
        if found is not None:
            return Shown(f"{event.object_type.replace('_', ' ')} {found.text}", found.url)
    return Shown(f"{event.object_type.replace('_', ' ')} #{event.object_id}")


def _names(wanted: dict[str, set[int]]) -> dict[str, dict[int, Shown]]:
    names: dict[str, dict[int, Shown]] = {}
    if wanted.get("group"):
        names["group"] = {
            group.id: Shown(f"{group.code} {group.name}", _group_url(group))
            for group in Group.objects.filter(id__in=wanted["group"]).select_related("taxonomy")
        }
    if wanted.get("member"):
        names["member"] = {
            member.id: Shown(f"“{member.text}” in {member.group.code}", _group_url(member.group))
            for member in Member.objects.filter(id__in=wanted["member"]).select_related(
                "group__taxonomy"
            )
        }
    if wanted.get("review_item"):
        names["review_item"] = {
            item_id: Shown(f"“{text}”")
            for item_id, text in ReviewItem.objects.filter(
                id__in=wanted["review_item"]
            ).values_list("id", "input__text")
        }
    if wanted.get("taxonomy"):
        names["taxonomy"] = {
            taxonomy.id: Shown(taxonomy.slug, reverse("taxonomy-detail", args=[taxonomy.slug]))
            for taxonomy in Taxonomy.objects.filter(id__in=wanted["taxonomy"])
        }
    if wanted.get("model_version"):
        versions = apps.get_model("models_app", "ModelVersion").objects
        names["model_version"] = {
            version.id: Shown(
                version.label, f"{reverse('models')}?taxonomy={version.taxonomy.slug}"
            )
            for version in versions.filter(id__in=wanted["model_version"]).select_related(
                "taxonomy"
            )
        }
    if wanted.get("run"):
        runs = apps.get_model("models_app", "TrainingRun").objects
        names["run"] = {
            run_id: Shown(f"#{run_id} ({kind})", reverse("models-run", args=[run_id]))
            for run_id, kind in runs.filter(id__in=wanted["run"]).values_list("id", "kind")
        }
    return names


def _group_url(group: Group) -> str:
    return reverse("taxonomy-group", args=[group.taxonomy.slug, group.code])
