"""Writes to taxonomies: imports."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import transaction

from annotations.importers import ImportFileError, RowError, parse_taxonomy
from annotations.models import Group, GroupRelation, Member, Taxonomy
from annotations.services.audit import audit_record
from annotations.text_rule import TextError, clean_text, comparison_key

_BATCH = 2000


class ImportRejected(Exception):
    """The file has bad rows and the import was asked to be all-or-nothing."""

    def __init__(self, errors: list[RowError], rows_read: int) -> None:
        self.errors = errors
        self.rows_read = rows_read
        super().__init__(f"{len(errors)} of {rows_read} rows are bad; nothing was imported")


@dataclass
class ImportReport:
    taxonomy: Taxonomy
    taxonomy_created: bool
    unchanged: bool = False
    rows_read: int = 0
    groups_created: int = 0
    groups_updated: int = 0
    members_created: int = 0
    members_removed: int = 0
    duplicates: int = 0
    relations: int = 0
    skipped_rows: list[RowError] = field(default_factory=list)

    def summary(self) -> str:
        if self.unchanged:
            return f"{self.taxonomy.slug}: unchanged since the last import ({self.rows_read} rows)"
        return (
            f"{self.taxonomy.slug}: {self.rows_read} rows read; groups {self.groups_created} "
            f"created, {self.groups_updated} updated; members {self.members_created} created, "
            f"{self.members_removed} removed, {self.duplicates} duplicate rows merged; "
            f"{self.relations} group relations; {len(self.skipped_rows)} bad rows skipped"
        )


def taxonomy_import(
    *,
    slug: str,
    path: Path,
    fmt: str,
    name: str | None = None,
    skip_bad_rows: bool = False,
    user=None,
) -> ImportReport:
    """Create or update a taxonomy from a file, all or nothing.

    Re-importing updates group names and descriptions (a file with no description column keeps
    the stored ones), adds new strings and removes taxonomy strings the file no longer has,
    unless rows were skipped (one of them may be what kept a string); curator and admin members
    are never removed by an import.
    Every import that stores (or finds nothing to change) is one audit event, by ``user``
    (None: the command line), with the report's counts; a rejected file records nothing.
    """
    try:
        validate_slug(slug)
    except ValidationError:
        raise ImportFileError(
            f"taxonomy slug {slug!r} may hold only letters, digits, '-' and '_'", field="slug"
        ) from None
    if name is not None and name.strip():
        try:
            name = clean_text(name, max_length=Taxonomy._meta.get_field("name").max_length)
        except TextError as exc:
            raise ImportFileError(f"taxonomy name {exc}", field="name") from None
    else:
        name = None
    parsed = parse_taxonomy(path, fmt, max_text_length=settings.SIAMWEB_MAX_TEXT_LENGTH)
    if parsed.errors and not skip_bad_rows:
        raise ImportRejected(parsed.errors, parsed.rows_read)
    if not parsed.members:
        raise ImportFileError(f"{Path(path).name} holds no usable rows")
    return _apply(slug=slug, name=name, fmt=fmt, parsed=parsed, path=Path(path), user=user)


@transaction.atomic
def _apply(*, slug, name, fmt, parsed, path: Path, user) -> ImportReport:
    report = _store(slug=slug, name=name, fmt=fmt, parsed=parsed)
    audit_record(
        actor=user,
        action="taxonomy.import",
        obj=report.taxonomy,
        taxonomy=report.taxonomy,
        after=_audit_counts(report, fmt=fmt, path=path, sha256=parsed.sha256),
    )
    return report


def _audit_counts(report: ImportReport, *, fmt: str, path: Path, sha256: str) -> dict:
    return {
        "file": path.name,
        "format": fmt,
        "sha256": sha256,
        "taxonomy_created": report.taxonomy_created,
        "unchanged": report.unchanged,
        "rows_read": report.rows_read,
        "groups_created": report.groups_created,
        "groups_updated": report.groups_updated,
        "members_created": report.members_created,
        "members_removed": report.members_removed,
        "duplicates": report.duplicates,
        "relations": report.relations,
        "skipped_rows": len(report.skipped_rows),
    }


def _store(*, slug, name, fmt, parsed) -> ImportReport:
    taxonomy, created = Taxonomy.objects.select_for_update().get_or_create(
        slug=slug, defaults={"name": name or slug, "source_format": fmt}
    )
    report = ImportReport(
        taxonomy=taxonomy,
        taxonomy_created=created,
        rows_read=parsed.rows_read,
        skipped_rows=parsed.errors,
    )
    if not created and taxonomy.source_sha256 == parsed.sha256 and (name in (None, taxonomy.name)):
        report.unchanged = True
        return report

    groups = {g.code: g for g in Group.objects.filter(taxonomy=taxonomy)}
    new_groups, changed_groups = [], []
    for code, (group_name, description) in parsed.groups.items():
        group = groups.get(code)
        if group is None:
            new_groups.append(
                Group(taxonomy=taxonomy, code=code, name=group_name, description=description or "")
            )
            continue
        if description is None:  # the file has no descriptions: the stored one stays
            description = group.description
        if (group.name, group.description) != (group_name, description):
            group.name, group.description = group_name, description
            changed_groups.append(group)
    Group.objects.bulk_create(new_groups, batch_size=_BATCH)
    Group.objects.bulk_update(changed_groups, ["name", "description"], batch_size=_BATCH)
    report.groups_created, report.groups_updated = len(new_groups), len(changed_groups)
    group_ids = dict(Group.objects.filter(taxonomy=taxonomy).values_list("code", "id"))

    wanted: dict[tuple[int, str], str] = {}
    for code, text in parsed.members:
        key = (group_ids[code], comparison_key(text))
        if key in wanted:
            report.duplicates += 1
        else:
            wanted[key] = text
    existing = {
        (group_id, normalized): (member_id, source)
        for member_id, group_id, normalized, source in Member.objects.filter(
            taxonomy=taxonomy
        ).values_list("id", "group_id", "normalized_text", "source")
    }
    # A skipped row may be the one that keeps a string: a file with skipped rows removes none.
    stale = [
        member_id
        for key, (member_id, source) in existing.items()
        if source == Member.Source.TAXONOMY and key not in wanted and not parsed.errors
    ]
    for start in range(0, len(stale), _BATCH):
        Member.objects.filter(id__in=stale[start : start + _BATCH]).delete()
    report.members_removed = len(stale)
    new_members = [
        Member(
            taxonomy=taxonomy,
            group_id=group_id,
            text=text,
            normalized_text=normalized,
            source=Member.Source.TAXONOMY,
        )
        for (group_id, normalized), text in wanted.items()
        if (group_id, normalized) not in existing
    ]
    Member.objects.bulk_create(new_members, batch_size=_BATCH)
    report.members_created = len(new_members)

    if parsed.relations:
        GroupRelation.objects.filter(taxonomy=taxonomy).delete()
        GroupRelation.objects.bulk_create(
            [
                GroupRelation(taxonomy=taxonomy, group_id=group_ids[a], related_id=group_ids[b])
                for a, b in dict.fromkeys(parsed.relations)
            ],
            batch_size=_BATCH,
        )
    report.relations = len(dict.fromkeys(parsed.relations))

    taxonomy.source_sha256 = parsed.sha256
    taxonomy.source_format = fmt
    if name:
        taxonomy.name = name
    taxonomy.save(update_fields=["source_sha256", "source_format", "name", "updated_at"])
    return report
