"""The taxonomy a slug names: read by every API request of a taxonomy and by every command that
names one."""

from __future__ import annotations

from django.db import connection

from annotations.models import Taxonomy
from siamweb.plain_sql import ModelColumns

_TAXONOMY = ModelColumns(Taxonomy, "t")
_TAXONOMY_BY_SLUG = f"SELECT {_TAXONOMY.sql} FROM {Taxonomy._meta.db_table} t WHERE t.slug = %s"


def taxonomy_get(slug: str) -> Taxonomy | None:
    # Every API request of a taxonomy reads it: plain SQL (``siamweb.plain_sql``).
    with connection.cursor() as cursor:
        cursor.execute(_TAXONOMY_BY_SLUG, [slug])
        row = cursor.fetchone()
    return _TAXONOMY.instance(row) if row is not None else None
