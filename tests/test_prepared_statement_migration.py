"""A statement a connection prepared and a migration then changed is prepared again on a new
connection (PostgreSQL alone prepares; this file is not in the SQLite rerun)."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from siamweb.plain_sql import prepared_rows


@pytest.mark.django_db(transaction=True)
def test_a_statement_a_migration_changed_is_prepared_again_on_a_new_connection():
    if connection.vendor != "postgresql":
        pytest.fail("this test needs PostgreSQL: set DATABASE_URL (make services)")
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE prepared_probe (label varchar(20))")
        cursor.execute("INSERT INTO prepared_probe VALUES ('icu nurse')")
    sql = "SELECT label FROM prepared_probe WHERE label LIKE %s"
    try:
        assert prepared_rows(sql, ["icu%"]) == [("icu nurse",)]
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_prepared_statements")
            assert cursor.fetchone() == (1,)  # prepared, so the change below can break it
        # As a deploy's migration does, from another connection: the column's type changes, and
        # PostgreSQL refuses the statement this connection prepared ("cached plan must not
        # change result type").
        params = connection.get_connection_params()
        other = psycopg.connect(**{k: v for k, v in params.items() if k != "context"})
        with other:
            other.execute("ALTER TABLE prepared_probe ALTER COLUMN label TYPE text")
        assert prepared_rows(sql, ["icu%"]) == [("icu nurse",)]
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE prepared_probe")
